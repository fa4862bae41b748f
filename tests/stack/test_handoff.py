"""Hand-off from a full load to binlog streaming (issue 4 groundwork): a full load under concurrent writes,
then the change reader from the recorded position and the sink applying whole source transactions; the
target converges to the source, keyed and keyless tables alike, nothing lost or doubled, and a second pass
over the same binlog changes nothing."""

from __future__ import annotations

import os
import re
import sys
import threading
import time

import psycopg
import pytest
import yaml

from seam.apply.sink import Sink
from seam.config import load_pipeline
from seam.source.streaming import ChangeReader
from seam_dev import demo
from tests.support.commands import run_command
from tests.support.compare import diff, source_rows, target_rows

DB = "handoff_test"
TABLES = ["accounts", "payments", "audit_log"]
pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def pipeline_path(stack, tmp_path_factory):
    demo.seed(load_pipeline(), rows=20_000, admin_url=os.environ["SEAM_MYSQL_URL"], database=DB, log=lambda m: None)
    doc = yaml.safe_load(open(load_pipeline().path))
    doc["tables"] = [
        {"name": f"{DB}.accounts", "key": ["id"]},
        {"name": f"{DB}.payments", "key": ["id"]},
        {"name": f"{DB}.audit_log", "key": "none"},
    ]
    path = tmp_path_factory.mktemp("handoff") / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _stream_once(pipeline) -> dict:
    stats = ChangeReader(pipeline).run(until_idle=True)
    sink = Sink(pipeline)
    try:
        sink.run(caught_up=True)
    finally:
        sink.close()
    return stats


