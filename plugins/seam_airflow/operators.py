"""Thin operators: the Seam library does the work, these hand it Airflow's connections.

Its size: one thin operator per kind of DAG task (Spark job, full load, incremental, validate, stream
supervisor, settlement) with the shared bad-input and notify helpers.

The library is imported inside ``execute`` (here and in the DAG files' task callables): the scheduler and the
DAG processor import these files again and again, and a task needs the binlog reader, Kafka and Spark's
helpers only when it runs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator
from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction, RetryRule

from seam_airflow.hooks import SeamHook
from seam_airflow.links import ValidationReportLink


class BadInput(SystemExit):
    """A bad pipeline, table name or Param. A SystemExit, so that Airflow ends the task with the line logged
    before it and "Task exited", not with a traceback; ``BAD_INPUT_FAILS`` keeps it from being retried."""

    def __init__(self, line: str) -> None:
        super().__init__(2)
        self.line = line


# every Seam operator's retry policy (tasks of the DAG files that check Params have retries=0)
BAD_INPUT_FAILS = ExceptionRetryPolicy(
    rules=[RetryRule(exception=BadInput, action=RetryAction.FAIL, reason="bad input: fix it and trigger again")]
)


@contextmanager
def seam_errors():
    """Seam's own errors end the task with their one line and no traceback: at once (no retry) when trying
    again cannot help (a typo in a Param, a table without a key, a divergence), retried by Airflow when it may
    (a server down, a lock held, a load that resumes)."""
    from airflow.sdk.exceptions import AirflowException

    from seam.core.errors import SeamError, one_line

    try:
        yield
    except SeamError as exc:
        line = f"bad input: {exc}" if exc.kind == "configuration" else one_line(exc)
        logging.getLogger("airflow.task").error("%s", line)
        if not exc.retry:
            raise BadInput(line) from None
        raise AirflowException(line) from None


DEFAULT_JDBC_JAR = "/usr/share/java/mariadb-java-client.jar"


class SeamSparkJobOperator(SparkSubmitOperator):
    """Run ``spark_jobs/<job>.py`` with the pipeline and job arguments.

    Endpoints and credentials come from :class:`SeamHook` at execute time, into
    the spark-submit environment only: not into rendered task fields, and not into ``env_vars``, which the
    provider turns into ``--conf spark.yarn.appMasterEnv.*`` (or ``spark.kubernetes.driverEnv.*``) arguments,
    readable in ``ps`` by every user of the machine. The driver runs in client mode and reads them there.
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "job_args", "pipeline")

    def __init__(
        self,
        *,
        job: str,
        pipeline: str | None = None,
        job_args: list[str] | None = None,
        conn_id: str = "seam_spark",
        mysql_conn_id: str = "seam_mysql",
        kafka_conn_id: str = "seam_kafka",
        target_conn_id: str = "seam_target",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("name", f"seam-{job}")
        kwargs.setdefault("jars", os.environ.get("SEAM_JDBC_JAR", DEFAULT_JDBC_JAR))
        from seam.spark import spark_job_script

        super().__init__(application=spark_job_script(job), conn_id=conn_id, **kwargs)
        self.job = job
        self.pipeline = pipeline
        self.job_args = job_args or []
        self.hook_conn_ids = dict(
            mysql_conn_id=mysql_conn_id,
            kafka_conn_id=kafka_conn_id,
            target_conn_id=target_conn_id,
            spark_conn_id=conn_id,
        )

    @seam_errors()
    def execute(self, context) -> None:
        self.application_args = [*(["--pipeline", self.pipeline] if self.pipeline else []), *self.job_args]
        # this task's own process: its environment is inherited by spark-submit and dies with the task
        os.environ.update(SeamHook(**self.hook_conn_ids).job_env())
        return super().execute(context)


class ProviderSpark:
    """A load's Spark job through the apache-spark provider: ``SparkSubmitHook`` with the ``seam_spark``
    connection (its master: local[*] on the embedded stack, spark:// in docker-compose, yarn, k8s), run in a
    thread so that the load can watch the ledger meanwhile. A job here is ``seam.load_run.SparkSubmit``'s.

    The environment (credentials included) goes to the spark-submit process itself, never through the hook's
    ``env_vars``, which become ``--conf`` arguments on YARN and Kubernetes."""

    def __init__(self, conn_id: str, env: dict[str, str]) -> None:
        self.conn_id, self.env = conn_id, env

    def __call__(self, job: str, args: list[str]) -> _ProviderJob:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        from seam.spark import spark_job_script, submit_conf

        hook = SparkSubmitHook(
            conn_id=self.conn_id,
            name=f"seam-{job}",
            conf=submit_conf(),
            jars=self.env.get("SEAM_JDBC_JAR", DEFAULT_JDBC_JAR),
            application_args=args,
        )
        return _ProviderJob(hook, spark_job_script(job), self.env)


def load_runner(task, hook: SeamHook):
    """How a load runs in an Airflow task: its processes get the connections' variables (this process's
    environment stays as it is), their lines go to the task log, Spark runs through the ``seam_spark``
    connection, and what runs is in ``task._started`` for on_kill."""
    from seam.load_run import Runner, job_env

    env = hook.job_env()
    return Runner(
        env=env,
        say=task.log.info,
        log=task.log,
        submit=ProviderSpark(task.spark_conn_id, job_env(env)),
        timeout=task.timeout,
        children=task._started,
        stopped=task._kill.killed,
        lock=task._kill.lock,
    )


class _ProviderJob:
    def __init__(self, hook, application: str, env: dict[str, str]) -> None:
        import threading

        self.hook = hook
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._run, args=(application, env), name="spark-submit", daemon=True)
        self.thread.start()

    def _run(self, application: str, env: dict[str, str]) -> None:
        try:
            # its own session: stop() takes the JVM and the Python driver under it together
            self.hook.submit(application, start_new_session=True, env=env)
        except Exception as exc:  # noqa: BLE001 - the load reports the failed job; the hook logged its output
            self.error = exc

    @property
    def pid(self) -> int | None:
        proc = getattr(self.hook, "_submit_sp", None)
        return proc.pid if proc is not None else None

    def poll(self) -> int | None:
        return None if self.thread.is_alive() else (1 if self.error else 0)

    def stop(self, grace_s: float = 30.0) -> None:
        import signal

        self.hook.on_kill()  # the provider's own kill (a driver on a cluster, a YARN application)
        if self.pid is not None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.thread.join(timeout=grace_s)


