"""An ALTER is read as its session read it. The rows there got the default the server made of the statement,
which depends on the session's settings, logged with it in the binlog; each case is also checked with a row
between the ALTER and the reader (then the stream has only the statement to go by, not the source's catalog).

- ``explicit_defaults_for_timestamp=OFF`` (MariaDB's default before 10.10, a DBA's setting after): there ``ADD
  ts TIMESTAMP`` is NOT NULL, and the table's first TIMESTAMP gets DEFAULT CURRENT_TIMESTAMP ON UPDATE
  CURRENT_TIMESTAMP, so the rows hold the ALTER's time, not NULL; a later TIMESTAMP gets the zero timestamp,
  which stops that table alone, naming it. Before, the first case was applied as NULL (silently different).
- ``sql_mode``: EMPTY_STRING_IS_NULL makes ``DEFAULT ''`` NULL (it was applied as ''); adjacent literals are
  one string (``DEFAULT 'a' 'b'`` was applied as 'a'); ORACLE names types otherwise (BLOB is LONGBLOB, NUMBER a
  DOUBLE, DATE a DATETIME, whose date-only default stops the table); TIME_ROUND_FRACTIONAL rounds a default's
  extra digits (stops). A stop names the default, not "a later change".
- literals a column stores otherwise than spelled: an unquoted number in a string column is the server's
  spelling of its value (``DEFAULT 1e3`` is '1000', ``-0`` is '0': both were applied as written), a YEAR's
  two digits are a year of this or the last century (5 was applied as 5, not 2005), a bit literal in an INT
  (the change reader crashed on it, and so every table stalled): these stop; ZEROFILL makes a number UNSIGNED
  (it stopped as "altered by a statement the binlog does not hold"); MariaDB's JSON is LONGTEXT (an added JSON
  column's values landed as Python's repr of the document, {'k': 1}).
- a column's character set: MODIFY to one that cannot hold every value (utf8mb4 to latin1 or utf8mb3) has the
  source replace what it cannot hold with '?', so it stops; before, it was followed as no change at all. A
  column declared without a character set takes the table's default, which the row's table map shows.
- ``ALTER IGNORE TABLE ... ADD UNIQUE`` deletes, unlogged, every row but the first of each repeated key: its
  table stops (before, the ALTER was taken for an index change and the deleted rows stayed in the target)."""

from __future__ import annotations

import os

import psycopg
import pytest

from seam_dev import demo
from tests.support.independent import compare_pipeline
from tests.support.pipelines import loaded, stopped_tables, stream_once
from tests.support.source import fresh_database

DB = "explicit_defaults"
pytestmark = pytest.mark.stack
TABLES = ("first_ts", "later_ts", "with_default", "session_on", "bystander")


def _streamed(tmp_path_factory, db: str, tables, name: str, rows: str = "(1, 1), (2, 2)"):
    """Tables ``(id INT PRIMARY KEY, a INT)`` holding ``rows``, loaded and streamed to the binlog's end: the
    pipeline, and an autocommitting connection to ``db``."""
    fresh_database(
        db,
        *(
            statement
            for table in tables
            for statement in (
                f"CREATE TABLE {db}.{table} (id INT PRIMARY KEY, a INT)",
                f"INSERT INTO {db}.{table} VALUES {rows}",
            )
        ),
    )
    _, pipeline = loaded(tmp_path_factory, name, [{"name": f"{db}.{t}", "key": ["id"]} for t in tables])
    stream_once(pipeline)
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], db)
    conn.autocommit(True)
    return pipeline, conn


