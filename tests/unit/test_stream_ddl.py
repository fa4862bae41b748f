"""How the change reader classifies DDL on a streamed table (pure parsing, no database): ADD COLUMN goes on,
anything that changes rows or shape stops the table, index and option changes and other tables are ignored."""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import replace

import pytest

from seam.core.pipeline import TableConfig
from seam.core.position import Position
from seam.core.schema import Column
from seam.repair import same_definition
from seam.source.binlog import query_kind, xid_text
from seam.source.chains import Followed
from seam.source.ddl import (
    _COMPUTED,
    LATER_CHANGE,
    composed_clauses,
    ddl_effect,
    declared_columns,
    followed_columns,
    swapped_clauses,
    widening,
)
from seam.source.declared import (
    EMPTY_STRING_IS_NULL,
    ORACLE,
    Instant,
    Now,
    declared_column,
    declared_default,
    json_as_longtext,
    settled_for_mode,
    settled_timestamps,
)
from seam.source.fills import Unfilled, fill, literal_default, mysql_default
from seam.source.stream_ddl import _schema_change
from seam.wire.boundary import SchemaChange
from seam.wire.records import normalize


@pytest.mark.parametrize(
    "query, effect",
    [
        ("ALTER TABLE payments ADD COLUMN note varchar(20)", ("alter", [("add", "note", ("column", "varchar(20)"))])),
        (
            "alter table `shop`.`payments` add `risk note` decimal(10,2) default 1.5, add index (x)",
            ("alter", [("add", "risk note", ("column", "decimal(10,2) default 1.5"))]),
        ),
        (
            "ALTER TABLE payments ADD COLUMN a INT, ADD COLUMN IF NOT EXISTS b INT FIRST",
            ("alter", [("add", "a", ("column", "INT")), ("add?", "b", ("column", "INT FIRST"))]),
        ),
        (
            "/* by app */ ALTER ONLINE TABLE payments ADD c JSON AFTER id",
            ("alter", [("add", "c", ("column", "JSON AFTER id"))]),
        ),
        ("ALTER TABLE payments DROP COLUMN memo", ("alter", [("drop", "memo")])),
        ("ALTER TABLE payments DROP memo, DROP COLUMN IF EXISTS `x`", ("alter", [("drop", "memo"), ("drop?", "x")])),
        (
            "ALTER TABLE payments MODIFY amount decimal(20,4)",
            ("alter", [("modify", "amount", ("column", "decimal(20,4)"))]),
        ),
        (
            "ALTER TABLE payments MODIFY COLUMN `note` varchar(90) NULL",
            ("alter", [("modify", "note", ("column", "varchar(90) NULL"))]),
        ),
        (
            "ALTER TABLE payments ADD COLUMN z INT, CHANGE a b INT",
            ("alter", [("add", "z", ("column", "INT")), ("change", "a", "b", ("column", "INT"))]),
        ),
        ("ALTER TABLE payments RENAME COLUMN a TO `b c`", ("alter", [("rename", "a", "b c")])),
        (
            "ALTER TABLE payments ALTER COLUMN a SET DEFAULT 3, ALTER b DROP DEFAULT",
            (
                "default",
                [("default", "a", ("default", "SET DEFAULT 3")), ("default", "b", ("default", "DROP DEFAULT"))],
            ),
        ),
        ("ALTER TABLE payments AUTO_INCREMENT = 10, DEFAULT CHARSET = utf8mb4", None),
        (
            "ALTER TABLE payments DROP PRIMARY KEY, ADD PRIMARY KEY (id, x)",
            ("stop", "ALTER TABLE DROP PRIMARY, ADD PRIMARY"),
        ),
        # every column may change its character set: each is checked as a MODIFY's (``widening``)
        ("ALTER TABLE payments CONVERT TO CHARACTER SET utf8mb4", ("alter", [("convert", "*")])),
        (
            "ALTER TABLE payments CONVERT TO CHARSET latin1 COLLATE latin1_bin, ADD z INT",
            ("alter", [("convert", "*"), ("add", "z", ("column", "INT"))]),
        ),
        ("ALTER TABLE payments DROP PARTITION p1", ("stop", "ALTER TABLE DROP PARTITION")),
        ("ALTER TABLE payments TRUNCATE PARTITION p1", ("stop", "ALTER TABLE TRUNCATE PARTITION")),
        ("ALTER TABLE payments RENAME TO payments_old", ("stop", "ALTER TABLE RENAME TO")),
        ("ALTER TABLE payments IMPORT TABLESPACE", ("stop", "ALTER TABLE IMPORT TABLESPACE")),
        ("ALTER TABLE payments DISCARD TABLESPACE", ("stop", "ALTER TABLE DISCARD TABLESPACE")),
        ("ALTER TABLE payments EXCHANGE PARTITION p0 WITH TABLE t2", ("stop", "ALTER TABLE EXCHANGE PARTITION")),
        (
            "ALTER TABLE parts EXCHANGE PARTITION p0 WITH TABLE shop.payments",
            ("stop", "ALTER TABLE EXCHANGE PARTITION"),
        ),
        ("ALTER TABLE payments_new RENAME TO payments", ("stop", "ALTER TABLE RENAME (onto its name)")),
        ("ALTER TABLE payments_new RENAME COLUMN a TO payments", None),
        ("TRUNCATE payments", ("truncate", "TRUNCATE")),
        ("TRUNCATE TABLE shop.payments", ("truncate", "TRUNCATE")),
        ("TRUNCATE TABLE payments_archive", None),
        ("RENAME TABLE payments TO payments_old, x TO y", ("stop", "RENAME TABLE (renamed away)")),
        # the cut-over of gh-ost and pt-online-schema-change
        (
            "RENAME TABLE `shop`.`payments` TO `shop`.`_payments_del`, `shop`.`_payments_gho` TO `shop`.`payments`",
            ("cutover", ("shop", "_payments_gho")),
        ),
        ("RENAME TABLE payments TO _payments_old, _payments_new TO payments", ("cutover", ("shop", "_payments_new"))),
        ("RENAME TABLE x TO payments", ("stop", "RENAME TABLE (another table renamed onto its name)")),
        ("RENAME TABLE other.payments TO payments_x", None),
        ("DROP TABLE IF EXISTS other, `payments`", ("stop", "DROP TABLE")),
        ("DROP TABLE `shop`.`payments` /* generated by server */", ("stop", "DROP TABLE")),
        ("DROP TEMPORARY TABLE IF EXISTS payments", None),
        ("DROP DATABASE shop", ("stop", "DROP DATABASE")),
        ("drop schema if exists `shop`", ("stop", "DROP DATABASE")),
        ("DROP DATABASE shop2", None),
        ("CREATE DATABASE IF NOT EXISTS shop", None),
        ("CREATE OR REPLACE DATABASE shop", ("stop", "CREATE DATABASE")),
        ("CREATE TABLE payments (id int primary key)", ("stop", "CREATE TABLE (the table was recreated)")),
        ("CREATE TABLE `shop`.`payments` LIKE shop.template", ("stop", "CREATE TABLE (the table was recreated)")),
        ("CREATE TABLE payments SELECT * FROM old", ("stop", "CREATE TABLE (the table was recreated)")),
        ("CREATE OR REPLACE TABLE payments (id int)", ("stop", "CREATE OR REPLACE TABLE")),
        # the table is followed, so it exists: IF NOT EXISTS does nothing (a DROP before it stopped the table)
        ("CREATE TABLE IF NOT EXISTS payments (id int)", None),
        ("CREATE TEMPORARY TABLE payments (id int)", None),
        ("ALTER TABLE payments ADD INDEX ix (a, b), ALGORITHM=INPLACE", None),
        ("CREATE INDEX ix ON payments (a)", None),
        ("ALTER TABLE payments_archive DROP COLUMN memo", None),
        ("ALTER TABLE other.payments DROP COLUMN memo", None),
        ("CREATE TABLE payments2 LIKE payments", None),
        ("INSERT INTO payments VALUES (1)", ("stop", "INSERT logged as a statement, not as rows")),
        ("delete from shop.payments where id = 1", ("stop", "DELETE logged as a statement, not as rows")),
        ("UPDATE payments_archive SET a = 1", None),
        ("INSERT INTO other.t VALUES (1)", None),
        ("GRANT SELECT ON shop.payments TO x", None),
        # a writer's sql_mode ANSI_QUOTES: names in double quotes (they were missed, and TRUNCATE was silent)
        ('TRUNCATE "shop"."payments"', ("truncate", "TRUNCATE")),
        ('DROP TABLE "payments"', ("stop", "DROP TABLE")),
        ('DROP DATABASE "shop"', ("stop", "DROP DATABASE")),
        ('CREATE TABLE "payments" (id int)', ("stop", "CREATE TABLE (the table was recreated)")),
        ('ALTER TABLE "shop"."payments" ADD COLUMN "x" INT', ("alter", [("add", "x", ("column", "INT"))])),
        ('ALTER TABLE "payments" RENAME COLUMN "a" TO "b"', ("alter", [("rename", "a", "b")])),
        ('ALTER TABLE "payments" ADD "PRIMARY" INT', ("alter", [("add", "PRIMARY", ("column", "INT"))])),
        ('RENAME TABLE "payments" TO "_p_old", "_p_new" TO "payments"', ("cutover", ("shop", "_p_new"))),
        ('ALTER TABLE "pay""ments" DROP COLUMN memo', None),
        ('ALTER TABLE "payments" ADD INDEX "ix" ("a")', None),
        # a DBA's partition maintenance changes no row; the partitions that lose or gain rows stop the table
        ("ALTER TABLE payments OPTIMIZE PARTITION p0, p1", None),
        ("ALTER TABLE payments ANALYZE PARTITION ALL", None),
        ("ALTER TABLE payments REBUILD PARTITION p2", None),
        ("ALTER TABLE payments TRUNCATE PARTITION p0, p1", ("stop", "ALTER TABLE TRUNCATE PARTITION, P1")),
        ("ALTER TABLE payments DROP PARTITION p0", ("stop", "ALTER TABLE DROP PARTITION")),
        # several columns in one ADD; MariaDB's WAIT/NOWAIT; clauses that change no row (they stopped the table)
        (
            "ALTER TABLE payments ADD COLUMN (a INT, b VARCHAR(5) DEFAULT 'x,y')",
            ("alter", [("add", "a", ("column", "INT")), ("add", "b", ("column", "VARCHAR(5) DEFAULT 'x,y'"))]),
        ),
        ("ALTER TABLE payments ADD (a INT)", ("alter", [("add", "a", ("column", "INT"))])),
        ("ALTER TABLE payments WAIT 5 DROP COLUMN memo", ("alter", [("drop", "memo")])),
        ("ALTER TABLE payments NOWAIT ADD INDEX (a)", None),
        ("ALTER TABLE payments ALTER COLUMN memo SET INVISIBLE", None),
        ("ALTER TABLE payments ORDER BY id", None),
        ("ALTER TABLE payments DISABLE KEYS", None),
        ("ALTER TABLE payments ALTER CHECK c NOT ENFORCED", None),
        ("ALTER TABLE payments PAGE_CHECKSUM=1, TRANSACTIONAL=1 ENCRYPTED=YES", None),
        ("ALTER TABLE payments UNION=(a,b)", ("stop", "ALTER TABLE UNION=(A,B)")),
    ],
)
def test_ddl_effect(query, effect):
    assert ddl_effect(query, "shop", "shop", "payments") == effect


