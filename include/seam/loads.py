"""``seam load full``: check everything, run the Spark publishing job, apply
the batch with a sink, and report rows, rows/s and the recorded binlog position.

Its size: one load from check to commit (cascade order, the sink and the Spark job as children, progress,
stall and kill handling, the relay of their log lines) reads best in one place.

The Spark job runs through ``spark-submit`` (the same entry point Airflow
runs), the sink in its own process (unless one already applies the table's
topic): either can be killed and re-run without harm (see ``seam.apply.sink``).

Delivery guarantee: that of the sink (exactly once, whole batches only).
Progress is the ledger's staged row count, i.e. rows safely in PostgreSQL.
"""

from __future__ import annotations

import json
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pymysql

from seam.apply.sink import Sink
from seam.core.errors import ONE_LINE, SeamError
from seam.core.identifiers import qi
from seam.core.pipeline import Pipeline, TableConfig
from seam.source.full_load import Resume, plan_from_json, prepare
from seam.source.incremental import plan_window
from seam.source.schema import reachable, read_foreign_keys
from seam.spark import spark_job_script, spark_master, submit_conf
from seam.state import ledger
from seam.state.connection import connect_state
from seam.state.ledger import batch_status, watermark
from seam.state.positions import stored_offsets
from seam.state.schema import held_by_another, lock, try_lock
from seam.wire.boundary import Part, new_batch_id
from seam.wire.topics import ensure_topics, table_topic


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
    def stop(self) -> None: ...


SparkSubmit = Callable[[str, list[str]], SparkJob]


@dataclass
class Runner:
    """How loads run here, as values: the connections' ``SEAM_*`` variables the processes a load starts read
    (an Airflow hook's; never written into this process's environment), where their output goes (``say`` for
    progress, ``log`` for their lines, else this process's stdout), how the Spark job is submitted (default:
    spark-submit here), and ``children``: what runs now, for a caller that must stop it (a task's on_kill)."""

    env: Mapping[str, str] = field(default_factory=dict)
    say: Callable[[str], None] = print
    log: LineLog | None = None
    submit: SparkSubmit | None = None
    timeout: float = 3600
    progress_every: float = 3.0
    children: list = field(default_factory=list)


def job_env(connections: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a process a load starts: this one's, with the connections' ``SEAM_*`` variables."""
    env = {**os.environ, **(connections or {})}
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def sink_running(conn, topic: str) -> bool:
    return held_by_another(conn, "topic", topic)


def cascades_followed(pipeline: Pipeline, tables: list[TableConfig]) -> tuple[list[str], list[TableConfig], dict]:
    """One line per foreign-key rule the stream will apply to a loaded table (or from one), so that a user
    sees which deletes and key updates reach which synced children; and the tables in the order to load
    them: a parent before the tables its cascades reach, so that a level below is loaded at a later
    position than the level above (seam.apply.cascades needs the level above to have applied the change); and
    per table, the tables of the list its cascades reach (loaded again with it if its batch is rejected)."""
    keys = _cascading_keys(pipeline)
    loaded = {(t.db, t.table) for t in tables}
    lines = []
    for fk in keys:
        if fk.child in loaded or fk.parent in loaded:
            lines.append(
                f"cascade followed by the stream: {'.'.join(fk.parent)} -> {'.'.join(fk.child)} "
                f"({', '.join(fk.columns)}; {', '.join(fk.rules_followed())})"
            )
    reached = {fk.child for fk in keys if fk.parent != fk.child}
    for fk in keys:  # a loaded middle level whose lower level is not loaded with it
        if fk.parent in loaded and fk.parent in reached and fk.child != fk.parent and fk.child not in loaded:
            lines.append(
                f"note: cascades through {'.'.join(fk.parent)} continue into {'.'.join(fk.child)}; one "
                f"that happens while {'.'.join(fk.parent)} loads stops {'.'.join(fk.child)} until both are "
                f"loaded again: load them together (seam load full {'.'.join(fk.parent)} "
                f"{'.'.join(fk.child)})"
            )
    parents = {
        t: {fk.parent for fk in keys if fk.child == t and fk.parent != t and fk.parent in loaded} for t in loaded
    }
    ordered: list[TableConfig] = []
    done: set[tuple[str, str]] = set()
    while len(ordered) < len(tables):
        ready = [t for t in tables if (t.db, t.table) not in done and parents[(t.db, t.table)] <= done]
        for t in ready or [t for t in tables if (t.db, t.table) not in done][:1]:  # a cycle: as given
            ordered.append(t)
            done.add((t.db, t.table))
    below = {
        t.name: reachable((t.db, t.table), lambda p: [fk.child for fk in keys if fk.parent == p and fk.child in loaded])
        - {(t.db, t.table)}
        for t in tables
    }
    reach = {name: {f"{db}.{table}" for db, table in seen} for name, seen in below.items()}
    return lines, ordered, reach


def _cascading_keys(pipeline: Pipeline) -> list:
    """The foreign keys whose rules the stream follows into the pipeline's streamed tables."""

    streamed = {(t.db, t.table) for t in pipeline.tables if t.sync == "stream"}
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs())
    try:
        return [
            fk
            for fk in read_foreign_keys(conn, {t.db for t in pipeline.tables})
            if fk.rules_followed() and fk.child in streamed
        ]
    finally:
        conn.close()


