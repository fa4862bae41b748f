"""Columns that a plain ``SELECT *`` or the binlog treat apart: an INVISIBLE column (``SELECT *`` leaves it out:
the load asked for a GRANT the user had), VIRTUAL and STORED generated columns. Loaded, then streamed with
inserts, updates and deletes; checked with the independent comparer. (A view and a system-versioned table are
refused before the load: ``test_full_load``.)"""

from __future__ import annotations

import os

import pytest

from seam_dev import demo
from tests.support.commands import seam_command
from tests.support.independent import compare_pipeline
from tests.support.pipelines import loaded, stopped_tables, stream_once
from tests.support.source import fresh_database

DB = "table_kinds_test"
pytestmark = pytest.mark.stack


def test_invisible_and_generated_columns_load_and_stream_exactly(stack, tmp_path_factory):
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.gen (id INT PRIMARY KEY, a INT, b INT AS (a * 2) VIRTUAL, "
        "c VARCHAR(20) AS (CONCAT('x', a)) STORED, d INT INVISIBLE DEFAULT 4, KEY (b))",
        f"INSERT INTO {DB}.gen (id, a, d) SELECT seq, seq, seq % 9 FROM {DB}.seq_1_to_300",
    )
    path, pipeline = loaded(tmp_path_factory, "table_kinds", [{"name": f"{DB}.gen", "key": ["id"]}])
    assert compare_pipeline(pipeline, DB, "gen") is None
    stream_once(pipeline)
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with writer.cursor() as cur:
        cur.execute("UPDATE gen SET a = a * 10, d = 9 WHERE id % 4 = 0")
        cur.execute("UPDATE gen SET d = NULL WHERE id % 6 = 0")
        cur.execute("DELETE FROM gen WHERE id % 5 = 0")
        cur.execute("INSERT INTO gen (id, a) VALUES (1000, 1)")
    writer.close()
    stream_once(pipeline)
    assert compare_pipeline(pipeline, DB, "gen") is None
    checked = seam_command(path, "validate", f"{DB}.gen")
    assert checked.returncode == 0 and f"{DB}.gen: EQUAL" in checked.stdout, checked.stdout + checked.stderr


def test_long_binary_keys_and_large_blobs_load_and_stream_exactly(stack, tmp_path_factory):
    """The snapshot reads binary values as TO_BASE64's text, which breaks a line every 76 characters: keys of
    80 bytes and BLOBs of 3 MB (their newlines were removed by REPLACE in SQL, in quadratic time: 27 s for one
    12 MB BLOB; the reader drops them now)."""
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.blobs (k VARBINARY(100) PRIMARY KEY, b LONGBLOB, g GEOMETRY)",
        f"INSERT INTO {DB}.blobs SELECT CONCAT(REPEAT(X'00FF0A', 26), CHAR(seq)), "
        f"IF(seq % 10 = 0, REPEAT(CONCAT(X'0A0D', CHAR(seq)), 1000000), UNHEX(SHA2(seq, 512))), "
        f"ST_GeomFromText(CONCAT('LINESTRING(', seq, ' 1, 2 3, 4 5, 6 7, 8 9, 10 11)')) FROM {DB}.seq_1_to_40",
    )
    _, pipeline = loaded(tmp_path_factory, "table_blobs", [{"name": f"{DB}.blobs", "key": ["k"]}])
    assert compare_pipeline(pipeline, DB, "blobs") is None
    stream_once(pipeline)
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with writer.cursor() as cur:
        cur.execute("UPDATE blobs SET b = REPEAT(X'0A', 2000000) WHERE LENGTH(b) > 64")
        cur.execute(f"INSERT INTO blobs SELECT CONCAT(REPEAT(X'0A', 70), CHAR(seq)), X'0A', NULL FROM {DB}.seq_1_to_5")
    writer.close()
    stream_once(pipeline)
    assert compare_pipeline(pipeline, DB, "blobs") is None


def test_a_streamed_table_made_system_versioned_stops_and_no_way_out_streams_its_history(stack, tmp_path_factory):
    """``ALTER TABLE ... ADD SYSTEM VERSIONING`` on a streamed table: from then on its binlog carries history
    rows among the current ones. The table stops, and the way out printed is one that works: sync it by
    windows. `seam repair` refuses it in one line (it repaired it, and the stream then applied the history
    rows of the next UPDATE as the table's rows: 4 rows silently wrong)."""
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.acct (id INT PRIMARY KEY, bal INT)",
        f"INSERT INTO {DB}.acct SELECT seq, seq FROM {DB}.seq_1_to_20",
    )
    path, pipeline = loaded(tmp_path_factory, "table_versioned", [{"name": f"{DB}.acct", "key": ["id"]}])
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with writer.cursor() as cur:
        cur.execute("ALTER TABLE acct ADD SYSTEM VERSIONING")
        cur.execute("UPDATE acct SET bal = bal + 1 WHERE id BETWEEN 5 AND 8")
    writer.commit()
    writer.close()
    stream_once(pipeline)
    stopped = stopped_tables(pipeline, DB)["acct"]
    assert "ADD SYSTEM" in stopped and "is system-versioned" in stopped and "sync it by windows" in stopped, stopped
    assert "seam repair" not in stopped, stopped
    refused = seam_command(path, "repair", f"{DB}.acct", "--full")
    assert refused.returncode == 2 and "is system-versioned" in refused.stderr, refused.stdout + refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert stopped_tables(pipeline, DB)["acct"] == stopped  # nothing changed