@pytest.mark.parametrize(
    "query, sql_mode, effect",
    [
        # a comment marker or an escaped quote inside a string hid the clause after it (silently followed on)
        ("ALTER TABLE payments COMMENT 'issue #5', DROP COLUMN memo", 0, ("alter", [("drop", "memo")])),
        ("ALTER TABLE payments COMMENT 'a -- b', DROP COLUMN memo", 0, ("alter", [("drop", "memo")])),
        ("ALTER TABLE payments COMMENT 'a /* b', DROP COLUMN memo", 0, ("alter", [("drop", "memo")])),
        (
            r"ALTER TABLE payments COMMENT 'a\'', MODIFY memo VARCHAR(5)",
            0,
            ("alter", [("modify", "memo", ("column", "VARCHAR(5)"))]),
        ),
        (r"ALTER TABLE payments COMMENT 'a\'', DROP COLUMN memo", 0, ("alter", [("drop", "memo")])),
        # the same text under NO_BACKSLASH_ESCAPES: the string ends at the backslash
        (r"ALTER TABLE payments COMMENT 'a\', DROP COLUMN memo", 0x100000, ("alter", [("drop", "memo")])),
        (r"ALTER TABLE payments COMMENT 'a\', DROP COLUMN memo'", 0, None),
        # and a harmless comment with an escaped quote stopped the table for nothing
        (r"ALTER TABLE payments ADD INDEX i (x) COMMENT 'it\'s, y'", 0, None),
        (
            r"ALTER TABLE payments ADD COLUMN note VARCHAR(9) DEFAULT 'it\'s' COMMENT 'x, y'",
            0,
            ("alter", [("add", "note", ("column", "VARCHAR(9) DEFAULT 'it''s' COMMENT 'x, y'"))]),
        ),
        # a versioned comment's content is what the server ran; a real comment is not
        ("ALTER TABLE payments /*!50100 DROP COLUMN memo */", 0, ("alter", [("drop", "memo")])),
        ("ALTER TABLE payments /*M!100100 DROP COLUMN memo */", 0, ("alter", [("drop", "memo")])),
        ("ALTER TABLE payments /* DROP COLUMN memo */ ADD INDEX (a)", 0, None),
        ("ALTER TABLE payments ADD INDEX (a) -- DROP COLUMN memo", 0, None),
        ("ALTER TABLE payments ADD INDEX (a) # DROP COLUMN memo", 0, None),
        # under ANSI_QUOTES a double-quoted word is a name, whose backslash escapes nothing
        ('ALTER TABLE "payments" DROP COLUMN "me\\"', 0x4, ("alter", [("drop", "me\\")])),
        # text the server cannot have read as it looks here: a stop for a table it names, never a guess
        ("ALTER TABLE payments COMMENT 'x", 0, ("stop", "a statement Seam cannot read (a string that does not end)")),
        ("ALTER TABLE other COMMENT 'x", 0, None),
    ],
)
def test_ddl_effect_reads_strings_and_comments_as_the_server_did(query, sql_mode, effect):
    assert ddl_effect(query, "shop", "shop", "payments", sql_mode) == effect


@pytest.mark.parametrize(
    "query, folded",
    [
        ("TRUNCATE TABLE Payments", ("truncate", "TRUNCATE")),
        ("TRUNCATE TABLE SHOP.PAYMENTS", ("truncate", "TRUNCATE")),
        ("ALTER TABLE `Payments` DROP COLUMN memo", ("alter", [("drop", "memo")])),
        ("DROP TABLE IF EXISTS Shop.Payments", ("stop", "DROP TABLE")),
        ("DROP DATABASE SHOP", ("stop", "DROP DATABASE")),
        ("RENAME TABLE Payments TO payments_old", ("stop", "RENAME TABLE (renamed away)")),
        ("RENAME TABLE payments TO _p_old, _p_new TO PAYMENTS", ("cutover", ("shop", "_p_new"))),
        ("INSERT INTO PAYMENTS VALUES (1)", ("stop", "INSERT logged as a statement, not as rows")),
    ],
)
def test_a_source_that_folds_names_compares_them_in_any_case(query, folded):
    """lower_case_table_names 1 or 2: `Payments` is the table `payments`; 0 (Linux's default): another table."""
    assert ddl_effect(query, "Shop", "shop", "payments", fold_names=True) == folded
    assert ddl_effect(query, "Shop", "shop", "payments") is None


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
        ("RELEASE SAVEPOINT s1", "savepoint_release"),
        ("ROLLBACK TO SAVEPOINT `sa_savepoint_1`", "savepoint_rollback"),
        ("ROLLBACK WORK TO s1", "savepoint_rollback"),
        ("ROLLBACK TO `a`", "savepoint_rollback"),  # as the server logs it
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


def test_stream_start_waits_for_a_part_that_works_since_it_failed():
    """`seam stream start` returns when each part beats: a part that failed minutes ago (a sink that met a full
    load's sink on its topic) counts once it has beaten since this command began and worked since it failed
    (a part waiting to try again beats without working)."""
    from seam.cli.stream_ready import beating

    assert beating({"state": "running", "beat_age": 1.0}, waited_s=0.5)
    assert beating({"state": "restarting", "beat_age": 2.0, "failed_age": 30.0, "worked": True}, waited_s=5.0)
    assert not beating({"state": "restarting", "beat_age": 2.0, "failed_age": 30.0, "worked": False}, waited_s=5.0)
    assert not beating({"state": "restarting", "beat_age": 9.0, "failed_age": 30.0, "worked": True}, waited_s=5.0)
    assert not beating({"state": "down", "beat_age": 1.0}, waited_s=5.0) and not beating({}, waited_s=5.0)


def _why_not(result) -> str | None:
    """Why an added column's rows do not get their value from the stream: the table stops (``result`` is the
    reason), or the column is added NULL there and the table repaired (``Unfilled``); None when they do."""
    if isinstance(result, str):
        return result
    return "; ".join(v.why for v in result[2].values() if isinstance(v, Unfilled)) or None


def _col(name: str, column_type: str, nullable: bool = True) -> Column:
    data_type = column_type.split("(")[0].split()[0]
    return Column(name, data_type, column_type, nullable, 2 if data_type == "decimal" else None)


@pytest.mark.parametrize(
    "old, new, follows",
    [
        ("int(11)", "bigint(20)", True),
        ("tinyint(3) unsigned", "smallint(6)", True),
        ("int(10) unsigned", "int(11)", False),  # 4294967295 does not fit
        ("bigint(20)", "int(11)", False),
        ("varchar(20)", "varchar(200)", True),
        ("varchar(20)", "varchar(10)", False),
        ("char(3)", "char(8)", True),
        ("binary(4)", "binary(8)", False),  # the source pads every stored value with zero bytes
        ("varbinary(4)", "varbinary(8)", True),
        ("decimal(10,2)", "decimal(14,2)", True),
        ("decimal(10,2)", "decimal(14,4)", True),  # as many digits before the point: 12.34 is 12.3400
        ("decimal(10,2)", "decimal(12,4)", True),
        ("decimal(10,2)", "decimal(11,4)", False),  # 99999999.99 has 8 digits before the point
        ("decimal(10,4)", "decimal(12,2)", False),  # rounded
        ("varchar(20)", "text", True),
        ("varchar(63)", "tinytext", True),  # 63 characters of up to 4 bytes: 252 of TINYTEXT's 255
        ("varchar(64)", "tinytext", False),
        ("varchar(20000)", "text", False),
        ("varchar(20000)", "mediumtext", True),
        ("varbinary(255)", "tinyblob", True),
        ("varbinary(256)", "tinyblob", False),
        ("varbinary(4)", "text", False),
        ("varchar(4)", "blob", False),
        ("char(4)", "text", True),  # without its trailing spaces, as read (unless the ALTER's session padded them)
        ("char(64)", "tinytext", False),
        ("char(5)", "varchar(5)", True),
        ("char", "varchar(1)", True),
        ("char(5)", "varchar(4)", False),
        ("varchar(5)", "char(5)", False),  # the server drops trailing spaces
        ("binary(4)", "varbinary(4)", True),  # with its zero bytes
        ("binary(4)", "tinyblob", True),
        ("binary(4)", "varbinary(3)", False),
        ("varbinary(4)", "binary(4)", False),  # padded
        ("binary(4)", "varchar(4)", False),
        ("char(4)", "varbinary(4)", False),
        ("text", "mediumtext", True),
        ("blob", "tinyblob", False),
        ("enum('a','b')", "enum('a','b','c')", True),
        ("enum('a','b')", "enum('c','a','b')", False),  # the stored indexes move
        ("set('x')", "set('x','y')", True),
        ("float", "double", True),  # the single-precision value, as it is (MariaDB 10.11: 1.1 is 1.100000023841858)
        ("float", "double(10,2)", False),  # rounded to 2 digits
        ("float", "double unsigned", False),
        ("float unsigned", "double", True),
        ("datetime", "timestamp", False),
        # as a statement declares it and as MariaDB's catalog shows it: the same type
        ("year", "year(4)", True),
        ("bit", "bit(1)", True),
        ("binary", "binary(1)", True),
        ("bit", "bit(2)", False),
    ],
)
def test_what_is_a_widening(old, new, follows):
    assert (widening(_col("c", old), _col("c", new)) is None) is follows


@pytest.mark.parametrize(
    "kind, old, new, follows",
    [("datetime", 0, 3, True), ("timestamp", 0, 6, True), ("time", 2, 2, True), ("time", 3, 1, False)],
)
def test_more_fractional_digits_are_a_widening(kind, old, new, follows):
    before = Column("c", kind, f"{kind}({old})" if old else kind, True, None, old)
    after = Column("c", kind, f"{kind}({new})", True, None, new)
    assert (widening(before, after) is None) is follows


def test_not_null_added_is_not_followed_null_allowed_is():
    assert widening(_col("c", "int(11)", False), _col("c", "int(11)", True)) is None
    assert "NOT NULL" in widening(_col("c", "int(11)", True), _col("c", "int(11)", False))


@pytest.mark.parametrize(
    "a, b, same",
    [
        (_col("c", "int(11)"), _col("c", "int"), True),  # as MariaDB shows it, as MySQL 8 does
        (_col("c", "year(4)"), _col("c", "year"), True),
        (
            replace(_col("c", "varchar(20)"), charset="utf8mb3"),
            replace(_col("c", "varchar(20)"), charset="latin1"),
            True,
        ),
        (_col("c", "varchar(20)"), _col("c", "varchar(200)"), False),  # widened: the target's is the narrower
        (_col("c", "varchar(200)"), _col("c", "varchar(20)"), False),
        (_col("c", "int(11)"), _col("c", "int(11)", False), False),  # NOT NULL either way
        (_col("c", "int(11)", False), _col("c", "int(11)"), False),
        (_col("c", "int(11)"), _col("c", "bigint(20)"), False),
        (_col("c", "decimal(10,2)"), _col("c", "decimal(12,2)"), False),
    ],
)
def test_the_same_definition_is_the_same_type_however_spelled_and_the_same_nullability(a, b, same):
    """What a repair requires of the source's columns against the target's (``seam.repair``)."""
    assert same_definition(a, b) is same