class KillSwitch:
    """What a task's on_kill sets, under the lock its load starts each process with (``seam.load_run.Runner``):
    no process is started after it. Copies of the task (Airflow deep-copies operators) share it."""

    def __init__(self) -> None:
        self.killed = threading.Event()
        self.lock = threading.Lock()

    def __copy__(self) -> KillSwitch:
        return self

    def __deepcopy__(self, memo) -> KillSwitch:
        return self


class SeamOperator(BaseOperator):
    """What every Seam operator shares: the pipeline file (``pipeline``, templated), the Airflow connections
    its hook reads (``*_conn_id``), the retry policy that fails bad input at once, and ``on_kill`` stopping
    what the task started (``_started``: a load's Spark job and sink). Subclasses add their own fields."""

    template_fields: Sequence[str] = ("pipeline",)

    def __init__(
        self,
        *,
        pipeline: str | None = None,
        mysql_conn_id: str = "seam_mysql",
        kafka_conn_id: str = "seam_kafka",
        target_conn_id: str = "seam_target",
        spark_conn_id: str = "seam_spark",
        **kwargs: Any,
    ) -> None:
        super().__init__(**{"retry_policy": BAD_INPUT_FAILS, **kwargs})
        self.pipeline = pipeline
        self.spark_conn_id = spark_conn_id
        self.hook_conn_ids = dict(
            mysql_conn_id=mysql_conn_id,
            kafka_conn_id=kafka_conn_id,
            target_conn_id=target_conn_id,
            spark_conn_id=spark_conn_id,
        )
        self._started: list = []
        self._kill = KillSwitch()

    def seam_hook(self) -> SeamHook:
        return SeamHook(**self.hook_conn_ids)

    def load_pipeline(self, hook: SeamHook | None = None):
        """The pipeline file, its ``${SEAM_...}`` references filled from the connections."""
        return (hook or self.seam_hook()).load_pipeline(self.pipeline or None)

    def on_kill(self) -> None:
        with self._kill.lock:  # a process the load starts from now on is stopped by the load itself
            self._kill.killed.set()
            started = list(self._started)
        stop_started(started, self.log)