def cascade_groups(pipeline: Pipeline, tables: list[TableConfig]) -> list[list[TableConfig]]:
    """The tables split into groups that can load independently (for example in parallel): a table that
    a cascade reaches through another table of the list (a middle level) loads in one ``full_load`` with
    it, which orders them parents first (see seam.apply.cascades). Other tables are groups of their own."""
    keys = _cascading_keys(pipeline)
    wanted = {(t.db, t.table): t for t in tables}
    middle = {fk.child for fk in keys if fk.child != fk.parent}
    group = {name: {name} for name in wanted}
    for fk in keys:
        if fk.parent in middle and fk.parent != fk.child and fk.parent in wanted and fk.child in wanted:
            merged = group[fk.parent] | group[fk.child]
            for name in merged:
                group[name] = merged
    out, seen = [], set()
    for name in wanted:
        if name not in seen:
            seen |= group[name]
            out.append([wanted[n] for n in wanted if n in group[name]])
    return out


def full_load(
    pipeline: Pipeline,
    tables: list[TableConfig],
    runner: Runner | None = None,
    *,
    stall_after: float = 300.0,
    rejected_retries: int = 1,
    restart: bool = False,
) -> list[dict]:
    """Load each table fully; returns one summary per table. Raises LoadError if any batch did not commit.
    A rejected batch (its END disagrees with what reached the sink) is loaded again ``rejected_retries`` times.
    A table whose earlier load was interrupted with its batch still open resumes it (the chunks published
    whole are kept), unless ``restart``."""
    runner = runner or Runner()
    say = runner.say
    schemas = {t.name: prepare(pipeline, t)[0] for t in tables}  # every check first: a bad table changes nothing
    lines, tables, reach = cascades_followed(pipeline, tables)
    for line in lines:
        say(line)
    resumes, results = ({}, {}) if restart else _resumable(pipeline, tables, schemas, say)
    for r in results.values():
        seconds = (r["finished_at"] - r["opened_at"]).total_seconds()
        r["seconds"], r["rows_per_s"] = round(seconds, 2), round((r["final_rows"] or 0) / max(seconds, 1e-3))
    todo = [t for t in tables if t.name not in results]
    for attempt in range(1 + rejected_retries):
        if not todo:
            break
        batches = {t.name: resumes[t.name][0] if t.name in resumes else new_batch_id() for t in todo}
        job_args = [
            a
            for t in todo
            for a in ("--table", t.name, "--batch", batches[t.name], "--resume", resumes.get(t.name, ("", "-"))[1])
        ]
        resumes = {}  # a batch loaded again after a rejection starts afresh
        results.update(_run_batches(pipeline, todo, batches, "full_load", job_args, runner, stall_after))
        # a batch whose END disagrees with what reached the sink lost messages on the way (a broker that lost
        # data): it was rejected, nothing of it is visible, and a new batch is the remedy
        rejected = [t for t in todo if results[t.name]["state"] == "rejected"]
        if not rejected or attempt == rejected_retries:
            break
        for t in rejected:
            say(
                f"{t.name}: batch {results[t.name]['batch']} was REJECTED ({results[t.name]['error']}); the target "
                "keeps its previous data; loading it again with a new batch"
            )
        again = {t.name for t in rejected} | {n for t in rejected for n in reach[t.name]}  # and the levels below
        todo = [t for t in tables if t.name in again]
    failed = []
    for t in tables:
        r = results[t.name]
        if r["state"] == "committed":
            say(
                f"{t.name}: committed batch {r['batch']}: {r['final_rows'] or 0:,} rows in {r['seconds']:.1f}s "
                f"({r['rows_per_s']:,} rows/s), binlog position {r['position_file']}:{r['position_pos']}, "
                f"target table {qi(t.db)}.{qi(t.table)}"
            )
        else:
            failed.append(f"{t.name}: batch {r['batch']} {r['state']}: {r['error']}")
    if failed:
        raise LoadError("; ".join(failed) + " (the target keeps the previous data)")
    return [results[t.name] for t in tables]


