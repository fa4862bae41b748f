"""The wiring-check DAG on the real Airflow standalone, triggered like a user
would (REST API): Spark counts each MariaDB table and the counts land in PostgreSQL."""

from __future__ import annotations

import os

import pytest

from seam.config import load_pipeline
from seam.wiring import latest
from seam_dev.airflow_api import AirflowClient
from seam_dev.demo import connect
from tests.support.pipelines import pipeline_file

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def test_wiring_dag_run_succeeds_and_counts_match_source(airflow_stack, seeded, tmp_path_factory):
    path = pipeline_file(
        tmp_path_factory, "wiring", [{"name": "demo.accounts", "key": ["id"]}, {"name": "demo.type_zoo", "key": ["id"]}]
    )
    pipeline = load_pipeline(path)
    client = AirflowClient.from_env()
    run = client.trigger("seam_wiring_check", conf={"pipeline": path})
    state = client.wait("seam_wiring_check", run["dag_run_id"], timeout=600)
    tasks = client.task_states("seam_wiring_check", run["dag_run_id"])
    assert state == "success", tasks
    assert sorted(tasks) == ["count_rows[0]", "count_rows[1]", "report", "tables"]

    admin = connect(os.environ["SEAM_MYSQL_URL"])
    with admin.cursor() as cur:
        expected = {}
        for t in pipeline.tables:
            cur.execute(f"SELECT COUNT(*) FROM `{t.db}`.`{t.table}`")
            expected[t.name] = cur.fetchone()[0]
    admin.close()
    assert {name: rows for name, rows, _ in latest(pipeline) if name in expected} == expected


def test_airflow_has_the_seam_connections_and_auth_is_on(airflow_stack):
    import json
    import urllib.error
    import urllib.request

    base = os.environ["SEAM_AIRFLOW_URL"]
    with pytest.raises(urllib.error.HTTPError) as err:  # no token: refused
        urllib.request.urlopen(f"{base}/api/v2/dags", timeout=10)
    assert err.value.code in (401, 403)
    client = AirflowClient.from_env()
    dags = client._request("GET", "/api/v2/dags?tags=seam")
    assert "seam_wiring_check" in {d["dag_id"] for d in dags["dags"]}
    # the connections the project created resolve inside Airflow
    import subprocess

    from seam_dev.stack import venv_bin

    out = subprocess.run(
        [str(venv_bin() / "airflow"), "connections", "get", "seam_mysql", "-o", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, **airflow_stack.airflow_env()},
    )
    conn = json.loads(out.stdout)[0] if out.returncode == 0 else {}
    assert conn.get("conn_type") == "mysql" and conn.get("login") == "seam", out.stderr[-500:]
