"""GTID positions (issue 15): a stream resumes on another server after a failover.

Two MariaDB servers of their own (a primary and its replica, GTID replication, the replica's binlog
files numbered apart from the primary's), the test stack's broker and target. Seam loads and streams
from the primary; the primary dies with changes Seam has not read; the pipeline is pointed at the
promoted replica, which takes more writes. The stream finds each table's GTID set in the replica's binlog
and goes on: the target equals the replica, row by row (independent comparer), nothing lost or doubled.
A failover that lost transactions the target already has stops with the remedy instead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
import yaml

from seam.config import load_pipeline
from seam.source.streaming import ChangeReader
from seam_dev import demo
from tests.support.commands import run_command
from tests.support.compare import diff, source_rows, target_rows
from tests.support.pipelines import stream_once
from tests.support.servers import MariaDB

DB = "failover_test"
TABLES = ["accounts", "payments", "audit_log"]
pytestmark = pytest.mark.stack


@pytest.fixture
def servers(stack, tmp_path):
    primary, replica = MariaDB(tmp_path / "primary", 11), MariaDB(tmp_path / "replica", 12)
    try:
        for _ in range(3):  # the replica's binlog files are numbered apart from the primary's
            replica.run("FLUSH BINARY LOGS")
        primary.add_users()
        replica.replicate_from(primary)
        yield primary, replica
    finally:
        primary.stop()
        replica.stop()


def _pipeline_file(tmp_path: Path, server: MariaDB, name: str) -> str:
    doc = yaml.safe_load(open(load_pipeline().path))
    doc["name"] = name
    doc["kafka"]["topic_prefix"] = f"seam.{name}"
    doc["source"]["port"] = server.port
    doc["tables"] = [
        {"name": f"{DB}.accounts", "key": ["id"]},
        {"name": f"{DB}.payments", "key": ["id"]},
        {"name": f"{DB}.audit_log", "key": "none"},
    ]
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _seam(path: str, *args: str) -> subprocess.CompletedProcess:
    return run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True, timeout=600
    )


def _positions(pipeline) -> dict:
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        rows = conn.execute(
            "SELECT tbl, file, pos, gtids, server, stopped FROM seam.positions WHERE db = %s", (DB,)
        ).fetchall()
    return {r[0]: r[1:] for r in rows}


def _assert_equal(pipeline) -> None:
    for table in TABLES:
        src, schema = source_rows(pipeline, DB, table)
        tgt = target_rows(pipeline, schema)
        assert src == tgt, f"{table}: {diff(src, tgt)}"


def _load_and_stream(path: str, primary: MariaDB) -> None:
    demo.seed(load_pipeline(path), rows=3_000, admin_url=primary.admin_url, database=DB, log=lambda m: None)
    load = _seam(path, "load", "full", *[f"{DB}.{t}" for t in TABLES])
    assert load.returncode == 0, load.stderr + load.stdout
    demo.run_writer(primary.admin_url, rate=200, seconds=4, threads=1, seed=21, database=DB)
    stream_once(load_pipeline(path))
    _assert_equal(load_pipeline(path))


def test_stream_resumes_on_the_promoted_replica_by_gtid(servers, tmp_path):
    primary, replica = servers
    path = _pipeline_file(tmp_path, primary, "failover")
    _load_and_stream(path, primary)
    before = _positions(load_pipeline(path))
    assert all(p[3] == "server_id 11" and p[2] for p in before.values()), before

    # changes Seam never read, then the primary dies; its replica has them and is promoted
    unread = demo.run_writer(primary.admin_url, rate=200, seconds=4, threads=1, seed=22, database=DB)
    replica.caught_up_with(primary)
    primary.stop()
    replica.promote()
    after = demo.run_writer(replica.admin_url, rate=200, seconds=4, threads=1, seed=23, database=DB)
    assert unread["transactions"] > 50 and after["transactions"] > 50

    path = _pipeline_file(tmp_path, replica, "failover")
    pipeline = load_pipeline(path)
    early = _seam(path, "validate", f"{DB}.accounts")
    assert early.returncode != 0 and "was read on server_id 11, not on this source" in early.stderr, early.stderr
    first = stream_once(pipeline)
    stream_once(pipeline)  # what the sink applied after the first reader stopped
    _assert_equal(pipeline)
    moved = _positions(pipeline)
    assert all(p[3] == "server_id 12" and p[4] is None for p in moved.values()), moved
    # the replica's files are numbered apart: the primary's file/pos would have been meaningless here
    assert {p[0] for p in moved.values()}.isdisjoint({p[0] for p in before.values()}), (before, moved)
    assert first["changes"] > 0

    again = stream_once(pipeline)  # nothing doubled: a second pass from the stored positions changes nothing
    _assert_equal(pipeline)
    assert again["changes"] == 0
    validated = _seam(path, "validate", *[f"{DB}.{t}" for t in TABLES])  # at the moved positions
    assert validated.returncode == 0 and validated.stdout.count(": EQUAL:") == 3, validated.stdout + validated.stderr


def test_failover_that_lost_applied_transactions_stops_with_the_remedy(servers, tmp_path):
    primary, replica = servers
    path = _pipeline_file(tmp_path, primary, "failover_lost")
    replica.caught_up_with(primary)
    _load_and_stream(path, primary)
    replica.caught_up_with(primary)
    replica.run("STOP SLAVE")  # the replica falls behind; Seam applies what it never gets
    demo.run_writer(primary.admin_url, rate=200, seconds=2, threads=1, seed=24, database=DB)
    stream_once(load_pipeline(path))
    primary.stop()
    replica.promote()

    path = _pipeline_file(tmp_path, replica, "failover_lost")
    pipeline = load_pipeline(path)
    reader = ChangeReader(pipeline)
    try:
        reader.run(until_idle=True)  # each table whose position is lost stops; none is moved
    finally:
        reader.close()
    positions = _positions(pipeline)
    assert all(p[3] == "server_id 11" for p in positions.values()), positions  # nothing moved
    for table in ("accounts", "payments"):
        stopped = positions[table][4]
        assert stopped and "the source is server_id 12 now" in stopped, stopped
        assert f"`seam repair {DB}.{table} --full`" in stopped, stopped
    assert f"`seam load full {DB}.audit_log`" in positions["audit_log"][4]
    # the ways out, as printed: the target's rows the new primary never had are found and replaced
    for table in ("accounts", "payments"):
        repaired = _seam(path, "repair", f"{DB}.{table}", "--full", "--max-rows", "100000")
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    reload = _seam(path, "load", "full", f"{DB}.audit_log")
    assert reload.returncode == 0, reload.stdout + reload.stderr
    demo.run_writer(replica.admin_url, rate=200, seconds=2, threads=1, seed=25, database=DB)
    stream_once(pipeline)
    _assert_equal(pipeline)
