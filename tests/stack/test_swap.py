"""A full load's swap keeps what users built on the target table (issue 13): views, user indexes, grants and
comments survive a reload, the swap stays atomic, and the primary key's index is named after the table."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest

from seam.config import load_pipeline
from seam_dev import demo
from tests.support.commands import run_command
from tests.support.pipelines import pipeline_file

DB = "swap_test"
pytestmark = pytest.mark.stack


def _seam(path: str, *args) -> subprocess.CompletedProcess:
    return run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True, timeout=600
    )


def _source(*statements):
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def path(stack, tmp_path_factory):
    _source(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"CREATE TABLE {DB}.viewed (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(20), "
        "due DATE NOT NULL DEFAULT '2024-01-01')",
        f"INSERT INTO {DB}.viewed VALUES (1, 1.50, 'a', DEFAULT), (2, 2.50, 'b', DEFAULT)",
        f"CREATE TABLE {DB}.plain (id INT PRIMARY KEY, v VARCHAR(10))",
        f"INSERT INTO {DB}.plain VALUES (1, 'x'), (2, 'y')",
    )
    file = pipeline_file(
        tmp_path_factory, "swap", [{"name": f"{DB}.viewed", "key": ["id"]}, {"name": f"{DB}.plain", "key": ["id"]}]
    )
    with psycopg.connect(**load_pipeline(file).target.conninfo(), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{DB}" CASCADE')  # views an earlier, failed run left behind
    first = _seam(file, "load", "full", f"{DB}.viewed", f"{DB}.plain")
    assert first.returncode == 0, first.stdout + first.stderr
    return file


def test_views_indexes_grants_and_comments_survive_a_reload(path):
    pipeline = load_pipeline(path)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'swap_reader'").fetchone():  # an earlier run's
            conn.execute("DROP OWNED BY swap_reader")
        conn.execute("DROP ROLE IF EXISTS swap_reader")
        conn.execute("CREATE ROLE swap_reader")
        conn.execute(f'CREATE VIEW "{DB}".big AS SELECT id, amount FROM "{DB}".viewed WHERE amount > 2')
        conn.execute(f'CREATE INDEX viewed_note_idx ON "{DB}".viewed (note)')
        for table in ("viewed", "plain"):
            conn.execute(f'GRANT SELECT ON "{DB}"."{table}" TO swap_reader')
            conn.execute(f'COMMENT ON TABLE "{DB}"."{table}" IS \'settled daily\'')
            conn.execute(f'COMMENT ON COLUMN "{DB}"."{table}".id IS \'the key\'')
        # as a load before NOT NULL dates stayed NOT NULL left it: the reload in place sets NOT NULL again
        conn.execute(f'ALTER TABLE "{DB}".viewed ALTER COLUMN due DROP NOT NULL')
    _source(
        "SET SESSION sql_mode = ''",  # a zero date, as legacy schemas hold them
        f"INSERT INTO {DB}.viewed VALUES (3, 9.99, 'c', '0000-00-00')",
        f"INSERT INTO {DB}.plain VALUES (3, 'z')",
    )
    again = _seam(path, "load", "full", f"{DB}.viewed", f"{DB}.plain")
    assert again.returncode == 0, again.stdout + again.stderr
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        assert [r[0] for r in conn.execute(f'SELECT id FROM "{DB}".big ORDER BY id')] == [2, 3]  # the new rows
        assert conn.execute("SELECT to_regclass(%s)", (f'"{DB}".viewed_note_idx',)).fetchone()[0] is not None
        assert conn.execute(
            "SELECT attnotnull FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'due'", (f'"{DB}".viewed',)
        ).fetchone()[0]
        assert conn.execute(f"SELECT count(*) FROM \"{DB}\".viewed WHERE due = '-infinity'").fetchone()[0] == 1
        for table in ("viewed", "plain"):
            ref = f'"{DB}"."{table}"'
            assert conn.execute(f"SELECT count(*) FROM {ref}").fetchone()[0] == 3
            assert conn.execute("SELECT has_table_privilege('swap_reader', %s, 'SELECT')", (ref,)).fetchone()[0]
            assert (
                conn.execute("SELECT obj_description(%s::regclass, 'pg_class')", (ref,)).fetchone()[0]
                == "settled daily"
            )
            assert conn.execute("SELECT col_description(%s::regclass, 1)", (ref,)).fetchone()[0] == "the key"
            assert (
                conn.execute(
                    "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'p'", (ref,)
                ).fetchone()[0]
                == f"{table}_pkey"
            )
        # the source changes shape under the view: one clear reason, and the previous table stays
        _source(f"ALTER TABLE {DB}.viewed ADD COLUMN extra INT")
        shaped = _seam(path, "load", "full", f"{DB}.viewed")
        assert shaped.returncode == 2 and "depend on it" in shaped.stderr, shaped.stdout + shaped.stderr
        assert conn.execute(f'SELECT count(*) FROM "{DB}".viewed').fetchone()[0] == 3