OLD = (_col("id", "int(11)", False), _col("amount", "decimal(10,2)"), _col("memo", "varchar(20)"))


def test_followed_columns_rename_drop_widen_add_in_the_source_order():
    now = [
        (_col("note", "varchar(5)"), "'n/a'"),
        (_col("id", "int(11)", False), None),
        (_col("total", "decimal(12,2)"), None),
    ]
    clauses = [("drop", "memo"), ("change", "amount", "total"), ("add", "note")]
    columns, renamed, defaults = followed_columns(OLD, ("id",), clauses, now)
    assert [c.name for c in columns] == ["note", "id", "total"]
    assert renamed == {"amount": "total"} and defaults == {"note": "n/a"}


@pytest.mark.parametrize(
    "clauses, now, why",
    [
        ([("drop", "id")], OLD[1:], "drops key column id"),
        ([("rename", "id", "pk")], [(OLD[0], None)], "renames key column id"),
        ([("modify", "memo")], [(c, None) for c in OLD[:2]] + [(_col("memo", "varchar(5)"), None)], "not a widening"),
        ([("add", "x")], [(c, None) for c in OLD] + [(_col("x", "date", False), None)], "cannot reproduce"),
        ([("add", "x")], [(c, None) for c in OLD] + [(_col("x", "int(11)"), "(1 + 1)")], "cannot reproduce"),
        ([("add", "x")], [(c, None) for c in OLD], "a later change came first"),
        ([("drop", "memo")], [(c, None) for c in OLD[:1]] + [(_col("amount", "decimal(12,2)"), None)], "any more"),
        ([("drop", "memo"), ("rename", "amount", "memo")], [(c, None) for c in OLD[:2]], "a name the table had"),
    ],
)
def test_followed_columns_refuses_what_it_cannot_follow_exactly(clauses, now, why):
    result = followed_columns(OLD, ("id",), clauses, now)
    assert why in (_why_not(result) or ""), result


def test_a_cut_over_is_compared_by_column_name():
    now = [_col("id", "int(11)", False), _col("amount", "decimal(12,2)"), _col("tier", "int(11)")]
    assert swapped_clauses(OLD, now) == [("drop", "memo"), ("modify", "amount"), ("add", "tier")]
    columns, renamed, defaults = followed_columns(OLD, ("id",), swapped_clauses(OLD, now), [(c, "2") for c in now])
    assert [c.name for c in columns] == ["id", "amount", "tier"] and renamed == {} and defaults == {"tier": "2"}


@pytest.mark.parametrize(
    "statements, composed",
    [
        (  # a migration: added, widened and renamed, then another column widened
            [[("add", "n2")], [("modify", "n2")], [("rename", "n2", "n3")], [("modify", "memo")]],
            [("modify", "memo"), ("add", "n3")],
        ),
        ([[("rename", "memo", "a")], [("rename", "a", "b")]], [("rename", "memo", "b")]),
        ([[("rename", "memo", "a")], [("modify", "a")]], [("change", "memo", "a")]),
        ([[("drop", "memo")], [("add", "memo")]], [("drop", "memo"), ("add", "memo")]),
        ([[("rename", "memo", "m")], [("rename", "m", "memo")]], []),
        ([[("add", "x")], [("add", "x")]], "column x is added where one of that name is"),
        ([[("drop", "memo")], [("modify", "memo")]], "column memo is not one the stream knows"),
        ([[("rename", "amount", "memo")]], "column amount is renamed onto memo, a name the table has"),
        # column names are not case-sensitive: a clause names the table's column in any case
        ([[("drop", "MEMO")]], [("drop", "memo")]),
        ([[("rename", "Amount", "amt")], [("modify", "AMT")]], [("change", "amount", "AMT")]),
        ([[("rename", "amount", "AMOUNT")]], [("rename", "amount", "AMOUNT")]),
        ([[("modify", "Memo")]], [("change", "memo", "Memo")]),  # MODIFY renames the column as written
        ([[("default", "MEMO", ("default", "SET DEFAULT 'x'"))]], []),
        (  # CONVERT TO CHARACTER SET: the columns there, not one added after it
            [[("rename", "memo", "m")], [("convert", "*")], [("add", "z", ("column", "INT"))]],
            [("change", "memo", "m"), ("modify", "id"), ("modify", "amount"), ("add", "z", ("column", "INT"))],
        ),
        ([[("add", "MEMO")]], "column memo is added where one of that name is"),
        ([[("rename", "amount", "MEMO")]], "column amount is renamed onto MEMO, a name the table has"),
    ],
)
def test_alters_in_a_row_compose_into_one_statements_clauses(statements, composed):
    assert composed_clauses([c.name for c in OLD], statements) == composed


@pytest.mark.parametrize(
    "query, composed",
    [  # a migration run twice: the server skips a clause whose IF [NOT] EXISTS does not hold, so does the stream
        ("ALTER TABLE payments ADD COLUMN IF NOT EXISTS memo INT, ADD COLUMN IF NOT EXISTS c INT", [("add", "c")]),
        ("ALTER TABLE payments ADD COLUMN IF NOT EXISTS (a INT, MEMO INT)", [("add", "a")]),
        ("ALTER TABLE payments DROP COLUMN IF EXISTS nope, DROP IF EXISTS memo", [("drop", "memo")]),
        ("ALTER TABLE payments CHANGE COLUMN IF EXISTS nope n2 INT, RENAME COLUMN IF EXISTS x TO y", []),
        ("ALTER TABLE payments MODIFY IF EXISTS amount DECIMAL(12,2)", [("modify", "amount")]),
        ("ALTER TABLE payments ADD COLUMN IF NOT EXISTS memo INT", []),
    ],
)
def test_a_clause_whose_if_exists_does_not_hold_is_skipped_as_the_server_skipped_it(query, composed):
    effect = ddl_effect(query, "shop", "shop", "payments")
    assert effect is not None and effect[0] == "alter", effect
    clauses = composed_clauses([c.name for c in OLD], [effect[1]])
    assert [c[:2] for c in clauses] == composed, clauses


def test_a_column_dropped_and_added_again_is_not_followed_as_the_same_column():
    now = [(c, None) for c in OLD]
    result = followed_columns(
        OLD, ("id",), composed_clauses([c.name for c in OLD], [[("drop", "memo")], [("add", "memo")]]), now
    )
    assert "memo is added where one of that name was" in (_why_not(result) or "")


@pytest.mark.parametrize(
    "declared, default",
    [
        (("column", "INT NOT NULL DEFAULT 3 AFTER v"), "3"),
        (("column", "varchar(20) COMMENT 'DEFAULT 9' DEFAULT 'it''s'"), "it's"),
        # as plain_statement spells a statement: its backslash escapes already resolved, a backslash is one
        (("column", "varchar(20) DEFAULT 'a\\b'"), "a\\b"),
        (("column", "varchar(20) DEFAULT 'a\nb'"), "a\nb"),
        (("column", "decimal(6,2) DEFAULT -1.5"), "-1.5"),
        (("column", "tinyint(1) DEFAULT TRUE"), "1"),
        (("column", "int NULL DEFAULT NULL"), None),
        (("column", "int"), None),
        (("column", "datetime DEFAULT CURRENT_TIMESTAMP"), Now(None, False)),
        (("column", "datetime(6) DEFAULT now(3) ON UPDATE now(3)"), Now(3, False)),
        (("column", "date DEFAULT (CURRENT_DATE)"), Now(None, True)),
        (("column", "BIT(3) NOT NULL DEFAULT b'101'"), "b'101'"),
        (("column", "BIT(3) DEFAULT 0b11"), "b'11'"),
        (("column", "BIT(3) DEFAULT b'12'"), _COMPUTED),
        (("column", "date DEFAULT (CURRENT_DATE + INTERVAL 1 DAY)"), Now(None, True, None, (1, "DAY"))),
        (("column", "date DEFAULT (CURRENT_DATE + INTERVAL 1 DAY + INTERVAL 1 DAY)"), _COMPUTED),
        (("column", "date DEFAULT (CURDATE() + INTERVAL '1' DAY)"), _COMPUTED),
        (("column", "int DEFAULT (1 + 1)"), _COMPUTED),
        # a literal in parentheses is that literal; more than one thing in them is an expression
        (("column", "TEXT DEFAULT ('')"), ""),
        (("column", "int NOT NULL DEFAULT ( (-5) ) COMMENT 'x'"), "-5"),
        (("column", "int DEFAULT (3)NOT NULL"), "3"),
        (("column", "TEXT DEFAULT ('a' 'b')"), "ab"),
        (("column", "BIT(3) DEFAULT (b'101')"), "b'101'"),
        (("column", "int DEFAULT (NULL)"), _COMPUTED),  # an expression (the ALTER's time in a NOT NULL TIMESTAMP)
        (("column", "int DEFAULT ((3)"), _COMPUTED),
        (("column", "varchar(9) DEFAULT ('a' COLLATE utf8mb4_bin)"), _COMPUTED),
        (("column", "varchar(9) DEFAULT (concat('a', 'b'))"), _COMPUTED),
        (("column", "varbinary(9) DEFAULT (x'00')"), "00"),  # a hexadecimal literal: its digits, paired
        (("column", "varbinary(9) DEFAULT 0X41"), _COMPUTED),  # 0X is no literal: the server refused it
        (("column", "varbinary(9) DEFAULT 0x123"), "0123"),
        # the empty document, JSON_ARRAY() or JSON_OBJECT(): MySQL 8 gives a JSON column no literal default
        (("column", "json NOT NULL DEFAULT (json_object())"), "{}"),
        (("column", "json DEFAULT ( ( JSON_ARRAY ( ) ) ) COMMENT 'x'"), "[]"),
        (("column", "text DEFAULT JSON_ARRAY()NOT NULL"), "[]"),  # MariaDB's call without parentheses
        (("column", "json DEFAULT (JSON_ARRAY(1))"), _COMPUTED),
        (("column", "json DEFAULT (JSON_OBJECT() COLLATE utf8mb4_bin)"), _COMPUTED),
        (("column", "json DEFAULT ((JSON_ARRAY())"), _COMPUTED),
        (("column", "int AUTO_INCREMENT UNIQUE"), _COMPUTED),
        (("column", "int AS (a + 1) VIRTUAL"), _COMPUTED),
        (("default", "SET DEFAULT 'x'"), "x"),
        (("default", "DROP DEFAULT"), None),
    ],
)
def test_what_a_clause_declares_as_default(declared, default):
    assert declared_default(declared) == default


