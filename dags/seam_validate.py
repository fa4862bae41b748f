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
from seam_airflow.operators import SeamValidateOperator, seam_errors

DEFAULT_ARGS = {"retries": 1, "retry_delay": pendulum.duration(seconds=30), "owner": "seam"}


@dag(
    schedule=CronTriggerTimetable("17 * * * *", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args=DEFAULT_ARGS,
    tags=["seam", "validation"],
    max_active_runs=1,
    doc_md=__doc__,
    params={
        "tables": Param(
            [],
            type="array",
            items={"type": "string"},
            description="db.table names; empty: every table of the pipeline loaded so far",
        ),
        "repair": Param(
            False,
            type="boolean",
            description="on a mismatch, repair the table (seam repair: only the rows that differ, up to the "
            "pipeline's repair.max_rows), validate again, and notify with what was repaired",
        ),
        "pipeline": Param(
            None,
            type=["null", "string"],
            description="pipeline YAML path (absolute, or relative to the project); empty: the default",
        ),
    },
)
def seam_validate():
    @task(retries=0)
    def tables(params=None) -> list[dict]:
        from seam.validate.validation import loaded_tables

        with seam_errors():  # a typo in a Param: one line, no retry
            pipeline = SeamHook().load_pipeline(params.get("pipeline") or None)
            names = (
                [pipeline.table(name).name for name in params["tables"]]
                if params.get("tables")
                else [t.name for t in loaded_tables(pipeline)]
            )
        return [{"table": name, "pipeline": pipeline.path, "repair": bool(params.get("repair"))} for name in names]

    SeamValidateOperator.partial(
        task_id="validate", max_active_tis_per_dagrun=2, map_index_template="{{ task.table }}"
    ).expand_kwargs(tables())


seam_validate()
