"""Thin operators: the Seam library does the work, these hand it Airflow's connections."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator

from seam_airflow.hooks import SeamHook

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def bad_input_fails_at_once():
    """A bad pipeline, table name or Param is not a glitch: the task fails with its one line, no retry."""
    from airflow.sdk.exceptions import AirflowFailException
    from seam.config import ConfigError

    try:
        yield
    except ConfigError as exc:
        raise AirflowFailException(f"bad input: {exc}") from None
SPARK_JOBS = PROJECT_ROOT / "spark_jobs"
DEFAULT_JDBC_JAR = "/usr/share/java/mariadb-java-client.jar"


class SeamSparkJobOperator(SparkSubmitOperator):
    """Run ``spark_jobs/<job>.py`` with the pipeline and job arguments.

    Endpoints and credentials come from :class:`SeamHook` at execute time, into
    the spark-submit environment only (not into rendered task fields).
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "job_args", "pipeline")

    def __init__(self, *, job: str, pipeline: str | None = None, job_args: list[str] | None = None,
                 conn_id: str = "seam_spark", mysql_conn_id: str = "seam_mysql",
                 kafka_conn_id: str = "seam_kafka", target_conn_id: str = "seam_target", **kwargs: Any) -> None:
        kwargs.setdefault("name", f"seam-{job}")
        kwargs.setdefault("jars", os.environ.get("SEAM_JDBC_JAR", DEFAULT_JDBC_JAR))
        super().__init__(application=str(SPARK_JOBS / f"{job}.py"), conn_id=conn_id, **kwargs)
        self.job = job
        self.pipeline = pipeline
        self.job_args = job_args or []
        self.hook_conn_ids = dict(mysql_conn_id=mysql_conn_id, kafka_conn_id=kafka_conn_id,
                                  target_conn_id=target_conn_id)

    def execute(self, context) -> None:
        self.application_args = [*(["--pipeline", self.pipeline] if self.pipeline else []), *self.job_args]
        self.env_vars = {**os.environ, **(self.env_vars or {}), **SeamHook(**self.hook_conn_ids).job_env()}
        return super().execute(context)