@pytest.mark.parametrize(
    "sql_mode, fill",
    [(0, "a\\b\n%\\%\t"), (0x100000, "a\\\\b\\n%\\%\\t")],  # NO_BACKSLASH_ESCAPES: each backslash is one
)
def test_an_added_default_with_backslashes_is_the_value_the_server_stored(sql_mode, fill):
    # the catalog as MariaDB shows that value: a backslash doubled, a newline as \n, a quote doubled
    catalog = "'" + fill.replace("\\", "\\\\").replace("\n", "\\n").replace("'", "''") + "'"
    query = r"ALTER TABLE payments ADD COLUMN c VARCHAR(20) DEFAULT 'a\\b\n%\%\t' COMMENT 'x'"
    effect = ddl_effect(query, "shop", "shop", "payments", sql_mode)
    assert effect is not None and effect[0] == "alter", effect
    result = followed_columns(OLD, ("id",), effect[1], [(c, None) for c in OLD] + [(_col("c", "varchar(20)"), catalog)])
    assert _why_not(result) is None and result[2] == {"c": fill}, result


# 2026-11-29 17:14:44.630316 UTC, on a session whose time_zone is +05:30
AT = Instant(dt.datetime(2026, 11, 29, 17, 14, 44, 630316), dt.datetime(2026, 11, 29, 22, 44, 44, 630316), True)


@pytest.mark.parametrize(
    "definition, column, catalog, fill",
    [  # what MariaDB stored in the rows there (its own test: SELECT after the ALTER)
        (
            "DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6)",
            ("datetime(6)", 6),
            "current_timestamp(6)",
            "2026-11-29T22:44:44.630316",
        ),
        (
            "TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)",
            ("timestamp(3)", 3),
            "current_timestamp(3)",
            "2026-11-29T17:14:44.630000Z",
        ),
        (
            "DATETIME(2) DEFAULT CURRENT_TIMESTAMP(6)",
            ("datetime(2)", 2),
            "current_timestamp(6)",
            "2026-11-29T22:44:44.630000",
        ),
        ("DATETIME DEFAULT NOW()", ("datetime", 0), "current_timestamp()", "2026-11-29T22:44:44.000000"),
        ("DATE DEFAULT (CURRENT_DATE)", ("date", None), "curdate()", "2026-11-29"),
        ("DATE DEFAULT CURRENT_TIMESTAMP", ("date", None), "current_timestamp()", None),  # not what MariaDB stores
        # no digits named: the column's (MariaDB shows current_timestamp(2); it filled .63, not .00)
        (
            "DATETIME(2) DEFAULT CURRENT_TIMESTAMP",
            ("datetime(2)", 2),
            "current_timestamp(2)",
            "2026-11-29T22:44:44.630000",
        ),
        ("DATETIME(3) DEFAULT NOW(3)", ("datetime(3)", 3), "CURRENT_TIMESTAMP(3)", "2026-11-29T22:44:44.630000"),
        ("DATETIME(3) DEFAULT NOW()", ("datetime(3)", 3), "current_timestamp(2)", None),  # a later change came first
        # an interval added on the session's wall clock, as MariaDB 10.11 shows and stores each (SET timestamp)
        (
            "DATE DEFAULT (CURRENT_DATE + INTERVAL 1 YEAR)",
            ("date", None),
            "(curdate() + interval 1 year)",
            "2027-11-29",
        ),
        ("DATE DEFAULT (CURDATE() + INTERVAL 3 MONTH)", ("date", None), "(curdate() + interval 3 month)", "2027-02-28"),
        (
            "DATE DEFAULT (DATE_SUB(CURDATE(), INTERVAL 2 WEEK))",
            ("date", None),
            "(curdate() - interval 2 week)",
            "2026-11-15",
        ),
        # NOW() is whole seconds in an expression; on a DATE, the day (a DATETIME cut, past midnight here)
        (
            "DATETIME(3) DEFAULT (NOW() - INTERVAL 1 DAY)",
            ("datetime(3)", 3),
            "(current_timestamp() - interval 1 day)",
            "2026-11-28T22:44:44.000000",
        ),
        (
            "DATETIME(6) DEFAULT ((DATE_ADD(NOW(6), INTERVAL 90 MINUTE)))",
            ("datetime(6)", 6),
            "(current_timestamp(6) + interval 90 minute)",
            "2026-11-30T00:14:44.630316",
        ),
        (
            "DATE DEFAULT (NOW() + INTERVAL 2 HOUR)",
            ("date", None),
            "(current_timestamp() + interval 2 hour)",
            "2026-11-30",
        ),
        (
            "DATETIME DEFAULT (CURDATE() + INTERVAL 1 HOUR)",
            ("datetime", 0),
            "(curdate() + interval 1 hour)",
            "2026-11-29T01:00:00.000000",
        ),
        (
            "DATETIME(2) DEFAULT (NOW(6) + INTERVAL 1 DAY)",
            ("datetime(2)", 2),
            "(current_timestamp(6) + interval 1 day)",
            None,
        ),  # MySQL rounds
        (
            "TIMESTAMP NULL DEFAULT (NOW() + INTERVAL 1 DAY)",
            ("timestamp", 0),
            "(current_timestamp() + interval 1 day)",
            None,
        ),  # the source did not convert its wall time: not guessed (the zone's offset may change in between)
        (
            "DATE DEFAULT (CURDATE() + INTERVAL 9000 YEAR)",
            ("date", None),
            "(curdate() + interval 9000 year)",
            None,
        ),  # NULL
        (
            "DATE DEFAULT (CURDATE() + INTERVAL 1 YEAR)",
            ("date", None),
            "(curdate() + interval 2 year)",
            None,
        ),  # a later one
    ],
)
def test_an_added_columns_rows_get_the_time_of_the_statement_that_added_it(definition, column, catalog, fill):
    data_type = column[0].partition("(")[0]
    added = Column("c", data_type, column[0], True, None, column[1])
    now = [(c, None) for c in OLD] + [(added, catalog)]
    result = followed_columns(OLD, ("id",), [("add", "c", ("column", definition, AT))], now)
    if fill is None:
        assert bool(_why_not(result)), result
        return
    assert _why_not(result) is None, result
    assert normalize(added, result[2]["c"]) == fill
    unstamped = followed_columns(OLD, ("id",), [("add", "c", ("column", definition))], now)
    assert "cannot reproduce" in (_why_not(unstamped) or "")  # no time, no guess


@pytest.mark.parametrize(
    "added, widened, final, catalog, fill",
    [  # what MariaDB 10.11 stored (its own test: SELECT after both ALTERs)
        ("INT NOT NULL", "BIGINT", _col("c", "bigint(20)"), None, 0),  # NULL allowed later: the rows kept 0
        ("BINARY(4) NOT NULL", "BLOB", _col("c", "blob"), None, b"\0\0\0\0"),  # a BINARY's zero bytes
        ("BINARY(4) DEFAULT 'ab'", "VARBINARY(8)", _col("c", "varbinary(8)"), None, b"ab\0\0"),
        ("CHAR(4) DEFAULT 'ab  '", "VARCHAR(8) DEFAULT 'ab  '", _col("c", "varchar(8)"), "'ab  '", "ab"),
        ("FLOAT DEFAULT 1.1", "DOUBLE DEFAULT 1.1", _col("c", "double"), "1.1", 1.100000023841858),
        (
            "DATETIME(2) DEFAULT CURRENT_TIMESTAMP",
            "DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6)",
            Column("c", "datetime", "datetime(6)", True, None, 6),
            "current_timestamp(6)",
            "2026-11-29T22:44:44.630000",  # the ADD's two digits
        ),
    ],
)
def test_an_added_column_widened_before_the_reader_came_keeps_the_adds_fill(added, widened, final, catalog, fill):
    """ADD then MODIFY with no row between: the rows got the ADD's fill, which the widening kept (the fill
    was taken from the widened column: NULL for INT NOT NULL made BIGINT, six digits of the ALTER's time)."""
    clauses = composed_clauses(
        ["id", "amount", "memo"], [[("add", "c", ("column", added, AT))], [("modify", "c", ("column", widened))]]
    )
    now = [(c, None) for c in OLD] + [(final, catalog)]
    result = followed_columns(OLD, ("id",), clauses, now)
    assert _why_not(result) is None, result
    if isinstance(fill, bytes):
        fill = normalize(final, fill)  # as Seam records bytes
    assert normalize(final, result[2]["c"]) == fill
    order = ["id", "amount", "memo", "c"]
    declared = declared_columns(OLD, ("id",), clauses, order)  # a row came between: the statements alone
    assert _why_not(declared) is None, declared
    assert normalize(final, declared[2]["c"]) == fill
    # the ADD read alone, the source already showing the widened column: the ADD's fill, or it waits
    alone = followed_columns(OLD, ("id",), [("add", "c", ("column", added, AT))], now)
    why = _why_not(alone)
    assert (LATER_CHANGE in why) if why else normalize(final, alone[2]["c"]) == fill, alone


def test_an_added_column_of_a_type_not_read_from_statements_waits_when_the_source_shows_it_otherwise_null():
    """FLOAT(30) NOT NULL (a DOUBLE: a type the stream takes from the source's catalog) read when the source
    already shows it allowing NULL: the rows hold 0, which a column added NULL would not give them, so the
    ADD waits for the statements after it (it was followed with NULL in every row). The same NULL-ness:
    followed from the catalog's column."""
    now = [(c, None) for c in OLD] + [(_col("c", "double"), None)]
    waits = followed_columns(OLD, ("id",), [("add", "c", ("column", "FLOAT(30) NOT NULL"))], now)
    assert LATER_CHANGE in (_why_not(waits) or ""), waits
    now = [(c, None) for c in OLD] + [(_col("c", "double", False), None)]
    result = followed_columns(OLD, ("id",), [("add", "c", ("column", "FLOAT(30) NOT NULL"))], now)
    assert _why_not(result) is None and result[2] == {"c": "0"}, result


def _added_alone(definition: str, added: Column, catalog: str | None):
    """followed_columns of one ADD of ``added`` as ``definition`` declares it, the source showing ``catalog``
    as its COLUMN_DEFAULT."""
    now = [(c, None) for c in OLD] + [(added, catalog)]
    return followed_columns(OLD, ("id",), [("add", "c", ("column", definition))], now)


def _assert_filled(result, added: Column, fill, refused: str = "") -> None:
    """The rows there got ``fill`` (as Seam records it), or, ``fill`` None, the ADD stops its table (saying
    ``refused``)."""
    if fill is None:
        assert refused in (_why_not(result) or ""), result
    else:
        assert _why_not(result) is None and normalize(added, result[2]["c"]) == fill, result


@pytest.mark.parametrize(
    "definition, column, catalog, fill",
    [  # the catalog as MariaDB shows the default the rows there got (its own test: SELECT after the ALTER)
        ("DATE NOT NULL DEFAULT '1970-01-01'", ("date", None), "'1970-01-01'", "1970-01-01"),
        (
            "DATETIME(3) DEFAULT '2000-01-01 10:00:00.5'",
            ("datetime", 3),
            "'2000-01-01 10:00:00.500'",
            "2000-01-01T10:00:00.500000",
        ),
        ("TIME DEFAULT '-12:00:01'", ("time", 0), "'-12:00:01'", "-12:00:01.000000"),
        ("TIME(2) DEFAULT '100:00:00.25'", ("time", 2), "'100:00:00.25'", "100:00:00.250000"),
        # stored otherwise than written: the server's to read (MariaDB truncates .7, MySQL rounds it up)
        ("DATETIME DEFAULT '2000-01-01 10:00:00.7'", ("datetime", 0), "'2000-01-01 10:00:00'", None),
        ("DATETIME DEFAULT '2000-1-1 1:2:3'", ("datetime", 0), "'2000-01-01 01:02:03'", None),
        ("DATE DEFAULT '0000-00-00'", ("date", None), "'0000-00-00'", None),
        ("TIMESTAMP NULL DEFAULT '2000-01-01 10:00:00'", ("timestamp", 0), "'2000-01-01 10:00:00'", None),  # a zone's
    ],
)
def test_an_added_columns_literal_time_is_followed_when_spelled_as_stored(definition, column, catalog, fill):
    added = Column("c", column[0], f"{column[0]}({column[1]})" if column[1] else column[0], True, None, column[1])
    _assert_filled(_added_alone(definition, added, catalog), added, fill)


