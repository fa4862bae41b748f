"""The Airflow UI in a real browser (Debian's chromium driven by playwright-core, installed by
``tests/ui/setup.sh``), as a person uses it: log in with the README's instructions, trigger ``seam_full_load``
from its form with tables typed into the Param, wait for success on the run's page, open the validate task's
log; trigger ``seam_stream`` (start, then stop) and ``seam_settlement``; and type Params wrong (a table, a
pipeline path, a day), each failing the first task with one line and no traceback. Screenshots of every step
go to ``<state dir>/ui-screenshots``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from seam_dev.airflow_api import AirflowClient
from tests.support.commands import run_command
from tests.support.compare import diff, source_rows, target_rows

pytestmark = [pytest.mark.airflow, pytest.mark.slow]
HERE = Path(__file__).parent
DAGS = ("seam_full_load", "seam_stream", "seam_settlement")


@pytest.fixture(scope="module")
def browser_driver():
    run_command(["bash", str(HERE / "setup.sh")], check=True, timeout=900)


def _seam(*args: str) -> subprocess.CompletedProcess:
    return run_command([sys.executable, "-m", "seam.cli", *args], capture_output=True, text=True, timeout=600)


def _one_line_failure(step: dict, line: str) -> None:
    assert step["state"] == "failed", step
    assert line in step["log"], step["log"][-3000:]
    assert "Task exited" in step["log"], step["log"][-3000:]
    assert "Traceback" not in step["log"] and 'File "' not in step["log"], step["log"][-3000:]


def test_a_person_drives_seams_dags_from_the_airflow_ui(airflow_stack, pipeline, seeded, browser_driver):
    client = AirflowClient.from_env()
    paused = {dag: client.wait_for_dag(dag)["is_paused"] for dag in DAGS}  # the form unpauses; put them back
    for dag in DAGS:  # runs that earlier tests left waiting on a paused DAG would run first (max_active_runs=1)
        for run in client._request("GET", f"/api/v2/dags/{dag}/dagRuns?state=queued&state=running")["dag_runs"]:
            client._request("PATCH", f"/api/v2/dags/{dag}/dagRuns/{quote(run['dag_run_id'])}", {"state": "failed"})
    shots = Path(os.environ["SEAM_STATE_DIR"]) / "ui-screenshots"
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    # the supervisor's scheduled runs (once the form unpauses it) must leave the demo stream stopped until
    # the test starts it from the form
    assert _seam("stream", "stop").returncode == 0
    try:
        out = run_command(
            ["node", str(HERE / "airflow_ui.mjs"), str(shots)], capture_output=True, text=True, timeout=1800, cwd=HERE
        )
    finally:
        for dag, was in paused.items():
            client._request("PATCH", f"/api/v2/dags/{dag}", {"is_paused": was})
        _seam("stream", "stop")
    steps = {
        s["step"]: s
        for s in (json.loads(line[len("RESULT ") :]) for line in out.stdout.splitlines() if line.startswith("RESULT "))
    }
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    print(f"screenshots: {shots}")

    full = steps["full_load"]
    assert full["state"] == "success", full
    assert "demo.payments: EQUAL" in full["log"], full["log"][-3000:]  # the validate task's log, opened in the UI
    for table in ("accounts", "payments"):
        src, schema = source_rows(pipeline, "demo", table)
        tgt = target_rows(pipeline, schema)
        assert src == tgt, diff(src, tgt)

    _one_line_failure(steps["table_typo"], "bad input: ")
    assert "tables: no table 'demo.paymnets'" in steps["table_typo"]["log"]
    _one_line_failure(steps["pipeline_typo"], "pipeline: file not found: include/pipelines/demo.yml")
    _one_line_failure(steps["settlement_typo"], "day: '2026-02-30' is not a date")

    assert steps["stream_start"]["state"] == "success", steps["stream_start"]
    assert "demo.payments: applied" in steps["stream_start"]["log"]  # the per-table lag in the supervisor's log
    assert steps["stream_stop"]["state"] == "success", steps["stream_stop"]
    assert steps["settlement"]["state"] == "success", steps["settlement"]
    assert "demo.accounts" in steps["assets"]["text"] and "demo.payments" in steps["assets"]["text"]
    pictures = sorted(shots.glob("*.png"))
    assert len(pictures) >= 15 and all(p.stat().st_size > 10_000 for p in pictures), pictures
