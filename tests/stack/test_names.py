"""Names a MySQL table may have and PostgreSQL must hold: case, spaces, quotes, backticks, reserved words,
multibyte characters, and names near or past PostgreSQL's 63-byte limit (MySQL allows 64 characters, up to
256 bytes). A table of 30 ``é`` (60 bytes) crashed the sink with every other table of its load: the primary
key's name, ``<table>_pkey``, was cut at 58 characters, not bytes. A 64-byte column name crashed the load's
sink at BEGIN, and the streaming sink for every table after each restart when an ALTER added one."""

from __future__ import annotations

import os

import psycopg
import pytest

from seam_dev import demo
from tests.support.commands import seam_command
from tests.support.independent import compare_pipeline
from tests.support.pipelines import loaded, pipeline_file, stream_once
from tests.support.source import fresh_database

DB = "names_test"
WIDE = "é" * 30  # 60 bytes: its primary key's name is clipped to fit
pytestmark = pytest.mark.stack


def test_awkward_names_load_and_stream_exactly(stack, tmp_path_factory):
    fresh_database(
        DB,
        f'CREATE TABLE {DB}.`Orders` (`Id` INT PRIMARY KEY, `Order Date` DATE, `a"b` INT, `c``d` INT, '
        "`select` INT, `prix€` DECIMAL(9,2))",
        f"CREATE TABLE {DB}.orders (id INT PRIMARY KEY, v INT)",  # the same name as the one above but for case
        f"CREATE TABLE {DB}.`{WIDE}` (id INT PRIMARY KEY, `{'c' * 63}` INT)",
        f"INSERT INTO {DB}.`Orders` SELECT seq, '2024-01-01' + INTERVAL seq DAY, seq, -seq, seq % 7, seq / 7 "
        f"FROM {DB}.seq_1_to_500",
        f"INSERT INTO {DB}.orders SELECT seq, seq FROM {DB}.seq_1_to_500",
        f"INSERT INTO {DB}.`{WIDE}` SELECT seq, seq FROM {DB}.seq_1_to_500",
    )
    tables = [
        {"name": f"{DB}.Orders", "key": ["Id"]},
        {"name": f"{DB}.orders", "key": ["id"]},
        {"name": f"{DB}.{WIDE}", "key": ["id"]},
    ]
    path, pipeline = loaded(tmp_path_factory, "names", tables)
    for table in ("Orders", "orders", WIDE):
        assert compare_pipeline(pipeline, DB, table) is None, table
    with psycopg.connect(**pipeline.target.conninfo()) as target:
        pkey = target.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = 'p'", (f'{DB}."{WIDE}"',)
        ).fetchone()[0]
    assert pkey == "é" * 29 + "_pkey", pkey  # 58 bytes would cut the 30th in half
    stream_once(pipeline)
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with writer.cursor() as cur:
        cur.execute('UPDATE `Orders` SET `Id` = `Id` + 1000, `a"b` = 0 WHERE `Id` % 4 = 0')
        cur.execute(f"UPDATE `{WIDE}` SET id = id + 1000 WHERE id % 4 = 0")
        cur.execute("DELETE FROM orders WHERE id % 5 = 0")
        cur.execute("INSERT INTO orders VALUES (9999, 1)")
    writer.close()
    stream_once(pipeline)
    for table in ("Orders", "orders", WIDE):
        assert compare_pipeline(pipeline, DB, table) is None, table
    checked = seam_command(path, "validate", "--all")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_name_postgresql_cannot_hold_is_refused_and_stops_only_its_table(stack, tmp_path_factory):
    long = "c" * 64
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.too_long (id INT PRIMARY KEY, `{long}` INT)",
        f"CREATE TABLE {DB}.seams (id INT PRIMARY KEY, _seam_part INT)",
        f"CREATE TABLE {DB}.grows (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE {DB}.other (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {DB}.grows SELECT seq, seq FROM {DB}.seq_1_to_100",
        f"INSERT INTO {DB}.other SELECT seq, seq FROM {DB}.seq_1_to_100",
    )
    for table, expected in (("too_long", f"the column name '{long}' is 64 bytes"), ("seams", "begins with _seam_")):
        path = pipeline_file(tmp_path_factory, "names_refused", [{"name": f"{DB}.{table}", "key": ["id"]}])
        refused = seam_command(path, "load", "full", f"{DB}.{table}")
        out = refused.stdout + refused.stderr
        assert refused.returncode != 0 and expected in out and "rename it at the source" in out, out
        assert "Traceback" not in out, out
    tables = [{"name": f"{DB}.grows", "key": ["id"]}, {"name": f"{DB}.other", "key": ["id"]}]
    _, pipeline = loaded(tmp_path_factory, "names_stream", tables)
    stream_once(pipeline)
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with writer.cursor() as cur:
        cur.execute(f"ALTER TABLE grows ADD COLUMN `{long}` INT")
        cur.execute("INSERT INTO grows (id) VALUES (500)")
        cur.execute("INSERT INTO other VALUES (500, 5)")
    writer.close()
    stream_once(pipeline)
    stream_once(pipeline)  # the sink again: it went on (it restarted on the ALTER for every table)
    with psycopg.connect(**pipeline.target.conninfo()) as target:
        stopped = dict(
            target.execute(
                f"SELECT tbl, stopped FROM {pipeline.target.state_schema}.positions WHERE db = %s "
                "AND tbl IN ('grows', 'other')",
                (DB,),
            ).fetchall()
        )
    assert stopped["other"] is None and compare_pipeline(pipeline, DB, "other") is None, stopped
    assert "is 64 bytes, longer than PostgreSQL's 63-byte identifier limit" in (stopped["grows"] or ""), stopped
