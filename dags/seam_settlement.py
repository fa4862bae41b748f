"""Nightly settlement: on the schedule and in the time zone of the pipeline's ``settlement:`` section (for
example 02:00 Asia/Shanghai), each settlement table's previous business day is settled: a table kept current
by windows loads that day's window, a streamed table must have applied the source past the day's end; then
the day is validated with the table's checks (sums of amounts agree to the cent). Success emits the table's
Asset (``seam://<pipeline>/<db>/<table>``, through the ``seam_settlement`` alias) for downstream DAGs; a mismatch fails the run and notifies.
``airflow backfill create --dag-id seam_settlement --from-date ... --to-date ...`` settles past days; from the
UI, give the business ``day`` to settle (empty: the run's previous business day)."""

from __future__ import annotations

import pendulum
from airflow.sdk import AssetAlias, Param, dag, task
from airflow.timetables.trigger import CronTriggerTimetable

from seam import settlement as settlement_section
from seam.config import DEFAULT_PIPELINE
from seam_airflow.dag_defaults import DEFAULT_ARGS, pipeline_param, repair_param
from seam_airflow.hooks import SeamHook
from seam_airflow.operators import SeamSettlementOperator, seam_errors

SETTLEMENT_ARGS = {**DEFAULT_ARGS, "retries": 3, "retry_delay": pendulum.duration(minutes=5)}
# the schedule and time zone are the default pipeline's (a local file read, without its secrets)
SETTLEMENT = settlement_section.read(DEFAULT_PIPELINE)


@dag(
    schedule=CronTriggerTimetable(SETTLEMENT.schedule, timezone=SETTLEMENT.timezone) if SETTLEMENT else None,
    start_date=pendulum.datetime(2026, 1, 1, tz=SETTLEMENT.timezone if SETTLEMENT else "UTC"),
    catchup=False,
    default_args=SETTLEMENT_ARGS,
    tags=["seam", "settlement"],
    max_active_runs=1,
    doc_md=__doc__,
    params={
        "day": Param(
            None,
            type=["null", "string"],
            description="business day to settle, YYYY-MM-DD; empty: the run's previous business day",
        ),
        "repair": repair_param(),
        "pipeline": pipeline_param(),
    },
)
def seam_settlement():
    @task(retries=0)
    def plan(params=None, logical_date=None, dag_run=None) -> list[dict]:
        import datetime as dt

        from seam.config import ConfigError

        with seam_errors():  # a typo in a Param: one line, no retry, before any load
            pipeline = SeamHook().load_pipeline(params.get("pipeline") or None)
            section = pipeline.settlement
            if section is None:
                raise ConfigError(
                    "settlement", "the pipeline has no settlement section (schedule, timezone, tables)", pipeline.path
                )
            if params.get("day"):
                try:
                    day = dt.date.fromisoformat(params["day"])
                except ValueError:
                    raise ConfigError("day", f"{params['day']!r} is not a date (YYYY-MM-DD)") from None
            else:
                day = section.settled_day(logical_date or dag_run.run_after)
        start, end = section.window(day)
        print(
            f"settling business day {day} ({section.timezone}): cursor window ({start}, {end}] in "
            f"{section.source_timezone}"
        )
        return [
            {
                "table": pipeline.table(name).name,
                "day": day.isoformat(),
                "start": start,
                "end": end,
                "day_end": section.day_end(day).isoformat(),
                "pipeline": pipeline.path,
                "repair": bool(params.get("repair")),
            }
            for name in section.tables
        ]

    SeamSettlementOperator.partial(
        task_id="settle", map_index_template="{{ task.table }}", outlets=[AssetAlias(SeamSettlementOperator.ALIAS)]
    ).expand_kwargs(plan())


seam_settlement()
