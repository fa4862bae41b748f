"""A seeded, randomized differential test of ALTERs as applications' sessions run them: ADD COLUMN with a random
type, NULL-ness, default (quoted, unquoted, bit and hex literals, the statement's time, dates, the empty JSON
document) and position, and on the columns added before MODIFY, CHANGE, RENAME, DROP, default changes and a
CONVERT TO CHARACTER SET of the table, one or two clauses a statement, under a random sql_mode,
explicit_defaults_for_timestamp and time zone, with rows between some ALTERs and the stream read at random points
(so it meets each ALTER in time, or after later ones). Every table the stream did not stop must equal its source by
the independent comparer; one it stopped names its reason. A stop that names `seam repair` (a column added with a
value the stream cannot reproduce) is taken at its word for up to three tables: the repair runs, then the table
equals its source, or it refuses in one line naming `seam load full` (the table was altered again after the stop).
The reader must not fail: one bad default once crashed it, and every table stalled. Seeds: ALTER_FUZZ_SEEDS
(default 5)."""

from __future__ import annotations

import os
import random
import sys

import pymysql
import pytest

from seam_dev import demo
from tests.support.commands import run_command
from tests.support.independent import compare_pipeline
from tests.support.pipelines import loaded, stopped_tables, stream_once
from tests.support.source import fresh_database

pytestmark = pytest.mark.stack
TYPES = [
    "INT",
    "INT UNSIGNED",
    "TINYINT",
    "BIGINT",
    "DECIMAL(8,3)",
    "FLOAT",
    "DOUBLE",
    "VARCHAR(12)",
    "CHAR(4)",
    "TEXT",
    "VARBINARY(8)",
    "BINARY(4)",
    "BLOB",
    "DATE",
    "DATETIME(2)",
    "TIME(1)",
    "TIMESTAMP(3)",
    "TIMESTAMP",
    "YEAR",
    "BIT(5)",
    "ENUM('a','B','c ')",
    "SET('x','Y','z')",
    "JSON",
    "VARCHAR(6) CHARACTER SET latin1",
    "INT(4) ZEROFILL",
    "BOOL",
    "MEDIUMINT",
    "SMALLINT UNSIGNED",
    "TINYTEXT",
    "CHAR(3) CHARACTER SET ascii",
    # wider kinds of the above, so that a random MODIFY is often a widening the stream follows
    "VARCHAR(40)",
    "CHAR(8)",
    "VARBINARY(16)",
    "MEDIUMTEXT",
    "LONGBLOB",
    "DECIMAL(12,5)",
    "DATETIME(6)",
    "TIME(4)",
    "TIMESTAMP(6)",
    "DOUBLE(8,3)",  # a default rounded to D digits as the server rounds its double
    "FLOAT(6,2) UNSIGNED",
    "REAL(7,1)",
    "REAL",
]
LITERALS = [
    "'a\\0b'",  # a NUL, which PostgreSQL's text cannot hold
    "'t\\tx\\Z'",
    "'%_\\%'",
    "''",
    "' '",
    "'a'",
    "'abc'",
    "'A'",
    "'b'",
    "'x,z'",
    "'Y'",
    "'c'",
    "'ü'",
    "'a\\\\nb'",
    "'it''s'",
    '"dq"',
    "'1'",
    "'12'",
    "'-3'",
    "'2.5'",
    "1",
    "-1",
    "0",
    "-0",
    "1.5",
    "1e2",
    "+3",
    "007",
    ".5",
    "2.50",
    "TRUE",
    "FALSE",
    "b'101'",
    "0x41",
    "X'41'",
    "x'00ff'",  # not UTF-8: MariaDB's catalog shows it as \\0?
    "CURRENT_TIMESTAMP",
    "NOW(3)",
    "'2001-02-03'",
    "'2001-02-03 04:05:06'",
    "'2001-02-03 04:05:06.789'",
    "'10:11:12.3'",
    "'1999'",
    "99",
    "2001",
    "NULL",
    "'a' 'b'",
    "'0000-00-00'",
    "CURRENT_DATE",
    "'{}'",
    "'[1]'",
    "5",
    "255",
    "'1970-01-01 00:00:01'",
    "20010203",  # digits alone: a date, a time, or a number
    "010203040506.5",
    "'103000'",
    "(CURRENT_DATE + INTERVAL 1 MONTH)",  # the statement's time, shifted
    "(NOW() - INTERVAL 90 MINUTE)",
    "JSON_ARRAY()",  # the empty document, as applications give a JSON column its default
    "json_object()",
]
MODES = [
    "",
    "STRICT_TRANS_TABLES",
    "NO_BACKSLASH_ESCAPES",
    "EMPTY_STRING_IS_NULL",
    "ANSI_QUOTES",
    "TIME_ROUND_FRACTIONAL",
    "STRICT_ALL_TABLES,NO_ZERO_DATE",
    "PAD_CHAR_TO_FULL_LENGTH",
    "ORACLE",
    "ANSI",  # REAL is FLOAT there
]