class SeamFullLoadOperator(BaseOperator):
    """Full load of one pipeline table (``seam load full``): Spark snapshot -> Kafka -> sink -> PostgreSQL.
    ``with_tables`` load in the same run, ordered parents first (the levels below a cascade's middle level).

    Fails unless every batch commits; returns the ledger summary (batch, rows, binlog position) as XCom, a
    list of them with ``with_tables``.
    """

    template_fields: Sequence[str] = ("table", "with_tables", "pipeline")

    def __init__(self, *, table: str, with_tables: Sequence[str] = (), pipeline: str | None = None,
                 mysql_conn_id: str = "seam_mysql", kafka_conn_id: str = "seam_kafka",
                 target_conn_id: str = "seam_target", timeout: float = 3600, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.with_tables = list(with_tables)  # loaded in the same run (levels below ``table``'s cascades)
        self.pipeline = pipeline
        self.timeout = timeout
        self.hook_conn_ids = dict(mysql_conn_id=mysql_conn_id, kafka_conn_id=kafka_conn_id,
                                  target_conn_id=target_conn_id)

    def execute(self, context) -> dict:
        from seam.loads import full_load

        hook = SeamHook(**self.hook_conn_ids)
        os.environ.update(hook.job_env())  # for the spark-submit and sink processes this task starts
        with bad_input_fails_at_once():
            pipeline = hook.load_pipeline(self.pipeline or None)
            tables = [pipeline.table(name) for name in (self.table, *self.with_tables)]
        summaries = full_load(pipeline, tables, pipeline_path=pipeline.path, timeout=self.timeout,
                              say=self.log.info, log=self.log)
        plain = [{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in s.items()} for s in summaries]
        return plain[0] if len(plain) == 1 else plain


class SeamIncrementalLoadOperator(BaseOperator):
    """One incremental window of one table (``seam load incremental``): the rows whose cursor lies in
    (start, end], the end clamped to the source's clock minus the table's safety delay; merged by key.

    Fails unless the window commits; returns the ledger summary with the window and clamp as XCom.
    """

    template_fields: Sequence[str] = ("table", "pipeline", "start", "end")

    def __init__(self, *, table: str, start: str | None = None, end: str | None = None,
                 pipeline: str | None = None, mysql_conn_id: str = "seam_mysql", kafka_conn_id: str = "seam_kafka",
                 target_conn_id: str = "seam_target", timeout: float = 3600, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table, self.start, self.end, self.pipeline, self.timeout = table, start, end, pipeline, timeout
        self.hook_conn_ids = dict(mysql_conn_id=mysql_conn_id, kafka_conn_id=kafka_conn_id,
                                  target_conn_id=target_conn_id)

    def execute(self, context) -> dict:
        from seam.loads import incremental_load

        hook = SeamHook(**self.hook_conn_ids)
        os.environ.update(hook.job_env())
        with bad_input_fails_at_once():
            pipeline = hook.load_pipeline(self.pipeline or None)
            table = pipeline.table(self.table)
        (summary,) = incremental_load(pipeline, [table], start=self.start or None, end=self.end or None,
                                      pipeline_path=pipeline.path, timeout=self.timeout, say=self.log.info,
                                      log=self.log)
        return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in summary.items()}


class SeamValidateOperator(BaseOperator):
    """Validate one pipeline table (``seam validate``): counts, checksums and the configured column checks,
    source against target at a consistent point; optionally only an incremental window (start, end].

    On a mismatch the task fails without retrying (a mismatch is a finding, not a glitch), its log carries
    the summary and the differing rows, and the pipeline's notifiers (``notify:`` webhook and e-mail) fire
    once. Returns the report summary as XCom.
    """

    template_fields: Sequence[str] = ("table", "pipeline", "start", "end")

    def __init__(self, *, table: str, start: str | None = None, end: str | None = None,
                 pipeline: str | None = None, mysql_conn_id: str = "seam_mysql", kafka_conn_id: str = "seam_kafka",
                 target_conn_id: str = "seam_target", limit: int = 50, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table, self.start, self.end, self.pipeline, self.limit = table, start, end, pipeline, limit
        self.hook_conn_ids = dict(mysql_conn_id=mysql_conn_id, kafka_conn_id=kafka_conn_id,
                                  target_conn_id=target_conn_id)

    def execute(self, context) -> dict:
        from airflow.sdk.exceptions import AirflowFailException
        from seam.validation import Scope, validate_tables

        from seam_airflow.notifiers import pipeline_notifiers

        with bad_input_fails_at_once():
            pipeline = SeamHook(**self.hook_conn_ids).load_pipeline(self.pipeline or None)
            table = pipeline.table(self.table)
        window = (self.start, self.end) if self.start and self.end and table.cursor else None
        (report,) = validate_tables(pipeline, [table], Scope(window=window), limit=self.limit, say=self.log.info)
        summary = {k: v for k, v in report.as_dict().items() if k not in ("differences", "buckets")}
        if report.verdict == "equal":
            return summary
        ti = context["ti"]
        payload = {"pipeline": pipeline.name, "table": table.name, "problem": f"validation {report.verdict}",
                   "detail": report.summary(), "verdict": report.verdict, "missing": report.missing,
                   "extra": report.extra, "different": report.different, "report": report.html,
                   "dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id,
                   "keys": [d.key for d in report.differences[:10]]}
        for notifier in pipeline_notifiers(pipeline.notify, subject=f"Seam: {report.summary()[:150]}",
                                           payload=payload, html=report.to_html()):
            try:
                notifier.notify(context)
            except Exception as exc:  # one unreachable receiver must not silence the others
                self.log.error("notifier %s failed: %s", type(notifier).__name__, exc)
        raise AirflowFailException(report.summary())
