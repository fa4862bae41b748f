"""The full-load DAG on the real Airflow standalone, triggered like a user would
from the UI (REST API, tables as a Param): each table is a mapped task whose
batch commits, and the targets equal their sources."""
from __future__ import annotations

import urllib.request

import psycopg
import pytest

from seam.airflow_api import AirflowClient
from tests.support.compare import diff, source_rows, target_rows

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def test_full_load_dag_loads_the_chosen_tables(airflow_stack, pipeline, seeded):
    client = AirflowClient.from_env()
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS seam")
        since = conn.execute("SELECT now()").fetchone()[0]
    run = client.trigger("seam_full_load", conf={"tables": ["demo.type_zoo", "accounts"]})
    state = client.wait("seam_full_load", run["dag_run_id"], timeout=900)
    tasks = client.task_states("seam_full_load", run["dag_run_id"])
    assert state == "success", tasks
    assert sorted(tasks) == ["full_load[demo.accounts]", "full_load[demo.type_zoo]", "load_groups", "tables",
                             "validate[demo.accounts]", "validate[demo.type_zoo]"]  # labelled by table
    assert {tasks["validate[demo.accounts]"], tasks["validate[demo.type_zoo]"]} == {"success"}  # validated equal
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        ledger = conn.execute("SELECT tbl, state FROM seam.batches WHERE opened_at >= %s ORDER BY tbl",
                              (since,)).fetchall()
    assert ledger == [("accounts", "committed"), ("type_zoo", "committed")]
    for table in ("type_zoo", "accounts"):
        src, schema = source_rows(pipeline, "demo", table)
        tgt = target_rows(pipeline, schema)
        assert src == tgt, diff(src, tgt)


def test_unknown_table_fails_before_any_load(airflow_stack, pipeline):
    """A typo in a Param fails the first task once (no retry), with one line naming it."""
    client = AirflowClient.from_env()
    run = client.trigger("seam_full_load", conf={"tables": ["demo.nope"]})
    state = client.wait("seam_full_load", run["dag_run_id"], timeout=300)
    assert state == "failed"
    assert client.task_states("seam_full_load", run["dag_run_id"])["tables"] == "failed"
    ti = client._request("GET", "/api/v2/dags/seam_full_load/dagRuns/" + urllib.request.quote(run["dag_run_id"]) + "/taskInstances/tables")
    assert ti["try_number"] == 1, ti


def test_params_are_optional_and_a_relative_pipeline_path_resolves(airflow_stack, pipeline, seeded):
    """No pipeline Param at all (the form's default), and the README's relative path, both load."""
    client = AirflowClient.from_env()
    run = client.trigger("seam_full_load", conf={"tables": ["demo.type_zoo"],
                                                 "pipeline": "include/pipelines/demo.yaml"})
    assert client.wait("seam_full_load", run["dag_run_id"], timeout=900) == "success", \
        client.task_states("seam_full_load", run["dag_run_id"])
