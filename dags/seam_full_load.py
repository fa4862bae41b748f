"""Full load: a consistent snapshot of each table (at one binlog position)
replaces its target table atomically. Trigger from the UI with the tables to
load (empty: every table of the pipeline). The tables load together in one
Spark application (`load_together`); each table is then its own mapped task
(a table that a cascade reaches through another loaded table shares its
task, loaded after it), which reports its table's batch, or loads the table
itself when the shared load did not commit it (a retry resumes its open
batch); each is validated after the loads (a mismatch fails the run and
notifies)."""

from __future__ import annotations

from airflow.sdk import dag, task

from seam_airflow.dag_defaults import DEFAULT_ARGS, START_DATE, pipeline_param, tables_param
from seam_airflow.hooks import SeamHook
from seam_airflow.operators import (
    SeamFullLoadOperator,
    SeamLoadTogetherOperator,
    SeamValidateOperator,
    seam_errors,
)


@dag(
    schedule=None,
    start_date=START_DATE,
    catchup=False,
    default_args=DEFAULT_ARGS,
    tags=["seam", "full-load"],
    max_active_runs=1,
    doc_md=__doc__,
    params={
        "tables": tables_param("db.table names; empty loads every table of the pipeline"),
        "pipeline": pipeline_param(),
    },
)
def seam_full_load():
    @task(retries=0)
    def tables(params=None) -> list[dict]:
        with seam_errors():  # a typo in a Param: one line, no retry, before any load
            pipeline = SeamHook().load_pipeline(params.get("pipeline") or None)
            wanted = params.get("tables") or [t.name for t in pipeline.tables]
            return [{"table": pipeline.table(name).name, "pipeline": pipeline.path} for name in wanted]

    @task
    def load_groups(planned: list[dict]) -> list[dict]:
        """A table that a cascade reaches through another loaded table loads in one task with it, parents
        first: the level below must be loaded at or after the level above (seam.source.cascades)."""
        from seam.loads import cascade_groups

        if not planned:
            return []
        with seam_errors():
            pipeline = SeamHook().load_pipeline(planned[0]["pipeline"])
            groups = cascade_groups(pipeline, [pipeline.table(p["table"]) for p in planned])
        return [{"table": g[0].name, "with_tables": [t.name for t in g[1:]], "pipeline": pipeline.path} for g in groups]

    planned = tables()
    # every table in one Spark application (one JVM start for a schema of hundreds); each table's own task
    # then reports its table, or loads it itself if the shared load did not commit it
    together = SeamLoadTogetherOperator(task_id="load_together", tables_from="tables")
    planned >> together
    loads = SeamFullLoadOperator.partial(
        task_id="full_load",
        max_active_tis_per_dagrun=2,
        map_index_template="{{ task.table }}",
        loaded_by="load_together",
        trigger_rule="all_done",  # a failed shared load leaves its tables to their own tasks
    ).expand_kwargs(load_groups(planned))
    together >> loads
    checks = SeamValidateOperator.partial(
        task_id="validate", max_active_tis_per_dagrun=2, map_index_template="{{ task.table }}"
    ).expand_kwargs(planned)
    loads >> checks


seam_full_load()