def _resumable(
    pipeline: Pipeline, tables: list[TableConfig], schemas: dict, say
) -> tuple[dict[str, tuple[str, str]], dict[str, dict]]:
    """Per table whose last full load was interrupted with its batch still open (and the same columns and
    key): (batch id, ``Resume`` as JSON for the Spark job). What the interrupted load published is applied
    first, so that every chunk it published whole is kept; a batch whose END it had published commits
    there, and is the table's load (second dict: its summary)."""
    conn = connect_state(pipeline)
    out, finished = {}, {}
    state = pipeline.target.state_schema
    try:
        interrupted = {t.name: ledger.resumable(conn, state, t.db, t.table) for t in tables}
        waiting = [t for t in tables if interrupted[t.name]]
        if waiting:
            say(
                f"{', '.join(t.name for t in waiting)}: an interrupted load's batch is open; applying what it published"
            )
            _catch_up(pipeline, waiting, conn)
        for t in waiting:
            found = interrupted[t.name]
            assert found is not None  # waiting holds the interrupted ones
            batch = found[0]
            status = batch_status(conn, state, batch) or {}
            if status.get("state") == "committed":
                say(f"{t.name}: batch {batch} resumed: the interrupted load had published all of it; committed")
                finished[t.name] = {"table": t.name, "batch": batch, **status}
        for t in tables:
            if t.name in finished:
                continue
            found = ledger.resumable(conn, pipeline.target.state_schema, t.db, t.table)
            if found is None:
                continue
            batch, columns, key, plan, kept = found
            if columns != [asdict(c) for c in schemas[t.name].columns] or key != list(t.key):
                continue  # the table changed: a new batch supersedes the open one
            parts = tuple(
                Part(part, attempt, rows, checksum, file, pos) for part, attempt, rows, checksum, file, pos in kept
            )
            out[t.name] = (batch, Resume(plan_from_json(plan), parts).to_json())
    finally:
        conn.close()
    return out, finished


def _catch_up(pipeline: Pipeline, tables: list[TableConfig], conn) -> None:
    """Until the tables' topics are applied as far as they go: by the running sink (its stored offsets stop
    moving), or by a sink run here until idle."""
    topics = [table_topic(pipeline, t) for t in tables]
    if not all(sink_running(conn, topic) for topic in topics):
        sink = Sink(pipeline, tables)
        try:
            sink.run(caught_up=True, deadline=time.time() + 900)
        finally:
            sink.close()
        return
    last, still, deadline = None, 0, time.time() + 300
    while still < 3 and time.time() < deadline:
        offsets = stored_offsets(conn, pipeline.target.state_schema, topics)
        still = still + 1 if offsets == last else 0
        last = offsets
        time.sleep(1)


def incremental_load(
    pipeline: Pipeline,
    tables: list[TableConfig],
    runner: Runner | None = None,
    *,
    start: str | None = None,
    end: str | None = None,
) -> list[dict]:
    """Load one window per table (see ``seam.source.incremental``); returns one summary per table. Windows of the same
    table are serialised (an advisory lock per table in the target), whoever starts them."""
    runner = runner or Runner()
    say = runner.say
    conn = connect_state(pipeline)
    for table in sorted(tables, key=lambda t: t.name):  # windows of one table never run at once: wait our turn
        if not try_lock(conn, "window", table.name):
            say(f"{table.name}: another window of this table is being loaded; waiting for it to finish")
            lock(conn, "window", table.name)
    try:
        return _incremental_locked(pipeline, tables, conn, runner, start, end)
    finally:
        conn.close()  # releases the table locks