# a +05:30 session's literals, as the source read them in UTC for the statement (stream_ddl._instant)
ZONED = replace(
    AT,
    in_utc={
        "2000-01-01 10:00:00": dt.datetime(2000, 1, 1, 4, 30),
        "2000-06-01 00:00:00.5": dt.datetime(2000, 5, 31, 18, 30, 0, 500000),
        "2000-01-01": dt.datetime(1999, 12, 31, 18, 30),
    },
)


@pytest.mark.parametrize(
    "definition, column, catalog, fill",
    [  # the catalog on UTC, as MariaDB shows the default the rows there got (its own test: SELECT after the ALTER)
        (
            "TIMESTAMP NULL DEFAULT '2000-01-01 10:00:00'",
            ("timestamp", 0),
            "'2000-01-01 04:30:00'",
            "2000-01-01T04:30:00.000000Z",
        ),
        (
            "TIMESTAMP(3) NOT NULL DEFAULT '2000-06-01 00:00:00.5'",
            ("timestamp", 3),
            "'2000-05-31 18:30:00.500'",
            "2000-05-31T18:30:00.500000Z",
        ),
        # a DATETIME keeps the session's spelling, whatever the zone
        (
            "DATETIME DEFAULT '2000-01-01 10:00:00'",
            ("datetime", 0),
            "'2000-01-01 10:00:00'",
            "2000-01-01T10:00:00.000000",
        ),
        # the rows got 04:30 UTC; a catalog showing 10:00 UTC is a later ALTER's
        ("TIMESTAMP NULL DEFAULT '2000-01-01 10:00:00'", ("timestamp", 0), "'2000-01-01 10:00:00'", None),
        (
            "TIMESTAMP(0) NULL DEFAULT '2000-01-01'",
            ("timestamp", 0),
            "'1999-12-31 18:30:00'",
            "1999-12-31T18:30:00.000000Z",
        ),
        # more digits than the column keeps: the server's to round or truncate
        ("TIMESTAMP NULL DEFAULT '2000-06-01 00:00:00.5'", ("timestamp", 0), "'2000-05-31 18:30:00'", None),
    ],
)
def test_an_added_timestamps_literal_default_is_read_on_the_statements_session_clock(definition, column, catalog, fill):
    kind, digits = column
    added = Column("c", kind, f"{kind}({digits})" if digits else kind, True, None, digits)
    now = [(c, None) for c in OLD] + [(added, catalog)]
    result = followed_columns(OLD, ("id",), [("add", "c", ("column", definition, ZONED))], now)
    if fill is None:
        assert bool(_why_not(result)), result
        return
    assert _why_not(result) is None, result
    assert normalize(added, result[2]["c"]) == fill, result
    late = declared_columns(OLD, ("id",), [("add", "c", ("column", definition, ZONED))], ["id", "amount", "memo", "c"])
    assert _why_not(late) is None and late[2]["c"] == result[2]["c"], late  # read late: the same fill


def test_a_cut_overs_timestamp_column_takes_the_catalogs_utc_default():
    added = Column("c", "timestamp", "timestamp", True, None, 0)
    result = followed_columns(
        OLD, ("id",), [("add", "c")], [(c, None) for c in OLD] + [(added, "'2000-01-01 04:30:00'")]
    )
    assert _why_not(result) is None and normalize(added, result[2]["c"]) == "2000-01-01T04:30:00.000000Z", result
    zero = followed_columns(OLD, ("id",), [("add", "c")], [(c, None) for c in OLD] + [(added, "'0000-00-00 00:00:00'")])
    assert bool(_why_not(zero)), zero


@pytest.mark.parametrize(
    "definition, column_type, fill",
    [  # what MariaDB gave the rows there (its own test: SELECT after the ALTER); MySQL gives the same
        ("INT UNSIGNED NOT NULL", "int(10) unsigned", 0),
        ("DECIMAL(5,2) NOT NULL", "decimal(5,2)", "0.00"),
        ("DOUBLE NOT NULL", "double", 0.0),
        ("VARCHAR(5) NOT NULL", "varchar(5)", ""),
        ("ENUM('b','a') NOT NULL", "enum('b','a')", "b"),
        ("SET('x','y') NOT NULL", "set('x','y')", ""),
        ("TIME NOT NULL", "time", "00:00:00.000000"),
        ("YEAR NOT NULL", "year(4)", 0),
        ("BINARY(3) NOT NULL", "binary(3)", "AAAA"),  # three zero bytes, in base64
        ("BLOB NOT NULL", "blob", ""),
        ("BIT(3) NOT NULL", "bit(3)", 0),
        # a zero date, JSON's '' and a spatial column's empty value: not values of their types
        ("DATETIME NOT NULL", "datetime", None),
        ("JSON NOT NULL", "json", None),
        ("POINT NOT NULL", "point", None),
    ],
)
def test_a_not_null_column_added_without_a_default_gets_the_types_implicit_one(definition, column_type, fill):
    added = _col("c", column_type, False)
    _assert_filled(_added_alone(definition, added, None), added, fill, refused="cannot reproduce")


@pytest.mark.parametrize(
    "definition, column_type, catalog, fill",
    [  # the catalog as MariaDB shows the default the rows there got (its own test: SELECT after the ALTER)
        ("BIT(1) NOT NULL DEFAULT b'1'", "bit(1)", "b'1'", 1),
        ("BIT(4) DEFAULT 5", "bit(4)", "b'101'", 5),
        ("BIT(3) DEFAULT 0b011", "bit(3)", "b'11'", 3),
        ("BIT(2) DEFAULT TRUE", "bit(2)", "b'1'", 1),
        ("VARBINARY(8) NOT NULL DEFAULT ''", "varbinary(8)", "''", ""),
        ("BLOB DEFAULT 'xy'", "blob", "'xy'", "eHk="),
        ("VARBINARY(8) DEFAULT 'é'", "varbinary(8)", "'é'", None),  # its bytes: the client's character set's
        (
            "BINARY(4) DEFAULT 'ab'",
            "binary(4)",
            "'ab\\0\\0'",
            "YWIAAA==",
        ),  # ab and two zero bytes, as the catalog shows it
        # a hexadecimal literal: its bytes, as MariaDB 10.11 shows each (a byte that is not UTF-8 as ?)
        ("VARBINARY(4) DEFAULT x'00FF'", "varbinary(4)", "'\\0?'", "AP8="),
        ("VARBINARY(4) DEFAULT 0x4142", "varbinary(4)", "'AB'", "QUI="),
        ("BINARY(4) DEFAULT x'41'", "binary(4)", "'A\\0\\0\\0'", "QQAAAA=="),
        ("BLOB DEFAULT x'ff'", "blob", "X'ff'", "/w=="),
        ("VARBINARY(4) DEFAULT 0x123", "varbinary(4)", "'\x01#'", "ASM="),  # 0x0123, shown as its bytes
        ("VARBINARY(4) DEFAULT x'0001'", "varbinary(4)", "'\\0\x01'", "AAE="),
        ("VARBINARY(4) DEFAULT x'00ff'", "varbinary(4)", "'\\0\x01'", None),  # the source shows another: later
        ("VARBINARY(1) DEFAULT (x'0001')", "varbinary(1)", "'\\0'", None),  # two bytes: the server refuses it
        ("INT DEFAULT 0x41", "int(11)", "65", 65),  # an integer
        ("TINYINT DEFAULT 0xff", "tinyint(4)", "127", None),  # 255 does not fit: the server refuses it
        ("VARCHAR(4) DEFAULT 0x4142", "varchar(4)", "'AB'", None),  # bytes in the column's character set
    ],
)
def test_an_added_bit_or_binary_columns_literal_default_is_followed(definition, column_type, catalog, fill):
    added = _col("c", column_type)
    _assert_filled(_added_alone(definition, added, catalog), added, fill)


@pytest.mark.parametrize(
    "definition, column_type, catalog, fill",
    [  # the catalog as MariaDB shows the default the rows there got (its own test: SELECT after the ALTER)
        ("ENUM('x','Y') DEFAULT 'y'", "enum('x','Y')", "'Y'", "Y"),
        ("SET('p','q') DEFAULT 'Q,p'", "set('p','q')", "'p,q'", "p,q"),
        ("CHAR(3) DEFAULT 'a '", "char(3)", "'a'", "a"),
        ("ENUM('x ','z') DEFAULT 'x'", "enum('x','z')", "'x'", "x"),  # the server drops a member's trailing spaces
        ("ENUM('a','A') CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT 'A'", "enum('a','A')", "'A'", "A"),
    ],
)
def test_an_added_enum_set_or_char_default_is_the_spelling_the_column_stores(definition, column_type, catalog, fill):
    added = _col("c", column_type)
    _assert_filled(_added_alone(definition, added, catalog), added, fill)
    said = [("add", "c", ("column", definition))]
    late = declared_columns(OLD, ("id",), said, ["id", "amount", "memo", "c"])  # read late, rows between
    assert _why_not(late) is None and late[2]["c"] == fill, late


def test_a_fraction_the_server_did_not_log_is_not_guessed():
    coarse = Instant(AT.utc, AT.local, False)
    now = [(c, None) for c in OLD] + [(Column("c", "datetime", "datetime(3)", True, None, 3), "current_timestamp(3)")]
    result = followed_columns(OLD, ("id",), [("add", "c", ("column", "DATETIME(3) DEFAULT NOW(3)", coarse))], now)
    assert "cannot reproduce" in (_why_not(result) or ""), result