@pytest.mark.parametrize("seed", [int(s) for s in os.environ.get("ALTER_FUZZ_SEEDS", "5").split(",")])
def test_random_added_columns_are_followed_exactly_or_stop_their_table(stack, tmp_path_factory, seed):
    rng = random.Random(seed)
    db = f"alter_fuzz_{seed}"
    tables = [f"t{i}" for i in range(30)]
    fresh_database(
        db,
        *(
            s
            for t in tables
            for s in (
                f"CREATE TABLE {db}.{t} (id INT PRIMARY KEY, a INT)",
                f"INSERT INTO {db}.{t} VALUES (1, 1), (2, 2), (3, 3)",
            )
        ),
    )
    path, pipeline = loaded(
        tmp_path_factory, f"alter_fuzz_{seed}", [{"name": f"{db}.{t}", "key": ["id"]} for t in tables]
    )
    stream_once(pipeline)
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], db)
    conn.autocommit(True)
    ran, nid, columns = [], 10, {}
    with conn.cursor() as cur:
        for step in range(150):
            t = rng.choice(tables)
            mode = rng.choice(MODES)
            cur.execute("SET sql_mode = %s", (mode,))
            cur.execute(
                f"SET explicit_defaults_for_timestamp = {rng.choice(['ON', 'OFF'])}, time_zone = '{rng.choice(['+00:00', '+05:30', '-08:00'])}'"
            )
            q = f"ALTER TABLE {t} " + ", ".join(
                _clause(rng, step, k, columns.setdefault(t, [])) for k in range(rng.choice([1, 1, 1, 2]))
            )
            try:
                cur.execute(q)
                ran.append((t, mode, q))
                cur.execute(
                    "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                    "AND COLUMN_NAME NOT IN ('id', 'a')",
                    (db, t),
                )
                columns[t] = [r[0] for r in cur.fetchall()]
            except pymysql.err.MySQLError:  # the server refused the combination: nothing to follow
                continue
            if rng.random() < 0.5:
                nid += 1
                try:
                    cur.execute(f"INSERT INTO {t} (id, a) VALUES ({nid}, {nid})")
                except pymysql.err.MySQLError:  # a NOT NULL column without a default, a CHECK
                    pass
            if rng.random() < 0.3:
                try:
                    cur.execute(f"UPDATE {t} SET a = a + 1 WHERE id = 1")
                except pymysql.err.MySQLError:
                    pass
            if rng.random() < 0.1:
                stream_once(pipeline)
        cur.execute("SET sql_mode = DEFAULT")
    stream_once(pipeline)
    stopped = stopped_tables(pipeline, db)
    bad = []
    for t in tables:
        if stopped.get(t):
            print(f"{t}: STOPPED {stopped[t][:400]}")
            continue
        diff = compare_pipeline(pipeline, db, t)
        if diff:
            bad.append(t)
            print(f"{t}: DIFF {diff[:600]}")
            for tt, mode, q in ran:
                if tt == t:
                    print(f"    [{mode}] {q}")
    followed = [t for t in tables if not stopped.get(t) and any(tt == t for tt, _, _ in ran)]
    print(f"seed {seed}: {len(ran)} ALTERs, {len(followed)} tables followed every one, differing: {bad}")
    assert not bad
    for t in [t for t in tables if "run `seam repair" in (stopped.get(t) or "")][:3]:  # the way out it printed
        repaired = run_command(
            [sys.executable, "-m", "seam.cli", "--pipeline", path, "repair", f"{db}.{t}"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        print(f"{t}: seam repair exited {repaired.returncode}: {(repaired.stdout + repaired.stderr)[-300:]}")
        if repaired.returncode == 0:
            assert compare_pipeline(pipeline, db, t) is None, t
        else:
            assert "Traceback" not in repaired.stderr and f"seam load full {db}.{t}" in repaired.stderr, repaired.stderr
    assert len(followed) >= 5, followed  # enough tables compared for the test to say something


def _declaration(rng: random.Random) -> str:
    decl = rng.choice(TYPES)
    if rng.random() < 0.3:
        decl += " NOT NULL"
    elif rng.random() < 0.2:
        decl += " NULL"
    if rng.random() < 0.7:
        literal = rng.choice(LITERALS)
        decl += " DEFAULT " + (f"({literal})" if rng.random() < 0.2 else literal)  # MySQL 8's way for a TEXT
    if rng.random() < 0.15:
        decl += rng.choice([" FIRST", " AFTER id", " AFTER a"])
    return decl


def _clause(rng: random.Random, step: int, k: int, columns: list[str]) -> str:
    """One clause of an ALTER: mostly ADD; on a column an earlier ALTER added, MODIFY, CHANGE, RENAME, DROP or
    a default's change."""
    kind = (
        rng.choice(["add"] * 5 + ["modify", "change", "rename", "drop", "default", "default", "convert"])
        if columns
        else "add"
    )
    if kind == "add":
        return f"ADD COLUMN c{step}_{k} {_declaration(rng)}"
    if kind == "convert":  # a DBA's move to another character set, of every text column
        return "CONVERT TO CHARACTER SET " + rng.choice(["utf8mb4", "utf8mb4 COLLATE utf8mb4_bin", "latin1", "utf8mb3"])
    column = rng.choice(columns)
    if kind == "modify":
        return f"MODIFY {column} {_declaration(rng)}"
    if kind == "change":
        return f"CHANGE {column} r{step}_{k} {_declaration(rng)}"
    if kind == "rename":
        return f"RENAME COLUMN {column} TO n{step}_{k}"
    if kind == "drop":
        return f"DROP COLUMN {column}"
    return f"ALTER COLUMN {column} " + rng.choice(["DROP DEFAULT", "SET DEFAULT " + rng.choice(LITERALS)])