def _incremental_locked(
    pipeline: Pipeline, tables: list[TableConfig], conn, runner: Runner, start: str | None, end: str | None
) -> list[dict]:
    say = runner.say
    windows = {}
    for table in tables:  # every window is checked before anything is published
        mark = watermark(conn, pipeline.target.state_schema, table.db, table.table, table.cursor)
        _, windows[table.name] = plan_window(pipeline, table, start, end, mark)
    for table in tables:
        w = windows[table.name]
        say(
            f"{table.name}: window {w.cursor} in ({w.start}, {w.end}]"
            + (
                f" (CLAMPED: requested end {w.requested_end} is within the {table.safety_delay_s:g}s safety delay "
                "of the source's clock)"
                if w.clamped
                else ""
            )
        )
    batches = {t.name: new_batch_id() for t in tables}
    job_args = [
        a
        for t in tables
        for a in ("--table", t.name, "--batch", batches[t.name], "--window", json.dumps(windows[t.name].__dict__))
    ]
    results = _run_batches(pipeline, tables, batches, "incremental_load", job_args, runner, stall_after=300.0)
    failed = []
    for t in tables:
        r = results[t.name]
        w = windows[t.name]
        r.update(window_start=w.start, window_end=w.end, requested_end=w.requested_end, clamped=w.clamped)
        if r["state"] == "committed":
            say(
                f"{t.name}: committed window ({w.start}, {w.end}] as batch {r['batch']}: {r['final_rows'] or 0:,} "
                f"rows merged in {r['seconds']:.1f}s; watermark {w.end}" + (" (clamped)" if w.clamped else "")
            )
        else:
            failed.append(f"{t.name}: batch {r['batch']} {r['state']}: {r['error']}")
    if failed:
        raise LoadError("; ".join(failed) + " (the target keeps the previous data)")
    return [results[t.name] for t in tables]


