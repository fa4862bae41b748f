"""ALTERs run back to back (a schema migration) while the change reader is behind: when it reads the first, the
source's definition is already the last one's. With no row of the table between them they are followed as one
change; a row between two of them has them followed as their statements declared them, when that gives the row's
columns, else it stops that table alone, with its remedy, never applied with the wrong columns.
An added column's rows get the default its ADD declared, not the one the source shows later: a literal (with
backslash escapes, under the statement's sql_mode), the time the statement ran (CURRENT_TIMESTAMP, on its
session's wall clock), a TIMESTAMP literal on that clock, or a NOT NULL type's implicit value; a clause whose IF [NOT] EXISTS does not hold is
skipped, as the server skipped it. The reader runs here only after every statement (``stream_once``), so it
is behind every time."""

from __future__ import annotations

import datetime as dt
import os

import psycopg
import pytest

from seam.config import load_pipeline
from seam_dev import demo
from tests.support.commands import seam_command
from tests.support.independent import compare
from tests.support.pipelines import pipeline_file, stream_once
from tests.support.source import fresh_database

DB = "alters_in_a_row"
pytestmark = pytest.mark.stack


@pytest.fixture
def path(stack, tmp_path_factory):
    fresh_database(
        DB,
        *(
            statement
            for table in ("migrated", "busy", "stuck", "bystander")
            for statement in (
                f"CREATE TABLE {DB}.{table} (id INT PRIMARY KEY, memo VARCHAR(20), amount DECIMAL(10,2) NOT NULL)",
                f"INSERT INTO {DB}.{table} SELECT seq, CONCAT('m', seq), seq / 4 FROM {DB}.seq_0_to_299",
            )
        ),
    )
    tables = [{"name": f"{DB}.{t}", "key": ["id"]} for t in ("migrated", "busy", "stuck", "bystander")]
    path = pipeline_file(tmp_path_factory, "alters", tables)
    load = seam_command(path, "load", "full", *[t["name"] for t in tables])
    assert load.returncode == 0, load.stderr + load.stdout
    stream_once(load_pipeline(path))  # the stream is at the binlog's end
    return path


