"""`seam stream status` tells the truth from the parts' own records in the target (issue 13): running,
starting, restarting with the count and the last error, stopped, down; exit 1 unless every part runs."""

from __future__ import annotations

import os
import sys

import psycopg
import pytest

from seam.config import load_pipeline
from seam.source.snapshot import source_head
from seam.state.parts import part_beat, part_failed, part_started, part_states, part_stopped
from seam.state.positions import store_loaded_position
from seam.state.schema import ensure_state
from seam.supervise import supervise
from seam_dev import demo
from tests.support.commands import run_command
from tests.support.pipelines import pipeline_file

pytestmark = pytest.mark.stack


def _loaded_at_head(tmp_path_factory, name: str):
    """A pipeline ``name`` of one table of its own, as if loaded at the source's head (what is tested is the
    parts' states), and no part recorded yet: (path, pipeline)."""
    path = pipeline_file(tmp_path_factory, name, [{"name": "parts_test.t", "key": ["id"]}], pipeline_name=name)
    pipeline = load_pipeline(path)
    source = demo.connect(os.environ["SEAM_MYSQL_URL"])
    try:
        with source.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS parts_test")
            cur.execute("CREATE TABLE IF NOT EXISTS parts_test.t (id INT PRIMARY KEY)")
        head = source_head(source)
    finally:
        source.close()
    schema = pipeline.target.state_schema
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        ensure_state(conn, schema)
        store_loaded_position(conn, schema, "parts_test", "t", name, head, None, None, None)
        conn.execute(f"DELETE FROM {schema}.stream_parts WHERE pipeline = %s", (pipeline.name,))
    return path, pipeline


def test_part_states_follow_heartbeats_failures_and_stops(stack, tmp_path_factory):
    path, pipeline = _loaded_at_head(tmp_path_factory, "parts_test")
    assert pipeline.name == "parts_test"
    schema = pipeline.target.state_schema
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:

        def states():
            return {p: s["state"] for p, s in part_states(conn, schema, pipeline.name).items()}

        def status():
            return run_command(
                [sys.executable, "-m", "seam.cli", "--pipeline", path, "stream", "status"],
                capture_output=True,
                text=True,
                timeout=120,
            )

        assert states() == {}
        never = status()
        assert never.returncode == 1 and "never started" in never.stdout, never.stdout
        part_started(conn, schema, pipeline.name, "reader", fresh=True)
        part_started(conn, schema, pipeline.name, "sink", fresh=True)
        assert states() == {"reader": "starting", "sink": "starting"}
        assert "stream: STARTING" in status().stdout
        part_beat(conn, schema, pipeline.name, "reader", batches=1)
        part_beat(conn, schema, pipeline.name, "sink", batches=1)
        assert states() == {"reader": "running", "sink": "running"}
        running = status()
        assert running.returncode == 0 and "stream: RUNNING" in running.stdout, running.stdout
        part_failed(conn, schema, pipeline.name, "sink", "psycopg.OperationalError: the target went away")
        part_started(conn, schema, pipeline.name, "sink", fresh=False)  # the supervisor restarts it
        looping = status()
        assert looping.returncode == 1 and "stream: RESTARTING" in looping.stdout, looping.stdout
        assert "1 restart(s), last error: psycopg.OperationalError: the target went away" in looping.stdout
        conn.execute(
            f"UPDATE {schema}.stream_parts SET beat_at = now() - interval '1 minute' WHERE part = 'reader' "
            "AND pipeline = %s",
            (pipeline.name,),
        )
        assert states()["reader"] == "down"
        part_stopped(conn, schema, pipeline.name, "reader")
        part_stopped(conn, schema, pipeline.name, "sink")
        stopped = status()
        assert stopped.returncode == 1 and "stream: STOPPED" in stopped.stdout, stopped.stdout
        part_started(conn, schema, pipeline.name, "sink", fresh=True)  # `seam stream start`: counts reset
        assert part_states(conn, schema, pipeline.name)["sink"]["restarts"] == 0


def test_a_part_failing_again_and_again_is_named_with_its_cause_a_one_off_is_not(stack, tmp_path_factory):
    """A reader that fails the same way on every pass (a bug, a grant taken away) is retried with back-off for
    ever; the supervisor (``seam_stream``, which alerts) says so with the error, after 5 failures in a row.
    Failures with two minutes of work between them (a broker restart now and then) are not in a row."""
    path, pipeline = _loaded_at_head(tmp_path_factory, "parts_failing")
    schema = pipeline.target.state_schema
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        for part in ("reader", "sink"):  # as if they ran on another host: the supervisor leaves them be
            part_started(conn, schema, pipeline.name, part, fresh=True)
            part_beat(conn, schema, pipeline.name, part, batches=1)
        conn.execute(f"UPDATE {schema}.stream_parts SET host = 'worker-2' WHERE pipeline = %s", (pipeline.name,))
        error = "ProgrammingError: (1227, 'Access denied; you need the REPLICATION SLAVE privilege')"
        for _ in range(4):
            part_failed(conn, schema, pipeline.name, "reader", error)
        part_beat(conn, schema, pipeline.name, "reader", batches=1)  # work right after a failure ends nothing
        assert part_states(conn, schema, pipeline.name)["reader"]["streak"] == 4
        conn.execute(  # the last failure was long ago, and the reader works: the failures in a row end
            f"UPDATE {schema}.stream_parts SET failed_at = now() - interval '1 hour' WHERE pipeline = %s",
            (pipeline.name,),
        )
        part_beat(conn, schema, pipeline.name, "reader", batches=1)
        part_failed(conn, schema, pipeline.name, "reader", error)  # a one-off
        once = part_states(conn, schema, pipeline.name)["reader"]
        assert (once["state"], once["restarts"], once["streak"], once["failing"]) == ("restarting", 5, 1, False)
        health = supervise(pipeline, action="ensure", say=lambda line: None)
        assert not any("keeps failing" in p for p in health.problems), health.problems
        for _ in range(4):
            part_failed(conn, schema, pipeline.name, "reader", error)
        looping = part_states(conn, schema, pipeline.name)["reader"]
        assert (looping["streak"], looping["failing"]) == (5, True)
        health = supervise(pipeline, action="ensure", say=lambda line: None)
        assert f"reader keeps failing (5 failures in a row, retried with back-off), last error: {error}" in "; ".join(
            health.problems
        ), health.problems
        assert not health.healthy and health.actions == []  # reported, not started a second time
        part_beat(conn, schema, pipeline.name, "reader", batches=1)  # the grant is back: it works again
        recovered = part_states(conn, schema, pipeline.name)["reader"]
        assert (recovered["state"], recovered["streak"], recovered["failing"]) == ("restarting", 5, False)
        health = supervise(pipeline, action="ensure", say=lambda line: None)
        assert not any("keeps failing" in p for p in health.problems), health.problems
        part_failed(conn, schema, pipeline.name, "reader", error)  # and fails again: still in a row
        status = run_command(
            [sys.executable, "-m", "seam.cli", "--pipeline", path, "stream", "status"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert status.returncode == 1 and "10 restart(s), failing 6 times in a row, last error: Prog" in status.stdout
        part_started(conn, schema, pipeline.name, "reader", fresh=True)
        assert part_states(conn, schema, pipeline.name)["reader"]["streak"] == 0
