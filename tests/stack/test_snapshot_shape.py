"""A table whose columns changed between a full load's plan and a chunk's snapshot is not read with the planned
columns at a position after the change (``seam.source.snapshot``): nothing in the binlog between the chunks'
snapshots shows such a change, and the batch would commit the old columns where the stream goes on with the
new ones. The chunk stops, naming the columns."""

from __future__ import annotations

import os

import MySQLdb
import pymysql
import pytest

from seam.config import load_pipeline
from seam.source.checks import check_source
from seam.source.row_json import RowJson
from seam.source.schema import read_schema
from seam.source.snapshot import Chunk, ChunkPlan, ChunkRead, ShapeChangeError, SnapshotError, chunk_sql, read_chunk
from seam_dev import demo
from tests.support.source import fresh_database

DB = "rowshape_test"
pytestmark = pytest.mark.stack


def test_a_chunk_read_after_its_table_changed_shape_stops_naming_the_columns(stack):
    fresh_database(DB, f"CREATE TABLE `{DB}`.t (id INT PRIMARY KEY, v INT, n VARCHAR(10))")
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, %s, 'x')", [(i, i) for i in range(1, 101)])
    conn.commit()
    pipeline = load_pipeline()
    source = MySQLdb.connect(**pipeline.source.pymysql_kwargs())
    schema = read_schema(source, DB, "t")
    source.close()
    rows = RowJson.of(schema, ("id",))
    whole = Chunk(0, None, None)
    read = ChunkRead(0, chunk_sql(schema, ChunkPlan(None, (whole,)), whole, rows), rows, None, schema)
    assert sum(len(pairs) for _, _, pairs in read_chunk(pipeline.source, read)) == 100  # as planned: read

    for ddl, changed in [
        ("ALTER TABLE t ADD COLUMN w INT NOT NULL DEFAULT 7", "w"),
        ("ALTER TABLE t DROP COLUMN w, MODIFY n VARCHAR(20)", "n"),
    ]:
        with conn.cursor() as cur:
            cur.execute(ddl)
        with pytest.raises(SnapshotError, match=rf"{DB}\.t changed shape before it was read \(columns {changed} "):
            list(read_chunk(pipeline.source, read))
    conn.close()


def test_a_column_added_while_the_load_is_planned_is_not_called_a_missing_grant(stack):
    """The source check compares the columns SELECT * shows with those read for the plan, to find columns a
    grant hides; an ALTER between the two (seen: 5 s into a load of 600,000 rows under a writer) was reported
    as `GRANT SELECT ON demo.* TO the Seam user`."""
    fresh_database(DB, f"CREATE TABLE `{DB}`.t (id INT PRIMARY KEY, v INT)")
    pipeline = load_pipeline()
    source = pymysql.connect(**pipeline.source.pymysql_kwargs())
    schema = read_schema(source, DB, "t")
    check_source(source, schema)  # as read: passes
    source.rollback()  # its reads hold the table's metadata lock
    admin = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with admin.cursor() as cur:
        cur.execute("ALTER TABLE t ADD COLUMN w INT")
    admin.close()
    with pytest.raises(ShapeChangeError, match=rf"{DB}\.t changed shape while the load was planned .*'w'.*: run"):
        check_source(source, schema)
    source.close()