def _run_batches(
    pipeline: Pipeline,
    tables: list[TableConfig],
    batches: dict[str, str],
    job: str,
    job_args: list[str],
    runner: Runner,
    stall_after: float,
) -> dict[str, dict]:
    """Run the Spark publishing job and a sink (unless one runs) until every batch is final. With a ``log``
    their output goes to it line by line at each line's own level (else to this process's stdout/stderr)."""
    say, log, submit, children = runner.say, runner.log, runner.submit, runner.children
    timeout, progress_every = runner.timeout, runner.progress_every
    pipeline_path = pipeline.path or None
    env = job_env(runner.env)
    output: dict[str, Any] = (
        dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace") if log else {}
    )
    topics = [table_topic(pipeline, t) for t in tables]
    ensure_topics(pipeline, topics)
    conn = connect_state(pipeline)
    started = time.time()

    def start_sink() -> Child:
        sink_cmd = [
            sys.executable,
            "-m",
            "seam.cli",
            "sink",
            *(["--pipeline", pipeline_path] if pipeline_path else []),
            *[a for t in tables for a in ("--table", t.name)],
            *[a for b in batches.values() for a in ("--until-batch", b)],
            "--timeout",
            str(timeout),
        ]
        child = Child(subprocess.Popen(sink_cmd, env=env, start_new_session=True, **output))
        children.append(child)
        if log:
            relay_output(child.proc, log)
        return child

    sink = None
    try:
        if not all(sink_running(conn, topic) for topic in topics):
            sink = start_sink()
        job_args = [*(["--pipeline", pipeline_path] if pipeline_path else []), *job_args]
        spark: SparkJob
        if submit is None:
            spark = Child(
                subprocess.Popen(
                    spark_submit_command(pipeline, job, job_args), env=env, start_new_session=True, **output
                )
            )
            if log:
                relay_output(spark.proc, log)
        else:
            spark = submit(job, job_args)
        children.append(spark)
    except BaseException:  # nothing this load started may outlive it
        for child in children:
            child.stop()
        conn.close()
        raise
    say(
        ("spark job started" if submit is not None else f"spark job pid {spark.pid}")
        + (f", sink pid {sink.pid}" if sink else ", applied by the running sink")
    )

    results: dict[str, dict] = {}

    def staged_rows() -> int:
        return sum(
            (batch_status(conn, pipeline.target.state_schema, b) or {}).get("staged_rows", 0) for b in batches.values()
        )

    last_report, last_rows = started, 0
    last_progress, spark_done = started, None
    shown = False  # a progress line was said
    try:
        last_rows = staged_rows()  # a resumed batch's kept rows are not this run's rate
        while len(results) < len(tables):
            time.sleep(0.5)
            for t in tables:
                status = batch_status(conn, pipeline.target.state_schema, batches[t.name])
                if status and status["state"] != "open" and t.name not in results:
                    results[t.name] = {"table": t.name, "batch": batches[t.name], **status}
            if len(results) == len(tables):
                break
            code = spark.poll()
            if code not in (None, 0):
                raise LoadError(
                    f"the Spark job failed (exit {code}); nothing of the unfinished batch is visible, "
                    "the target keeps the previous data; fix the cause above and re-run"
                )
            if sink is None and not all(sink_running(conn, t) for t in topics):
                # the sink we left it to was another load's, and it ended with that load's batch
                say("the running sink stopped before the batch committed; starting one for it")
                sink = start_sink()
            if sink is not None and sink.poll() is not None and all(sink_running(conn, t) for t in topics):
                # a streaming sink (re)started between the check above and ours, and took the topics first: it
                # applies the batch as it does when it runs from the start
                say("a running sink took the topics first: it applies the batch")
                sink = None
            if sink is not None and sink.poll() is not None:
                raise LoadError(
                    f"the sink stopped (exit {sink.poll()}) before the batch committed; "
                    f"run `seam sink {' '.join('--table ' + t.name for t in tables)}` to finish "
                    "applying it, the target keeps the previous data meanwhile"
                )
            if time.time() - started > timeout:
                raise LoadError(f"no commit within {timeout:.0f}s; the target keeps the previous data")
            if code == 0 and spark_done is None:
                spark_done = time.time()
            if spark_done is not None and time.time() - max(spark_done, last_progress) > stall_after:
                unseen = [
                    name for name, b in batches.items() if batch_status(conn, pipeline.target.state_schema, b) is None
                ]
                raise LoadError(
                    f"the Spark job published everything, but the sink has made no progress for "
                    f"{stall_after:.0f}s"
                    + (f" and never saw the BEGIN of {', '.join(unseen)}" if unseen else "")
                    + "; is the sink running and the broker the same "
                    "one the job wrote to? The target keeps the previous data; re-run the load"
                )
            due = time.time() - last_report >= progress_every
            if due or not shown:
                staged = staged_rows()
                # nothing to say before the first rows (Spark is starting); they are said as soon as they come
                # (a fast load may commit within one interval), then every ``progress_every``
                if due or staged != last_rows:
                    rate = (staged - last_rows) / max(time.time() - last_report, 1e-3)
                    if staged:
                        say(f"  staged {staged:,} rows in the target ({rate:,.0f} rows/s)")
                        shown = True
                    if staged != last_rows:
                        last_progress = time.time()
                    last_report, last_rows = time.time(), staged
        deadline = time.time() + 120
        while spark.poll() is None and time.time() < deadline:
            time.sleep(0.2)
    finally:
        for child in (spark, sink):
            if child is not None:
                child.stop()
                if child in children:
                    children.remove(child)
        conn.close()

    elapsed = time.time() - started
    for r in results.values():
        seconds = (r["finished_at"] - r["opened_at"]).total_seconds() if r["finished_at"] else elapsed
        r["seconds"] = round(seconds, 2)
        r["rows_per_s"] = round((r["final_rows"] or 0) / max(seconds, 1e-3))
    return results


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


def relay_output(proc: subprocess.Popen, log: LineLog) -> threading.Thread:
    """Log a child's output line by line at each line's own level: Spark's log4j and Seam's logging name it
    near the start of a line, a trace's continuation lines keep the level of the line they continue, and
    anything else (progress lines) is INFO."""

    def relay():
        level = logging.INFO
        assert proc.stdout is not None  # started with stdout=PIPE
        for line in proc.stdout:
            line = line.rstrip()
            if not line:
                continue
            found = _LEVEL.search(line[:80])
            if ONE_LINE.match(line):
                level = logging.ERROR
            elif found:
                level = _LEVELS[found.group(1)]
            elif not line[:1].isspace() and not line.startswith(("Caused by", "at ", "...")):
                level = logging.INFO
            log.log(level, "%s", line)

    thread = threading.Thread(target=relay, name=f"relay-{proc.pid}", daemon=True)
    thread.start()
    return thread
