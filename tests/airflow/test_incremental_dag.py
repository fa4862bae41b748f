"""The incremental DAG on the real Airflow standalone: `airflow backfill create` loads three consecutive
daily windows (each run's data interval), then a second backfill re-runs the middle window; the target equals the source restricted to rows changed up to the last window's end, with
no duplicates, and every window is a committed batch in the ledger."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from pathlib import Path

import psycopg
import pytest
import yaml

from seam.config import load_pipeline
from seam_dev import demo
from seam_dev.airflow_api import AirflowClient
from seam_dev.stack import EmbeddedStack
from tests.support.commands import run_command

DB = "incr_af"
pytestmark = [pytest.mark.airflow, pytest.mark.slow]


@pytest.fixture(scope="module")
def pipeline_path(airflow_stack, tmp_path_factory):
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
        cur.execute(f"CREATE DATABASE `{DB}`")
        cur.execute(
            f"CREATE TABLE `{DB}`.`ledger` (id INT PRIMARY KEY, amount DECIMAL(12,2) NOT NULL, "
            "updated_at DATETIME(6) NOT NULL)"
        )
        rows, i = [], 0
        for day in ("2025-12-31", "2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"):
            for clock in ("00:00:00", "06:30:00", "12:00:00.5", "23:59:59.999999"):
                i += 1
                rows.append((i, f"{i}.25", f"{day} {clock}"))
        cur.executemany(f"INSERT INTO `{DB}`.`ledger` VALUES (%s, %s, %s)", rows)
    conn.close()
    doc = yaml.safe_load(open(load_pipeline().path))
    doc["tables"] = [{"name": f"{DB}.ledger", "key": ["id"], "cursor": "updated_at", "safety_delay": "10s"}]
    doc["kafka"]["topic_prefix"] = "seam.incr_af"
    path = tmp_path_factory.mktemp("incr_af") / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _target_ids(pipeline) -> list[int]:
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        return [r[0] for r in conn.execute(f'SELECT id FROM "{DB}"."ledger" ORDER BY id')]


def _expected(after: str, upto: str) -> list[int]:
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM ledger WHERE updated_at > %s AND updated_at <= %s ORDER BY id", (after, upto))
        ids = [r[0] for r in cur.fetchall()]
    conn.close()
    return ids


def _backfill(client, first: str, last: str, conf: str, expect: int, reprocess: bool = False) -> list[dict]:
    """`airflow backfill create` on the embedded Airflow; waits for the runs of those logical dates."""
    env = {**os.environ, **EmbeddedStack().airflow_env()}
    since = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    created = run_command(
        [
            str(Path(sys.executable).with_name("airflow")),
            "backfill",
            "create",
            "--dag-id",
            "seam_incremental",
            "--from-date",
            first,
            "--to-date",
            last,
            "--dag-run-conf",
            conf,
            "--reprocess-behavior",
            "completed" if reprocess else "failed",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert created.returncode == 0, created.stderr + created.stdout
    deadline, runs = time.monotonic() + 1200, []
    while time.monotonic() < deadline:
        runs = [
            r
            for r in client._request("GET", "/api/v2/dags/seam_incremental/dagRuns?limit=100")["dag_runs"]
            if r["run_type"] == "backfill"
            and first <= r["logical_date"][:10] <= last
            and (r.get("queued_at") or "") > since
        ]
        if len(runs) == expect and all(r["state"] in ("success", "failed") for r in runs):
            backfills = client._request("GET", "/api/v2/backfills?dag_id=seam_incremental")["backfills"]
            if all(b["completed_at"] for b in backfills):  # the next backfill may only start after this
                return runs
        time.sleep(2)
    raise AssertionError(f"backfill {first}..{last} did not finish: {runs}")


def test_backfill_three_days_then_rerun_the_middle_window(pipeline_path):
    pipeline = load_pipeline(pipeline_path)
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        began = conn.execute("SELECT now()").fetchone()[0]
    client = AirflowClient.from_env()
    client.wait_for_dag("seam_incremental")
    client._request("PATCH", "/api/v2/dags/seam_incremental", {"is_paused": False})  # backfills need it
    conf = json.dumps({"tables": [f"{DB}.ledger"], "pipeline": pipeline_path})
    runs = _backfill(client, "2026-01-01", "2026-01-03", conf, expect=3, reprocess=True)  # rerunnable on a dev stack
    assert [r["state"] for r in runs] == ["success"] * 3, runs
    intervals = sorted((r["data_interval_start"][:10], r["data_interval_end"][:10]) for r in runs)
    assert intervals == [("2026-01-01", "2026-01-02"), ("2026-01-02", "2026-01-03"), ("2026-01-03", "2026-01-04")]
    expected = _expected("2026-01-01 00:00:00", "2026-01-04 00:00:00")
    assert _target_ids(pipeline) == expected and len(expected) == 12

    again = _backfill(client, "2026-01-02", "2026-01-02", conf, expect=1, reprocess=True)  # the middle window
    assert [r["state"] for r in again] == ["success"], again
    assert _target_ids(pipeline) == expected  # the re-run window changes nothing, doubles nothing
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        windows = conn.execute(
            "SELECT window_start, window_end, final_rows, state FROM seam.batches WHERE db = %s AND opened_at >= %s",
            (DB, began),
        ).fetchall()
    assert sorted((s[:10], e[:10], n, state) for s, e, n, state in windows) == [
        ("2026-01-01", "2026-01-02", 4, "committed"),
        ("2026-01-02", "2026-01-03", 4, "committed"),
        ("2026-01-02", "2026-01-03", 4, "committed"),
        ("2026-01-03", "2026-01-04", 4, "committed"),
    ], windows
    # unpausing also started today's scheduled window of the demo tables: let it finish, then pause again
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and any(
        r["state"] not in ("success", "failed")
        for r in client._request("GET", "/api/v2/dags/seam_incremental/dagRuns?limit=100")["dag_runs"]
    ):
        time.sleep(2)
    client._request("PATCH", "/api/v2/dags/seam_incremental", {"is_paused": True})
