"""Validation on a schedule: every hour, each table of the pipeline that has been
loaded (streamed tables above all) is compared with its source at a consistent
point: counts, checksums, the configured column checks, and the exact differing
rows. A mismatch fails that table's task and fires the pipeline's notifiers
(``notify:`` webhook and e-mail). Trigger from the UI to check chosen tables."""

from __future__ import annotations

from airflow.sdk import dag, task
from airflow.timetables.trigger import CronTriggerTimetable

from seam_airflow.dag_defaults import DEFAULT_ARGS, START_DATE, pipeline_param, repair_param, tables_param
from seam_airflow.hooks import SeamHook
from seam_airflow.operators import SeamValidateOperator, seam_errors


@dag(
    schedule=CronTriggerTimetable("17 * * * *", timezone="UTC"),
    start_date=START_DATE,
    catchup=False,
    default_args=DEFAULT_ARGS,
    tags=["seam", "validation"],
    max_active_runs=1,
    doc_md=__doc__,
    params={
        "tables": tables_param("db.table names; empty: every table of the pipeline loaded so far"),
        "repair": repair_param(),
        "pipeline": pipeline_param(),
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
