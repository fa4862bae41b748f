"""Incremental loads: each run loads the window of its data interval
(``data_interval_start`` < updated_at <= ``data_interval_end``, the end clamped
to the source's clock minus each table's safety delay) for every incremental
table, merged by key. ``airflow backfill create --dag-id seam_incremental
--from-date ... --to-date ...`` (re)loads past windows; a re-run window gives
the same target. From the UI, give an explicit window (start/end Params) and
the tables to load. One run at a time (max_active_runs=1), so windows of the
same table never overlap in time; tables of one run load in parallel. After the
loads, each window is validated (source against target, up to the watermark)."""

from __future__ import annotations

from airflow.sdk import Param, dag, task
from airflow.timetables.interval import CronDataIntervalTimetable

from seam_airflow.dag_defaults import DEFAULT_ARGS, START_DATE, pipeline_param, tables_param
from seam_airflow.hooks import SeamHook
from seam_airflow.operators import SeamIncrementalLoadOperator, SeamValidateOperator, seam_errors


# a data-interval timetable: each run covers [day, next day) (a plain "@daily" in Airflow 3 gives runs whose
# interval is a single point)
@dag(
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=START_DATE,
    catchup=False,
    default_args=DEFAULT_ARGS,
    tags=["seam", "incremental"],
    max_active_runs=1,
    doc_md=__doc__,
    params={
        "tables": tables_param("db.table names; empty: every incremental table of the pipeline"),
        "start": Param(None, type=["null", "string"], description="window start (exclusive); empty: the data interval"),
        "end": Param(None, type=["null", "string"], description="window end (inclusive); empty: the data interval"),
        "pipeline": pipeline_param(),
    },
)
def seam_incremental():
    @task(retries=0)
    def windows(params=None, data_interval_start=None, data_interval_end=None) -> list[dict]:
        with seam_errors():  # a typo in a Param: one line, no retry, before any load
            pipeline = SeamHook().load_pipeline(params.get("pipeline") or None)
            wanted = params.get("tables") or [t.name for t in pipeline.tables if t.sync == "windows"]
            names = [pipeline.table(name).name for name in wanted]
        start = params.get("start") or (data_interval_start and data_interval_start.isoformat())
        end = params.get("end") or (data_interval_end and data_interval_end.isoformat())
        return [{"table": name, "start": start, "end": end, "pipeline": pipeline.path} for name in names]

    planned = windows()
    loads = SeamIncrementalLoadOperator.partial(
        task_id="incremental_load", max_active_tis_per_dagrun=2, map_index_template="{{ task.table }}"
    ).expand_kwargs(planned)
    checks = SeamValidateOperator.partial(
        task_id="validate", max_active_tis_per_dagrun=2, map_index_template="{{ task.table }}"
    ).expand_kwargs(planned)
    loads >> checks


seam_incremental()
