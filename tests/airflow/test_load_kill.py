"""A full load killed from Airflow (issue 16): the load task of ``seam_full_load`` is marked failed through the
REST API; Airflow kills the task, its ``on_kill`` stops what it started, no process of the load is left, and the
target keeps its previous table.

A reporting query holds the target table meanwhile, as one may: the load publishes everything, and its sink
waits at END to swap the table in. The kill comes then, timed by that wait (``pg_blocking_pids``), not by a
sleep: the sink must stop although its step waits on a lock (it retried such a wait for as long as the lock was
held, and outlived the kill)."""

from __future__ import annotations

import os
import sys
import time
import urllib.parse
from pathlib import Path

import psycopg
import pytest
import yaml

from seam.config import load_pipeline
from seam_dev import demo
from seam_dev.airflow_api import AirflowClient
from tests.support.commands import run_command
from tests.support.pipelines import pipeline_file
from tests.support.source import fresh_database

DB = "loadkill_test"
pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def _processes_of(marker: str) -> list[str]:
    """Command lines of live processes that name ``marker`` (this test's pipeline file)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in text and state != "Z" and int(cmdline.parent.name) != os.getpid():
            found.append(f"{cmdline.parent.name}: {text[:200]}")
    return found


def _count(pipeline) -> int:
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        return conn.execute(f'SELECT count(*) FROM "{DB}".big').fetchone()[0]


def _waits_on(pipeline, report_pid: int) -> bool:
    """Whether a session (the load's sink, at its swap) waits on a lock the report's session holds."""
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        return conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE %s = ANY (pg_blocking_pids(pid)))", (report_pid,)
        ).fetchone()[0]


def test_a_load_task_killed_from_airflow_leaves_no_process_and_the_target_unchanged(airflow_stack, tmp_path_factory):
    fresh_database(
        DB,
        f"CREATE TABLE `{DB}`.big (id INT PRIMARY KEY, amount DECIMAL(18,2), note VARCHAR(100))",
        f"INSERT INTO `{DB}`.big SELECT seq, seq + 0.5, REPEAT('x', 40) FROM `{DB}`.seq_1_to_5000",
    )
    # no shared Spark driver: it would outlive the first load by design, holding this test's pipeline path
    spark = {**yaml.safe_load(open(load_pipeline().path))["spark"], "shared_driver_idle_s": 0}
    path = pipeline_file(
        tmp_path_factory, "loadkill", [{"name": f"{DB}.big", "key": ["id"]}], pipeline_name="loadkill", spark=spark
    )
    pipeline = load_pipeline(path)
    first = run_command(  # --restart: a batch that a killed run of this test left open is not resumed
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{DB}.big", "--restart"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    before = _count(pipeline)
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        since = conn.execute("SELECT now()").fetchone()[0]
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with conn.cursor() as cur:  # the second load has more rows than the first
        for start in range(5001, 300_001, 100_000):
            cur.execute(f"INSERT INTO big SELECT seq, seq / 2, REPEAT('y', 60) FROM seq_{start}_to_{start + 99_999}")
    conn.close()

    report = psycopg.connect(**pipeline.target.conninfo())  # a reporting query's transaction, left open
    report.execute(f'SELECT count(*) FROM "{DB}".big').fetchone()
    client = AirflowClient.from_env()
    run = client.trigger("seam_full_load", conf={"tables": [f"{DB}.big"], "pipeline": path})
    run_id = urllib.parse.quote(run["dag_run_id"])
    ti_path = f"/api/v2/dags/seam_full_load/dagRuns/{run_id}/taskInstances/full_load/0"
    deadline = time.monotonic() + 600  # its swap waits on the report's lock from here on
    while not (_waits_on(pipeline, report.info.backend_pid) and _processes_of(path)):
        state = client.run_state("seam_full_load", run["dag_run_id"])
        assert state in ("queued", "running") and time.monotonic() < deadline, (
            state,
            client.task_states("seam_full_load", run["dag_run_id"]),
        )
        time.sleep(0.5)

    client._request("PATCH", ti_path, {"new_state": "failed"})  # what "Mark as failed" in the UI does
    deadline = time.monotonic() + 120
    while (left := _processes_of(path)) and time.monotonic() < deadline:
        time.sleep(1)
    assert not left, "processes of the killed load are still running:\n" + "\n".join(left)
    assert _count(pipeline) == before  # the previous table, untouched
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        states = [
            s
            for (s,) in conn.execute(
                "SELECT state FROM seam.batches WHERE db = %s AND opened_at > %s", (DB, since)
            ).fetchall()
        ]
    assert "committed" not in states, states  # the killed load's batch never became visible
    report.close()
    client.wait("seam_full_load", run["dag_run_id"], timeout=300)
