"""The copies online schema changes build (gh-ost's ``_t_gho`` LIKE the table, pt-online-schema-change's
``_t_new`` from its definition), tracked through their ALTERs, so that the cut-over follows a renamed column as a
rename (pure parsing, no database; the stack test is tests/stack/test_repair.py's cut-over test)."""

from __future__ import annotations

import json

import pytest

from seam.core.position import Position
from seam.core.schema import Column
from seam.source.binlog import Statement
from seam.source.ddl import followed_columns, swapped_clauses
from seam.source.ghosts import Ghosts, created_table

AT = Position("bin.000001", 4)
ACCOUNTS = ("id", "owner", "currency", "status")
FOLLOWED = {("shop", "accounts"): ACCOUNTS}
PT_OSC_CREATE = (
    "CREATE TABLE `shop`.`_accounts_new` (\n  `id` bigint(20) NOT NULL AUTO_INCREMENT,\n  `owner` varchar(100) "
    "NOT NULL,\n  `currency` char(3) NOT NULL DEFAULT 'E,(',\n  `status` enum('open','closed') NOT NULL,\n  "
    "PRIMARY KEY (`id`),\n  KEY `ix` (`owner`,`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 PARTITION BY HASH (`id`)"
)


def _statement(query: str, in_transaction: bool = False, fold: bool = False) -> Statement:
    return Statement(AT, query, "shop", in_transaction, None, fold)


def _seen(*queries: str, fold: bool = False) -> Ghosts:
    ghosts = Ghosts()
    for query in queries:
        ghosts.see(_statement(query, fold=fold), lambda: FOLLOWED)
    return ghosts


@pytest.mark.parametrize(
    "query, name, made",
    [
        (
            "create /* gh-ost */ table `shop`.`_accounts_gho` like `shop`.`accounts`",
            "_accounts_gho",
            ("like", ("shop", "accounts")),
        ),
        ("CREATE TABLE IF NOT EXISTS _accounts_gho (LIKE accounts)", "_accounts_gho", ("like", ("shop", "accounts"))),
        (PT_OSC_CREATE, "_accounts_new", ("columns", list(ACCOUNTS))),
    ],
)
def test_a_copy_is_read_from_its_create(query, name, made):
    assert created_table(query, "shop") == (("shop", name), made)


@pytest.mark.parametrize(
    "query",
    [
        "CREATE TABLE copy SELECT * FROM accounts",
        "CREATE TABLE copy (id INT) SELECT id FROM accounts",
        "CREATE TEMPORARY TABLE copy LIKE accounts",
        "ALTER TABLE accounts ADD COLUMN x INT",
    ],
)
def test_other_statements_create_no_copy(query):
    assert created_table(query, "shop") is None


def test_ghosts_alters_are_composed_into_the_renames_of_the_cut_over():
    ghosts = _seen(
        "create /* gh-ost */ table `shop`.`_accounts_gho` like `shop`.`accounts`",
        "alter /* gh-ost */ table `shop`.`_accounts_gho` ADD COLUMN region CHAR(2), ADD INDEX (owner)",
        "ALTER TABLE _accounts_gho RENAME COLUMN currency TO ccy, CHANGE status state enum('open','closed')",
        "ALTER TABLE _accounts_gho RENAME COLUMN ccy TO cur",
        "INSERT INTO _accounts_gho SELECT * FROM accounts",  # (a statement the copy's columns do not change)
    )
    assert ghosts.renames(("shop", "_accounts_gho"), ACCOUNTS) == {"currency": "cur", "status": "state"}
    # the followed table's columns changed since the copy was made: its ALTERs say nothing about them now
    assert ghosts.renames(("shop", "_accounts_gho"), ("id", "owner", "currency", "status", "later")) == {}
    assert ghosts.renames(("shop", "_other_gho"), ACCOUNTS) == {}


def test_pt_online_schema_changes_copy_is_known_by_its_definition_and_names_fold_as_the_server_does():
    ghosts = _seen(PT_OSC_CREATE, "ALTER TABLE `shop`.`_accounts_new` CHANGE COLUMN `owner` `holder` varchar(200)")
    assert ghosts.renames(("shop", "_accounts_new"), ACCOUNTS) == {"owner": "holder"}
    folded = _seen(
        "CREATE TABLE _Accounts_Gho LIKE Accounts", "ALTER TABLE _ACCOUNTS_GHO RENAME COLUMN owner TO o", fold=True
    )
    assert folded.renames(("shop", "_accounts_gho"), ACCOUNTS) == {"owner": "o"}
    # a table of other columns is not a copy; nor is one in another database
    assert _seen("CREATE TABLE _accounts_new (id INT, x INT)").tracked == {}
    assert _seen("CREATE TABLE other._accounts_gho LIKE other.accounts").tracked == {}


@pytest.mark.parametrize(
    "then",
    [
        "DROP TABLE _accounts_gho",
        "RENAME TABLE _accounts_gho TO _accounts_x",
        "CREATE TABLE _accounts_gho (id INT)",  # made again, of other columns
        "ALTER TABLE _accounts_gho ADD PRIMARY KEY (owner)",  # a clause the stream does not follow
    ],
)
def test_a_copy_dropped_renamed_made_again_or_altered_past_reading_is_forgotten(then):
    ghosts = _seen(
        "CREATE TABLE _accounts_gho LIKE accounts", "ALTER TABLE _accounts_gho RENAME COLUMN owner TO o", then
    )
    assert ghosts.renames(("shop", "_accounts_gho"), ACCOUNTS) == {}


