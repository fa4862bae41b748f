"""How the change reader classifies DDL on a streamed table (pure parsing, no database): ADD COLUMN goes on,
anything that changes rows or shape stops the table, index and option changes and other tables are ignored."""

from __future__ import annotations

import pytest

from seam.source.binlog import ddl_effect, query_kind, xid_text
from seam.source.streaming import _COMPUTED, literal_default


@pytest.mark.parametrize(
    "query, effect",
    [
        ("ALTER TABLE payments ADD COLUMN note varchar(20)", ("add", ["note"])),
        (
            "alter table `shop`.`payments` add `risk note` decimal(10,2) default 1.5, add index (x)",
            ("add", ["risk note"]),
        ),
        ("ALTER TABLE payments ADD COLUMN a INT, ADD COLUMN IF NOT EXISTS b INT", ("add", ["a", "b"])),
        ("/* by app */ ALTER ONLINE TABLE payments ADD c JSON", ("add", ["c"])),
        ("ALTER TABLE payments DROP COLUMN memo", ("stop", "ALTER TABLE DROP COLUMN")),
        ("ALTER TABLE payments MODIFY amount decimal(20,4)", ("stop", "ALTER TABLE MODIFY amount")),
        ("ALTER TABLE payments ADD COLUMN z INT, CHANGE a b INT", ("stop", "ALTER TABLE CHANGE a")),
        ("TRUNCATE payments", ("stop", "TRUNCATE")),
        ("TRUNCATE TABLE shop.payments", ("stop", "TRUNCATE TABLE")),
        ("RENAME TABLE payments TO payments_old, x TO y", ("stop", "RENAME TABLE")),
        ("DROP TABLE IF EXISTS other, `payments`", ("stop", "DROP TABLE IF EXISTS")),
        ("CREATE OR REPLACE TABLE payments (id int)", ("stop", "CREATE OR REPLACE TABLE")),
        ("ALTER TABLE payments ADD INDEX ix (a, b), ALGORITHM=INPLACE", None),
        ("CREATE INDEX ix ON payments (a)", None),
        ("ALTER TABLE payments_archive DROP COLUMN memo", None),
        ("ALTER TABLE other.payments DROP COLUMN memo", None),
        ("RENAME TABLE x TO payments", None),
        ("CREATE TABLE payments2 LIKE payments", None),
        ("INSERT INTO payments VALUES (1)", ("stop", "INSERT logged as a statement, not as rows")),
        ("delete from shop.payments where id = 1", ("stop", "DELETE logged as a statement, not as rows")),
        ("UPDATE payments_archive SET a = 1", None),
        ("INSERT INTO other.t VALUES (1)", None),
        ("GRANT SELECT ON shop.payments TO x", None),
    ],
)
def test_ddl_effect(query, effect):
    assert ddl_effect(query, "shop", "shop", "payments") == effect


def test_literal_defaults():
    assert literal_default(None) is None and literal_default("NULL") is None
    assert literal_default("'it''s'") == "it's"
    assert literal_default("3") == "3" and literal_default("-1.50") == "-1.50"
    assert literal_default("current_timestamp()") is _COMPUTED


@pytest.mark.parametrize(
    "query, kind",
    [
        ("BEGIN", "begin"),
        ("COMMIT", "commit"),
        ("SAVEPOINT `s1`", "savepoint"),
        ("RELEASE SAVEPOINT s1", "savepoint"),
        ("ROLLBACK TO SAVEPOINT `sa_savepoint_1`", "savepoint"),
        ("ROLLBACK WORK TO s1", "savepoint"),
        ("/* app */ SAVEPOINT s2", "savepoint"),
        ("ALTER TABLE t ADD COLUMN x INT", "other"),
        ("ROLLBACK", "rollback"),
        ("rollback work", "rollback"),
        ("START TRANSACTION", "begin"),
        ("XA START X'7831',X'',1", "xa_start"),
        ("XA END X'7831',X'',1", "xa_end"),
        ("XA PREPARE 'x'", "xa_prepare"),
        ("XA COMMIT X'7831',X'',1", "xa_commit"),
        ("XA ROLLBACK X'7831',X'',1", "xa_rollback"),
        ("XA COMMIT 'x' ONE PHASE", "xa_commit_one_phase"),
        ("INSERT INTO t VALUES (1)", "other"),
    ],
)
def test_query_kinds(query, kind):
    assert query_kind(query)[0] == kind


