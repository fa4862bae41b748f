"""The full-load DAG on the real Airflow standalone, triggered through the REST API: a typo in a table Param
fails the first task once, and a run without Params or with a relative pipeline path loads. (Loading chosen
tables from the trigger form, each validated and equal to its source: tests/ui/test_airflow_ui.py.)"""

from __future__ import annotations

import urllib.request

import pytest

from seam_dev.airflow_api import AirflowClient

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def test_unknown_table_fails_before_any_load(airflow_stack, pipeline):
    """A typo in a Param fails the first task once (no retry), with one line naming it."""
    client = AirflowClient.from_env()
    run = client.trigger("seam_full_load", conf={"tables": ["demo.nope"]})
    state = client.wait("seam_full_load", run["dag_run_id"], timeout=300)
    assert state == "failed"
    assert client.task_states("seam_full_load", run["dag_run_id"])["tables"] == "failed"
    ti = client._request(
        "GET",
        "/api/v2/dags/seam_full_load/dagRuns/" + urllib.request.quote(run["dag_run_id"]) + "/taskInstances/tables",
    )
    assert ti["try_number"] == 1, ti


def test_params_are_optional_and_a_relative_pipeline_path_resolves(airflow_stack, pipeline, seeded):
    """No pipeline Param at all (the form's default), and the README's relative path, both load."""
    client = AirflowClient.from_env()
    run = client.trigger(
        "seam_full_load", conf={"tables": ["demo.type_zoo"], "pipeline": "include/pipelines/demo.yaml"}
    )
    assert client.wait("seam_full_load", run["dag_run_id"], timeout=900) == "success", client.task_states(
        "seam_full_load", run["dag_run_id"]
    )