class SeamFullLoadOperator(SeamOperator):
    """Full load of one pipeline table (``seam load full``): Spark snapshot -> Kafka -> sink -> PostgreSQL.
    ``with_tables`` load in the same run, ordered parents first (the levels below a cascade's middle level).

    With ``loaded_by`` (a ``SeamLoadTogetherOperator``'s task id), a table that task committed is reported,
    not loaded again; one it did not commit is loaded here (resuming its open batch).

    Fails unless every batch commits; returns the ledger summary (batch, rows, binlog position) as XCom, a
    list of them with ``with_tables``.
    """

    template_fields: Sequence[str] = ("table", "with_tables", "pipeline")

    def __init__(
        self,
        *,
        table: str,
        with_tables: Sequence[str] = (),
        loaded_by: str | None = None,
        timeout: float = 3600,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.with_tables = list(with_tables)  # loaded in the same run (levels below ``table``'s cascades)
        self.loaded_by = loaded_by  # a SeamLoadTogetherOperator's task id: what it committed is not loaded again
        self.timeout = timeout

    @seam_errors()
    def execute(self, context) -> dict | list[dict]:
        from seam.loads import full_load

        names = [self.table, *self.with_tables]
        done = self._committed_together(context, names)
        if done:
            return done[0] if len(done) == 1 else done
        hook = self.seam_hook()
        pipeline = self.load_pipeline(hook)
        tables = [pipeline.table(name) for name in names]
        return _plain(full_load(pipeline, tables, load_runner(self, hook)), single=len(tables) == 1)

    def _committed_together(self, context, names: list[str]) -> list[dict] | None:
        """The summaries of ``names`` when ``loaded_by`` committed every one of them (each logged as this
        task's own line), else None: the tables are then loaded by this task."""
        together: dict[str, dict] = (context["ti"].xcom_pull(task_ids=self.loaded_by) if self.loaded_by else None) or {}
        done = [together[name] for name in names if together.get(name, {}).get("state") == "committed"]
        if len(done) < len(names):
            if together:
                self.log.info("%s: not committed by %s; loading it in this task", ", ".join(names), self.loaded_by)
            return None
        for d in done:  # this table's own line of the load it shared a Spark application with
            self.log.info(
                "%s: committed batch %s with %s other table(s) in one Spark application (%s): %s rows in %ss, "
                "binlog position %s:%s",
                d["table"],
                d["batch"],
                len(together) - 1,
                self.loaded_by,
                d.get("final_rows"),
                d.get("seconds"),
                d.get("position_file"),
                d.get("position_pos"),
            )
        return done


def _plain(summaries: list[dict], single: bool) -> dict | list[dict]:
    """Ledger summaries as XCom (datetimes as ISO text)."""
    plain = [{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in s.items()} for s in summaries]
    return plain[0] if single else plain


class SeamLoadTogetherOperator(SeamOperator):
    """Full loads of many tables in one Spark application (``seam load full T1 T2 ...``: their batches
    published side by side, ``spark.max_parallel_tables`` at once), so that a schema of hundreds of tables
    pays one JVM start, not one each. The tables come from the XCom of ``tables_from`` (a list of
    ``{"table": name, "pipeline": path}``). A table that fails does not fail this task: each table's own
    ``SeamFullLoadOperator`` (``loaded_by`` this task) reports it, and loads it again itself if it did not
    commit. Fewer than two tables: nothing to share, each table's task loads it.

    Returns ``{table: ledger summary}`` as XCom.
    """

    template_fields: Sequence[str] = ("pipeline", "tables_from")

    def __init__(self, *, tables_from: str, timeout: float = 6 * 3600, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tables_from = tables_from
        self.timeout = timeout

    @seam_errors()
    def execute(self, context) -> dict[str, dict]:
        from seam.loads import full_load

        planned = context["ti"].xcom_pull(task_ids=self.tables_from) or []
        names = [p["table"] for p in planned]
        if len(names) < 2:
            self.log.info("%s table(s): each table's own task loads it", len(names))
            return {}
        self.pipeline = self.pipeline or planned[0].get("pipeline")  # the one the tables were read from
        hook = self.seam_hook()
        pipeline = self.load_pipeline(hook)
        summaries = full_load(
            pipeline, [pipeline.table(n) for n in names], load_runner(self, hook), raise_on_failure=False
        )
        return {s["table"]: s for s in _plain(summaries, single=False)}


# Airflow kills a task's process 5 s after it asks it to stop: on_kill must have killed what it started by then
ON_KILL_GRACE_S = 2.0


def stop_started(started: list, log) -> None:
    """Stop what a load started (an Airflow task killed from the UI): its unfinished batch stays invisible. Each
    process gets SIGTERM and, ``ON_KILL_GRACE_S`` later, SIGKILL: a sink still staging a run when asked to stop
    would otherwise outlive the task."""
    for child in list(started):
        log.info("stopping %s (pid %s)", type(child).__name__, getattr(child, "pid", None))
        child.stop(grace_s=ON_KILL_GRACE_S)


class SeamIncrementalLoadOperator(SeamOperator):
    """One incremental window of one table (``seam load incremental``): the rows whose cursor lies in
    (start, end], the end clamped to the source's clock minus the table's safety delay; merged by key.

    Fails unless the window commits; returns the ledger summary with the window and clamp as XCom.
    """

    template_fields: Sequence[str] = ("table", "pipeline", "start", "end")

    def __init__(
        self,
        *,
        table: str,
        start: str | None = None,
        end: str | None = None,
        timeout: float = 3600,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table, self.start, self.end, self.timeout = table, start, end, timeout

    @seam_errors()
    def execute(self, context) -> dict:
        from seam.loads import incremental_load

        hook = self.seam_hook()
        pipeline = self.load_pipeline(hook)
        table = pipeline.table(self.table)
        (summary,) = incremental_load(
            pipeline, [table], load_runner(self, hook), start=self.start or None, end=self.end or None
        )
        return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in summary.items()}


def repaired(pipeline, table, scope, limit: int, log, context, what: str, env: dict[str, str]):
    """After a mismatch, with ``repair`` on: ``seam repair`` of the table (up to ``repair.max_rows`` rows), then
    the same validation again. Returns (the new report, what the repair did or why it did not run); a table
    made equal notifies the pipeline's notifiers with what was repaired."""
    from seam.repair import RepairError, repair_table
    from seam.validate.validation import validate_tables

    try:
        result = repair_table(pipeline, table, env=env, say=log.info)
    except RepairError as exc:
        log.error("%s: the repair did not run: %s", table.name, exc)
        return None, f"the repair did not run: {exc}"
    log.info("%s", result.summary())
    (report,) = validate_tables(pipeline, [table], scope, limit=limit, say=log.info)
    if report.verdict == "equal":
        notify(
            pipeline,
            context,
            subject=f"Seam: {what}: {table.name} repaired ({result.differing} differing rows)",
            payload={
                "pipeline": pipeline.name,
                "table": table.name,
                "problem": "repaired",
                "detail": result.summary(),
                "verdict": "equal after repair",
                "repair": asdict(result),
            },
            log=log,
        )
    return report, result.summary()


class SeamValidateOperator(SeamOperator):
    """Validate one pipeline table (``seam validate``): counts, checksums and the configured column checks,
    source against target at a consistent point; optionally only an incremental window (start, end].

    On a mismatch the task fails without retrying (a mismatch is a finding, not a glitch), its log carries
    the summary and the differing rows, and the pipeline's notifiers (``notify:`` webhook and e-mail) fire
    once. With ``repair`` on, a mismatch is repaired first (``seam repair``, up to ``repair.max_rows`` rows)
    and validated again: equal then, the task succeeds and the notifiers say what was repaired. Returns the
    report summary as XCom.
    """

    template_fields: Sequence[str] = ("table", "pipeline", "start", "end")
    operator_extra_links = (ValidationReportLink(),)  # the HTML report, from the task in the UI

    def __init__(
        self,
        *,
        table: str,
        start: str | None = None,
        end: str | None = None,
        limit: int = 50,
        repair: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table, self.start, self.end, self.limit = table, start, end, limit
        self.repair = repair
        self.report_name: str | None = None  # the report this run wrote (ValidationReportLink)

    @seam_errors()
    def execute(self, context) -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from seam.validate.side import Scope
        from seam.validate.validation import validate_tables

        pipeline = self.load_pipeline()
        table = pipeline.table(self.table)
        window = (self.start, self.end) if self.start and self.end and table.cursor else None
        scope = Scope(window=window)
        (report,) = validate_tables(pipeline, [table], scope, limit=self.limit, say=self.log.info)
        repair = None
        if report.verdict == "mismatch" and self.repair:
            hook = self.seam_hook()
            again, repair = repaired(
                pipeline, table, scope, self.limit, self.log, context, "validation", hook.job_env()
            )
            report = again or report
        self.report_name = os.path.basename(report.html) if report.html else None
        summary = {k: v for k, v in report.as_dict().items() if k not in ("differences", "buckets")}
        if report.verdict == "equal":
            return {**summary, **({"repaired": repair} if repair else {})}
        payload = {
            "pipeline": pipeline.name,
            "table": table.name,
            "problem": f"validation {report.verdict}",
            "detail": report.summary(),
            "verdict": report.verdict,
            "missing": report.missing,
            "extra": report.extra,
            "different": report.different,
            "report": report.html,
            "keys": [d.key for d in report.differences[:10]],
            **({"repair": repair} if repair else {}),
        }
        notify(
            pipeline,
            context,
            subject=f"Seam: {report.summary()[:150]}",
            payload=payload,
            html=report.to_html(),
            log=self.log,
        )
        raise AirflowFailException(report.summary())


class SeamStreamOperator(SeamOperator):
    """Keep a pipeline's stream running (``seam.supervise``): ``action`` ensure (start what is down), start,
    stop or restart the change reader and the streaming sink, which run detached from the worker. Logs each
    table's lag; fails without retrying, and notifies the pipeline's notifiers once, when a part did not come
    up, a table is STOPPED or lags more than ``stream.max_lag_seconds``. Returns parts, actions and lags."""

    template_fields: Sequence[str] = ("action", "tables", "pipeline")

    def __init__(
        self,
        *,
        action: str = "ensure",
        tables: Sequence[str] = (),
        start_timeout: float = 180,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.action, self.tables, self.start_timeout = action, tables, start_timeout

    @seam_errors()
    def execute(self, context) -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from seam.config import ConfigError
        from seam.supervise import ACTIONS, lag_lines, supervise

        hook = self.seam_hook()
        pipeline = self.load_pipeline(hook)
        tables = [pipeline.table(name) for name in self.tables or ()]
        if self.action not in ACTIONS:
            raise ConfigError("action", f"{self.action!r} is not one of {', '.join(ACTIONS)}")
        health = supervise(
            pipeline,
            action=self.action,
            tables=tables or None,
            env=hook.job_env(),
            start_timeout=self.start_timeout,
            say=self.log.info,
        )
        for part, state in health.parts.items():
            self.log.info(
                "%s: %s, pid %s on %s, last heartbeat %.0fs ago",
                part,
                state["state"].upper(),
                state["pid"],
                state["host"],
                state["beat_age"],
            )
        for line in lag_lines(health):
            self.log.info("%s", line)
        result = {
            "actions": health.actions,
            "problems": health.problems,
            "parts": {p: s["state"] for p, s in health.parts.items()},
            "lags": [
                {"table": lag.table, "seconds": lag.behind_seconds, "events": lag.behind_events, "stopped": lag.stopped}
                for lag in health.lags
            ],
        }
        if health.healthy:
            return result
        problem = "; ".join(health.problems)
        notify(
            pipeline,
            context,
            subject=f"Seam stream {pipeline.name}: {problem[:150]}",
            payload={"pipeline": pipeline.name, "problem": "stream unhealthy", "detail": problem, **result},
            log=self.log,
        )
        raise AirflowFailException(f"stream of {pipeline.name} unhealthy: {problem}")

    def on_kill(self) -> None:
        # the parts are detached by design (they must outlive this task); only the waiting stops
        self.log.info("the stream's parts keep running; trigger seam_stream with action=stop to stop them")


def notify(pipeline, context, *, subject: str, payload: dict, html: str | None = None, log=None) -> None:
    """Send ``payload`` to every notifier of the pipeline (``notify:``); one failing must not silence the others."""
    from seam_airflow.notifiers import pipeline_notifiers

    ti = context["ti"]
    payload = {**payload, "dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id}
    for notifier in pipeline_notifiers(pipeline.notify, subject=subject, payload=payload, html=html):
        try:
            notifier.notify(context)
        except Exception as exc:  # noqa: BLE001
            if log is not None:
                log.error("notifier %s failed: %s", type(notifier).__name__, exc)


class SeamSettlementOperator(SeamOperator):
    """Settle one table's business day (``seam.settlement``): a table kept current by windows loads the day's
    window (start, end]; a streamed table must have applied the source past the day's end (else the task
    fails and retries: the stream may be catching up). Then the day is validated with the table's checks
    (column sums must agree to the cent): a mismatch fails without retrying and notifies the pipeline's
    notifiers. Success emits the table's Asset (``seam://<pipeline>/<db>/<table>``) through the
    ``seam_settlement`` asset alias, for downstream DAGs."""

    template_fields: Sequence[str] = ("table", "day", "start", "end", "day_end", "pipeline")
    operator_extra_links = (ValidationReportLink(),)  # the day's validation report, from the task in the UI
    ALIAS = "seam_settlement"

    def __init__(
        self,
        *,
        table: str,
        day: str,
        start: str,
        end: str,
        day_end: str,
        timeout: float = 3600,
        limit: int = 50,
        repair: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table, self.day, self.start, self.end, self.day_end = table, day, start, end, day_end
        self.repair = repair
        self.timeout, self.limit = timeout, limit
        self.report_name: str | None = None  # the report this run wrote (ValidationReportLink)

    @seam_errors()
    def execute(self, context) -> dict:
        import datetime as dt

        from airflow.sdk.exceptions import AirflowException, AirflowFailException

        from seam.loads import incremental_load
        from seam.supervise import stream_passed
        from seam.validate.side import Scope
        from seam.validate.validation import validate_tables

        hook = self.seam_hook()
        pipeline = self.load_pipeline(hook)
        table = pipeline.table(self.table)
        day, start, end = self.day, self.start, self.end
        self.log.info("settling %s for business day %s: cursor window (%s, %s]", table.name, day, start, end)
        if table.sync == "windows":
            (summary,) = incremental_load(pipeline, [table], load_runner(self, hook), start=start, end=end)
            if summary.get("clamped"):
                raise AirflowException(
                    f"{table.name}: the day's end is within the table's safety delay of the "
                    "source's clock; the window was clamped, settlement retries later"
                )
        else:
            behind = stream_passed(pipeline, table, dt.datetime.fromisoformat(self.day_end))
            if behind:
                raise AirflowException(behind)  # retried: the stream may still be catching up
        scope = Scope(window=(start, end) if table.cursor else None)
        (report,) = validate_tables(pipeline, [table], scope, limit=self.limit, say=self.log.info)
        repair = None
        if report.verdict == "mismatch" and self.repair:
            again, repair = repaired(
                pipeline, table, scope, self.limit, self.log, context, f"settlement {day}", hook.job_env()
            )
            report = again or report
        self.report_name = os.path.basename(report.html) if report.html else None
        summary = {k: v for k, v in report.as_dict().items() if k not in ("differences", "buckets")}
        if repair:
            summary["repaired"] = repair
        if report.verdict == "equal":
            from airflow.sdk import Asset, AssetAlias

            self.log.info("%s: business day %s settled: %s", table.name, day, report.summary())
            context["outlet_events"][AssetAlias(self.ALIAS)].add(
                Asset(
                    name=f"seam.{pipeline.name}.{table.name}", uri=f"seam://{pipeline.name}/{table.db}/{table.table}"
                ),
                extra={"day": day},
            )
            return {"day": day, **summary}
        notify(
            pipeline,
            context,
            subject=f"Seam settlement {day}: {report.summary()[:150]}",
            payload={
                "pipeline": pipeline.name,
                "table": table.name,
                "day": day,
                "problem": f"settlement {report.verdict}",
                "detail": report.summary(),
                "keys": [d.key for d in report.differences[:10]],
                **({"repair": repair} if repair else {}),
            },
            html=report.to_html(),
            log=self.log,
        )
        raise AirflowFailException(f"settlement of {day}: {report.summary()}")