def test_xids_have_one_spelling():
    """The session writes 'x1'; the binlog logs X'7831',X'',1: both name one transaction."""
    assert xid_text("'x1'") == xid_text("X'7831',X'',1") == "X'7831',X'',1"
    assert xid_text("'g', 'b', 7") == "X'67',X'62',7"
    assert query_kind("XA COMMIT 'x1'")[1] == query_kind("XA END X'7831',X'',1")[1]


def test_foreign_key_rules_from_show_create_table():
    from seam.source.schema import _fk_rules

    text = """CREATE TABLE `orders` (
  `id` int(11) NOT NULL,
  `cc` varchar(10) NOT NULL,
  `t` int(11) DEFAULT NULL,
  `u` int(11) DEFAULT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `orders_ibfk_1` FOREIGN KEY (`cc`) REFERENCES `customers` (`code`) ON DELETE CASCADE ON UPDATE CASCADE,
  CONSTRAINT `odd``name` FOREIGN KEY (`t`) REFERENCES `other`.`t` (`id`) ON DELETE SET NULL,
  CONSTRAINT `plain` FOREIGN KEY (`u`, `t`) REFERENCES `u` (`a`, `b`)
) ENGINE=InnoDB"""
    assert _fk_rules(text) == {
        "orders_ibfk_1": ("CASCADE", "CASCADE"),
        "odd`name": ("SET NULL", "RESTRICT"),
        "plain": ("RESTRICT", "RESTRICT"),
    }


def test_what_a_parent_change_does_to_its_children():
    from seam.source.schema import ForeignKey

    def fk(on_delete, on_update):
        return ForeignKey(("d", "child"), ("pid",), ("d", "parent"), ("id",), on_delete, on_update)

    both = fk("CASCADE", "SET NULL")
    assert both.follows() and both.rules_followed() == ["ON DELETE CASCADE", "ON UPDATE SET NULL"]
    assert both.action_for("d", [1], None) == "delete"
    assert both.action_for("u", [1], [2]) == "set_null"
    assert both.action_for("u", [1], [1]) is None  # the referenced columns did not change
    assert both.action_for("d", [None], None) is None  # no child references a NULL key
    assert both.action_for("c", None, [1]) is None
    assert fk("SET NULL", "CASCADE").action_for("u", [1], [2]) == "update"
    restrict = fk("RESTRICT", "NO ACTION")
    assert not restrict.follows() and restrict.action_for("d", [1], None) is None


def test_stream_start_waits_for_a_part_that_beats_since_it_failed():
    """`seam stream start` returns when each part beats: a part that failed minutes ago (a sink that met a full
    load's sink on its topic) counts once it has beaten since this command began and since it failed."""
    from seam.cli import _beating

    assert _beating({"state": "running", "beat_age": 1.0}, waited_s=0.5)
    assert _beating({"state": "restarting", "beat_age": 2.0, "failed_age": 30.0}, waited_s=5.0)
    assert not _beating({"state": "restarting", "beat_age": 2.0, "failed_age": 1.0}, waited_s=5.0)  # failed since
    assert not _beating({"state": "restarting", "beat_age": 9.0, "failed_age": 30.0}, waited_s=5.0)  # not since start
    assert not _beating({"state": "down", "beat_age": 1.0}, waited_s=5.0) and not _beating({}, waited_s=5.0)
