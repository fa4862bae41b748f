"""Every DAG imports cleanly, is tagged, retries, and does no I/O at parse time."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parents[2] / "dags"


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
    assert {"seam_wiring_check", "seam_full_load", "seam_incremental", "seam_stream", "seam_settlement"} <= set(
        dagbag.dag_ids
    )


PLANNING = {"tables", "windows", "plan"}  # they only check the Params: a typo fails at once, no retry
UNMAPPED = PLANNING | {"load_groups", "load_together"}  # plan or share the mapped loads; they retry


def test_dags_are_tagged_and_retry(dagbag):
    for dag_id, dag in dagbag.dags.items():
        assert "seam" in dag.tags, dag_id
        for task in dag.tasks:
            if task.task_id in PLANNING and dag_id != "seam_wiring_check":
                assert task.retries == 0, f"{dag_id}.{task.task_id} retries a bad Param"
            else:
                assert task.retries >= 1, f"{dag_id}.{task.task_id} has no retries"


def test_params_with_defaults_are_optional_and_mapped_tasks_named_by_table(dagbag):
    for dag_id in ("seam_full_load", "seam_incremental", "seam_validate"):
        dag = dagbag.dags[dag_id]
        for name, param in dag.params.items():
            schema = param.schema
            # a switch (boolean) with its default is optional too: the form shows a checkbox
            optional = param.value is None or param.value == [] or "null" in schema.get("type", [])
            assert optional or schema.get("type") == "boolean", (dag_id, name)
        for task in dag.tasks:
            if task.task_id not in UNMAPPED:
                assert getattr(task, "partial_kwargs", {}).get("map_index_template") == "{{ task.table }}", (
                    f"{dag_id}.{task.task_id}"
                )


def test_parsing_touches_no_network(monkeypatch):
    """DAG files are parsed every few seconds: they must not connect anywhere."""
    from airflow.dag_processing.dagbag import DagBag

    def refuse(*args, **kwargs):
        raise AssertionError("a DAG file opened a network connection at parse time")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