def test_an_alter_the_reader_could_not_see_whole_makes_the_copy_unknown():
    ghosts = Ghosts()
    ghosts.see(_statement("CREATE TABLE _accounts_gho LIKE accounts"), lambda: FOLLOWED)
    ghosts.see(_statement("ALTER TABLE _accounts_gho RENAME COLUMN owner TO o", in_transaction=True), lambda: FOLLOWED)
    ghosts.see(_statement("ALTER TABLE _accounts_gho RENAME COLUMN status TO s"), lambda: FOLLOWED)
    assert ghosts.renames(("shop", "_accounts_gho"), ACCOUNTS) == {}


def _col(name: str, column_type: str, nullable: bool = True) -> Column:
    return Column(name, column_type.split("(")[0], column_type, nullable)


def test_a_cut_over_follows_the_copys_renames_and_compares_the_rest_by_name():
    old = (_col("id", "int(11)", False), _col("currency", "char(3)"), _col("memo", "varchar(20)"))
    now = [_col("id", "int(11)", False), _col("ccy", "char(3)"), _col("memo", "varchar(40)"), _col("tier", "int(11)")]
    clauses = swapped_clauses(old, now, {"currency": "ccy", "gone": "x", "memo": "id"})  # the last two cannot be
    assert clauses == [("rename", "currency", "ccy"), ("modify", "memo"), ("add", "tier")]
    columns, renamed, defaults = followed_columns(old, ("id",), clauses, [(c, None) for c in now])
    assert [c.name for c in columns] == ["id", "ccy", "memo", "tier"] and renamed == {"currency": "ccy"}
    # without the renames, the column is dropped and another added: the repair would copy every row's value
    assert swapped_clauses(old, now) == [("drop", "currency"), ("modify", "memo"), ("add", "ccy"), ("add", "tier")]


def test_a_reader_that_starts_again_keeps_what_it_will_not_read_again():
    """Saved as JSON (seam.state.ghost_tables) and restored for a reader starting at a position: a copy made
    and altered before it keeps its ALTERs; an ALTER after it, or a copy made after it, is read again."""
    ghosts = Ghosts()
    for pos, query in [
        (100, "CREATE TABLE _accounts_gho LIKE accounts"),
        (200, "ALTER TABLE _accounts_gho ADD COLUMN region CHAR(2) DEFAULT 'EU', RENAME COLUMN owner TO holder"),
        (300, "ALTER TABLE _accounts_gho RENAME COLUMN status TO state"),
        (400, "CREATE TABLE _accounts_new LIKE accounts"),
    ]:
        ghosts.see(Statement(Position("bin.000001", pos), query, "shop", False), lambda: FOLLOWED)
        assert ghosts.changed
    saved = json.loads(json.dumps(ghosts.rows()))
    assert not ghosts.changed
    assert ghosts.renames(("shop", "_accounts_gho"), ACCOUNTS) == {"owner": "holder", "status": "state"}
    restored = Ghosts.restored(saved, Position("bin.000001", 250))
    assert list(restored.tracked) == [("shop", "_accounts_gho")]
    assert restored.renames(("shop", "_accounts_gho"), ACCOUNTS) == {"owner": "holder"}
    restored.see(
        Statement(
            Position("bin.000001", 300), "ALTER TABLE _accounts_gho RENAME COLUMN status TO state", "shop", False
        ),
        FOLLOWED,
    )
    assert restored.renames(("shop", "_accounts_gho"), ACCOUNTS) == {"owner": "holder", "status": "state"}
    assert Ghosts.restored(saved, Position("bin.000001", 50)).tracked == {}
    assert Ghosts.restored(saved, Position("bin.000002", 4)).renames(("shop", "_accounts_gho"), ACCOUNTS) == {
        "owner": "holder",
        "status": "state",
    }


def test_a_copy_taken_by_a_cut_over_is_there_again_for_a_reader_that_reads_the_cut_over_again():
    """gh-ost's two-step cut-over read again after a restart (the sink had not applied the second RENAME): the copy
    was forgotten at that RENAME, so the first, read again, found no copy and stopped the table. It is kept with
    where it went, and restored for a reader that starts before that; not for one that starts after it."""
    ghosts = Ghosts()
    for pos, query in [
        (100, "CREATE TABLE _accounts_gho LIKE accounts"),
        (200, "ALTER TABLE _accounts_gho RENAME COLUMN owner TO holder"),
        (300, "RENAME TABLE accounts TO _accounts_del"),
        (400, "RENAME TABLE _accounts_gho TO accounts"),
    ]:
        ghosts.see(Statement(Position("bin.000001", pos), query, "shop", False), lambda: FOLLOWED)
    assert ghosts.copies_of("shop", ACCOUNTS) == [] and ghosts.renames(("shop", "_accounts_gho"), ACCOUNTS) == {}
    saved = json.loads(json.dumps(ghosts.rows()))
    for start in (250, 350):  # before the first RENAME, or between the two
        again = Ghosts.restored(saved, Position("bin.000001", start))
        assert again.copies_of("shop", ACCOUNTS) == [("shop", "_accounts_gho")]
        assert again.renames(("shop", "_accounts_gho"), ACCOUNTS) == {"owner": "holder"}
    assert Ghosts.restored(saved, Position("bin.000001", 450)).tracked == {}
    # a copy gone is the first to make room for a new one
    for i in range(100):
        ghosts.see(_statement(f"CREATE TABLE _c{i} LIKE accounts"), lambda: FOLLOWED)
    assert ("shop", "_accounts_gho") not in ghosts.tracked and ("shop", "_c0") in ghosts.tracked
