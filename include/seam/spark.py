"""Spark session and JDBC read options built from a pipeline.

Delivery guarantee: none by itself; the jobs that use it state theirs.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TypeVar

from seam.config import load_pipeline
from seam.core.errors import SeamError, one_line
from seam.core.pipeline import Pipeline
from seam.spark_classes import driver_java_options

# a busy machine delays the executor's heartbeats: wait longer rather than log a timeout trace
SUBMIT_CONF = {
    "spark.log.level": "WARN",
    "spark.ui.enabled": "false",
    "spark.executor.heartbeatInterval": "30s",
    "spark.network.timeout": "600s",
    # a cancelled task's Python worker killed when Spark sees it cancelled (it polls every 2 s), not 2 s later:
    # a killed load's tasks otherwise publish rows its retry stages and then drops
    "spark.python.task.killTimeout": "0s",
}
TASK_ATTEMPTS = 4  # Spark's default spark.task.maxFailures, which local mode does not apply


def submit_conf(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The ``--conf`` of every spark-submit of Seam's jobs: ``SUBMIT_CONF``, the driver's JVM options (its
    class archive when there is one, ``seam.spark_classes``: about 3 s less of start-up; then
    ``SEAM_SPARK_JAVA_OPTIONS``), then ``extra``."""
    options = " ".join(o for o in (driver_java_options(), os.environ.get("SEAM_SPARK_JAVA_OPTIONS", "").strip()) if o)
    return {**SUBMIT_CONF, **({"spark.driver.extraJavaOptions": options} if options else {}), **(extra or {})}


def spark_master(pipeline: Pipeline) -> str:
    """Where Seam's Spark jobs run: ``SEAM_SPARK_MASTER_OVERRIDE`` (Airflow sets it from the ``seam_spark``
    connection, so that changing only the connection moves every job), else the pipeline's ``spark.master``.

    A local master gets its task attempts spelled out (``local[2]`` -> ``local[2,4]``): local mode gives a task
    one attempt, so a chunk whose source connection was lost for a moment would fail the whole load. A chunk
    read again is a new attempt, which the sink tells apart (``seam.apply.batch``) and reconciliation puts at
    the batch's position."""
    return with_task_attempts(os.environ.get("SEAM_SPARK_MASTER_OVERRIDE") or pipeline.spark.master)


def with_task_attempts(master: str) -> str:
    """``local`` / ``local[N]`` with ``TASK_ATTEMPTS`` attempts per task; any other master as it is."""
    local = re.fullmatch(r"local(?:\[(\*|\d+)\])?", master.strip())
    return f"local[{local.group(1) or 1},{TASK_ATTEMPTS}]" if local else master


def spark_job_script(job: str) -> str:
    """The spark-submit entry point ``spark_jobs/<job>.py``, found where the ``spark_jobs`` package is (a
    checkout or an installed ``seam``)."""
    import spark_jobs

    return str(Path(spark_jobs.__file__).parent / f"{job}.py")


def spark_session(pipeline: Pipeline, app_name: str):
    """A SparkSession with the MySQL JDBC driver on the class path.

    Under spark-submit the JVM already runs, its ``--master`` decides where, and ``--jars`` supplies the
    driver; run as a plain script, the session is on ``spark_master`` with ``spark.jars``.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # set by spark-submit for its Python driver
        builder = builder.master(spark_master(pipeline)).config("spark.jars", pipeline.spark.jdbc_jar)
    return (
        builder.config("spark.sql.session.timeZone", "UTC")
        # MySQL strips CHAR padding and ENUM/SET have no width; Spark would pad them back
        .config("spark.sql.legacy.charVarcharAsString", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(max(2, pipeline.spark.partitions)))
        .config("spark.python.daemon.module", "seam.spark_daemon")  # workers import compiled pyspark
        .getOrCreate()
    )


def jdbc_options(pipeline: Pipeline) -> dict[str, str]:
    src = pipeline.source
    return {
        "url": src.jdbc_url + "?zeroDateTimeBehavior=convertToNull&useUnicode=true&characterEncoding=utf8"
        "&sessionVariables=time_zone='+00:00'",  # TIMESTAMPs read as UTC text
        "driver": pipeline.spark.jdbc_driver,
        "user": src.user,
        "password": src.password.reveal(),
        "fetchsize": "10000",
    }


def quote_mysql(name: str) -> str:
    """Quote a MySQL identifier (backticks doubled inside)."""
    return "`" + name.replace("`", "``") + "`"


T = TypeVar("T")
R = TypeVar("R")


def each_table(items: Sequence[T], work: Callable[[T], R], parallel: int) -> Iterator[tuple[T, R]]:
    """``work`` of each item (a table's batch), up to ``parallel`` at once in threads of the driver: their Spark
    jobs share the application's executors, so many small tables cost one JVM start, not one each. Yields
    (item, result) as each ends. After a ``SeamError`` nothing new starts; what runs ends, then it is raised."""
    if parallel <= 1 or len(items) <= 1:
        for item in items:
            yield item, work(item)
        return
    error: SeamError | None = None
    with ThreadPoolExecutor(min(parallel, len(items)), thread_name_prefix="seam-table") as pool:
        futures = {pool.submit(work, item): item for item in items}
        for future in as_completed(futures):
            if future.cancelled():  # after an error: never started; its result() would raise CancelledError
                continue
            try:
                result = future.result()
            except SeamError as exc:
                if error is None:
                    error = exc
                    for waiting in futures:
                        waiting.cancel()
                continue
            except BaseException:
                for waiting in futures:
                    waiting.cancel()
                raise
            yield futures[future], result
    if error is not None:
        raise error


def submitted_job(run: Callable[..., int], argv: list[str] | None, pipeline_path: str | None, app_name: str) -> int:
    """A job's spark-submit ``main``: a session of its own on the pipeline's Spark settings, then ``run(spark, argv,
    env, say)`` with this process's environment and stdout (what the shared driver, ``seam.spark_driver``, calls
    with its caller's), the session stopped after; a pipeline that does not read is one line."""
    try:
        pipeline = load_pipeline(pipeline_path)
    except SeamError as exc:
        print(one_line(exc), file=sys.stderr, flush=True)
        return 1
    spark = spark_session(pipeline, app_name)
    try:
        return run(spark, sys.argv[1:] if argv is None else argv, os.environ, say_line)
    finally:
        spark.stop()


_PRINTING = threading.Lock()


def say_line(line: str) -> None:
    """A whole line on stdout, flushed: the tables' threads print at once, and ``print`` writes the line
    and its newline apart."""
    with _PRINTING:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
