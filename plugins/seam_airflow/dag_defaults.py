"""What Seam's DAG files share: their default task arguments and the Params every DAG takes the same way."""

from __future__ import annotations

import pendulum
from airflow.sdk import Param

DEFAULT_ARGS = {"retries": 1, "retry_delay": pendulum.duration(seconds=30), "owner": "seam"}
START_DATE = pendulum.datetime(2026, 1, 1, tz="UTC")


def pipeline_param() -> Param:
    return Param(
        None,
        type=["null", "string"],
        description="pipeline YAML path (absolute, or relative to the project); empty: the default",
    )


def tables_param(description: str) -> Param:
    return Param([], type="array", items={"type": "string"}, description=description)


def repair_param() -> Param:
    return Param(
        False,
        type="boolean",
        description="on a mismatch, repair the table (seam repair: only the rows that differ, up to the "
        "pipeline's repair.max_rows), validate again, and notify with what was repaired",
    )