def test_timestamps_added_under_explicit_defaults_off_are_followed_as_the_server_made_them(stack, tmp_path_factory):
    pipeline, conn = _streamed(tmp_path_factory, DB, TABLES, "explicit_defaults")
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+05:30', explicit_defaults_for_timestamp = OFF")
        cur.execute("ALTER TABLE first_ts ADD ts TIMESTAMP AFTER id")
        cur.execute("INSERT INTO first_ts (id, a) VALUES (3, 3)")  # a row before the reader reads the catalog
        cur.execute("UPDATE first_ts SET a = 9 WHERE id = 1")
        cur.execute("ALTER TABLE later_ts ADD ts TIMESTAMP NULL, ADD ts2 TIMESTAMP")
        cur.execute("ALTER TABLE with_default ADD ts TIMESTAMP(3) DEFAULT '2001-02-03 04:05:06'")
        cur.execute("SET explicit_defaults_for_timestamp = ON")
        cur.execute("ALTER TABLE session_on ADD ts TIMESTAMP")
        for table in ("with_default", "session_on", "bystander"):
            cur.execute(f"INSERT INTO {table} (id, a) VALUES (3, 3)")
        cur.execute("SELECT UNIX_TIMESTAMP(ts) FROM first_ts WHERE id = 2")
        (filled,) = cur.fetchone()
    stream_once(pipeline)

    stopped = stopped_tables(pipeline, DB)
    assert {t for t, why in stopped.items() if why and t in TABLES} == {"later_ts"}, stopped
    assert "column ts2" in stopped["later_ts"] and "timestamp default" in stopped["later_ts"], stopped
    assert "later change" not in stopped["later_ts"], stopped
    for table in ("first_ts", "with_default", "session_on", "bystander"):
        assert compare_pipeline(pipeline, DB, table) is None, table
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as target:
        rows = dict(target.execute(f'SELECT id, extract(epoch FROM ts) FROM "{DB}".first_ts').fetchall())
        assert rows[2] == filled and rows[3] is not None, rows  # the ALTER's time, not NULL
        nulls = target.execute(f'SELECT count(*) FROM "{DB}".session_on WHERE ts IS NULL').fetchone()[0]
        assert nulls == 3  # ON: the column is NULL, as written


MODES_DB = "session_sql_mode"
MODES = {
    "empty_is_null": ("EMPTY_STRING_IS_NULL", "ADD c VARCHAR(10) DEFAULT '', ADD e VARCHAR(5) NOT NULL DEFAULT 'x'"),
    "empty_joined": ("EMPTY_STRING_IS_NULL", "ADD c VARCHAR(10) DEFAULT '' 'x'"),
    # ('') is (NULL) there, an expression: a TIMESTAMP NOT NULL (explicit_defaults_for_timestamp OFF) gets the
    # ALTER's time from it (the random ALTER test's seed 5 found it applied as NULL)
    "empty_in_parentheses": ("EMPTY_STRING_IS_NULL", "ADD c TEXT DEFAULT (''), ADD d VARCHAR(5) DEFAULT ( ( '' ) )"),
    "joined": ("", "ADD c VARCHAR(10) DEFAULT 'a' 'b'"),
    "oracle_types": (
        "ORACLE",
        "ADD d BLOB, ADD e CLOB, ADD f RAW(4), ADD g NUMBER, ADD h NUMBER(5), ADD i VARCHAR2(3)",
    ),
    "oracle_date": ("ORACLE", "ADD d DATE DEFAULT '2001-02-03'"),  # a DATETIME there: 2001-02-03 00:00:00
    # REAL is FLOAT there (and under ANSI): a DOUBLE's digits in the stream would not be the rows'
    "real_as_float": ("REAL_AS_FLOAT", "ADD r REAL DEFAULT 1.1, ADD s REAL(7,2) NOT NULL DEFAULT 2.345"),
    "rounded": ("TIME_ROUND_FRACTIONAL", "ADD t DATETIME(1) DEFAULT '2001-02-03 04:05:06.55'"),
}


