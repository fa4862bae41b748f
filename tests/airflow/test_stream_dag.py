"""The stream supervisor DAG (``seam_stream``) in real Airflow DAG runs (``dag.test`` against the embedded
stack's Airflow metadata database): it starts the reader and the streaming sink detached, a sink killed
with SIGKILL is started again by the next run and the stream catches up (validation EQUAL), a table the
stream had to stop fails the run and alerts once, and a stop is kept by later scheduled runs. (A typo in a
Param: tests/ui/test_airflow_ui.py, tests/airflow/test_full_load_dag.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psycopg
import pytest

from seam.config import load_pipeline
from seam.supervise import _group
from seam_dev import demo
from tests.support.airflow import run_dag
from tests.support.commands import run_command
from tests.support.pipelines import pipeline_file
from tests.support.source import fresh_database

DB = "streamdag_test"
pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def _run(stack, conf: dict) -> dict:
    return run_dag(stack, "seam_stream", conf)


def _seam(path: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True, timeout=timeout
    )


def _parts(pipeline) -> dict:
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        rows = conn.execute(
            "SELECT part, pid, stopped_at IS NOT NULL FROM seam.stream_parts WHERE pipeline = %s", (pipeline.name,)
        ).fetchall()
    return {part: (pid, stopped) for part, pid, stopped in rows}


def _write(first_id: int, rows: int) -> None:
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO ledger VALUES (%s, %s, %s)", [(i, f"{i}.10", "new") for i in range(first_id, first_id + rows)]
        )
        cur.execute("UPDATE ledger SET amount = amount + 1 WHERE id % 7 = 0")
        cur.execute("DELETE FROM ledger WHERE id % 11 = 0")
    conn.close()


def test_supervisor_starts_restarts_alerts_and_stops_the_stream(airflow_stack, tmp_path_factory, webhook):
    fresh_database(
        DB,
        f"CREATE TABLE `{DB}`.ledger (id INT PRIMARY KEY, amount DECIMAL(18,2), note VARCHAR(20))",
        f"INSERT INTO `{DB}`.ledger SELECT seq, seq + 0.25, 'old' FROM `{DB}`.seq_1_to_300",
    )
    logs = tmp_path_factory.mktemp("stream-logs")
    path = pipeline_file(
        tmp_path_factory,
        "streamdag",
        [{"name": f"{DB}.ledger", "key": ["id"]}],
        pipeline_name="streamdag",
        stream={"max_lag_seconds": "10m", "log_dir": str(logs)},
        notify={"webhook": webhook["url"]},
    )
    pipeline = load_pipeline(path)
    load = _seam(path, "load", "full", f"{DB}.ledger")
    assert load.returncode == 0, load.stdout + load.stderr
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:  # an earlier run's parts
        conn.execute("DELETE FROM seam.stream_parts WHERE pipeline = %s", (pipeline.name,))

    started = _run(airflow_stack, {"action": "start", "pipeline": path})
    assert started["state"] == "success", started["log"][-5000:]
    parts = _parts(pipeline)
    assert set(parts) >= {"reader", "sink"} and all(_group(parts[p][0]) for p in ("reader", "sink")), parts
    _write(1000, 200)
    caught = _seam(path, "stream", "wait", "--timeout", "300")
    assert caught.returncode == 0, caught.stdout + caught.stderr

    sink_pid = parts["sink"][0]
    os.kill(sink_pid, signal.SIGKILL)  # the part's process only: its Spark job is orphaned, as after a crash
    ensured = _run(airflow_stack, {"pipeline": path})
    assert ensured["state"] == "success", ensured["log"][-5000:]
    assert "sink: was" in ensured["log"] and "started pid" in ensured["log"], ensured["log"][-5000:]
    assert f"{DB}.ledger: applied" in ensured["log"]  # the per-table lag in the task log
    new_sink = _parts(pipeline)["sink"][0]
    assert new_sink != sink_pid and not _group(sink_pid), "the orphaned Spark job of the killed sink must be gone"
    _write(2000, 200)
    caught = _seam(path, "stream", "wait", "--timeout", "300")
    assert caught.returncode == 0, caught.stdout + caught.stderr
    validated = _seam(path, "validate", f"{DB}.ledger")
    assert validated.returncode == 0 and ": EQUAL:" in validated.stdout, validated.stdout + validated.stderr

    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with conn.cursor() as cur:  # DDL the stream cannot follow: the table stops, loudly
        cur.execute("ALTER TABLE ledger MODIFY note VARCHAR(10)")  # a narrowing
    conn.close()
    _seam(path, "stream", "wait", "--timeout", "120")
    stopped = _run(airflow_stack, {"pipeline": path})
    assert stopped["state"] == "failed" and f"{DB}.ledger is STOPPED" in stopped["log"], stopped["log"][-5000:]
    alerts = [p for p in webhook["posts"] if p.get("problem") == "stream unhealthy"]
    assert len(alerts) == 1 and f"{DB}.ledger is STOPPED" in alerts[0]["detail"], webhook["posts"]

    halted = _run(airflow_stack, {"action": "stop", "pipeline": path})
    assert halted["state"] == "success", halted["log"][-5000:]
    assert not any(_group(pid) for pid, _ in _parts(pipeline).values() if pid), "a part outlived the stop"
    left = _run(airflow_stack, {"pipeline": path})  # a scheduled run keeps the stop
    assert left["state"] == "success" and "left stopped" in left["log"], left["log"][-5000:]
    assert not any(_group(pid) for part, (pid, _) in _parts(pipeline).items() if part in ("reader", "sink"))
