"""Stream supervisor: keeps the pipeline's change reader and streaming sink running (they run detached,
outside worker slots), restarts a part that died from the positions stored in the target, and fails and
notifies when a part does not come up, a table is STOPPED or lags more than ``stream.max_lag_seconds``.
Runs every five minutes; trigger it with ``action`` start, stop or restart (a stop is kept: the scheduled
runs leave a stopped stream stopped until a start). Each run's log lists every table's lag."""

from __future__ import annotations

from airflow.sdk import Param, dag

from seam_airflow.dag_defaults import DEFAULT_ARGS, START_DATE, pipeline_param, tables_param
from seam_airflow.operators import SeamStreamOperator

# a problem it finds (a table STOPPED, lag over the bound) fails at once; a glitch (target unreachable) retries


@dag(
    schedule="*/5 * * * *",
    start_date=START_DATE,
    catchup=False,
    default_args=DEFAULT_ARGS,
    tags=["seam", "stream"],
    max_active_runs=1,
    doc_md=__doc__,
    render_template_as_native_obj=True,
    params={
        "action": Param(
            "ensure",
            enum=["ensure", "start", "stop", "restart"],
            description="ensure: start what is down; start, stop or restart the stream",
        ),
        "tables": tables_param("db.table names the stream follows; empty: every streamed table"),
        "pipeline": pipeline_param(),
    },
)
def seam_stream():
    SeamStreamOperator(
        task_id="supervise",
        action="{{ params.action }}",
        tables="{{ params.tables }}",
        pipeline="{{ params.pipeline or '' }}",
    )


seam_stream()
