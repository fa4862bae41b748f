"""docker-compose.yaml: valid for Compose, and its endpoints are the ones the
demo pipeline resolves to through Seam's Airflow connections."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SECRETS = {
    "MYSQL_ROOT_PASSWORD": "r",
    "SEAM_MYSQL_PASSWORD": "m",
    "SEAM_TARGET_PASSWORD": "t",
    "AIRFLOW_DB_PASSWORD": "a",
    "AIRFLOW_JWT_SECRET": "j",
}


@pytest.fixture(scope="module")
def compose() -> dict:
    binary = shutil.which("docker-compose")
    assert binary, "docker-compose (Debian package) is installed by `make setup`"
    proc = subprocess.run(
        [binary, "-f", str(ROOT / "docker-compose.yaml"), "config"],
        capture_output=True,
        text=True,
        env={**os.environ, **SECRETS},
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(proc.stdout)


def test_secrets_are_required_not_defaulted():
    env = {k: v for k, v in os.environ.items() if k not in SECRETS}
    proc = subprocess.run(
        ["docker-compose", "-f", str(ROOT / "docker-compose.yaml"), "config"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode != 0 and "set " in proc.stderr
    text = (ROOT / "docker-compose.yaml").read_text()
    assert not re.search(r"PASSWORD:\s*['\"]?[a-z]", text.replace("${", "")), "no literal passwords"


def test_services_of_the_deployment_stack(compose):
    services = compose["services"]
    assert services["mysql"]["image"].startswith("mysql:8.4")
    assert services["kafka"]["image"].startswith("apache/kafka")
    assert "broker,controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]  # KRaft, no ZooKeeper
    assert not any("zookeeper" in name for name in services)
    command = services["mysql"]["command"]
    for flag in ("--binlog-format=ROW", "--binlog-row-image=FULL", "--binlog-row-metadata=FULL"):
        assert flag in command
    for name in (
        "spark-master",
        "spark-worker",
        "postgres",
        "airflow-api-server",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
    ):
        assert name in services
    mounts = {v.split(":")[1] if isinstance(v, str) else v["target"] for v in services["airflow-scheduler"]["volumes"]}
    assert {"/opt/seam/dags", "/opt/seam/plugins", "/opt/seam/include", "/opt/seam/spark_jobs"} <= mounts


def test_pipeline_resolves_to_the_compose_endpoints(compose):
    from airflow.models.connection import Connection

    from seam.config import load_pipeline
    from seam_airflow.hooks import job_env_from

    services = compose["services"]
    env = services["airflow-scheduler"]["environment"]
    conns = {
        name: Connection.from_json(env[f"AIRFLOW_CONN_SEAM_{name.upper()}"], conn_id=f"seam_{name}")
        for name in ("mysql", "kafka", "target", "spark")
    }
    pipeline = load_pipeline(
        env={
            **job_env_from(conns["mysql"], conns["kafka"], conns["target"]),
            "SEAM_SPARK_MASTER": env["SEAM_SPARK_MASTER"],
        }
    )

    assert pipeline.source.host in services and pipeline.source.host == "mysql"
    assert pipeline.source.port == 3306 and pipeline.source.user == "seam"
    assert pipeline.source.password.reveal() == SECRETS["SEAM_MYSQL_PASSWORD"]

    host, port = pipeline.kafka.bootstrap.split(":")
    assert host in services
    assert f"PLAINTEXT://{host}:{port}" in services[host]["environment"]["KAFKA_ADVERTISED_LISTENERS"]

    assert pipeline.target.host in services and pipeline.target.port == 5432
    pg_env = services[pipeline.target.host]["environment"]
    assert (pipeline.target.database, pipeline.target.user) == (pg_env["POSTGRES_DB"], pg_env["POSTGRES_USER"])
    assert pipeline.target.password.reveal() == pg_env["POSTGRES_PASSWORD"]

    master = pipeline.spark.master
    assert master == f"{conns['spark'].host}:{conns['spark'].port}" == "spark://spark-master:7077"
    assert "7077" in json.dumps(services["spark-master"]["command"])
    assert master in services["spark-worker"]["command"]