@pytest.mark.parametrize("row_between", [False, True])
def test_an_alter_is_read_under_its_sessions_sql_mode(stack, tmp_path_factory, row_between):
    db = f"{MODES_DB}_{int(row_between)}"
    pipeline, conn = _streamed(tmp_path_factory, db, MODES, f"sql_modes_{row_between}")
    with conn.cursor() as cur:
        for table, (mode, clauses) in MODES.items():
            cur.execute("SET sql_mode = %s", (mode,))
            cur.execute(f"ALTER TABLE {table} {clauses}")
            if row_between:
                cur.execute(f"INSERT INTO {table} (id, a) VALUES (3, 3)")
    stream_once(pipeline)

    stopped = stopped_tables(pipeline, db)
    assert {t for t, why in stopped.items() if why and t in MODES} == {"rounded", "empty_in_parentheses"}, stopped
    assert "datetime default the stream does not reproduce" in stopped["rounded"], stopped["rounded"]
    assert "default the stream cannot reproduce" in stopped["empty_in_parentheses"], stopped["empty_in_parentheses"]
    for table in ("empty_is_null", "empty_joined", "joined", "oracle_types", "oracle_date"):
        assert compare_pipeline(pipeline, db, table) is None, table


LITERALS = {
    "number_as_text": ("ADD c VARCHAR(10) DEFAULT 1.50, ADD d VARCHAR(10) DEFAULT 7", None),
    "exponent_as_text": ("ADD c VARCHAR(10) DEFAULT 1e3", "cannot reproduce"),
    "negative_zero_as_text": ("ADD c VARCHAR(5) DEFAULT -0", "cannot reproduce"),
    "two_digit_year": ("ADD c YEAR DEFAULT 5", "cannot reproduce"),
    "four_digit_year": ("ADD c YEAR DEFAULT '2005'", None),
    "zero_filled": ("ADD c INT(5) ZEROFILL DEFAULT 42", None),
    "bit_literal": ("ADD c INT DEFAULT b'101'", "cannot reproduce"),  # the reader crashed on it, every table stalled
    "json_default": ("ADD c JSON NOT NULL DEFAULT '{}'", None),  # MariaDB's JSON: LONGTEXT
    # in single precision, as the rows hold it; the catalog shows 1.23457 and 16777200 (six digits)
    "float_fractions": ("ADD c FLOAT DEFAULT 1.1, ADD d FLOAT DEFAULT 1.23456789, ADD e FLOAT DEFAULT '-2.5e-3'", None),
    "float_rounded": (
        "ADD c FLOAT NOT NULL DEFAULT 16777217, ADD d FLOAT DEFAULT -0.0, ADD e FLOAT DEFAULT 3.4e38",
        None,
    ),
    "loose_times": (
        "ADD c DATETIME DEFAULT '2024-01-01', ADD d TIME DEFAULT '12:00', ADD e DATE NOT NULL DEFAULT '2024-1-5', "
        "ADD f DATETIME(3) DEFAULT '2024-1-5 10:20'",
        None,
    ),
    "binary_padded": ("ADD c BINARY(4) DEFAULT 'ab', ADD d BINARY(3) NOT NULL DEFAULT 'a b'", None),
    "digits_alone": (
        "ADD c DATE DEFAULT 20240101, ADD d DATETIME(2) DEFAULT 240101103000.25, ADD e TIME DEFAULT 1030, "
        "ADD f DATE NOT NULL DEFAULT '991231'",
        None,
    ),
    "date_with_a_time": ("ADD c DATE DEFAULT '2024-01-05 10:00'", "date default"),  # cut off, with a note
    # rounded to D digits after the point (1.505 is 1.5: its double is below 1.505), then a FLOAT's to single
    # precision (it stopped)
    "fixed_digits": (
        "ADD c DOUBLE(16,2) DEFAULT 1.505, ADD d FLOAT(7,3) DEFAULT 1.5, ADD e DOUBLE(6,3) UNSIGNED NOT NULL DEFAULT "
        "'2.0005', ADD f FLOAT(10,4) DEFAULT 0.1, ADD g REAL(5,2) DEFAULT -12.345e1, ADD h DOUBLE(5,2) DEFAULT 0.125",
        None,
    ),
    # a literal in parentheses: MySQL 8's only way to give a TEXT, BLOB or JSON column a default (it stopped)
    "in_parentheses": (
        "ADD c TEXT DEFAULT (''), ADD d INT NOT NULL DEFAULT (-5), ADD e VARCHAR(9) DEFAULT (( 'x' )), "
        "ADD f DECIMAL(5,2) DEFAULT (1.5), ADD g BLOB DEFAULT ('ab'), ADD h DATE DEFAULT ('2024-01-02'), "
        "ADD i TEXT DEFAULT ('a' 'b'), ADD j JSON DEFAULT ('[1]'), ADD k BIT(3) DEFAULT (b'101'), "
        "ADD l TIMESTAMP NULL DEFAULT ('2024-01-02 10:00:00')",
        None,
    ),
    # the empty document: the expression applications give a JSON column (MySQL 8 allows it no literal)
    "empty_documents": (
        "ADD c JSON DEFAULT (JSON_ARRAY()), ADD d TEXT NOT NULL DEFAULT (json_object()), ADD e LONGTEXT DEFAULT "
        "JSON_ARRAY(), ADD f VARCHAR(5) DEFAULT ((JSON_OBJECT()))",
        None,
    ),
    "document_with_members": ("ADD c JSON DEFAULT (JSON_ARRAY(1))", "cannot reproduce"),
    # a hexadecimal literal: bytes to a binary column (MariaDB's catalog shows one that is not UTF-8 as ?), a number
    # to an integer one
    "hexadecimal": (
        "ADD c VARBINARY(4) DEFAULT x'00FF', ADD d BINARY(4) NOT NULL DEFAULT 0x41, ADD e BLOB DEFAULT x'ff', "
        "ADD f INT DEFAULT 0x41, ADD g TINYBLOB DEFAULT (0x123)",
        None,
    ),
    "hexadecimal_text": ("ADD c VARCHAR(4) DEFAULT 0x4142", "cannot reproduce"),  # in the column's character set
    # the statement's time with an interval added, on its session's wall clock
    "shifted_time": (
        "ADD c DATE DEFAULT (CURRENT_DATE + INTERVAL 1 YEAR), ADD d DATETIME DEFAULT (NOW() - INTERVAL 1 DAY), "
        "ADD e DATE NOT NULL DEFAULT (DATE_ADD(CURDATE(), INTERVAL 1 MONTH)), ADD f DATETIME(2) DEFAULT "
        "(CURDATE() + INTERVAL 90 MINUTE)",
        None,
    ),
    # on a TIMESTAMP: the wall time read on the session's clock (+05:30 here), as the source converts it (it stopped)
    "shifted_timestamp": (
        "ADD c TIMESTAMP NULL DEFAULT (NOW() + INTERVAL 1 DAY), ADD d TIMESTAMP(2) NOT NULL DEFAULT "
        "(DATE_SUB(NOW(2), INTERVAL 1 MONTH)), ADD e TIMESTAMP NULL DEFAULT (CURRENT_DATE + INTERVAL 1 WEEK)",
        None,
    ),
    "expression": ("ADD c INT DEFAULT (1 + 1)", "cannot reproduce"),
    "null_expression": ("ADD c INT DEFAULT (NULL)", "cannot reproduce"),
}