@pytest.mark.parametrize(
    "column_type, default, extra, fill",
    [  # MySQL 8's COLUMN_DEFAULT and EXTRA for what MariaDB shows quoted
        ("varchar(20)", "it's a\\b", "", "it's a\\b"),
        ("varchar(20)", "NULL", "", "NULL"),  # the string 'NULL', not the absence of a default
        ("varchar(20)", None, "", None),
        ("int", "5", "", 5),
        ("decimal(6,2)", "1.50", "", "1.50"),
        ("enum('x','Y')", "Y", "", "Y"),
        ("bit(4)", "b'101'", "", 5),
        ("timestamp", "2000-01-01 04:30:00", "", "2000-01-01T04:30:00.000000Z"),  # the catalog on UTC
        ("varchar(36)", "uuid()", "DEFAULT_GENERATED", "cannot reproduce"),
        ("text", "_utf8mb4\\'a b\\'", "DEFAULT_GENERATED", "a b"),  # DEFAULT ('a b'): shown as an expression
        ("text", "_utf8mb4\\'\\'", "DEFAULT_GENERATED", ""),
        ("text", "_utf8mb4\\'a\\\\nb\\'", "DEFAULT_GENERATED", "cannot reproduce"),  # an escape: not guessed
        ("blob", "_binary\\'ab\\'", "DEFAULT_GENERATED", "cannot reproduce"),
        ("varbinary(8)", "0x6162", "", "cannot reproduce"),  # bytes or hex: not guessed
        ("json", "json_object()", "DEFAULT_GENERATED", "{}"),  # DEFAULT (json_object()), as TablePlus #2170 shows it
        ("json", "json_array()", "DEFAULT_GENERATED", "[]"),
        ("json", '_utf8mb4\\\'{"b": 1, "a": [2.50]}\\\'', "DEFAULT_GENERATED", '{"a":[2.5],"b":1}'),
        ("json", "json_array(1)", "DEFAULT_GENERATED", "cannot reproduce"),
        ("json", "_utf8mb4\\'[1\\'", "DEFAULT_GENERATED", "cannot reproduce"),  # not a document
        ("text", "json_array()", "DEFAULT_GENERATED", "[]"),
        ("int", "json_array()", "DEFAULT_GENERATED", "cannot reproduce"),  # not a number
    ],
)
def test_a_cut_overs_column_takes_mysql_8s_unquoted_default(column_type, default, extra, fill):
    added = _col("c", column_type)
    if added.data_type == "timestamp":
        added = Column("c", "timestamp", "timestamp", True, None, 0)
    catalog = mysql_default(added, default, extra)
    result = followed_columns(OLD, ("id",), [("add", "c")], [(c, None) for c in OLD] + [(added, catalog)])
    if fill == "cannot reproduce":
        assert fill in (_why_not(result) or ""), result
    else:
        assert _why_not(result) is None, result
        assert (result[2]["c"] if fill is None else normalize(added, result[2]["c"])) == fill, result


def test_the_catalogs_default_is_read_with_its_escapes():
    assert literal_default("'x\\ny\\\\z''\\0'") == "x\ny\\z'\0"
    assert literal_default("'a' = 'b'") is _COMPUTED


@pytest.mark.parametrize(
    "definition, column_type, nullable",
    [
        ("INT NOT NULL DEFAULT 3", "int", False),
        ("integer unsigned", "int unsigned", True),
        ("DECIMAL(6,2) NULL", "decimal(6,2)", True),
        ("numeric", "decimal(10,0)", True),
        ("VARCHAR(5) CHARACTER SET utf8mb4 NOT NULL", "varchar(5)", False),
        ("ENUM('a','B') DEFAULT 'a'", "enum('a','B')", True),
        ("boolean", "tinyint(1)", True),
        ("double precision", "double", True),
        ("DATETIME(0) NOT NULL", "datetime", False),  # as the catalog shows it: no digits, no (0)
        ("TIMESTAMP( 3 ) NULL", "timestamp(3)", True),
    ],
)
def test_what_a_clause_declares_as_column(definition, column_type, nullable):
    column = declared_column("c", ("column", definition))
    assert column is not None and (column.column_type, column.nullable) == (column_type, nullable)
    assert declared_column("c", ("column", "national varchar(5)")) is None  # not known here: the catalog decides
    assert declared_column("c", ("default", "SET DEFAULT 1")) is None


def _added_then(*later, now: tuple[str, bool, str | None]):
    """followed_columns of ALTERs in a row: ADD c (first of ``later``), the rest after it; ``now``: the
    source's c (type, nullable, COLUMN_DEFAULT)."""
    statements = [[clause] for clause in later]
    clauses = composed_clauses([c.name for c in OLD], statements)
    return followed_columns(OLD, ("id",), clauses, [(c, None) for c in OLD] + [(_col("c", now[0], now[1]), now[2])])


def test_an_added_columns_rows_get_the_default_its_add_declared():
    add = ("add", "c", ("column", "INT NOT NULL DEFAULT 3"))
    # read when the source already shows a later MODIFY: wait for it (the rows there got 3, not NULL)
    alone = _added_then(add, now=("int(11)", True, "NULL"))
    assert "a later change came first" in (_why_not(alone) or ""), alone
    then_modified = _added_then(add, ("modify", "c", ("column", "INT NULL")), now=("int(11)", True, "NULL"))
    assert _why_not(then_modified) is None and then_modified[2] == {"c": "3"}, then_modified
    then_default = _added_then(
        ("add", "c", ("column", "INT DEFAULT 1")),
        ("default", "c", ("default", "SET DEFAULT 2")),
        now=("int(11)", True, "2"),
    )
    assert _why_not(then_default) is None and then_default[2] == {"c": "1"}, then_default
    widened = _added_then(("add", "c", ("column", "DECIMAL(6,2) DEFAULT 1.5")), now=("decimal(10,2)", True, "1.50"))
    assert _why_not(widened) is None and widened[2] == {"c": "1.5"}, widened


@pytest.mark.parametrize(
    "later, now, why",
    [
        (  # the MODIFY rewrote the value every row got
            [("add", "c", ("column", "VARCHAR(10) DEFAULT '7'")), ("modify", "c", ("column", "INT"))],
            ("int(11)", True, "NULL"),
            "added, then column c changed",
        ),
        (  # NULLs rewritten by NOT NULL
            [("add", "c", ("column", "INT")), ("modify", "c", ("column", "INT NOT NULL"))],
            ("int(11)", False, None),
            "added, then column c became NOT NULL",
        ),
        (  # the server rounded it: not a later change
            [("add", "c", ("column", "INT DEFAULT 1.5"))],
            ("int(11)", True, "2"),
            "gets a default the stream cannot reproduce ('INT DEFAULT 1.5')",
        ),
        ([("add", "c", ("column", "INT AUTO_INCREMENT UNIQUE"))], ("int(11)", False, None), "cannot reproduce"),
        ([("add", "c", ("column", "VARCHAR(9) DEFAULT 'a'"))], ("varchar(5)", True, "'a'"), "later change came"),
    ],
)
def test_an_added_column_the_stream_cannot_fill_exactly_stops(later, now, why):
    result = _added_then(*later, now=now)
    assert why in (_why_not(result) or ""), result


@pytest.mark.parametrize(
    "definition, catalog, filled",
    [  # each checked against MariaDB 10.11: its COLUMN_DEFAULT, and CAST(CAST(c AS DOUBLE) AS CHAR) of a row
        ("FLOAT DEFAULT 1.1", "1.1", "1.100000023841858"),
        ("FLOAT DEFAULT 1.23456789", "1.23457", "1.2345678806304932"),
        ("FLOAT DEFAULT 123456789.5", "123457000", "123456792.0"),
        ("FLOAT NOT NULL DEFAULT 16777217", "16777200", "16777216.0"),
        ("FLOAT DEFAULT -2.5e-3", "-0.0025", "-0.0024999999441206455"),
        ("FLOAT DEFAULT '1e-3'", "0.001", "0.0010000000474974513"),
        ("FLOAT DEFAULT -0.0", "0", "0"),
        ("FLOAT DEFAULT .5", "0.5", "0.5"),
        ("FLOAT DEFAULT 3.4e38", "3.4e38", "3.3999999521443642e+38"),
    ],
)
def test_an_added_floats_rows_get_its_default_in_single_precision(definition, catalog, filled):
    result = _added_then(("add", "c", ("column", definition)), now=("float", "NOT NULL" not in definition, catalog))
    assert _why_not(result) is None and result[2] == {"c": filled}, result
    single = struct.unpack("<f", struct.pack("<f", float(filled)))[0]
    assert single == float(filled)  # a single-precision value: PostgreSQL's real reads it back as it is


@pytest.mark.parametrize(
    "definition, filled",
    [  # each checked against MariaDB 10.11: the rows the ADD filled, by the independent comparer
        ("DATETIME DEFAULT '2024-01-01'", "2024-01-01 00:00:00"),
        ("DATETIME(3) DEFAULT '2024-1-5 10:20'", "2024-01-05 10:20:00"),
        ("DATETIME(2) DEFAULT '2024-12-31 23:59:59.5'", "2024-12-31 23:59:59.5"),
        ("TIME DEFAULT '12:00'", "12:00:00"),
        ("TIME DEFAULT '-838:59'", "-838:59:00"),
        ("DATE NOT NULL DEFAULT '1999-12-1'", "1999-12-01"),
        ("DATE DEFAULT '2024-01-05 10:00'", None),  # the server cuts the time off with a note: it stops
        ("DATETIME DEFAULT '2024-01-01 24:00'", None),  # the server refuses it: never logged
        ("BINARY(4) DEFAULT 'ab'", "ab\0\0"),  # padded with zero bytes, as the catalog shows it
        ("BINARY(2) NOT NULL DEFAULT ''", "\0\0"),
        ("BINARY(2) DEFAULT 'abc'", None),  # refused by the server
        ("BINARY(4) DEFAULT 'ü'", None),  # its bytes are the session's character set's
        # digits alone, as the server reads them (each checked against MariaDB 10.11's catalog and rows)
        ("DATE DEFAULT 20240101", "2024-01-01"),
        ("DATE DEFAULT 700101", "1970-01-01"),
        ("DATE NOT NULL DEFAULT '240101'", "2024-01-01"),
        ("DATETIME DEFAULT 20240101", "2024-01-01 00:00:00"),
        ("DATETIME(2) DEFAULT 240101103000.25", "2024-01-01 10:30:00.25"),
        ("TIME DEFAULT 1030", "00:10:30"),
        ("TIME(1) DEFAULT -103000.5", "-10:30:00.5"),
        ("DATE DEFAULT 20240101103000", None),  # the time is cut off with a note
        ("DATE DEFAULT 0", None),  # the zero date
        ("TIME DEFAULT 1070", None),  # refused by the server
        # in parentheses: the literal, but MySQL 8 checks it only as each row gets it, where a session that is
        # not strict clips it: only a value the column holds whole is followed
        ("VARCHAR(3) DEFAULT ('abc')", "abc"),
        ("VARCHAR(3) DEFAULT ('abcd')", None),
        ("TINYTEXT DEFAULT ('" + "x" * 256 + "')", None),
        ("TINYINT DEFAULT (127)", "127"),
        ("TINYINT DEFAULT (1000)", None),
        ("SMALLINT UNSIGNED DEFAULT (-1)", None),
        ("DECIMAL(4,1) DEFAULT (999.9)", "999.9"),
        ("DECIMAL(4,1) DEFAULT (1000)", None),
    ],
)
def test_a_looser_spelling_or_a_binarys_padding_fills_the_value_the_server_stored(definition, filled):
    column = declared_column("c", ("column", definition))
    assert column is not None
    value, why = fill(column, declared_default(("column", definition)), definition)
    assert value == filled and (why is None) is (filled is not None), (value, why)