def test_alters_in_a_row_are_followed_as_one_and_a_row_between_them_stops_its_table(path):
    pipeline = load_pipeline(path)
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+05:30'")  # a DATETIME's CURRENT_TIMESTAMP is this wall clock's
        cur.execute(f"UPDATE {DB}.migrated SET memo = 'before' WHERE id < 10")
        for statement in (
            "ADD COLUMN n2 INT DEFAULT 3",
            "MODIFY n2 BIGINT DEFAULT 3",
            "RENAME COLUMN n2 TO n3",
            "MODIFY memo VARCHAR(200)",
            "CHANGE amount total DECIMAL(14,2) NOT NULL",
            "ADD COLUMN flag VARCHAR(5) DEFAULT 'new' FIRST",
            # the rows there get 4 (the source's default is NULL by the time the reader looks)
            "ADD COLUMN z INT NOT NULL DEFAULT 4",
            "MODIFY z INT NULL",
            "ALTER COLUMN flag SET DEFAULT 'newer'",
            # a default with backslash escapes: the rows there get the value the server stored (a\b, a newline, \%)
            r"ADD COLUMN esc VARCHAR(20) DEFAULT 'a\\b\n\%'",
            # the statement's time: the rows there got the time it ran, truncated to the digits asked for
            "ADD COLUMN seen DATETIME(6) DEFAULT CURRENT_TIMESTAMP(3), ADD COLUMN day DATE DEFAULT (CURRENT_DATE)",
            "ADD COLUMN stamp TIMESTAMP(2) NOT NULL DEFAULT CURRENT_TIMESTAMP(2) ON UPDATE CURRENT_TIMESTAMP(2)",
            # a DATE, DATETIME or TIME literal spelled as the server stores it
            "ADD COLUMN since DATE NOT NULL DEFAULT '1970-01-01', ADD COLUMN opens TIME(2) DEFAULT '-100:00:00.25'",
            "ADD COLUMN due DATETIME(3) DEFAULT '2000-01-01 10:00:00.5' AFTER id",
            # a TIMESTAMP literal is read on the session's clock: the rows there got 2000-05-31 18:30:00.5 UTC
            "ADD COLUMN valid_from TIMESTAMP(1) NULL DEFAULT '2000-06-01 00:00:00.5'",
            # a migration run again: the server skips what IF [NOT] EXISTS says is done
            "ADD COLUMN IF NOT EXISTS flag INT, DROP COLUMN IF EXISTS gone, ADD COLUMN IF NOT EXISTS extra INT DEFAULT 6",
            # a BIT literal (b'1', or a number), an ASCII binary one
            "ADD COLUMN active BIT(1) NOT NULL DEFAULT b'1', ADD COLUMN mask BIT(4) DEFAULT 5, "
            "ADD COLUMN tag VARBINARY(8) NOT NULL DEFAULT 'ab'",
            # NOT NULL without a DEFAULT: the type's implicit one (0, '', the first member, zero bytes)
            "ADD COLUMN qty INT UNSIGNED NOT NULL, ADD COLUMN kind ENUM('b','a') NOT NULL, ADD COLUMN yr YEAR NOT NULL",
            "ADD COLUMN raw BINARY(3) NOT NULL, ADD COLUMN label VARCHAR(5) NOT NULL, ADD COLUMN bits BIT(3) NOT NULL",
        ):
            cur.execute(f"ALTER TABLE {DB}.migrated {statement}")
        cur.execute(
            f"INSERT INTO {DB}.migrated (id, memo, total, n3, qty, kind, yr, raw, label, bits) "
            "VALUES (1000, 'after', 1.25, 9, 3, 'a', 2024, 'xyz', 'lbl', b'101')"
        )
        cur.execute(f"UPDATE {DB}.migrated SET n3 = 5, memo = REPEAT('x', 150) WHERE id % 7 = 0")
        # rows between two ALTERs: followed as the first one declared, which gives the rows' columns
        cur.execute(f"ALTER TABLE {DB}.busy ADD COLUMN n INT NOT NULL DEFAULT 1")
        cur.execute(f"UPDATE {DB}.busy SET n = 2 WHERE id < 5")
        cur.execute(f"ALTER TABLE {DB}.busy ADD COLUMN m VARCHAR(8) DEFAULT 'x' AFTER id")
        cur.execute(f"INSERT INTO {DB}.busy (id, memo, amount, n, m) VALUES (1000, 'after', 1.5, 3, 'y')")
        cur.execute(f"ALTER TABLE {DB}.busy RENAME COLUMN memo TO note, MODIFY n BIGINT NULL")
        # under NO_BACKSLASH_ESCAPES each backslash is one: the rows there get c:\new\%
        cur.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
        cur.execute(f"ALTER TABLE {DB}.busy ADD COLUMN path VARCHAR(20) DEFAULT 'c:\\new\\%'")
        cur.execute(f"UPDATE {DB}.busy SET path = 'd:\\' WHERE id < 3")
        cur.execute("SET SESSION sql_mode = DEFAULT")
        cur.execute(f"ALTER TABLE {DB}.busy ADD COLUMN opened TIMESTAMP NOT NULL DEFAULT '2020-01-01 10:00:00'")
        cur.execute(f"UPDATE {DB}.busy SET opened = '2021-01-01 00:00:00' WHERE id < 3")
        cur.execute(
            f"ALTER TABLE {DB}.busy ADD COLUMN at DATETIME DEFAULT NOW(), ADD grade ENUM('lo','HI') DEFAULT 'hi'"
        )
        cur.execute(f"UPDATE {DB}.busy SET at = '2001-02-03 04:05:06' WHERE id < 3")
        # the same with a type the stream does not read from a statement (FLOAT(30), a DOUBLE): that table stops
        cur.execute(f"ALTER TABLE {DB}.stuck ADD COLUMN f FLOAT(30) DEFAULT 1.5")
        cur.execute(f"UPDATE {DB}.stuck SET f = 2.25 WHERE id < 5")
        cur.execute(f"ALTER TABLE {DB}.stuck RENAME COLUMN memo TO note")
        cur.execute(f"UPDATE {DB}.bystander SET memo = 'still here' WHERE id < 50")
    conn.close()
    stream_once(pipeline)
    for table in ("migrated", "busy", "bystander"):
        assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, table) is None
    with psycopg.connect(**pipeline.target.conninfo()) as target:
        columns = [
            r[0]
            for r in target.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = "
                "'migrated' ORDER BY ordinal_position",
                (DB,),
            )
        ]
        stopped = target.execute(
            f"SELECT tbl, stopped FROM {pipeline.target.state_schema}.positions WHERE db = %s AND stopped IS NOT NULL",
            (DB,),
        ).fetchall()
    expected = [
        *("active", "bits", "day", "due", "esc", "extra", "flag", "id", "kind", "label", "mask", "memo", "n3"),
        *("opens", "qty", "raw", "seen", "since", "stamp", "tag", "total", "valid_from", "yr", "z"),
    ]
    assert sorted(columns) == expected, columns  # PostgreSQL adds columns last
    assert [t for t, _ in stopped] == ["stuck"], stopped
    with psycopg.connect(**pipeline.target.conninfo()) as target:
        filled = target.execute(
            f'SELECT DISTINCT m.esc, b.path, m.valid_from, b.opened FROM "{DB}".migrated m, "{DB}".busy b '
            "WHERE b.id = 9 AND m.id < 1000"
        )
        utc = dt.UTC
        assert filled.fetchall() == [
            (
                "a\\b\n\\%",
                "c:\\new\\%",
                dt.datetime(2000, 5, 31, 18, 30, 0, 500000, utc),
                dt.datetime(2020, 1, 1, 4, 30, tzinfo=utc),
            )
        ]
    assert "its rows changed after the ALTER at" in stopped[0][1] and f"seam load full {DB}.stuck" in stopped[0][1]