def test_full_load_then_stream_converges_exactly(pipeline_path):
    pipeline = load_pipeline(pipeline_path)
    # the writer runs through the whole load, which takes about 2.5 s in a warm shared Spark driver: at 300
    # changes/s it wrote only 409 transactions in one CI run
    stats, loaded = {}, threading.Event()
    writer = threading.Thread(
        target=lambda: stats.update(
            demo.run_writer(
                os.environ["SEAM_MYSQL_URL"], rate=800, seconds=300, threads=2, seed=11, database=DB, until=loaded
            )
        )
    )
    writer.start()
    try:
        load = run_command(
            [sys.executable, "-m", "seam.cli", "--pipeline", pipeline_path, "load", "full"]
            + [f"{DB}.{t}" for t in TABLES],
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        loaded.set()
        writer.join()  # one writer at a time: two would pick the same new ids
    assert load.returncode == 0, load.stderr + load.stdout
    after, streamed = {}, threading.Event()  # writes that surely follow the load, however long it took
    late = threading.Thread(
        target=lambda: after.update(
            demo.run_writer(
                os.environ["SEAM_MYSQL_URL"], rate=300, seconds=10, threads=1, seed=12, database=DB, until=streamed
            )
        )
    )
    late.start()
    try:
        first = _stream_once(pipeline)  # while the late writer still runs
    finally:
        streamed.set()
        late.join()
    second = _stream_once(pipeline)  # after it stopped: drain
    print(stats, first, second)
    assert stats["transactions"] > 300 and first["changes"] + second["changes"] > 0
    for table in TABLES:
        src, schema = source_rows(pipeline, DB, table)
        tgt = target_rows(pipeline, schema)
        assert src == tgt, f"{table}: {diff(src, tgt)}"

    again = _stream_once(pipeline)  # the whole binlog again from the stored positions: nothing changes
    for table in TABLES:
        src, schema = source_rows(pipeline, DB, table)
        assert src == target_rows(pipeline, schema), table
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        positions = conn.execute("SELECT tbl, file, pos FROM seam.positions WHERE db = %s", (DB,)).fetchall()
    assert len(positions) == 3 and again["changes"] == 0


def test_a_purged_binlog_stops_only_its_table_with_the_way_out(pipeline_path, tmp_path):
    """(The way out, `seam repair --full`, is run as printed in test_repair.py.)"""
    pipeline = load_pipeline(pipeline_path)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        saved = conn.execute("SELECT file FROM seam.positions WHERE db = %s AND tbl = 'accounts'", (DB,)).fetchone()
        conn.execute("UPDATE seam.positions SET file = 'mysql-bin.000000' WHERE db = %s AND tbl = 'accounts'", (DB,))
        try:
            reader = ChangeReader(pipeline)
            reader.close()
            assert re.search(
                rf"no longer has binlog mysql-bin.000000 .*`seam repair {DB}.accounts --full`",
                reader.stopped[f"{DB}.accounts"],
            ), reader.stopped
            assert f"{DB}.payments" not in reader.stopped and (DB, "payments") in reader.followed
            stopped = conn.execute("SELECT stopped FROM seam.positions WHERE db = %s AND tbl = 'accounts'", (DB,))
            assert "seam repair" in stopped.fetchone()[0]
        finally:
            conn.execute(
                "UPDATE seam.positions SET file = %s, stopped = NULL WHERE db = %s AND tbl = 'accounts'", (saved[0], DB)
            )


@pytest.mark.parametrize("sink", ["spark", "direct"])
def test_stream_start_status_stop(pipeline_path, sink, tmp_path):
    """`seam stream start` runs in the background, `status` shows per-table positions and lag from the source's
    and the target's positions, `stop` ends it; changes written meanwhile reach the target. With either sink
    (``stream.sink``): the Structured Streaming query, or the direct Kafka consumer."""
    doc = yaml.safe_load(open(pipeline_path))
    doc["stream"] = {**(doc.get("stream") or {}), "sink": sink}
    pipeline_path = str(tmp_path / "pipeline.yaml")
    (tmp_path / "pipeline.yaml").write_text(yaml.safe_dump(doc))
    pipeline = load_pipeline(pipeline_path)

    def seam(*args):
        return run_command(
            [sys.executable, "-m", "seam.cli", "--pipeline", pipeline_path, "stream", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    started = seam("start")
    assert started.returncode == 0 and "stream started" in started.stdout, started.stderr
    try:
        demo.run_writer(os.environ["SEAM_MYSQL_URL"], rate=100, seconds=5, threads=1, seed=5, database=DB)
        status = seam("status")
        assert status.returncode == 0 and ("stream: RUNNING" in status.stdout or "stream: STARTING" in status.stdout), (
            status.stdout + status.stderr
        )
        for table in TABLES:
            assert f"{DB}.{table}" in status.stdout
        deadline = time.time() + 180  # a busy machine: the sink's Spark start-up shares two cores
        while time.time() < deadline:
            if all(
                source_rows(pipeline, DB, t)[0] == target_rows(pipeline, source_rows(pipeline, DB, t)[1])
                for t in TABLES
            ):
                break
            time.sleep(2)
        else:
            raise AssertionError("the running stream did not bring the target to the source within 180 s")
        caught_up = seam("status")
        # none of the tables' own changes is left (the binlog's head may be further on: other databases' writes)
        assert caught_up.stdout.count(" 0 events,") == len(TABLES), caught_up.stdout
        applies = "micro-batches" if sink == "spark" else "transactions applied"
        assert re.search(rf"^\s+sink\s+RUNNING\b.*{applies}", caught_up.stdout, re.M), caught_up.stdout
        # validation of streamed tables while the writer and the stream both run: compared at the applied
        # position each target snapshot holds, without pausing either
        from seam.validate.validation import validate

        writer = threading.Thread(
            target=lambda: demo.run_writer(
                os.environ["SEAM_MYSQL_URL"], rate=100, seconds=8, threads=1, seed=6, database=DB
            )
        )
        writer.start()
        try:
            time.sleep(2)
            reports = [validate(pipeline, pipeline.table(f"{DB}.{t}"), say=lambda m: None) for t in TABLES]
        finally:
            writer.join()
        assert [r.verdict for r in reports] == ["equal"] * len(TABLES), [r.to_text() for r in reports]
        assert all(r.mode == "position" for r in reports)
    finally:
        stopped = seam("stop")
    assert "stream-reader stopped" in stopped.stdout and "stream-sink stopped" in stopped.stdout
    final = seam("status")
    assert final.returncode == 1 and "stream: STOPPED" in final.stdout, final.stdout
