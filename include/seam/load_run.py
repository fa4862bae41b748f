"""One run of a load's processes: the Spark publishing job (spark-submit here, or through Airflow's provider)
and a sink unless one already applies the topics, watched until every batch is final; their output relayed
line by line at each line's own level.

Delivery guarantee: that of the sink (exactly once, whole batches only); a run that fails or is stopped
leaves every unfinished batch invisible and its processes stopped.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psycopg
from confluent_kafka import KafkaException

from seam.config import state_dir
from seam.core.errors import ONE_LINE, SeamError, first_line
from seam.core.pipeline import Pipeline, TableConfig
from seam.spark import spark_job_script, spark_master, submit_conf
from seam.spark_driver import SharedJob, run_shared
from seam.state.connection import StateWatch, connect_state
from seam.state.ledger import batch_status, drop_left_over, left_over_parts, left_over_rows
from seam.state.owners import held_by_process
from seam.state.positions import applied_through, stored_offsets
from seam.state.schema import held_by_another
from seam.wire.sink_pace import StagedOffsets
from seam.wire.topics import end_offsets, ensure_topics, table_topic

log = logging.getLogger(__name__)


class LoadError(SeamError):
    """A load did not commit; the message says what happened and what to do. Loading again resumes it."""

    kind = "load"
    retry = True


def spark_submit_command(
    pipeline: Pipeline, job: str, args: list[str], script: Path | None = None, conf: dict[str, str] | None = None
) -> list[str]:
    """spark-submit of ``spark_jobs/<job>.py`` (or of ``script``) on ``seam.spark.spark_master``."""
    here = Path(sys.executable).with_name("spark-submit")
    submit = str(here) if here.exists() else shutil.which("spark-submit")
    if submit is None:
        raise LoadError(
            "spark-submit not found next to this Python or on PATH: install pyspark here, or put "
            "$SPARK_HOME/bin on PATH"
        )
    return [
        submit,
        "--master",
        spark_master(pipeline),
        "--jars",
        pipeline.spark.jdbc_jar,
        "--name",
        f"seam-{job}",
        *[a for k, v in submit_conf(conf).items() for a in ("--conf", f"{k}={v}")],
        str(script or spark_job_script(job)),
        *args,
    ]


SHARED_JOBS = ("full_load", "incremental_load")  # the jobs spark_jobs/spark_driver.py runs


def _print_line(line: str) -> None:
    print(line, flush=True)


class Child:
    """A process a load started in its own session (the sink, or spark-submit run from here): stopped as a
    group, so that a JVM and the Python driver under it go together."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def stop(self, grace_s: float = 30.0) -> None:
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass


# How a load runs its Spark job: (job, job arguments) -> something with poll() (None while it runs, else its
# exit code), stop() and pid. The default runs spark-submit here; Airflow's operators pass one that runs it
# through the apache-spark provider (the ``seam_spark`` connection decides local[*], spark://, yarn, k8s).
class LineLog(Protocol):
    """Where a load relays its children's lines: a ``logging.Logger``, or an Airflow task's ``self.log``."""

    def log(self, level: int, msg: Any, /, *args: Any) -> Any: ...


class SparkJob(Protocol):
    @property
    def pid(self) -> int | None: ...
    def poll(self) -> int | None: ...
    def stop(self, grace_s: float = 30.0) -> None: ...


SparkSubmit = Callable[[str, list[str]], SparkJob]


@dataclass
class Runner:
    """How loads run here, as values: the connections' ``SEAM_*`` variables the processes a load starts read
    (an Airflow hook's; never written into this process's environment), where their output goes (``say`` for
    progress, ``log`` for their lines, else this process's stdout), how the Spark job is submitted (default:
    spark-submit here), and ``children``: what runs now, for a caller that must stop it (a task's on_kill),
    which sets ``stopped`` under ``lock`` first: no process is started after that."""

    env: Mapping[str, str] = field(default_factory=dict)
    say: Callable[[str], None] = print
    log: LineLog | None = None
    submit: SparkSubmit | None = None
    timeout: float = 3600
    progress_every: float = 3.0
    children: list = field(default_factory=list)
    stopped: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