@pytest.mark.parametrize(
    "column_type, default, filled",
    [  # each as MariaDB 10.11 stored it as a default (and 23,000 random values inserted and read back agreed)
        ("double(16,2)", "1.505", "1.5"),  # the double of 1.505 is below it
        ("double(16,2)", "1.515", "1.51"),  # and 1.515 too
        ("double(5,2)", "0.125", "0.12"),  # half to even
        ("double(5,2)", "-12.345e1", "-123.45"),
        ("double(6,3) unsigned", "'2.0005'", "2.001"),
        ("float(7,3)", "1.23456", "1.2350000143051147"),  # rounded to 3 digits, then to single precision
        ("float(10,4)", "0.1", "0.10000000149011612"),
        ("double(5,2)", "1000", None),  # beyond M digits: the server refuses it
        ("double(5,2) unsigned", "-1", None),
        ("float(40,2)", "1e39", None),  # beyond FLOAT's range
    ],
)
def test_a_fixed_digits_floats_default_is_rounded_as_the_server_rounds_it(column_type, default, filled):
    base = column_type.partition("(")[0]
    column = Column("c", base, column_type, True, int(column_type.split(",")[1].split(")")[0]))
    value, why = fill(column, declared_default(("column", f"{column_type} DEFAULT {default}")), default)
    assert value == filled and (why is None) is (filled is not None), (value, why)
    if filled is not None:  # the statement read with a row between declares the same column
        declared = declared_column("c", ("column", f"{column_type} DEFAULT {default}"))
        assert declared is not None and declared.column_type == column_type, declared


@pytest.mark.parametrize(
    "column_type, catalog, fill",
    [  # nothing declared: the source's default, as MariaDB shows it
        ("blob", "X'ff'", "/w=="),
        ("varbinary(4)", "'AB'", "QUI="),
        ("varbinary(4)", "'\\0?'", None),  # ? is itself, or a byte that is not UTF-8 (x'00ff'): not guessed
    ],
)
def test_a_cut_overs_binary_column_takes_the_default_the_catalog_shows_unless_it_hides_bytes(
    column_type, catalog, fill
):
    now = [*OLD, _col("c", column_type)]
    result = followed_columns(OLD, ("id",), swapped_clauses(OLD, now), [(c, None) for c in OLD] + [(now[-1], catalog)])
    _assert_filled(result, now[-1], fill, refused="cannot reproduce")


def test_a_float_default_beyond_single_precision_or_from_the_catalog_alone_stops():
    too_big = fill(Column("c", "float", "float", True), "3.5e38", "FLOAT DEFAULT 3.5e38")
    assert too_big[0] is None and "cannot reproduce" in (too_big[1] or ""), too_big
    # a cut-over's column (nothing declared): MariaDB's catalog shows 1.23457 for the rows' 1.2345678806...
    now = [*OLD, _col("c", "float", True)]
    cut_over = followed_columns(
        OLD, ("id",), swapped_clauses(OLD, now), [(c, None) for c in OLD] + [(now[-1], "1.23457")]
    )
    assert "cannot reproduce" in (_why_not(cut_over) or ""), cut_over


def _declared(statements, names):
    clauses = composed_clauses([c.name for c in OLD], statements)
    return declared_columns(OLD, ("id",), clauses, names)


def test_alters_read_late_are_followed_as_declared_when_that_gives_the_rows_columns():
    result = _declared(
        [
            [("add", "x", ("column", "DATETIME(3) NULL FIRST"))],
            [("change", "memo", "note", ("column", "VARCHAR(40)"))],
            [("add", "n", ("column", "INT NOT NULL DEFAULT 7"))],
            [("modify", "n", ("column", "BIGINT NULL"))],
        ],
        ["x", "id", "amount", "note", "n"],
    )
    assert _why_not(result) is None, result
    columns, renamed, defaults = result
    assert [(c.name, c.column_type, c.nullable) for c in columns] == [
        ("x", "datetime(3)", True),
        ("id", "int(11)", False),
        ("amount", "decimal(10,2)", True),
        ("note", "varchar(40)", True),
        ("n", "bigint", True),
    ]
    assert columns[0].datetime_precision == 3 and renamed == {"memo": "note"} and defaults == {"x": None, "n": "7"}


@pytest.mark.parametrize(
    "statements, names, why",
    [
        ([[("add", "f", ("column", "FLOAT(30) DEFAULT 1.5"))]], ["id", "amount", "memo", "f"], "does not read"),
        ([[("add", "x", ("column", "INT"))]], ["id", "amount", "memo", "x", "y"], "not those the statements leave"),
        ([[("modify", "memo", ("column", "VARCHAR(10)"))]], ["id", "amount", "memo"], "not a widening"),
        ([[("add", "x", ("column", "DATE NOT NULL"))]], ["id", "amount", "memo", "x"], "cannot reproduce"),
        ([[("drop", "id")]], ["amount", "memo"], "drops key column id"),
    ],
)
def test_alters_read_late_stop_the_table_when_their_declarations_do_not_say_it_all(statements, names, why):
    result = _declared(statements, names)
    assert why in (_why_not(result) or ""), result


@pytest.mark.parametrize(
    "definition, catalog, follows",
    [
        ("DECIMAL(6,2) DEFAULT 1.545", ("decimal(6,2)", "1.55"), False),  # the server rounds half up
        ("DECIMAL(6,2) DEFAULT 1.50", ("decimal(6,2)", "1.50"), True),
        ("ENUM('a','b') DEFAULT 2", ("enum('a','b')", "'b'"), False),  # an index
        ("INT DEFAULT 1.5", ("int(11)", "2"), False),
        ("FLOAT DEFAULT 0.1", ("float", "0.1"), True),  # filled in single precision (below)
        ("FLOAT DEFAULT 1.23456789", ("float", "1.23457"), True),  # MariaDB shows six digits
        ("FLOAT DEFAULT 1.23456789", ("float", "'1.2345679'"), True),  # MySQL 8's, quoted by ``mysql_default``
        ("FLOAT DEFAULT 1.2345", ("float", "1.23457"), False),  # a later default
        ("DOUBLE DEFAULT 0.1", ("double", "0.1"), True),
        ("LONGTEXT DEFAULT (JSON_ARRAY())", ("longtext", "json_array()"), True),  # MariaDB's JSON, and its catalog
        ("JSON NOT NULL DEFAULT (JSON_OBJECT())", ("json", "json_object()"), True),
        ("VARCHAR(1) DEFAULT (JSON_ARRAY())", ("varchar(1)", "json_array()"), False),  # a session not strict cut it
        ("DATE DEFAULT (JSON_OBJECT())", ("date", "json_object()"), False),
        ("JSON DEFAULT ('[1, 2.0]')", ("json", "'[1, 2.0]'"), True),  # MySQL 8's, as ``mysql_default`` quotes it
        ("JSON DEFAULT (5)", ("json", "5"), False),  # a number, which MySQL does not read as a document
        ("JSON DEFAULT (x'31')", ("json", "0x31"), False),  # a binary string: neither
    ],
)
def test_an_added_default_the_server_stores_otherwise_is_not_reproduced(definition, catalog, follows):
    result = _added_then(("add", "c", ("column", definition)), now=(catalog[0], True, catalog[1]))
    assert bool(_why_not(result)) is not follows, result


_BEFORE = (
    Column("id", "int", "int(11)", False),
    Column("a", "int", "int(11)", True),
    Column("old", "timestamp", "timestamp", True),
)
_PROMOTED = "NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP"


@pytest.mark.parametrize(
    "clauses, declared",
    [  # each checked against MariaDB 10.11 with explicit_defaults_for_timestamp=OFF (its catalog after the ALTER)
        (
            "ADD ts TIMESTAMP NOT NULL AFTER id",
            {"ts": f"TIMESTAMP {_PROMOTED} AFTER id"},
        ),
        ("ADD ts TIMESTAMP FIRST", {"ts": f"TIMESTAMP {_PROMOTED} FIRST"}),
        ("ADD ts TIMESTAMP AFTER `old`", {"ts": "TIMESTAMP NOT NULL DEFAULT '0000-00-00 00:00:00' AFTER `old`"}),
        ("ADD ts TIMESTAMP", {"ts": "TIMESTAMP NOT NULL DEFAULT '0000-00-00 00:00:00'"}),  # `old` comes first
        ("DROP old, ADD ts TIMESTAMP", {"ts": f"TIMESTAMP {_PROMOTED}"}),
        ("CHANGE old old2 INT, ADD ts TIMESTAMP AFTER a", {"old2": "INT", "ts": f"TIMESTAMP {_PROMOTED} AFTER a"}),
        ("MODIFY old TIMESTAMP", {"old": f"TIMESTAMP {_PROMOTED}"}),  # NULL to NOT NULL: the stream then stops
        (
            "ADD ts TIMESTAMP(3) DEFAULT '2001-02-03 04:05:06'",
            {"ts": "TIMESTAMP(3) DEFAULT '2001-02-03 04:05:06' NOT NULL"},
        ),
        ("ADD ts TIMESTAMP ON UPDATE CURRENT_TIMESTAMP", {"ts": "TIMESTAMP ON UPDATE CURRENT_TIMESTAMP NOT NULL"}),
        (
            "ADD ts TIMESTAMP NULL, ADD ts2 TIMESTAMP(6) FIRST",
            {
                "ts": "TIMESTAMP NULL",
                "ts2": "TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6) FIRST",
            },
        ),
        ("ADD ts TIMESTAMP NOT NULL DEFAULT 0, ADD n INT", {"ts": "TIMESTAMP NOT NULL DEFAULT 0", "n": "INT"}),
    ],
)
def test_a_timestamp_is_declared_as_explicit_defaults_for_timestamp_off_reads_it(clauses, declared):
    effect = ddl_effect(f"ALTER TABLE t {clauses}", "d", "d", "t")
    settled = settled_timestamps(effect[1], False, _BEFORE)
    assert {c[-2]: c[-1][1] for c in settled if isinstance(c[-1], tuple)} == declared
    assert settled_timestamps(effect[1], True, _BEFORE) == effect[1]  # ON: as written


def test_a_timestamp_the_setting_decides_stops_when_the_binlog_did_not_log_it():
    why = settled_timestamps(ddl_effect("ALTER TABLE t ADD ts TIMESTAMP", "d", "d", "t")[1], None, _BEFORE)
    assert isinstance(why, str) and "explicit_defaults_for_timestamp" in why and "column ts" in why
    same_either_way = ddl_effect("ALTER TABLE t ADD ts TIMESTAMP NULL, ADD d DATETIME", "d", "d", "t")[1]
    assert settled_timestamps(same_either_way, None, _BEFORE) == same_either_way
    unknown = ddl_effect("ALTER TABLE t ADD ts TIMESTAMP AFTER nope", "d", "d", "t")[1]
    assert "not known here" in settled_timestamps(unknown, False, _BEFORE)


