"""Full load: a consistent snapshot of each table (at one binlog position)
replaces its target table atomically. Trigger from the UI with the tables to
load (empty: every table of the pipeline); each table is its own mapped task,
and each is validated after the loads (a mismatch fails the run and notifies)."""
from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

from seam_airflow.hooks import SeamHook
from seam_airflow.operators import SeamFullLoadOperator, SeamValidateOperator

DEFAULT_ARGS = {"retries": 1, "retry_delay": pendulum.duration(seconds=30), "owner": "seam"}


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
     default_args=DEFAULT_ARGS, tags=["seam", "full-load"], max_active_runs=1, doc_md=__doc__,
     params={"tables": Param([], type="array", items={"type": "string"},
                             description="db.table names; empty loads every table of the pipeline"),
             "pipeline": Param("", type="string", description="pipeline YAML path; empty: the default")})
def seam_full_load():
    @task
    def tables(params=None) -> list[str]:
        pipeline = SeamHook().load_pipeline(params.get("pipeline") or None)
        wanted = params.get("tables") or [t.name for t in pipeline.tables]
        return [pipeline.table(name).name for name in wanted]  # unknown names fail here, before any load

    names = tables()
    loads = SeamFullLoadOperator.partial(task_id="full_load", pipeline="{{ params.pipeline }}",
                                         max_active_tis_per_dagrun=2).expand(table=names)
    checks = SeamValidateOperator.partial(task_id="validate", pipeline="{{ params.pipeline }}",
                                          max_active_tis_per_dagrun=2).expand(table=names)
    loads >> checks


seam_full_load()
