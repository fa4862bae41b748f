"""DDL the binlog does not hold: a DBA's ``ALTER TABLE`` under ``sql_log_bin = 0`` (or run on another server of a
chain) on a streamed table. The rows after it carry other columns, or other types, than the table Seam follows;
that table stops, naming what differs and the way out (``seam repair --full``, which gives the target the source's
columns and copies the rows that differ; or the reload), and the others go on. Before, rows were read by name: an
added column was dropped silently, a renamed pair went on swapped, a DECIMAL's new scale was rounded away.
Columns the server keeps to itself (the hash of a long UNIQUE key) stop nothing."""

from __future__ import annotations

import os
import sys

import pytest

from seam_dev import demo
from tests.support.commands import run_command
from tests.support.independent import compare_pipeline
from tests.support.pipelines import loaded, stopped_tables, stream_once
from tests.support.source import fresh_database

DB = "unlogged_ddl_test"
pytestmark = pytest.mark.stack

UNLOGGED = {
    "added": "ADD COLUMN x INT DEFAULT 5 FIRST",
    "swapped": "CHANGE v w INT, CHANGE w v INT",
    "rescaled": "MODIFY d DECIMAL(12,4)",
    "indexed": "ADD INDEX (w)",  # nothing a row carries: the table goes on
}
SAID = {
    "added": "(added: x)",
    "swapped": "(the same columns in another order: id, w, v, d, t)",
    "rescaled": "(retyped: d)",
}


def test_a_table_altered_outside_the_binlog_stops_naming_what_differs(stack, tmp_path_factory):
    fresh_database(
        DB,
        # a long UNIQUE key: MariaDB keeps a hash column in the binlog's rows, not in its catalog (no change)
        *[
            f"CREATE TABLE {DB}.{t} (id INT PRIMARY KEY, v INT, w INT, d DECIMAL(10,2), t TEXT, UNIQUE KEY (t))"
            for t in UNLOGGED
        ],
        *[f"INSERT INTO {DB}.{t} SELECT seq, seq, seq * 10, seq / 3, seq FROM {DB}.seq_1_to_20" for t in UNLOGGED],
    )
    path, pipeline = loaded(tmp_path_factory, "unlogged_ddl", [{"name": f"{DB}.{t}", "key": ["id"]} for t in UNLOGGED])
    stream_once(pipeline)
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    writer.autocommit(True)
    with writer.cursor() as cur:
        for table, alter in UNLOGGED.items():
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"ALTER TABLE {table} {alter}")
            cur.execute("SET SESSION sql_log_bin = 1")
            cur.execute(f"UPDATE {table} SET d = 1.2345, v = v + 1, t = concat(t, 'x') WHERE id <= 3")
    writer.close()
    stream_once(pipeline)
    stopped = stopped_tables(pipeline, DB)
    assert stopped["indexed"] is None and compare_pipeline(pipeline, DB, "indexed") is None, stopped
    for table, said in SAID.items():
        assert said in (stopped[table] or "") and "a statement the binlog does not hold" in stopped[table], stopped
        assert f"seam load full {DB}.{table}" in stopped[table], stopped
        assert f"run `seam repair {DB}.{table} --full`" in stopped[table], stopped
    for table in SAID:  # the cheaper way out it printed: the target takes the source's columns, and the rows
        repaired = run_command(
            [sys.executable, "-m", "seam.cli", "--pipeline", path, "repair", f"{DB}.{table}", "--full"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr
        assert compare_pipeline(pipeline, DB, table) is None, table
    assert not any(stopped_tables(pipeline, DB).values())
