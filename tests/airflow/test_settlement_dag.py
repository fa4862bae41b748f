"""The nightly settlement DAG (``seam_settlement``) in real Airflow DAG runs (``dag.test`` against the embedded
stack's Airflow metadata database), with a Shanghai business day over a UTC source: the windows table loads
exactly the rows of that day, the streamed table is checked to be streamed past the day's end, both are
validated to the cent and emit their Assets; a cent of difference fails the run and alerts once. (A typo in
the day Param: tests/ui/test_airflow_ui.py.)"""

from __future__ import annotations

import os
import sys

import psycopg
import pytest

from seam.config import load_pipeline
from seam.state.connection import connect_state
from seam_dev import demo
from tests.support.airflow import run_dag
from tests.support.commands import run_command
from tests.support.pipelines import pipeline_file, stream_once

DB = "settle_test"
pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def _run(stack, conf: dict) -> dict:
    return run_dag(stack, "seam_settlement", conf)


def test_settlement_loads_checks_validates_and_emits_each_tables_day(airflow_stack, tmp_path_factory, webhook):
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
        cur.execute(f"CREATE DATABASE `{DB}`")
        for table in ("fees", "trades"):
            cur.execute(
                f"CREATE TABLE `{DB}`.{table} (id INT PRIMARY KEY, amount DECIMAL(18,2) NOT NULL, "
                "updated_at DATETIME NOT NULL)"
            )
            # every 30 minutes from 18 to 22 November (UTC): rows on both sides of each Shanghai midnight
            cur.execute(
                f"INSERT INTO `{DB}`.{table} SELECT seq, seq * 1.01, '2026-11-18 00:00:00' + "
                f"INTERVAL (seq * 30) MINUTE FROM `{DB}`.seq_1_to_230"
            )
    conn.close()
    checks = {"columns": {"amount": {"sum": {}}}}
    tables = [
        {"name": f"{DB}.fees", "key": ["id"], "cursor": "updated_at", "sync": "windows", "checks": checks},
        {"name": f"{DB}.trades", "key": ["id"], "cursor": "updated_at", "sync": "stream", "checks": checks},
    ]
    path = pipeline_file(
        tmp_path_factory,
        "settledag",
        tables,
        pipeline_name="settledag",
        notify={"webhook": webhook["url"]},
        settlement={
            "schedule": "0 2 * * *",
            "timezone": "Asia/Shanghai",
            "source_timezone": "UTC",
            "tables": [f"{DB}.fees", f"{DB}.trades"],
        },
    )
    pipeline = load_pipeline(path)
    state = connect_state(pipeline)  # a first load of the table (an earlier run's position would hide that path)
    state.execute("DELETE FROM seam.positions WHERE db = %s", (DB,))
    state.close()
    load = run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{DB}.trades"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert load.returncode == 0, load.stdout + load.stderr
    stream_once(pipeline)  # the stream has applied the source past the day's end (a heartbeat)

    settled = _run(airflow_stack, {"day": "2026-11-20", "pipeline": path})
    assert settled["state"] == "success", settled["log"][-6000:]
    assert settled["tasks"] == {"plan": "success", "settle[0]": "success", "settle[1]": "success"}
    assert settled["assets"] == [
        [f"seam://settledag/{DB}/fees", "2026-11-20"],
        [f"seam://settledag/{DB}/trades", "2026-11-20"],
    ]
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        # the Shanghai day 20 November is (19 Nov 16:00, 20 Nov 16:00] UTC: 48 half hours, nothing else
        window = conn.execute(f'SELECT count(*), min(updated_at), max(updated_at) FROM "{DB}".fees').fetchone()
    assert window[0] == 48 and str(window[1]) == "2026-11-19 16:30:00" and str(window[2]) == "2026-11-20 16:00:00"

    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        conn.execute(f"UPDATE \"{DB}\".trades SET amount = amount + 0.01 WHERE updated_at = '2026-11-20 03:00:00'")
    off = _run(airflow_stack, {"day": "2026-11-20", "pipeline": path})
    assert off["state"] == "failed" and off["tasks"]["settle[1]"] == "failed" and off["tasks"]["settle[0]"] == "success"
    assert "settlement of 2026-11-20" in off["log"] and "MISMATCH" in off["log"]
    alerts = [p for p in webhook["posts"] if p.get("problem", "").startswith("settlement")]
    assert len(alerts) == 1 and alerts[0]["table"] == f"{DB}.trades" and alerts[0]["day"] == "2026-11-20", alerts