@pytest.mark.parametrize("row_between", [False, True])
def test_a_literal_default_is_read_as_the_column_stores_it(stack, tmp_path_factory, row_between):
    db = f"literal_defaults_{int(row_between)}"
    pipeline, conn = _streamed(tmp_path_factory, db, LITERALS, f"literals_{row_between}")
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+05:30'")  # a session's clock that is not UTC
        for table, (clauses, _) in LITERALS.items():
            cur.execute(f"ALTER TABLE {table} {clauses}")
            if row_between:
                cur.execute(f"INSERT INTO {table} (id, a) VALUES (3, 3)")
    stream_once(pipeline)

    stopped = stopped_tables(pipeline, db)
    for table, (_, stop) in LITERALS.items():
        if stop:
            assert stop in (stopped[table] or ""), (table, stopped[table])
        else:
            assert stopped[table] is None and compare_pipeline(pipeline, db, table) is None, (table, stopped[table])


CHARSETS = {
    "to_latin1": ("MODIFY c VARCHAR(10) CHARACTER SET latin1", "from utf8mb4 to latin1"),
    "to_utf8mb3": ("CHANGE c c VARCHAR(12) CHARSET utf8mb3", "from utf8mb4 to utf8mb3"),
    "collation_only": ("MODIFY c VARCHAR(10) COLLATE utf8mb4_bin", None),
    "longer": ("MODIFY c VARCHAR(20)", None),
    "from_latin1": ("MODIFY l VARCHAR(20) CHARACTER SET utf8mb4", None),  # every latin1 text converts as it is
    # the table's default is latin1: a MODIFY that names no character set converts to it; with a later ALTER
    # and a row between, the stream has only the statement and the row's table map to go by
    "table_default": ("MODIFY c VARCHAR(20)", "from utf8mb4 to latin1"),
}


