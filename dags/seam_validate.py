"""Validation on a schedule: every hour, each table of the pipeline that has been
loaded (streamed tables above all) is compared with its source at a consistent
point: counts, checksums, the configured column checks, and the exact differing
rows. A mismatch fails that table's task and fires the pipeline's notifiers
(``notify:`` webhook and e-mail). Trigger from the UI to check chosen tables."""
from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task
from airflow.timetables.trigger import CronTriggerTimetable

from seam_airflow.hooks import SeamHook
from seam_airflow.operators import SeamValidateOperator

DEFAULT_ARGS = {"retries": 1, "retry_delay": pendulum.duration(seconds=30), "owner": "seam"}


@dag(schedule=CronTriggerTimetable("17 * * * *", timezone="UTC"), start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
     catchup=False, default_args=DEFAULT_ARGS, tags=["seam", "validation"], max_active_runs=1, doc_md=__doc__,
     params={"tables": Param([], type="array", items={"type": "string"},
                             description="db.table names; empty: every table of the pipeline loaded so far"),
             "pipeline": Param("", type="string", description="pipeline YAML path; empty: the default")})
def seam_validate():
    @task
    def tables(params=None) -> list[str]:
        from seam.validation import loaded_tables
        pipeline = SeamHook().load_pipeline(params.get("pipeline") or None)
        if params.get("tables"):
            return [pipeline.table(name).name for name in params["tables"]]
        return [t.name for t in loaded_tables(pipeline)]

    SeamValidateOperator.partial(task_id="validate", pipeline="{{ params.pipeline }}",
                                 max_active_tis_per_dagrun=2).expand(table=tables())


seam_validate()