def job_env(connections: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a process a load starts: this one's, with the connections' ``SEAM_*`` variables."""
    env = {**os.environ, **(connections or {})}
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def sink_through(conn, pipeline: Pipeline, reports: StagedOffsets, topics: list[str]) -> dict[str, int]:
    """Per topic, the offset through which the running sink has applied or staged what it read: its stored
    offset, or its report of an open batch's staging (``seam.wire.sink_pace``) where that is further. (A
    stream transaction that a batch's BEGIN cut in two keeps the stored offset before the BEGIN until the
    END, for a restart to read again; the batch's rows are staged meanwhile.)"""
    stored = {topic: offset for topic, offset, _ in stored_offsets(conn, pipeline.target.state_schema, topics)}
    staged = reports.read(topics)
    return {topic: max(stored.get(topic, -1), staged.get(topic, -1)) for topic in topics}


def sink_running(conn, topic: str) -> bool:
    return held_by_another(conn, "topic", topic)


class BatchRun:
    """The Spark job and a sink (unless one runs) for ``batches`` (table name -> batch id), until every
    batch is final. With a ``log`` their output goes to it line by line at each line's own level (else to
    this process's stdout/stderr)."""

    def __init__(
        self, pipeline: Pipeline, tables: list[TableConfig], batches: dict[str, str], runner: Runner, stall_after: float
    ):
        self.pipeline, self.tables, self.batches, self.runner = pipeline, tables, batches, runner
        self.stall_after = stall_after
        self.env = job_env(runner.env)
        self.output: dict[str, Any] = (
            dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace") if runner.log else {}
        )
        self.topics = [table_topic(pipeline, t) for t in tables]
        self.pipeline_args = ["--pipeline", pipeline.path] if pipeline.path else []
        self.results: dict[str, dict] = {}
        self.spark: SparkJob | None = None
        self.sink: Child | None = None
        self.job = ""
        self.left_over: dict[str, int] = {}
        self.finished = threading.Event()

    def run(self, job: str, job_args: list[str]) -> dict[str, dict]:
        self.job = job
        ensure_topics(self.pipeline, self.topics)
        self.watch = StateWatch(self.pipeline, self.runner.say)
        self.watch.hold(self.batches.values())
        # a resumed batch's rows of chunks it does not keep: not counted as staged (END drops them)
        self.left_over = left_over_rows(self.conn, self.pipeline.target.state_schema, list(self.batches.values()))
        if self.left_over:  # beside the job, not in END's transaction, where it was a resume's largest fixed cost
            schema = self.pipeline.target.state_schema
            dead = {batch: left_over_parts(self.conn, schema, batch) for batch in self.left_over}
            threading.Thread(target=self._drop_left_over, args=(dead,), name="drop-left-over", daemon=True).start()
        started = time.time()
        try:
            self._start(job, job_args)
            self._watch(started)
            deadline = time.time() + 120
            while self.spark is not None and self.spark.poll() is None and time.time() < deadline:
                time.sleep(0.2)
        finally:  # nothing this load started may outlive it
            for child in (self.spark, self.sink):
                if child is not None:
                    child.stop()
                    if child in self.runner.children:
                        self.runner.children.remove(child)
            self.watch.close()
            self.finished.set()
        elapsed = time.time() - started
        for r in self.results.values():
            seconds = (r["finished_at"] - r["opened_at"]).total_seconds() if r["finished_at"] else elapsed
            r["seconds"] = round(seconds, 2)
            r["rows_per_s"] = round((r["final_rows"] or 0) / max(seconds, 1e-3))
        return self.results

    def _drop_left_over(self, dead: dict[str, list[tuple[int, int]]]) -> None:
        """The rows of the chunks a resumed batch does not keep (``dead``: batch -> the dead run's pairs, read
        before the job started), deleted from its staging table while the job publishes (``ledger.drop_left_over``)
        once the sink has staged what was on the topics when the job started: a killed load's job in the shared
        Spark driver goes on publishing while it is cancelled, and ends before the next one starts. Best effort:
        END drops whatever is still there."""
        try:
            with connect_state(self.pipeline) as conn:
                if not self._staged_what_came_before_the_job(conn):
                    return
                for name, batch in self.batches.items():
                    if dead.get(batch):
                        dropped = drop_left_over(conn, self.pipeline.target.state_schema, batch, dead[batch])
                        self.runner.say(f"{name}: dropped the {dropped:,} staged rows of the chunks not kept")
        except (psycopg.Error, KafkaException) as error:  # e.g. END came first and dropped the columns
            log.info("the left-over rows stay for END to drop (%s)", first_line(error))

    def _staged_what_came_before_the_job(self, conn, within_s: float = 120.0) -> bool:
        deadline = time.monotonic() + within_s
        while self.spark is None:
            if time.monotonic() > deadline or self.finished.is_set():
                return False
            time.sleep(0.1)
        ends = end_offsets(self.pipeline, self.topics)
        reports = StagedOffsets(self.pipeline)
        try:
            while time.monotonic() < deadline and not self.finished.is_set():
                if applied_through(sink_through(conn, self.pipeline, reports, self.topics), ends):
                    return True
                time.sleep(0.2)
        finally:
            reports.close()
        return False

    def _keep(self, child) -> None:
        """Keep a process this run just started, for whoever stops the load (``Runner.children``); one started
        while the load was being stopped is stopped here at once (else it would outlive a killed task)."""
        with self.runner.lock:
            stopped = self.runner.stopped.is_set()
            self.runner.children.append(child)
        if stopped:
            child.stop()
            self._check_stopped()

    def _check_stopped(self) -> None:
        if self.runner.stopped.is_set():
            raise LoadError("the load was stopped (its task killed): nothing of its unfinished batch is visible")

    def _start(self, job: str, job_args: list[str]) -> None:
        self._check_stopped()
        if not all(sink_running(self.conn, topic) for topic in self.topics):
            self.sink = self._start_sink()
        job_args = [*self.pipeline_args, *job_args]
        shared = None
        if self.runner.submit is None and job in SHARED_JOBS and self.pipeline.spark.shared_driver_idle_s:
            self._wait_for_sink()
            shared = self._shared(job, job_args)
        if shared is not None:
            self.spark = shared
        elif self.runner.submit is None:
            command = spark_submit_command(self.pipeline, job, job_args)
            spark = Child(subprocess.Popen(command, env=self.env, start_new_session=True, **self.output))
            if self.runner.log:
                relay_output(spark.proc, self.runner.log)
            self.spark = spark
        else:
            self.spark = self.runner.submit(job, job_args)
        self._keep(self.spark)
        if shared is not None:
            started = f"spark job in the shared Spark driver (pid {shared.pid})"
        else:
            started = "spark job started" if self.runner.submit is not None else f"spark job pid {self.spark.pid}"
        self.runner.say(started + (f", sink pid {self.sink.pid}" if self.sink else ", applied by the running sink"))

    def _wait_for_sink(self, timeout: float = 120.0) -> None:
        """Until the sink this run started holds its topics: a job in the warm shared driver publishes its BEGIN
        within a second, and a load killed before its sink had recorded that BEGIN could not be resumed (seen:
        `resumed` missing after a kill at 60% of 400,000 rows). A sink that dies is the watch's to report."""
        deadline = time.time() + timeout
        while self.sink is not None and self.sink.poll() is None and time.time() < deadline:
            if all(sink_running(self.conn, t) for t in self.topics):
                return
            time.sleep(0.05)

    def _shared(self, job: str, job_args: list[str]) -> SharedJob | None:
        """The job in the shared Spark driver (``seam.spark_driver``), or None: spark-submit it is."""
        lines = LineRelay(self.runner.log).line if self.runner.log else _print_line
        return run_shared(
            self.pipeline,
            job,
            job_args,
            self.env,
            state_dir(),
            lambda args: spark_submit_command(self.pipeline, "spark_driver", [*self.pipeline_args, *args]),
            lines,
            self.runner.say,
        )

    def _start_sink(self) -> Child:
        sink_cmd = [
            sys.executable,
            "-m",
            "seam.cli",
            "sink",
            *self.pipeline_args,
            *[a for t in self.tables for a in ("--table", t.name)],
            *[a for b in self.batches.values() for a in ("--until-batch", b)],
            "--timeout",
            str(self.runner.timeout),
        ]
        self._check_stopped()
        child = Child(subprocess.Popen(sink_cmd, env=self.env, start_new_session=True, **self.output))
        if self.runner.log:
            relay_output(child.proc, self.runner.log)
        self._keep(child)
        return child

    def _status(self, batch: str) -> dict | None:
        return batch_status(self.conn, self.pipeline.target.state_schema, batch)

    def _staged_rows(self) -> int:
        return sum(
            max(0, (self._status(b) or {}).get("staged_rows", 0) - self.left_over.get(b, 0))
            for b in self.batches.values()
        )

    def _watch(self, started: float) -> None:
        """Until every batch is final: a failed process, a timeout or a stall raises ``LoadError``; progress
        is said as the rows are staged. A target that goes away (a restart, a failover) is waited for."""
        assert self.spark is not None
        progress = _Progress(self.runner.say, self.runner.progress_every, started, self._staged_rows())
        spark_done: float | None = None
        while len(self.results) < len(self.tables):
            try:
                self.watch.wait(0.5)
                spark_done = self._look(started, progress, spark_done)
            except psycopg.OperationalError as exc:
                self._wait_for_target(exc, started)

    def _look(self, started: float, progress: _Progress, spark_done: float | None) -> float | None:
        """One look at the batches and the processes; returns when the Spark job ended well (or None)."""
        assert self.spark is not None
        for t in self.tables:
            status = self._status(self.batches[t.name])
            if status and status["state"] != "open" and t.name not in self.results:
                self.results[t.name] = {"table": t.name, "batch": self.batches[t.name], **status}
        if len(self.results) == len(self.tables):
            return spark_done
        code = self.spark.poll()
        if code not in (None, 0):
            raise LoadError(
                f"the Spark job failed (exit {code}); nothing of the unfinished batch is visible, "
                "the target keeps the previous data; fix the cause above and re-run (a running stream holds the "
                "table's changes behind the open batch until then: `seam stream status`)"
            )
        self._check_sink()
        if time.time() - started > self.runner.timeout:
            raise LoadError(f"no commit within {self.runner.timeout:.0f}s; the target keeps the previous data")
        if code == 0 and spark_done is None:
            spark_done = time.time()
        if spark_done is not None and time.time() - max(spark_done, progress.moved_at) > self.stall_after:
            raise self._stalled()
        progress.report(self._staged_rows)
        return spark_done

    def _wait_for_target(self, exc: Exception, started: float) -> None:
        """The watch's session to the target broke: the load goes on (the sink retries on its own), so this
        connects again, within the run's timeout."""
        if time.time() - started > self.runner.timeout:
            raise LoadError(
                f"the target stayed unreachable ({first_line(exc)}) until the load's timeout; nothing of the "
                "unfinished batch is visible; start the target and re-run the load (it resumes)"
            )
        self.watch.reconnect(exc)

    @property
    def conn(self) -> psycopg.Connection:
        return self.watch.conn

    def _check_sink(self) -> None:
        """The sink this run relies on is still there (its own, or the running one it left the batch to)."""
        if self.sink is None and not all(sink_running(self.conn, t) for t in self.topics):
            # the sink we left it to was another load's, and it ended with that load's batch
            self.runner.say("the running sink stopped before the batch committed; starting one for it")
            self.sink = self._start_sink()
        if (
            self.sink is not None
            and self.sink.poll() is not None
            and all(sink_running(self.conn, t) for t in self.topics)
        ):
            if any(self._held_by_own_sink(t) for t in self.topics):
                # our killed sink's session outlives it until the target notices (a statement under way): it
                # is no running sink, and its lock goes with it; look again (CI: taken for one, the load
                # committed with a sink of its own where it should have said the way out)
                return
            # a streaming sink (re)started between the check above and ours, and took the topics first: it
            # applies the batch as it does when it runs from the start
            self.runner.say("a running sink took the topics first: it applies the batch")
            self.sink = None
        if self.sink is not None and self.sink.poll() is not None:
            # not `seam sink`: this load stops its Spark job on the way out, so the batch may never get its END
            kind = "full" if self.job == "full_load" else "incremental"
            raise LoadError(
                f"the sink stopped (exit {self.sink.poll()}) before the batch committed; nothing of the unfinished "
                f"batch is visible, the target keeps the previous data: re-run `seam load {kind} "
                f"{' '.join(t.name for t in self.tables)}`"
                + (" (it resumes the batch, keeping the chunks already staged)" if kind == "full" else "")
            )

    def _held_by_own_sink(self, topic: str) -> bool:
        assert self.sink is not None
        return held_by_process(self.conn, self.pipeline.target.state_schema, "topic", topic, self.sink.pid)

    def _stalled(self) -> LoadError:
        unseen = [name for name, b in self.batches.items() if self._status(b) is None]
        return LoadError(
            f"the Spark job published everything, but the sink has made no progress for {self.stall_after:.0f}s"
            + (f" and never saw the BEGIN of {', '.join(unseen)}" if unseen else "")
            + "; is the sink running and the broker the same "
            "one the job wrote to? The target keeps the previous data; re-run the load"
        )


class _Progress:
    """``staged N rows`` lines: nothing before the first rows (Spark is starting); they are said as soon as
    they come (a fast load may commit within one interval), then every ``every`` seconds. A resumed batch's
    kept rows are the baseline, not this run's rate."""

    def __init__(self, say: Callable[[str], None], every: float, started: float, rows: int):
        self.say, self.every = say, every
        self.reported_at, self.rows, self.moved_at = started, rows, started
        self.shown = False

    def report(self, staged_rows: Callable[[], int]) -> None:
        due = time.time() - self.reported_at >= self.every
        if not (due or not self.shown):
            return
        staged = staged_rows()
        if due or staged != self.rows:
            rate = (staged - self.rows) / max(time.time() - self.reported_at, 1e-3)
            if staged:
                self.say(f"  staged {staged:,} rows in the target ({rate:,.0f} rows/s)")
                self.shown = True
            if staged != self.rows:
                self.moved_at = time.time()
            self.reported_at, self.rows = time.time(), staged


_LEVEL = re.compile(r"(?<![\"'])\b(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL)\b(?![\"'])")
_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
}


class LineRelay:
    """Log a child's output line by line at each line's own level: Spark's log4j and Seam's logging name it
    near the start of a line, a trace's continuation lines keep the level of the line they continue, and
    anything else (progress lines) is INFO."""

    def __init__(self, log: LineLog):
        self.log, self.level = log, logging.INFO
        self._lock = threading.Lock()

    def line(self, line: str) -> None:
        line = line.rstrip()
        if not line:
            return
        with self._lock:
            found = _LEVEL.search(line[:80])
            if ONE_LINE.match(line):
                self.level = logging.ERROR
            elif found:
                self.level = _LEVELS[found.group(1)]
            elif not line[:1].isspace() and not line.startswith(("Caused by", "at ", "...")):
                self.level = logging.INFO
            self.log.log(self.level, "%s", line)


def relay_output(proc: subprocess.Popen, log: LineLog) -> threading.Thread:
    """Relay ``proc``'s output to ``log`` (``LineRelay``) in a thread of its own."""

    def relay():
        relay = LineRelay(log)
        assert proc.stdout is not None  # started with stdout=PIPE
        for line in proc.stdout:
            relay.line(line)

    thread = threading.Thread(target=relay, name=f"relay-{proc.pid}", daemon=True)
    thread.start()
    return thread