def test_a_change_of_character_set_that_loses_text_stops_its_table(stack, tmp_path_factory):
    db = "charset_changes"
    fresh_database(
        db,
        *(
            statement
            for table in CHARSETS
            for statement in (
                f"CREATE TABLE {db}.{table} (id INT PRIMARY KEY, c VARCHAR(10) CHARACTER SET utf8mb4, "
                "l VARCHAR(10) CHARACTER SET latin1) DEFAULT CHARSET "
                + ("latin1" if table == "table_default" else "utf8mb4"),
                f"INSERT INTO {db}.{table} VALUES (1, 'ü€😀', 'ü€'), (2, 'Ω', 'a')",
            )
        ),
    )
    _, pipeline = loaded(tmp_path_factory, "charsets", [{"name": f"{db}.{t}", "key": ["id"]} for t in CHARSETS])
    stream_once(pipeline)
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], db)
    conn.autocommit(True)
    with conn.cursor() as cur:
        cur.execute("SET sql_mode = ''")  # not strict: the source replaces what the new set cannot hold
        for table, (clause, _) in CHARSETS.items():
            cur.execute(f"ALTER TABLE {table} {clause}")
            cur.execute(f"INSERT INTO {table} (id, c) VALUES (3, 'x')")
            if table == "table_default":
                cur.execute(f"ALTER TABLE {table} ADD z INT")
    stream_once(pipeline)

    stopped = stopped_tables(pipeline, db)
    for table, (_, stop) in CHARSETS.items():
        if stop:
            assert f"character set {stop}" in (stopped[table] or ""), (table, stopped[table])
        else:
            assert stopped[table] is None and compare_pipeline(pipeline, db, table) is None, (table, stopped[table])


@pytest.mark.parametrize("later_alter", [False, True])
def test_a_json_column_added_on_mariadb_is_followed_as_the_longtext_it_is(stack, tmp_path_factory, later_alter):
    db = f"json_added_{int(later_alter)}"
    fresh_database(
        db,
        f"CREATE TABLE {db}.docs (id INT PRIMARY KEY, a INT, j JSON)",
        f"INSERT INTO {db}.docs VALUES (1, 1, '[1]'), (2, 2, NULL)",
    )
    _, pipeline = loaded(tmp_path_factory, f"json_{later_alter}", [{"name": f"{db}.docs", "key": ["id"]}])
    stream_once(pipeline)
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], db)
    conn.autocommit(True)
    with conn.cursor() as cur:
        cur.execute("ALTER TABLE docs ADD c JSON")
        cur.execute("""INSERT INTO docs (id, a, c) VALUES (3, 3, '{"k": [1, "x"]}')""")
        if later_alter:  # the stream reads the ADD with only the statement and the row to go by
            cur.execute("ALTER TABLE docs ADD z INT")
    stream_once(pipeline)
    assert stopped_tables(pipeline, db)["docs"] is None
    assert compare_pipeline(pipeline, db, "docs") is None


