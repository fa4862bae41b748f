"""Wiring check: Spark reads every table of the pipeline from MySQL and the
counts land in the target. The first DAG to run on a new stack."""

from __future__ import annotations

from airflow.sdk import dag, task

from seam_airflow.dag_defaults import DEFAULT_ARGS, START_DATE
from seam_airflow.hooks import SeamHook
from seam_airflow.operators import SeamSparkJobOperator


@dag(
    schedule=None,
    start_date=START_DATE,
    catchup=False,
    default_args=DEFAULT_ARGS,
    tags=["seam", "wiring"],
    max_active_runs=1,
    params={"pipeline": ""},
    doc_md=__doc__,
)
def seam_wiring_check():
    @task
    def tables(params=None) -> list[list[str]]:
        pipeline = SeamHook().load_pipeline((params or {}).get("pipeline"))
        return [["--table", t.name] for t in pipeline.tables]

    @task
    def report(params=None) -> list[dict]:
        from seam.wiring import latest

        rows = latest(SeamHook().load_pipeline((params or {}).get("pipeline")))
        for name, count, checked_at in rows:
            print(f"{name}: {count} rows (checked {checked_at:%Y-%m-%d %H:%M:%S} UTC)")
        return [{"table": name, "rows": count} for name, count, _ in rows]

    counted = SeamSparkJobOperator.partial(
        task_id="count_rows",
        job="wiring_check",
        pipeline="{{ params.pipeline }}",
    ).expand(job_args=tables())
    counted >> report()


seam_wiring_check()
