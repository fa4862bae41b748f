"""The stream's parts as processes: the streaming sink (`seam sink`, or a spark-submit with
``stream.sink: spark``, kept running, restarted with back-off, its heartbeats in the target) and both in one
foreground process.

Delivery guarantee: that of ``seam.source.streaming`` and ``seam.apply.sink`` (exactly once); a part that
loses its lock to another process exits 2 and applies nothing more."""

from __future__ import annotations

import collections
import contextlib
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import psutil
import psycopg

from seam.apply.sink import Sink
from seam.cli.common import pipeline_of, table_args
from seam.cli.cutover_repairs import CutoverRepairs
from seam.cli.pipeline_watch import PipelineWatch
from seam.cli.stream_reader import exit_status, log_to_stderr
from seam.core.errors import ONE_LINE
from seam.load_run import job_env, spark_submit_command
from seam.source.streaming import ChangeReader
from seam.state.connection import connect_state
from seam.state.owners import Owner
from seam.state.parts import part_beat, part_failed, part_started, part_stopped, retry_delay, wait_unless


def cmd_stream_part(args, procs) -> int:
    """``seam stream sink``, and ``seam stream start --foreground``: the parts in this process (``seam stream
    reader`` is ``seam.cli.stream_reader``)."""
    pipeline = pipeline_of(args)
    tables = [pipeline.table(t) for t in args.table] if args.table else list(pipeline.tables)
    if args.action != "sink":  # start --foreground
        return run_foreground(pipeline, tables, args.until_idle)
    watch = PipelineWatch(pipeline, list(args.table))
    return run_sink(pipeline, tables, table_args(pipeline, args), watch)