def test_alter_ignore_that_adds_a_unique_key_stops_its_table(stack, tmp_path_factory):
    db = "alter_ignore"
    pipeline, conn = _streamed(
        tmp_path_factory, db, ("deduplicated", "indexed"), "alter_ignore", rows="(1, 1), (2, 1), (3, 2)"
    )
    with conn.cursor() as cur:
        cur.execute("ALTER IGNORE TABLE deduplicated ADD UNIQUE KEY (a)")
        cur.execute("ALTER IGNORE TABLE indexed ADD INDEX (a)")
        cur.execute("SELECT COUNT(*) FROM deduplicated")
        assert cur.fetchone()[0] == 2  # the server dropped row 2, and logged no row for it
    stream_once(pipeline)
    stopped = stopped_tables(pipeline, db)
    assert "ALTER IGNORE TABLE" in (stopped["deduplicated"] or ""), stopped
    assert stopped["indexed"] is None and compare_pipeline(pipeline, db, "indexed") is None


FIXED_TO_VARYING = {
    "to_varchar": ("", ["MODIFY c VARCHAR(8)"], None),
    "to_text": ("", ["MODIFY c TEXT, MODIFY b TINYBLOB"], None),
    "binary_varying": ("", ["CHANGE b b2 VARBINARY(4)"], None),  # its zero bytes stay
    "padded": ("PAD_CHAR_TO_FULL_LENGTH", ["MODIFY c VARCHAR(8)"], "PAD_CHAR_TO_FULL_LENGTH"),
    "padded_text": ("PAD_CHAR_TO_FULL_LENGTH", ["MODIFY c TINYTEXT"], "PAD_CHAR_TO_FULL_LENGTH"),
    "padded_others": ("PAD_CHAR_TO_FULL_LENGTH", ["MODIFY c CHAR(8), MODIFY b VARBINARY(8)"], None),
    # added, then widened before the reader came: the rows keep the ADD's fill (they were given the widened
    # column's: NULL for a NOT NULL INT made a BIGINT, six digits of the ALTER's time for two)
    "added_widened": (
        "",
        [
            "ADD n INT NOT NULL, ADD z BINARY(3) NOT NULL, ADD p CHAR(4) DEFAULT 'ab  ', ADD f FLOAT DEFAULT 1.1, "
            "ADD t DATETIME(2) DEFAULT CURRENT_TIMESTAMP",
            "MODIFY n BIGINT, MODIFY z BLOB, MODIFY p VARCHAR(8), MODIFY f DOUBLE, MODIFY t DATETIME(6)",
        ],
        None,
    ),
}


@pytest.mark.parametrize("row_between", [False, True])
def test_a_char_made_a_varchar_keeps_its_values_unless_the_alters_session_padded_them(
    stack, tmp_path_factory, row_between
):
    """MariaDB and MySQL read a CHAR without its trailing spaces, and a CHAR made a VARCHAR or TEXT keeps its
    values so; under PAD_CHAR_TO_FULL_LENGTH the ALTER's session read them padded to the CHAR's length and the
    VARCHAR kept them padded: the table stops. A BINARY keeps its zero bytes in a VARBINARY or BLOB."""
    db = f"fixed_to_varying_{int(row_between)}"
    fresh_database(
        db,
        *(
            statement
            for table in FIXED_TO_VARYING
            for statement in (
                f"CREATE TABLE {db}.{table} (id INT PRIMARY KEY, a INT, c CHAR(5), b BINARY(4))",
                f"INSERT INTO {db}.{table} VALUES (1, 1, 'ab  ', 'x'), (2, 2, '', ''), (3, 3, ' a', NULL)",
            )
        ),
    )
    tables = [{"name": f"{db}.{t}", "key": ["id"]} for t in FIXED_TO_VARYING]
    _, pipeline = loaded(tmp_path_factory, f"fixed_to_varying_{row_between}", tables)
    stream_once(pipeline)
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], db)
    conn.autocommit(True)
    with conn.cursor() as cur:
        for table, (mode, alters, _) in FIXED_TO_VARYING.items():
            cur.execute("SET sql_mode = %s", (mode,))
            for alter in alters:
                cur.execute(f"ALTER TABLE {table} {alter}")
            cur.execute("SET sql_mode = DEFAULT")
            if row_between:
                cur.execute(f"INSERT INTO {table} (id, a) VALUES (4, 4)")
    stream_once(pipeline)

    stopped = stopped_tables(pipeline, db)
    for table, (_, _, stop) in FIXED_TO_VARYING.items():
        if stop:
            assert stop in (stopped[table] or ""), (table, stopped[table])
        else:
            assert stopped[table] is None and compare_pipeline(pipeline, db, table) is None, (table, stopped[table])


