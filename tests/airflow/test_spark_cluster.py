"""Scale-out: the same DAGs on a Spark standalone cluster, by changing only the ``seam_spark`` connection.
A master and a worker are started with pyspark's own ``spark-class`` on this machine; ``seam_full_load``
loads a table through it (spark-submit by the apache-spark provider) and ``seam_stream`` runs the streaming
sink on it; the cluster's own API shows both applications, and the target equals the source."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark
import pytest

from seam.config import load_pipeline
from seam_dev import demo
from tests.support.airflow import run_dag
from tests.support.commands import run_command
from tests.support.compare import diff, source_rows, target_rows
from tests.support.pipelines import pipeline_file
from tests.support.secrets import watching_command_lines
from tests.support.source import fresh_database

DB = "cluster_test"
pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster_state(ui: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as resp:
        return json.load(resp)


def _app_listed(ui: int, name: str, where: str, limit_s: float = 60) -> dict:
    """The master's state once app ``name`` is among its ``where`` apps (the master moves an app to its
    completed ones moments after the driver exits), or as it is at the limit."""
    deadline = time.monotonic() + limit_s
    while True:
        state = _cluster_state(ui)
        if name in [a["name"] for a in state[where]] or time.monotonic() > deadline:
            return state
        time.sleep(1)


@pytest.fixture()
def spark_cluster(tmp_path):
    """A standalone master and one worker (2 cores) from pyspark's ``spark-class``; yields the master URL
    and its web UI port, and stops both."""
    home = Path(pyspark.__file__).parent
    port, ui = _free_port(), _free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(tmp_path),
        "SPARK_LOG_DIR": str(tmp_path),
        "PYSPARK_PYTHON": sys.executable,
    }
    spark_class = str(home / "bin" / "spark-class")
    master = f"spark://127.0.0.1:{port}"
    procs = [
        subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            env=env,
            start_new_session=True,
            stdout=open(tmp_path / "master.log", "wb"),
            stderr=subprocess.STDOUT,
        )
    ]
    procs.append(
        subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "3g",
                "--webui-port",
                str(_free_port()),
                master,
            ],
            env=env,
            start_new_session=True,
            stdout=open(tmp_path / "worker.log", "wb"),
            stderr=subprocess.STDOUT,
        )
    )
    try:
        deadline = time.monotonic() + 120
        while True:  # a condition, not a time: the master reports the worker alive
            try:
                if _cluster_state(ui).get("aliveworkers", 0) >= 1:
                    break
            except (OSError, json.JSONDecodeError):  # not up; or, once while starting, an HTML page for the JSON
                pass
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-3000:]
            assert all(p.poll() is None for p in procs), (tmp_path / "master.log").read_text()[-3000:]
            time.sleep(1)
        yield {"master": master, "host": "spark://127.0.0.1", "port": port, "ui": ui}
    finally:
        for p in procs:
            os.killpg(p.pid, 15)
        for p in procs:
            p.wait(timeout=60)


def _seam(path: str, *args: str) -> subprocess.CompletedProcess:
    return run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True, timeout=600
    )


def test_full_load_and_streaming_sink_run_on_a_standalone_cluster(airflow_stack, spark_cluster, tmp_path_factory):
    fresh_database(
        DB,
        f"CREATE TABLE `{DB}`.ledger (id INT PRIMARY KEY, amount DECIMAL(18,2), note VARCHAR(20))",
        f"INSERT INTO `{DB}`.ledger SELECT seq, seq * 1.25, 'old' FROM `{DB}`.seq_1_to_5000",
    )
    path = pipeline_file(
        tmp_path_factory,
        "cluster",
        [{"name": f"{DB}.ledger", "key": ["id"]}],
        pipeline_name="cluster",
        stream={
            "log_dir": str(tmp_path_factory.mktemp("cluster-logs")),
            "sink": "spark",
        },  # the Structured Streaming sink
    )
    pipeline = load_pipeline(path)
    assert pipeline.spark.master.startswith("local"), "only the connection may point at the cluster"
    # the one change: the seam_spark connection (as `airflow connections` or a secrets backend would hold it)
    conn_env = {
        "AIRFLOW_CONN_SEAM_SPARK": json.dumps(
            {"conn_type": "spark", "host": spark_cluster["host"], "port": spark_cluster["port"]}
        )
    }

    passwords = [os.environ["SEAM_MYSQL_PASSWORD"], os.environ["SEAM_TARGET_PASSWORD"]]
    with watching_command_lines(passwords) as shown:  # no password in any process's arguments (`ps`)
        _load_and_stream(airflow_stack, spark_cluster, path, pipeline, conn_env)
    assert shown == [], shown[:3]


def _load_and_stream(airflow_stack, spark_cluster, path: str, pipeline, conn_env: dict) -> None:
    loaded = run_dag(airflow_stack, "seam_full_load", {"tables": [f"{DB}.ledger"], "pipeline": path}, env=conn_env)
    assert loaded["state"] == "success", loaded["log"][-5000:]
    assert loaded["tasks"]["validate[0]"] == "success"
    apps = _app_listed(spark_cluster["ui"], "seam-full-load", "completedapps")
    assert "seam-full-load" in [a["name"] for a in apps["completedapps"]], apps

    started = run_dag(airflow_stack, "seam_stream", {"action": "start", "pipeline": path}, env=conn_env)
    try:
        assert started["state"] == "success", started["log"][-5000:]
        conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO ledger SELECT seq, seq * 0.5, 'new' FROM seq_5001_to_5500")
            cur.execute("UPDATE ledger SET amount = amount + 1, note = 'moved' WHERE id % 7 = 0")
            cur.execute("DELETE FROM ledger WHERE id % 11 = 0")
        conn.close()
        caught = _seam(path, "stream", "wait", "--timeout", "300")
        assert caught.returncode == 0, caught.stdout + caught.stderr
        apps = _app_listed(spark_cluster["ui"], "seam-stream-sink", "activeapps")
        assert "seam-stream-sink" in [a["name"] for a in apps["activeapps"]], apps  # the sink runs on the cluster
        src, schema = source_rows(pipeline, DB, "ledger")
        tgt = target_rows(pipeline, schema)
        assert len(src) == 5500 - 500 and src == tgt, diff(src, tgt)
    finally:
        stopped = run_dag(airflow_stack, "seam_stream", {"action": "stop", "pipeline": path}, env=conn_env)
    assert stopped["state"] == "success", stopped["log"][-5000:]