def run_sink(pipeline, tables, table_args: list[str], watch: PipelineWatch) -> int:
    """The streaming sink (`seam sink`: the apply code fed by a plain Kafka consumer; or, with ``stream.sink:
    spark``, the same code in a Structured Streaming query's spark-submit), restarted if it fails, until SIGTERM. Its heartbeat, restarts
    and last error go to the target (``seam.state``), where `seam stream status` reads them. It also starts the
    repairs of its tables stopped at a cut-over (``seam.cli.cutover_repairs``)."""
    log_to_stderr()
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    owner = Owner(pipeline, "stream sink")
    stopping_or_lost = lambda: bool(stopping) or bool(owner.lost) or watch.changed()  # noqa: E731
    # on a cluster the sink holds its executors for as long as it runs: one core leaves the rest to the loads
    # (its work is the driver's foreachBatch; the setting is ignored by local[*])
    if pipeline.stream.sink == "direct":
        cmd = [sys.executable, "-m", "seam.cli", "--pipeline", pipeline.path, "sink", "--stream-part", *table_args]
    else:
        cmd = spark_submit_command(
            pipeline, "stream_sink", ["--pipeline", pipeline.path, *table_args], conf={"spark.cores.max": "1"}
        )
    state = _PartState(pipeline, "sink")
    repairs = CutoverRepairs(pipeline, tables)
    fresh, delay = True, None
    try:
        while not stopping_or_lost():
            state.record(part_started, fresh=fresh)
            fresh = False
            job = subprocess.Popen(cmd, env=job_env(), stderr=subprocess.PIPE, text=True, errors="replace")
            relay, last_lines = _relay_stderr(job)
            started, beat = time.monotonic(), 0.0
            while job.poll() is None:
                if stopping_or_lost():
                    _stop_sink_job(job)
                if time.monotonic() - beat > 2:
                    state.record(part_beat)
                    beat = time.monotonic()
                state.use(repairs.tick)
                time.sleep(0.5)
            relay.join(timeout=10)
            if not stopping_or_lost():
                error = _last_error(last_lines) or f"exit {job.returncode}"
                state.record(part_failed, error=error)
                delay = retry_delay(delay, time.monotonic() - started)
                print(
                    f"seam: the streaming sink exited ({job.returncode}: {error}); restarting in {delay:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
                wait_unless(stopping_or_lost, delay, beat=lambda: state.record(part_beat))
        restart = watch.changed_to_valid and not stopping and not owner.lost
        if not restart:  # else not stopped: it starts again at once
            state.record(part_stopped)
    finally:
        state.close()
        owner.release()
    if restart:
        watch.restart()
    return exit_status(owner)


def _stop_sink_job(job: subprocess.Popen) -> None:
    """Stop the sink's spark-submit: its Python driver first (SIGTERM: it stops the query between
    micro-batches and Spark, then exits 0), so that the JVM is not pulled from under a running micro-batch
    (an ERROR and an EOFException trace in the sink's log); the JVM itself if the driver does not end."""
    drivers = [p for p in _children(job.pid) if "stream_sink.py" in " ".join(_cmdline(p))]
    for driver in drivers:
        with contextlib.suppress(psutil.Error):
            driver.terminate()
    try:
        job.wait(60 if drivers else 0.1)
    except subprocess.TimeoutExpired:
        pass
    if job.poll() is None:
        job.terminate()
        job.wait(60)


def _children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _cmdline(process: psutil.Process) -> list[str]:
    """A process's command line, or nothing if it is gone (Spark's Python workers come and go)."""
    try:
        return process.cmdline()
    except psutil.Error:
        return []


class _PartState:
    """A part's heartbeats in the target, on a connection of its own that is made again when lost (the
    target restarted, a DBA terminated it): a heartbeat never stops the part it reports on."""

    def __init__(self, pipeline, part: str):
        self.pipeline, self.part = pipeline, part
        self.conn: Any = None

    def record(self, what, **kwargs) -> None:
        self.use(lambda conn: what(conn, self.pipeline.target.state_schema, self.pipeline.name, self.part, **kwargs))

    def use(self, work) -> None:
        """``work(conn)`` on the part's state connection."""
        try:
            if self.conn is None or self.conn.closed or self.conn.broken:
                self.conn = connect_state(self.pipeline)
            work(self.conn)
        except (psycopg.Error, OSError) as exc:
            line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            print(f"seam: could not record the {self.part}'s state in the target ({line}); retrying", file=sys.stderr)
            if self.conn is not None:
                self.conn.close()
            self.conn = None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def _relay_stderr(job):
    """Copy a child's stderr to ours as it comes, keeping its last lines (for the last error)."""
    last: collections.deque[str] = collections.deque(maxlen=50)

    def relay():
        for line in job.stderr:
            sys.stderr.write(line)
            last.append(line.rstrip())

    thread = threading.Thread(target=relay, daemon=True)
    thread.start()
    return thread, last


def _last_error(lines) -> str | None:
    for line in reversed(list(lines)):
        if ONE_LINE.match(line.strip()) or re.search(r"Error:|Exception:", line):
            return line.strip()[:500]
    return None


def run_foreground(pipeline, tables, until_idle: bool) -> int:
    """Reader and a plain (non-Spark) sink in one process: with ``until_idle``, a one-shot catch-up."""
    log_to_stderr()
    stopping: list[BaseException | bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    owners = [Owner(pipeline, "change reader")]
    try:
        owners.append(Owner(pipeline, "stream sink"))
        return _run_foreground(pipeline, tables, until_idle, stopping, owners)
    finally:
        for owner in owners:
            owner.release()


def _run_foreground(pipeline, tables, until_idle: bool, stopping: list, owners: list) -> int:
    stopping_or_lost = lambda: bool(stopping) or any(o.lost for o in owners)  # noqa: E731
    state, repairs = _PartState(pipeline, "sink"), CutoverRepairs(pipeline, tables)

    def sink_stops() -> bool:  # (the sink's thread only: the repairs' state is not shared with the reader's)
        state.use(repairs.tick)  # (cheap: it looks at the target every CHECK_EVERY_S)
        return stopping_or_lost() or (until_idle and not thread.is_alive())

    reader = ChangeReader(pipeline, tables)
    sink = Sink(pipeline, tables)

    def read():
        try:
            if until_idle:
                reader.run(should_stop=stopping_or_lost, until_idle=True)
            else:
                reader.serve(should_stop=stopping_or_lost)
        except BaseException as exc:  # the sink loop must stop too, and the error must be reported
            stopping.append(exc)
            raise

    thread = threading.Thread(target=read, name="seam-change-reader", daemon=True)
    thread.start()
    try:
        sink.run(should_stop=sink_stops, idle_exit=4 if until_idle else None)
        if until_idle:
            sink.run(caught_up=True)  # what the reader published last, up to each topic's end
            state.use(lambda conn: repairs.tick(conn, now=True))  # a cut-over just applied: its repair runs on
    finally:
        sink.close()
        state.close()
    thread.join(timeout=30)
    errors = [e for e in stopping if isinstance(e, BaseException)]
    if errors:
        raise errors[0]
    lost = [o for o in owners if o.lost]
    return exit_status(lost[0]) if lost else 0
