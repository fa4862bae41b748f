"""The shared Spark drivers (seam.spark_driver) on the real stack: loads share one Spark application, a load that
finds it busy starts and uses a second one (``spark.shared_drivers: 2``) or, with all of them busy, runs
spark-submit, a load that goes away has its job cancelled and the next load resumes the batch, and an idle
driver stops by itself. Every load is checked with the independent comparer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
import yaml

from seam.config import load_pipeline
from seam.spark_driver import driver_identity
from seam_dev import demo
from tests.support.commands import seam_command
from tests.support.independent import compare_pipeline
from tests.support.pipelines import pipeline_file
from tests.support.source import numbered_table

DB = "driver_test"
pytestmark = [pytest.mark.stack, pytest.mark.alone]  # the other lane's loads would keep the driver busy

DRIVER = re.compile(r"spark job in the shared Spark driver \(pid (\d+)\)")


def _driver_pid(out: str) -> int | None:
    found = DRIVER.search(out)
    return int(found.group(1)) if found else None


def _load(path: str, table: str) -> str:
    result = seam_command(path, "load", "full", f"{DB}.{table}", timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not open(f"/proc/{pid}/stat").read().split(") ")[-1].startswith("Z")


def test_loads_share_a_driver_a_busy_one_sends_them_to_a_second_then_to_spark_submit_and_idle_ones_stop(
    stack, tmp_path_factory
):
    numbered_table(DB, "one", 60_000)
    # large enough that its load still runs when the next ones ask: 200,000 rows were done before, once loads
    # sent their rows many to a Kafka message
    _another_numbered_table(DB, "two", 1_000_000)
    _another_numbered_table(DB, "three", 60_000)
    spark = {**yaml.safe_load(open(load_pipeline().path))["spark"], "partitions": 2, "shared_driver_idle_s": 20}
    tables = [{"name": f"{DB}.{t}", "key": ["id"]} for t in ("one", "two", "three")]
    path = pipeline_file(tmp_path_factory, "driver", tables, spark={**spark, "shared_drivers": 2})
    one_driver = pipeline_file(tmp_path_factory, "driver_one", tables, spark={**spark, "shared_drivers": 1})
    pipeline = load_pipeline(path)

    first = _driver_pid(_load(path, "one"))
    second_out = _load(path, "one")
    assert first is not None and _driver_pid(second_out) == first, second_out  # the same application, no JVM start
    assert compare_pipeline(pipeline, DB, "one") is None

    # while the driver runs one load, the next goes to a second driver (started for it), and a load that may
    # use one driver only runs spark-submit beside it
    slow = _started(path, "two")
    assert slow.stdout is not None
    deadline = time.time() + 120
    seen = ""
    while "spark job" not in seen and time.time() < deadline:
        seen += slow.stdout.readline()
    assert _driver_pid(seen) == first, seen
    beside, submitted = _started(path, "one"), _started(one_driver, "three")
    beside_out, submitted_out = beside.communicate(timeout=600)[0], submitted.communicate(timeout=600)[0]
    assert beside.returncode == 0 and submitted.returncode == 0, beside_out[-3000:] + submitted_out[-3000:]
    second = _driver_pid(beside_out)
    assert second not in (None, first), beside_out
    assert "spark job pid" in submitted_out and _driver_pid(submitted_out) is None, submitted_out
    seen += slow.communicate(timeout=600)[0]
    assert slow.returncode == 0, seen
    for table in ("one", "two", "three"):
        assert compare_pipeline(pipeline, DB, table) is None

    # idle for spark.shared_driver_idle_s: both stop, their sockets and PID files with them
    identity = driver_identity(pipeline, {**os.environ, "PYSPARK_PYTHON": sys.executable})
    sockets = [stack.run_dir / f"spark-driver-{identity}.sock", stack.run_dir / f"spark-driver-{identity}-1.sock"]
    deadline = time.time() + 120
    while (_alive(first) or _alive(second)) and time.time() < deadline:
        time.sleep(0.5)
    assert not _alive(first) and not _alive(second), "an idle driver did not stop"
    for socket_path in sockets:
        assert not socket_path.exists() and not socket_path.with_suffix(".pid").exists()
    assert _driver_pid(_load(path, "one")) not in (None, first, second)  # the next load starts a new one


def _started(path: str, table: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{DB}.{table}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _another_numbered_table(db: str, table: str, rows: int) -> None:
    """A second numbered table in ``db`` (``numbered_table`` makes the database afresh)."""
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE `{db}`.`{table}` (id INT PRIMARY KEY, amount DECIMAL(18,2), note VARCHAR(100))")
            cur.execute(
                f"INSERT INTO `{db}`.`{table}` SELECT seq, seq + 0.5, REPEAT('y', 60) FROM `{db}`.seq_1_to_{rows}"
            )
        conn.commit()
    finally:
        conn.close()