@pytest.mark.parametrize(
    "mode, clause, default, column_type",
    [  # each checked against MariaDB 10.11's catalog and rows after the ALTER
        (0, "ADD c VARCHAR(10) DEFAULT 'a' 'b'", "ab", "varchar(10)"),  # adjacent literals are one string
        (0, "ADD c VARCHAR(10) DEFAULT ''", "", "varchar(10)"),
        (EMPTY_STRING_IS_NULL, "ADD c VARCHAR(10) DEFAULT ''", None, "varchar(10)"),
        (EMPTY_STRING_IS_NULL, "ADD c CHAR(3) DEFAULT '' COMMENT 'x'", None, "char(3)"),
        (EMPTY_STRING_IS_NULL, "ADD c VARCHAR(10) DEFAULT '' 'x'", "x", "varchar(10)"),
        (EMPTY_STRING_IS_NULL, "ADD c VARCHAR(10) DEFAULT ' '", " ", "varchar(10)"),
        (EMPTY_STRING_IS_NULL, "ALTER COLUMN c SET DEFAULT ''", None, None),
        (ORACLE, "ADD d DATE DEFAULT '2001-02-03'", "2001-02-03", "datetime"),
        (ORACLE, "ADD d BLOB", None, "longblob"),
        (ORACLE, "ADD d CLOB", None, "longtext"),
        (ORACLE, "ADD d RAW(4)", None, "varbinary(4)"),
        (ORACLE, "ADD d NUMBER", None, "double"),
        (ORACLE, "ADD d NUMBER(5)", None, "decimal(5,0)"),
        (ORACLE, "ADD d VARCHAR2(3) DEFAULT ''", "", "varchar(3)"),  # ORACLE alone keeps ''
        (ORACLE | EMPTY_STRING_IS_NULL, "ADD d VARCHAR2(3) DEFAULT ''", None, "varchar(3)"),
    ],
)
def test_a_declaration_is_read_under_its_sessions_sql_mode(mode, clause, default, column_type):
    (settled,) = settled_for_mode(ddl_effect(f"ALTER TABLE t {clause}", "d", "d", "t", mode)[1], mode)
    declared = settled[-1]
    assert declared_default(declared) == default
    column = declared_column("c", declared)
    assert (column.column_type if column else None) == column_type


@pytest.mark.parametrize(
    "declaration, filled",
    [  # each checked against MariaDB 10.11: the rows there after ADD COLUMN c <declaration>
        ("VARCHAR(10) DEFAULT 1.50", "1.50"),
        ("VARCHAR(10) DEFAULT 7", "7"),
        ("VARCHAR(10) DEFAULT '1e3'", "1e3"),  # quoted: a string as written
        ("VARCHAR(10) DEFAULT 1e3", None),  # '1000'
        ("VARCHAR(10) DEFAULT -0", None),  # '0'
        ("VARCHAR(10) DEFAULT -0.0", None),  # '0.0'
        ("VARCHAR(10) DEFAULT +5", None),  # '5'
        ("YEAR DEFAULT 5", None),  # 2005
        ("YEAR DEFAULT '70'", None),  # 1970
        ("YEAR DEFAULT 2005", "2005"),
        ("INT DEFAULT +5", "+5"),  # a number column: its value
        ("INT DEFAULT b'101'", None),  # a binary string (5), not a BIT's digits
        ("BIT(3) DEFAULT b'101'", "101"),
    ],
)
def test_an_unquoted_number_is_filled_only_where_the_column_stores_it_as_spelled(declaration, filled):
    column = declared_column("c", ("column", declaration))
    value, why = fill(column, declared_default(("column", declaration)), declaration)
    assert (value, why is None) == (filled, filled is not None), why


def test_a_change_of_character_set_is_a_widening_only_where_every_text_converts_unchanged():
    def text(charset):
        return Column("c", "varchar", "varchar(10)", True, charset=charset)

    assert widening(text("latin1"), text("utf8mb4")) is None
    assert widening(text("utf8mb3"), text("utf8mb4")) is None
    assert widening(text("ascii"), text("latin1")) is None
    assert widening(text(None), text("latin1")) is None  # not known (a definition recorded before Seam read it)
    for old, new in (("utf8mb4", "latin1"), ("utf8mb4", "utf8mb3"), ("latin1", "ascii"), ("latin1", "greek")):
        assert f"from {old} to {new}" in (widening(text(old), text(new)) or ""), (old, new)
    late = declared_columns(
        (Column("id", "int", "int(11)", False), text("utf8mb4")),
        ("id",),
        [("modify", "c", ("column", "VARCHAR(20)"))],
        ["id", "c"],
        {"id": None, "c": "latin1"},  # the row's table map: the table's default was latin1
    )
    assert "from utf8mb4 to latin1" in (_why_not(late) or ""), late
    assert declared_column("c", ("column", "VARCHAR(3) CHARSET utf8 COLLATE utf8_bin")).charset == "utf8mb3"
    assert declared_column("c", ("column", "TEXT COLLATE latin1_swedish_ci")).charset == "latin1"
    assert declared_column("c", ("column", "TEXT COMMENT 'charset latin1'")).charset is None


def test_a_json_column_on_mariadb_is_declared_as_its_longtext():
    clauses = ddl_effect("ALTER TABLE t ADD c JSON NOT NULL DEFAULT '{}', ADD d INT", "d", "d", "t")[1]
    (c, d) = json_as_longtext(clauses)
    column = declared_column("c", c[-1])
    assert (column.column_type, column.charset, column.nullable) == ("longtext", "utf8mb4", False)
    assert declared_default(c[-1]) == "{}" and d == clauses[1]


@pytest.mark.parametrize(
    "query, stops",
    [
        ("ALTER IGNORE TABLE t ADD UNIQUE KEY (a)", True),
        ("ALTER ONLINE IGNORE TABLE t ADD CONSTRAINT u UNIQUE (a)", True),
        ("ALTER IGNORE TABLE t ADD PRIMARY KEY (a)", True),
        ("ALTER IGNORE TABLE t ADD c INT NOT NULL DEFAULT 0 UNIQUE", True),
        ("ALTER IGNORE TABLE t ADD INDEX (a)", False),
        ("ALTER IGNORE TABLE t ADD c INT COMMENT 'unique'", False),
        ("ALTER TABLE t ADD UNIQUE (a)", False),  # without IGNORE a repeated key fails the ALTER
        ("ALTER IGNORE TABLE other ADD UNIQUE (a)", False),
    ],
)
def test_alter_ignore_adding_a_unique_key_stops_the_table(query, stops):
    effect = ddl_effect(query, "d", "d", "t")
    assert (effect is not None and effect[0] == "stop") == stops, effect


@pytest.mark.parametrize(
    "before, after, why",
    [
        ("latin1", "utf8mb4", None),
        ("utf8mb3", "utf8mb4", None),
        ("utf8mb4", "latin1", "changed its character set from utf8mb4 to latin1"),
    ],
)
def test_a_converted_table_is_followed_when_its_text_converts_unchanged(before, after, why):
    def text(name, column_type, charset):
        return replace(_col(name, column_type), charset=charset)

    old = (_col("id", "int(11)", False), text("memo", "varchar(20)", before), text("body", "text", before))
    now = [(old[0], None), (text("memo", "varchar(20)", after), None), (text("body", "mediumtext", after), None)]
    result = followed_columns(old, ("id",), composed_clauses(["id", "memo", "body"], [[("convert", "*")]]), now)
    if why:
        assert why in (_why_not(result) or ""), result
    else:
        assert _why_not(result) is None and [c.charset for c in result[0]] == [None, after, after], result


def test_a_conversion_the_reader_meets_after_a_later_alter_stops_naming_it():
    clauses = composed_clauses(["id", "amount", "memo"], [[("convert", "*")], [("add", "z", ("column", "INT"))]])
    result = declared_columns(OLD, ("id",), clauses, ["id", "amount", "memo", "z"])
    assert "converted to another character set" in (_why_not(result) or ""), result


@pytest.mark.parametrize("key", [("id",), ()])
def test_an_added_column_the_stream_cannot_fill_is_added_null_and_its_table_repaired(key):
    """(UUID()) gives every row its own value: the target takes the column, NULL in the rows there, and the table
    stops for a repair (which the stream starts itself), the other added column filled as usual. A keyless
    table, which no repair takes up, stops."""
    now = [(c, None) for c in OLD] + [(_col("c", "int(11)"), "5"), (_col("u", "char(36)", False), "uuid()")]
    clauses = [
        ("add", "c", ("column", "INT DEFAULT 5")),
        ("add", "u", ("column", "CHAR(36) NOT NULL DEFAULT (UUID())")),
    ]
    result = followed_columns(OLD, key, clauses, now)
    assert (
        _why_not(result) == "column u gets a default the stream cannot reproduce ('CHAR(36) NOT NULL DEFAULT (UUID())')"
    )
    followed = Followed(TableConfig("shop", "t", key), None, "topic", Position("bin.000001", 4), None)
    change = _schema_change(followed, Position("bin.000001", 900), result, "ALTER TABLE t ADD c ..., ADD u ...")
    if not key:
        assert change == _why_not(result)
        return
    assert isinstance(change, SchemaChange) and change.defaults == {"c": 5, "u": None}, change
    assert [c["name"] for c in change.columns] == ["id", "amount", "memo", "c", "u"]
    assert change.stop == (
        f"{_why_not(result)}: the target took the column at {Position('bin.000001', 900)}, NULL in the rows there; "
        "run `seam repair shop.t` to copy their values from the source and go on streaming"
    )


_DAY_ON = "(current_timestamp() + interval 1 day)"
_MONTH_OFF = "(current_timestamp(3) - interval 1 month)"


@pytest.mark.parametrize(
    "definition, precision, catalog, wall, fill",
    [  # the wall time as the source converted it (stream_ddl._instant), keyed as the session's clock shows it
        ("TIMESTAMP NULL DEFAULT (NOW() + INTERVAL 1 DAY)", 0, _DAY_ON, "2026-11-30 22:44:44", "2026-11-30 17:14:44"),
        ("TIMESTAMP(3) DEFAULT (NOW(3) - INTERVAL 1 MONTH)", 3, _MONTH_OFF, "", None),  # not converted: not guessed
        (
            "TIMESTAMP(3) NOT NULL DEFAULT (NOW(3) - INTERVAL 1 MONTH)",
            3,
            _MONTH_OFF,
            "2026-10-29 22:44:44.630000",
            "2026-10-29 17:14:44.630000",
        ),
        ("TIMESTAMP DEFAULT (NOW(3) - INTERVAL 1 MONTH)", 0, _MONTH_OFF, "2026-10-29 22:44:44.630000", None),  # digits
        (
            "TIMESTAMP NULL DEFAULT (CURRENT_DATE + INTERVAL 1 DAY)",
            0,
            "(curdate() + interval 1 day)",
            "2026-11-30 00:00:00",
            "2026-11-29 18:30:00",
        ),
    ],
)
def test_an_added_timestamps_shifted_time_is_its_wall_time_as_the_source_converts_it(
    definition, precision, catalog, wall, fill
):
    """The statement's time plus an interval in a TIMESTAMP: the interval is added on the session's wall clock,
    and the result read on that clock as the server stored it, which only the source can convert (a zone whose
    offset changes in between). Where it has not (beyond the type, a gap in the zone), it is not guessed."""
    converted = {wall: dt.datetime.fromisoformat(fill or "2000-01-01")} if wall else {}
    at = Instant(AT.utc, AT.local, True, converted)
    added = Column("c", "timestamp", f"timestamp({precision})" if precision else "timestamp", True, None, precision)
    now = [(c, None) for c in OLD] + [(added, catalog)]
    result = followed_columns(OLD, ("id",), [("add", "c", ("column", definition, at))], now)
    if fill is None:
        assert "cannot reproduce" in (_why_not(result) or ""), result
    else:
        assert _why_not(result) is None and result[2]["c"] == fill, result