CONVERSIONS = {
    # a DBA's move to utf8mb4: lossless, the TEXTs grown to hold as many characters (it stopped the table)
    "to_utf8mb4": ("CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci", None),
    "to_utf8mb4_and_more": ("CONVERT TO CHARSET utf8mb4, ADD z VARCHAR(5) DEFAULT 'ä', ALGORITHM=COPY", None),
    "to_latin1": ("CONVERT TO CHARACTER SET latin1", "to latin1 (the source converted"),  # '😀' became '?'
    "to_binary": ("CONVERT TO CHARACTER SET binary", "not a widening"),  # text made bytes
    # MariaDB 10.11 makes a latin1 ENUM's member 'ä' a '?' (a strict session's ALTER fails instead)
    "enum_member_lost": ("CONVERT TO CHARACTER SET utf8mb4", "to enum('?','b'), which is not a widening"),
}


@pytest.mark.parametrize("later_alter", [False, True])
def test_a_table_converted_to_a_character_set_that_holds_its_text_is_followed(stack, tmp_path_factory, later_alter):
    db = f"converted_{int(later_alter)}"
    fresh_database(
        db,
        *(
            statement
            for table in CONVERSIONS
            for statement in (
                f"CREATE TABLE {db}.{table} (id INT PRIMARY KEY, l VARCHAR(10) CHARACTER SET latin1, "
                "m TEXT CHARACTER SET utf8mb3, s TINYTEXT CHARACTER SET latin1, c CHAR(3) CHARACTER SET latin1, "
                f"e ENUM('{'ä' if table == 'enum_member_lost' else 'a'}', 'b') CHARACTER SET latin1, "
                "u VARCHAR(10) CHARACTER SET utf8mb4, n INT) "
                "DEFAULT CHARSET latin1",
                f"INSERT INTO {db}.{table} VALUES (1, 'ü€', 'Ωж', 'é', 'ß', 'b', '😀', 1), (2, NULL, '', ' ', 'a ', 'b', 'x', 2)",
            )
        ),
    )
    _, pipeline = loaded(
        tmp_path_factory, f"convert_{later_alter}", [{"name": f"{db}.{t}", "key": ["id"]} for t in CONVERSIONS]
    )
    stream_once(pipeline)
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], db)
    conn.autocommit(True)
    with conn.cursor() as cur:
        cur.execute("SET sql_mode = ''")  # not strict: the source replaces what latin1 cannot hold
        for table, (clause, _) in CONVERSIONS.items():
            cur.execute(f"ALTER TABLE {table} {clause}")
            text = "'😀x'" if "utf8mb4" in clause else "'x'"
            cur.execute(f"INSERT INTO {table} (id, l, m, n) VALUES (3, {text}, {text}, 3)")
            cur.execute(f"UPDATE {table} SET u = {text}, s = 'ü' WHERE id = 1")
            if later_alter:  # the stream reads the CONVERT with only the statement and the row to go by: it stops
                cur.execute(f"ALTER TABLE {table} ADD y INT")
    stream_once(pipeline)

    stopped = stopped_tables(pipeline, db)
    for table, (_, stop) in CONVERSIONS.items():
        if later_alter:  # stopped, by what the source shows or the statement says
            stop = stop if stop and stop in (stopped[table] or "") else "converted to another character set"
        if stop:
            assert stop in (stopped[table] or ""), (table, stopped[table])
        else:
            assert stopped[table] is None and compare_pipeline(pipeline, db, table) is None, (table, stopped[table])
