"""Every benchmark case at a toy scale (``benchmarks/harness.py --tiny``), so that no benchmark can rot: the harness
runs each case next to its baselines and writes the JSON, the table and the chart. The figures mean nothing at
this scale; that each case ran, measured its baselines and found what it should is what is checked."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support.commands import run_command

pytestmark = pytest.mark.stack

ROOT = Path(__file__).resolve().parents[2]


def test_every_case_runs_next_to_its_baselines(stack, tmp_path):
    done = run_command(
        [sys.executable, str(ROOT / "benchmarks" / "harness.py"), "--tiny", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [report] = tmp_path.glob("*.json")
    doc = json.loads(report.read_text())
    found = {(r["case"], r["variant"]): r for r in doc["results"]}
    expected = {
        ("full load orders", "seam"),
        ("full load orders", "seam, portable snapshot"),
        ("full load orders", "raw JDBC->Parquet, cold"),
        ("full load orders", "raw JDBC->Parquet, warm"),
        ("full load orders", "SELECT INTO OUTFILE"),
        ("incremental lineitem 1%", "seam"),
        ("incremental lineitem 1%", "raw JDBC window read"),
        ("stream, flat out", "seam"),
        ("stream, flat out", "python-mysql-replication decode"),
        ("stream, flat out", "mariadb-binlog --verbose"),
        ("stream, flat out", "pg_chameleon"),  # its copy checked equal to the source
        ("full load orders, whole command", "pg_chameleon"),  # its copy counted
        ("stream at 1,000 changes/s", "seam"),
        ("stream, flat out", "seam, Spark sink"),  # stream.sink: spark
        ("stream at 1,000 changes/s", "seam, Spark sink"),
        ("validation orders, equal", "seam"),
        ("validation orders, 10 differences", "reladiff"),
        ("10 differing rows of 20,000", "seam repair"),
        ("10 differing rows of 20,000", "seam load full"),
        ("full load of 400,000 rows, killed at 60%", "seam load full again (resumes)"),
        ("full load of 400,000 rows, killed at 60%", "seam load full, clean"),
        ("stream, one transaction of 40,000 rows", "seam"),  # the reader's and the sink's RSS growth
        ("stream, one transaction of 40,000 rows", "10-row transactions"),
        ("full load of 8 tables", "seam, 8 tables in one command"),  # in one Spark application
        ("full load of 8 tables", "seam, the same rows in one table"),
        ("stream over 8 tables at 1,000 changes/s", "seam"),  # latency and `seam stream status`'s time
    }
    assert expected <= found.keys(), sorted(expected - found.keys())
    for result in found.values():
        assert result["rows"] > 0 and result["rows_per_s"] > 0, result
        assert result["peak_rss_mb"] > 0, result
    # the decoders saw exactly the changes the stream case wrote
    assert found[("stream, flat out", "python-mysql-replication decode")]["rows"] == 2_000
    assert found[("stream, flat out", "mariadb-binlog --verbose")]["rows"] == 2_000
    assert {"p50", "p95", "p99"} <= found[("stream at 1,000 changes/s", "seam")].keys()
    assert any(label == "seam / raw JDBC->Parquet, cold" for _, label, _ in doc["ratios"])
    resumed = found[("full load of 400,000 rows, killed at 60%", "seam load full again (resumes)")]
    assert resumed["runs"][0]["note"].startswith("resumed: "), resumed
    big = found[("stream, one transaction of 40,000 rows", "seam")]
    assert {"reader_rss_growth_mb", "sink_rss_growth_mb"} <= big.keys(), big
    many = found[("stream over 8 tables at 1,000 changes/s", "seam")]
    assert {"p50", "p99", "status_s"} <= many.keys() and many["status_s"] > 0, many
    assert report.with_suffix(".md").read_text().startswith("# Seam benchmarks")
    # what ran beside the run is said with its figures (Airflow's idle components take CPU from the cases)
    assert 0 <= doc["busy_percent_before"] <= 100 and all(isinstance(p, int) for p in doc["airflow_pids"]), doc
    assert "% of the CPUs were busy; Airflow " in report.with_suffix(".md").read_text()
    assert report.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
