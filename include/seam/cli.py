"""The ``seam`` command line.

Its size: one function per command and the parser; the work is in the library, the command bodies only call it
and print. Each command imports the rooms it uses inside its function: ``seam --help`` and the quick commands
start in a tenth of a second instead of importing the binlog reader, Kafka and Spark's helpers.

Every command takes ``--pipeline PATH`` (default ``include/pipelines/demo.yaml``).
When the embedded stack has been set up, its endpoints and credentials are
put in the environment (without overriding what is already set), so the
pipeline's ``${SEAM_...}`` references resolve with no manual export.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import urllib.parse
from typing import Any

from seam.config import DEFAULT_PIPELINE, ConfigError, Pipeline, load_pipeline
from seam.core.errors import ONE_LINE, SeamError, one_line
from seam.processes import Processes


def _pipeline(args) -> Pipeline:
    if getattr(args, "_pipeline_obj", None) is None:
        args._pipeline_obj = load_pipeline(args.pipeline)
    return args._pipeline_obj


# ------------------------------------------------------------- commands ----


def _stack():
    """The embedded development stack (``seam_dev``), for the commands that manage it."""
    from seam_dev.stack import EmbeddedStack

    return EmbeddedStack()


def cmd_up(args, procs: Processes) -> int:
    from seam_dev.stack import SERVICES, StackError

    stack = _stack()
    services = tuple(args.services) or SERVICES
    unknown = set(services) - set(SERVICES)
    if unknown:
        raise StackError(f"unknown service(s) {', '.join(sorted(unknown))}; choose from {', '.join(SERVICES)}")
    started = time.monotonic()
    stack.up(services, timeout=args.timeout)
    print(f"stack up in {time.monotonic() - started:.1f}s; `seam status` shows how to connect")
    return 0


def cmd_down(args, procs: Processes) -> int:
    _stack().down()
    return 0


def cmd_status(args, procs: Processes) -> int:
    if args.tables:
        return _table_status(_pipeline(args), [_pipeline(args).table(t) for t in args.tables])
    rows = _stack().status()
    for r in rows:
        state = "up" if r.running else "down"
        pid = f"pid {r.pid}" if r.pid else ""
        print(f"{r.name:9} {state:5} port {r.port:<6} {pid:11} {r.connect}" + (f"  [{r.detail}]" if r.detail else ""))
    return 0 if all(r.running for r in rows) else 3


def _table_status(pipeline, tables) -> int:
    """Per table: watermark and last window (incremental), last batches from the ledger, stream position."""
    from seam.apply.target import connect_state
    from seam.core.identifiers import qi
    from seam.state.ledger import table_history

    conn = connect_state(pipeline)
    for t in tables:
        history = table_history(conn, pipeline.target.state_schema, t.db, t.table)
        print(
            f"{t.name}  (target {qi(t.db)}.{qi(t.table)}; "
            + (
                f"incremental on {t.cursor}, safety delay {t.safety_delay_s:g}s"
                if t.incremental
                else "full loads and stream"
            )
            + ")"
        )
        for cursor, mark, start, end, clamped, at in history["watermarks"]:
            print(
                f"  watermark {cursor} = {mark}; last window ({start}, {end}]"
                + (" CLAMPED" if clamped else "")
                + f", at {at:%Y-%m-%d %H:%M:%S}"
            )
        rows = history["batches"]
        for batch, mode, st, ws, we, final, published, seconds, clamped, error in rows:
            window = f" window ({ws}, {we}]" + (" clamped" if clamped == "true" else "") if ws else ""
            took = f" in {seconds:.1f}s" if seconds is not None else ""
            print(
                f"  {batch} {mode:11} {st:10}{window} rows {final if final is not None else published or 0:,}"
                f"{took}" + (f"  error: {error}" if error else "")
            )
        if not rows:
            print("  no batches yet")
        pos = history["position"]
        if pos:
            print(f"  stream/binlog position applied {pos[0]}:{pos[1]}" + (f"  STOPPED: {pos[2]}" if pos[2] else ""))
        checked = history["validation"]
        if checked:
            verdict, at, missing, extra, different, html = checked
            print(
                f"  last validation {verdict.upper()} at {at:%Y-%m-%d %H:%M:%S}: {missing:,} missing, {extra:,} "
                f"extra, {different:,} different" + (f"  ({html})" if html else "")
            )
    conn.close()
    return 0


def cmd_env(args, procs: Processes) -> int:
    for key, value in _stack().env().items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


def cmd_seed(args, procs: Processes) -> int:
    from seam_dev import demo

    pipeline = _pipeline(args)
    demo.seed(pipeline, rows=args.rows, admin_url=os.environ.get("SEAM_MYSQL_URL"), reset=not args.keep)
    return 0


def cmd_writer(args, procs: Processes) -> int:
    from seam_dev import demo

    stats = demo.run_writer(
        os.environ["SEAM_MYSQL_URL"],
        rate=args.rate,
        seconds=args.seconds,
        threads=args.threads,
        seed=args.seed,
        database=args.database,
    )
    print(json.dumps(stats, sort_keys=True))
    return 0


def cmd_trigger(args, procs: Processes) -> int:
    from seam_dev.airflow_api import AirflowClient

    client = AirflowClient.from_env()
    conf = json.loads(args.conf) if args.conf else {}
    run = client.trigger(args.dag_id, conf=conf)
    print(f"triggered {args.dag_id} run {run['dag_run_id']}")
    if not args.wait:
        return 0
    state = client.wait(
        args.dag_id,
        run["dag_run_id"],
        timeout=args.timeout,
        tasks=True,
        progress=lambda s: print(f"  {args.dag_id}: {s}", flush=True),
    )
    print(f"{args.dag_id} run {run['dag_run_id']}: {state}")
    if state != "success":
        for task, message in client.failures(args.dag_id, run["dag_run_id"]).items():
            print(f"{task} failed: {message}", file=sys.stderr)
        print(
            f"the task logs are in the Airflow UI: {client.base_url}/dags/{args.dag_id}/runs/"
            f"{urllib.parse.quote(run['dag_run_id'])}",
            file=sys.stderr,
        )
    return 0 if state == "success" else 1


def cmd_load(args, procs: Processes) -> int:
    from seam.load_output import LoadOutput
    from seam.loads import Runner, full_load, incremental_load

    pipeline = _pipeline(args)
    if args.mode == "full":
        if args.all or args.start or args.end:
            raise ConfigError("load", "--all/--start/--end are for `seam load incremental`")
        if not args.tables:
            raise ConfigError("load", "name the table(s) to load: seam load full TABLE...")
        tables = [pipeline.table(t) for t in args.tables]
    else:
        if args.restart:
            raise ConfigError("load", "--restart is for `seam load full`")
        if args.all == bool(args.tables):
            raise ConfigError("load", "name the table(s) to load, or give --all for every incremental table")
        all_incremental = [t for t in pipeline.tables if t.incremental]
        tables = all_incremental if args.all else [pipeline.table(t) for t in args.tables]
        if not tables:
            raise ConfigError("tables", "no table of the pipeline is incremental (give it a cursor: updated_at)")
    stamp = time.strftime("%Y%m%dT%H%M%S")
    output = LoadOutput(procs.log_dir / f"load-{stamp}-{os.getpid()}.log", [t.name for t in tables])
    runner = Runner(say=lambda line: print(line, flush=True), log=output, timeout=args.timeout)
    try:
        if args.mode == "full":
            full_load(pipeline, tables, runner, restart=args.restart)
        else:
            incremental_load(pipeline, tables, runner, start=args.start, end=args.end)
    except SeamError:
        print(f"the whole output of the Spark job and the sink: {output.path}", flush=True)
        raise
    finally:
        output.close()
    return 0


def cmd_summary(args, procs: Processes) -> int:
    """One line per table: how it is kept current, rows, the full load's rows/s, lag, the last verdict.
    Exit 1 unless every table's last validation is EQUAL."""
    import pymysql

    from seam.apply.target import connect_state
    from seam.source.streaming import stream_lag
    from seam.state.parts import table_summary

    pipeline = _pipeline(args)
    streamed = [t for t in pipeline.tables if not t.incremental]
    lags = {lag.table: lag for lag in stream_lag(pipeline, streamed)[1]} if streamed else {}
    conn = connect_state(pipeline)
    source = pymysql.connect(**pipeline.source.pymysql_kwargs())
    rows = []
    try:
        for t in pipeline.tables:
            s = table_summary(conn, pipeline.target.state_schema, t.db, t.table)
            rate = f"{s['load_rows'] / s['load_seconds']:,.0f}" if s["load_rows"] and s["load_seconds"] else "-"
            if t.incremental:
                lag = "-"
                if s["watermark"]:  # the cursor's distance to the source's clock, in the source's time zone
                    with source.cursor() as cur:
                        cur.execute("SELECT TIMESTAMPDIFF(MICROSECOND, %s, NOW(6)) / 1e6", (s["watermark"],))
                        behind = cur.fetchone()[0]
                    lag = f"{float(behind):.0f} s (window)" if behind is not None else "-"
            else:
                got = lags.get(t.name)
                lag = (
                    (
                        "STOPPED"
                        if got.stopped
                        else "-"
                        if got.behind_seconds is None
                        else f"{got.behind_seconds:.0f} s, {got.behind_events or 0:,} ev"
                    )
                    if got and got.applied
                    else "-"
                )
            rows.append(
                (
                    t.name,
                    f"full + {t.sync}",
                    "-" if s["rows"] is None else f"{s['rows']:,}",
                    rate,
                    lag,
                    (s["verdict"] or "not validated").upper(),
                )
            )
    finally:
        conn.close()
        source.close()
    head = ("table", "mode", "rows", "rows/s (full load)", "lag", "verdict")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(r):
        return "  ".join(c.ljust(w) if i in (0, 1, 4, 5) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    print(line(head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    return 0 if all(r[5] == "EQUAL" for r in rows) else 1


def cmd_validate(args, procs: Processes) -> int:
    from seam.validate.side import Scope
    from seam.validate.validation import validate_tables

    pipeline = _pipeline(args)
    if args.all == bool(args.tables):
        raise ConfigError("validate", "name the table(s) to validate, or give --all")
    tables = list(pipeline.tables) if args.all else [pipeline.table(t) for t in args.tables]
    scope = Scope(
        window=tuple(args.window) if args.window else None,
        key_range=(args.key_range[0], args.key_range[1]) if args.key_range else None,
    )
    reports = validate_tables(
        pipeline, tables, scope, limit=args.limit, report_dir=args.report_dir, say=lambda line: print(line, flush=True)
    )
    if args.json:
        print(json.dumps([r.as_dict() for r in reports], default=str, indent=2))
    if len(reports) == 1 and reports[0].unchecked:  # one named table that cannot be compared: bad input
        print(f"seam: validation: {reports[0].problem}", file=sys.stderr)
        return 2
    if len(reports) > 1:
        print("verdicts: " + ", ".join(f"{r.table} {r.verdict.upper()}" for r in reports))
    return 0 if all(r.verdict == "equal" for r in reports) else 1


def cmd_repair(args, procs: Processes) -> int:
    from seam.repair import repair_table

    pipeline = _pipeline(args)
    if args.max_rows is not None and args.max_rows < 1:
        raise ConfigError("repair", "--max-rows must be at least 1")
    for name in args.tables:
        result = repair_table(
            pipeline,
            pipeline.table(name),
            full=args.full,
            max_rows=args.max_rows,
            timeout=args.timeout,
            say=lambda line: print(line, flush=True),
        )
        print(result.summary(), flush=True)
    return 0


def cmd_sink(args, procs: Processes) -> int:
    import logging
    import signal

    from seam.apply.sink import Sink

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    pipeline = _pipeline(args)
    tables = [pipeline.table(t) for t in args.table] if args.table else list(pipeline.tables)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    sink = Sink(pipeline, tables)
    try:
        finished = sink.run(
            until_batches=set(args.until_batch) or None,
            idle_exit=args.idle_exit,
            deadline=time.time() + args.timeout if args.timeout else None,
            should_stop=lambda: bool(stopping),
        )
    finally:
        sink.close()
    for batch, state in sorted(finished.items()):
        print(f"batch {batch}: {state}", flush=True)
    return 0


def cmd_kafka(args, procs: Processes) -> int:
    """`seam kafka topics` and `seam kafka tail TOPIC`: what is on the broker, without kcat (which cannot
    talk to the embedded broker)."""
    import signal

    from seam.wire.topics import list_topics, tail

    pipeline = _pipeline(args)
    if args.action == "topics":
        ours = {f"{pipeline.kafka.topic_prefix}."}
        for name, partitions in list_topics(pipeline):
            mine = "  (this pipeline)" if any(name.startswith(p) for p in ours) else ""
            print(f"{name}  partitions={partitions}{mine}")
        return 0
    if not args.topic:
        raise ConfigError("kafka", "name the topic to tail: seam kafka tail TOPIC (`seam kafka topics` lists them)")
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    for offset, key, control, value in tail(pipeline, args.topic, args.n, args.follow, lambda: bool(stopping)):
        text = value.decode("utf-8", "replace") if value is not None else "null"
        if not args.full and len(text) > 300:
            text = text[:299] + "…"
        kind = "CONTROL" if control else "record"
        print(f"{offset:>10} {kind:7} key={key.decode('utf-8', 'replace') if key else '-'} {text}", flush=True)
    return 0


def cmd_quarantine(args, procs: Processes) -> int:
    """`seam quarantine list|show ID|skip ID`: the messages the sink would not apply, and the decision on one."""
    from seam.apply.target import connect_state
    from seam.state import quarantine
    from seam.wire.topics import table_topic

    pipeline = _pipeline(args)
    if args.action != "list" and args.id is None:
        raise ConfigError("quarantine", f"name the message: seam quarantine {args.action} ID (`seam quarantine list`)")
    conn = connect_state(pipeline)
    try:
        schema = pipeline.target.state_schema
        if args.action == "list":
            topics = [table_topic(pipeline, t) for t in pipeline.tables]
            found = quarantine.listed(conn, schema, topics, all_=args.all)
            if not found:
                print("no quarantined messages" + ("" if args.all else " waiting for a decision"))
            for item in found:
                decided = f"  skipped {item.skipped_at:%Y-%m-%d %H:%M} by {item.skipped_by}" if item.skipped_at else ""
                print(
                    f"#{item.id:<5} {item.name:30} {item.topic}:{item.offset}  "
                    f"{item.quarantined_at:%Y-%m-%d %H:%M:%S}  {item.reason}{decided}"
                )
            return 1 if any(item.skipped_at is None for item in found) else 0
        q = quarantine.get(conn, schema, args.id)
        if q is None:
            raise ConfigError("quarantine", f"no quarantined message #{args.id} (`seam quarantine list --all`)")
        if args.action == "show":
            value = q.value or b""
            print(f"#{q.id} {q.name}: {q.topic} partition {q.partition} offset {q.offset}, at {q.quarantined_at}")
            print(f"reason: {q.reason}")
            print(f"key:    {q.key!r}")
            print(f"value:  {len(value):,} bytes: {value[:2000].decode('utf-8', 'replace')}")
            if q.skipped_at:
                print(f"skipped {q.skipped_at} by {q.skipped_by}" + (f": {q.note}" if q.note else ""))
            return 0
        with conn.transaction():
            goes_on = quarantine.skip(conn, schema, args.id, args.note)
        print(
            f"#{q.id} skipped; {q.name} "
            + (
                "goes on: the stream publishes its changes again from the applied position"
                if goes_on
                else "stays stopped (other quarantined messages, or another stop: `seam stream status`)"
            )
        )
        return 0
    finally:
        conn.close()


STREAM_PARTS = ("stream-reader", "stream-sink")


def cmd_stream(args, procs: Processes) -> int:
    pipeline = _pipeline(args)
    tables = [pipeline.table(t) for t in args.table] if args.table else list(pipeline.tables)
    table_args = [a for t in args.table for a in ("--table", pipeline.table(t).name)]
    if args.action == "start" and args.foreground:
        return _stream_foreground(pipeline, tables, args.until_idle)
    if args.action == "reader":
        return _stream_reader(pipeline, tables)
    if args.action == "sink":
        return _stream_sink(pipeline, table_args)
    if args.action == "start":
        for part in STREAM_PARTS:
            pid = procs.running(part)
            if pid:
                print(f"{part} already running (pid {pid})")
                continue
            cmd = [
                sys.executable,
                "-m",
                "seam.cli",
                "--pipeline",
                args.pipeline,
                "stream",
                part.split("-")[1],
                *table_args,
            ]
            pid = procs.start_process(part, cmd)
            print(f"{part} started (pid {pid}); log {procs.log_dir / (part + '.log')}")
        _await_parts(pipeline, procs, timeout=args.timeout)
        _requested(pipeline, stop=False)
        print("stream started; `seam stream status` shows its state and lag, `seam stream wait` waits for lag 0")
        return 0
    if args.action == "wait":
        return _stream_wait(pipeline, tables, timeout=args.timeout, fail_fast=args.fail_fast)
    if args.action == "stop":
        from seam.supervise import stop_part

        for part in STREAM_PARTS:
            pid = procs.stop(part)
            print(f"{part} stopped (pid {pid})" if pid else f"{part} was not running")
        for part, state in _part_states(pipeline).items():  # parts a supervisor started, on this host
            done = stop_part(state) if part in ("reader", "sink") else ""
            if done:
                print(f"stream-{part}: {done}")
        _requested(pipeline, stop=True)
        return 0
    return _stream_status(pipeline, tables, procs)


def _part_states(pipeline) -> dict:
    from seam.apply.target import connect_state
    from seam.state.parts import part_states

    conn = connect_state(pipeline)
    try:
        return part_states(conn, pipeline.target.state_schema, pipeline.name)
    finally:
        conn.close()


def _requested(pipeline, stop: bool) -> None:
    """Tell the stream supervisor (seam_stream) that a person started or stopped the stream."""
    from seam.apply.target import connect_state
    from seam.state.parts import supervisor_ran

    conn = connect_state(pipeline)
    try:
        supervisor_ran(conn, pipeline.target.state_schema, pipeline.name, [], stop)
    finally:
        conn.close()


def _await_parts(pipeline, procs: Processes, timeout: float) -> None:
    """Until both parts have recorded a heartbeat in the target; a part that exits fails with its last line."""
    from seam.apply.target import connect_state
    from seam.source.streaming import StreamError
    from seam.state.parts import part_states

    conn = connect_state(pipeline)
    began = time.monotonic()
    deadline = began + timeout
    try:
        while True:
            for part in STREAM_PARTS:
                if not procs.running(part):
                    log = procs.log_dir / f"{part}.log"
                    tail = log.read_text().strip().splitlines()[-1:] if log.exists() else []
                    raise StreamError(f"{part} stopped at once: {tail[0] if tail else 'see ' + str(log)}")
            states = part_states(conn, pipeline.target.state_schema, pipeline.name)
            if all(_beating(states.get(p.split("-")[1], {}), time.monotonic() - began) for p in STREAM_PARTS):
                return
            if time.monotonic() > deadline:
                raise StreamError(
                    f"the stream's parts recorded no heartbeat within {timeout:.0f}s; see {procs.log_dir}/stream-*.log"
                )
            time.sleep(0.5)
    finally:
        conn.close()


def _beating(state: dict, waited_s: float) -> bool:
    """A part is up when it runs or starts, or when it failed in the last minutes (say, a sink that found a
    full load's sink on its topic and was restarted) but has beaten since this command began and since it failed."""
    if state.get("state") in ("starting", "running"):
        return True
    failed_age = state.get("failed_age")
    return (
        state.get("state") == "restarting"
        and state["beat_age"] < waited_s
        and (failed_age is None or state["beat_age"] < failed_age)
    )


def _stream_wait(pipeline, tables, timeout: float, fail_fast: bool) -> int:
    from seam.waiting import wait_for_stream

    def say(line: str) -> None:
        print(line, file=sys.stderr if line.startswith("seam:") else sys.stdout, flush=True)

    return wait_for_stream(pipeline, tables, timeout, fail_fast, say)


def _logging() -> None:
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")


def _stream_reader(pipeline, tables) -> int:
    """The change reader, in the foreground until SIGTERM: binlog to the table topics."""
    import signal

    from seam.source.streaming import ChangeReader
    from seam.state.owners import Owner

    _logging()
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    owner = Owner(pipeline, "change reader")
    try:
        ChangeReader(pipeline, tables).serve(should_stop=lambda: bool(stopping) or bool(owner.lost))
    finally:
        owner.release()
    return _lost(owner)


def _lost(owner) -> int:
    """Exit status of a part whose loop ended: 2 when another process took its lock."""
    if owner.lost:
        print(f"seam: busy: {owner.lost}", file=sys.stderr)
        return 2
    return 0


def _stream_sink(pipeline, table_args: list[str]) -> int:
    """The Structured Streaming sink (spark-submit), restarted if it fails, until SIGTERM. Its heartbeat,
    restarts and last error go to the target (``seam.state``), where `seam stream status` reads them."""
    import signal
    import subprocess

    from seam.loads import job_env, spark_submit_command
    from seam.state.owners import Owner
    from seam.state.parts import part_beat, part_failed, part_started, part_stopped

    _logging()
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    owner = Owner(pipeline, "stream sink")
    stopping_or_lost = lambda: bool(stopping) or bool(owner.lost)  # noqa: E731
    # on a cluster the sink holds its executors for as long as it runs: one core leaves the rest to the loads
    # (its work is the driver's foreachBatch; the setting is ignored by local[*])
    cmd = spark_submit_command(
        pipeline, "stream_sink", ["--pipeline", pipeline.path, *table_args], conf={"spark.cores.max": "1"}
    )
    state = _PartState(pipeline, "sink")
    fresh, delay = True, 5.0
    try:
        while not stopping_or_lost():
            state.record(part_started, fresh=fresh)
            fresh = False
            job = subprocess.Popen(cmd, env=job_env(), stderr=subprocess.PIPE, text=True, errors="replace")
            relay, last_lines = _relay_stderr(job)
            started, beat = time.monotonic(), 0.0
            while job.poll() is None:
                if stopping_or_lost():
                    job.terminate()
                    job.wait(60)
                if time.monotonic() - beat > 2:
                    state.record(part_beat)
                    beat = time.monotonic()
                time.sleep(0.5)
            relay.join(timeout=10)
            if not stopping_or_lost():
                error = _last_error(last_lines) or f"exit {job.returncode}"
                state.record(part_failed, error=error)
                delay = 5.0 if time.monotonic() - started > 120 else min(delay * 2, 60.0)  # back off a loop
                print(
                    f"seam: the streaming sink exited ({job.returncode}: {error}); restarting in {delay:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
                time.sleep(delay)
        state.record(part_stopped)
    finally:
        state.close()
        owner.release()
    return _lost(owner)


class _PartState:
    """A part's heartbeats in the target, on a connection of its own that is made again when lost (the
    target restarted, a DBA terminated it): a heartbeat never stops the part it reports on."""

    def __init__(self, pipeline, part: str):
        self.pipeline, self.part = pipeline, part
        self.conn: Any = None

    def record(self, what, **kwargs) -> None:
        import psycopg

        from seam.apply.target import connect_state

        try:
            if self.conn is None or self.conn.closed or self.conn.broken:
                self.conn = connect_state(self.pipeline)
            what(self.conn, self.pipeline.target.state_schema, self.pipeline.name, self.part, **kwargs)
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
    import collections
    import threading

    last: collections.deque[str] = collections.deque(maxlen=50)

    def relay():
        for line in job.stderr:
            sys.stderr.write(line)
            last.append(line.rstrip())

    thread = threading.Thread(target=relay, daemon=True)
    thread.start()
    return thread, last


def _last_error(lines) -> str | None:
    import re

    for line in reversed(list(lines)):
        if ONE_LINE.match(line.strip()) or re.search(r"Error:|Exception:", line):
            return line.strip()[:500]
    return None


def _stream_foreground(pipeline, tables, until_idle: bool) -> int:
    """Reader and a plain (non-Spark) sink in one process: with ``until_idle``, a one-shot catch-up."""
    import signal

    from seam.state.owners import Owner

    _logging()
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
    import threading

    from seam.apply.sink import Sink
    from seam.source.streaming import ChangeReader

    stopping_or_lost = lambda: bool(stopping) or any(o.lost for o in owners)  # noqa: E731
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
        sink.run(
            should_stop=lambda: stopping_or_lost() or (until_idle and not thread.is_alive()),
            idle_exit=4 if until_idle else None,
        )
        if until_idle:
            sink.run(idle_exit=4)  # drain what the reader published last
    finally:
        sink.close()
    thread.join(timeout=30)
    errors = [e for e in stopping if isinstance(e, BaseException)]
    if errors:
        raise errors[0]
    lost = [o for o in owners if o.lost]
    return _lost(lost[0]) if lost else 0


def _stream_status(pipeline, tables, procs: Processes) -> int:
    """The parts as their heartbeats in the target show them, then each table's position and lag. Exit 1 when
    a part is down, stopped or restarting, or a table is stopped."""
    from seam.apply.target import connect_target
    from seam.source.streaming import stream_lag
    from seam.state.parts import part_states

    tables = [t for t in tables if t.sync == "stream"]
    head, lags = stream_lag(pipeline, tables)
    conn = connect_target(pipeline)
    try:
        parts = part_states(conn, pipeline.target.state_schema, pipeline.name)
    finally:
        conn.close()
    states = []
    for name in ("reader", "sink"):
        p = parts.get(name)
        if p is None:
            states.append("never started")
            print(f"  {name:7} never started (`seam stream start`)")
            continue
        states.append(p["state"])
        what = {
            "running": f"{p['batches']:,} {'polls' if name == 'reader' else 'micro-batches'}",
            "starting": "no micro-batch yet" if name == "sink" else "connecting",
            "restarting": f"{p['restarts']} restart(s), last error: {p['last_error']}",
            "stopped": "stopped cleanly",
            "down": f"no heartbeat for {p['beat_age']:.0f}s",
        }[p["state"]]
        print(
            f"  {name:7} {p['state'].upper():10} pid {p['pid']} on {p['host']}, last heartbeat "
            f"{p['beat_age']:.0f}s ago; {what}"
            + (f" ({p['restarts']} restart(s) since start)" if p["restarts"] and p["state"] == "running" else "")
        )
        if p["retries"]:
            print(f"          {p['retries']:,} transient target error(s) retried, the last: {p['last_retry']}")
    overall = (
        "running"
        if set(states) == {"running"}
        else "starting"
        if set(states) <= {"running", "starting"}
        else "restarting"
        if "restarting" in states
        else "stopped"
        if set(states) == {"stopped"}
        else "down"
    )
    print(f"stream: {overall.upper()}; source binlog at {head}")
    stopped = 0
    for lag in lags:
        if lag.applied is None:
            print(f"  {lag.table:30} no committed full load (`seam load full {lag.table}`)")
            continue
        if lag.stopped:
            stopped += 1
            print(f"  {lag.table:30} STOPPED at {lag.applied}: {lag.stopped}")
            continue
        behind = f"{lag.behind_bytes:,} bytes behind" if lag.behind_bytes is not None else "binlog purged"
        seconds = f"{lag.behind_seconds:.1f} s" if lag.behind_seconds is not None else "? s"
        rate = f"{lag.changes_per_s:,.0f} changes/s applied" if lag.changes_per_s is not None else ""
        print(
            f"  {lag.table:30} applied {str(lag.applied):26} {behind}, {lag.behind_events:,} events, {seconds}; {rate}"
        )
    return 1 if stopped or overall not in ("running", "starting") else 0


# ----------------------------------------------------------------- main ----


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seam", description="Keep MySQL tables in sync with PostgreSQL, in batch and in stream, with proof."
    )
    from seam_dev.stack import SERVICES

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--pipeline",
        default=argparse.SUPPRESS,
        metavar="PATH",
        help=f"pipeline YAML (default {DEFAULT_PIPELINE.relative_to(DEFAULT_PIPELINE.parents[2])})",
    )
    parser.add_argument("--pipeline", default=None, metavar="PATH", help="pipeline YAML")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("up", parents=[common], help="start the embedded stack (MariaDB, broker, PostgreSQL, Airflow)")
    p.add_argument("services", nargs="*", metavar="SERVICE", help=f"only these ({', '.join(SERVICES)})")
    p.add_argument("--timeout", type=float, default=240, help="seconds to wait for each service's health")
    p.set_defaults(func=cmd_up)

    sub.add_parser("down", parents=[common], help="stop what `seam up` started").set_defaults(func=cmd_down)
    p = sub.add_parser(
        "status",
        parents=[common],
        help="each service: up/down, port, how to connect; with TABLE: "
        "its watermark, last windows/batches and stream position",
    )
    p.add_argument("tables", nargs="*", metavar="TABLE")
    p.set_defaults(func=cmd_status)
    sub.add_parser("env", parents=[common], help="print export lines for every endpoint and credential").set_defaults(
        func=cmd_env
    )

    p = sub.add_parser("seed", parents=[common], help="create the demo schema and fill it")
    p.add_argument("--rows", type=int, default=10_000, help="rows in the payments ledger (other tables scale)")
    p.add_argument("--keep", action="store_true", help="add rows instead of recreating the demo tables")
    p.set_defaults(func=cmd_seed)

    p = sub.add_parser("writer", parents=[common], help="run a concurrent insert/update/delete mix on the demo tables")
    p.add_argument("--rate", type=float, default=200, help="target changes per second (all threads)")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=None, help="random seed, for a repeatable mix")
    p.add_argument("--database", default="demo")
    p.set_defaults(func=cmd_writer)

    p = sub.add_parser("load", parents=[common], help="load tables: `seam load full|incremental TABLE...`")
    p.add_argument(
        "mode",
        choices=["full", "incremental"],
        help="full: a consistent snapshot replaces the target table; incremental: the rows changed "
        "in a window are merged",
    )
    p.add_argument("tables", nargs="*", metavar="TABLE", help="db.table, or a table name unique in the pipeline")
    p.add_argument("--all", action="store_true", help="incremental: every incremental table of the pipeline")
    p.add_argument("--start", help="incremental: window start (exclusive; default: the stored watermark)")
    p.add_argument(
        "--end",
        help="incremental: window end (inclusive; default: now; always clamped to the "
        "source's now minus the safety delay)",
    )
    p.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the commit")
    p.add_argument(
        "--restart",
        action="store_true",
        help="full: start afresh (by default a load interrupted with its batch open resumes it, keeping its chunks)",
    )
    p.set_defaults(func=cmd_load)

    sub.add_parser(
        "summary",
        parents=[common],
        help="per table: mode, rows, full-load rows/s, lag and the last verdict; exit 1 unless every table is EQUAL",
    ).set_defaults(func=cmd_summary)

    p = sub.add_parser(
        "validate",
        parents=[common],
        help="compare source and target (counts, checksums, the differing rows); exit 1 on mismatch",
    )
    p.add_argument("tables", nargs="*", metavar="TABLE", help="db.table, or a table name unique in the pipeline")
    p.add_argument("--all", action="store_true", help="every table of the pipeline")
    p.add_argument("--window", nargs=2, metavar=("START", "END"), help="only rows whose cursor is in (START, END]")
    p.add_argument(
        "--key-range",
        nargs=2,
        type=int,
        metavar=("LO", "HI"),
        help="only rows whose (integer) first key column is in [LO, HI]",
    )
    p.add_argument("--limit", type=int, default=50, help="differing rows to list (totals are always exact)")
    p.add_argument("--report-dir", help="where to write the HTML report (default .seam/reports)")
    p.add_argument("--json", action="store_true", help="also print the reports as JSON")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "repair",
        parents=[common],
        help="copy again only the rows that differ from the source, and go on streaming from there",
    )
    p.add_argument("tables", nargs="+", metavar="TABLE", help="db.table, or a table name unique in the pipeline")
    p.add_argument(
        "--full",
        action="store_true",
        help="compare with the source as it is now, not at the table's position (its binlog is gone, or it stopped)",
    )
    p.add_argument("--max-rows", type=int, default=None, help="at most this many differing rows (repair.max_rows)")
    p.add_argument("--timeout", type=float, default=900.0, help="give up after this many seconds")
    p.set_defaults(func=cmd_repair)

    p = sub.add_parser("sink", parents=[common], help="apply table topics to the target (runs until stopped)")
    p.add_argument("--table", action="append", default=[], help="only these tables (repeatable; default all)")
    p.add_argument("--until-batch", action="append", default=[], help="exit once these batches are final")
    p.add_argument("--idle-exit", type=float, default=None, help="exit after this many idle seconds")
    p.add_argument("--timeout", type=float, default=None, help="give up after this many seconds")
    p.set_defaults(func=cmd_sink)

    p = sub.add_parser(
        "stream",
        parents=[common],
        help="binlog streaming: `seam stream start|stop|status|wait` "
        "(wait: until lag 0; reader|sink: run one part in the foreground)",
    )
    p.add_argument("action", choices=["start", "stop", "status", "wait", "reader", "sink"])
    p.add_argument("--table", action="append", default=[], help="only these tables (repeatable; default all)")
    p.add_argument("--foreground", action="store_true", help="start: run here instead of in the background")
    p.add_argument("--until-idle", action="store_true", help="start --foreground: stop at the binlog's end")
    p.add_argument(
        "--fail-fast", action="store_true", help="wait: exit 3 at the first STOPPED table (default: wait for the rest)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600,
        help="start: seconds to wait for the parts' heartbeats; wait: seconds to wait for lag 0",
    )
    p.set_defaults(func=cmd_stream)

    p = sub.add_parser("kafka", parents=[common], help="the broker: `seam kafka topics`, `seam kafka tail TOPIC`")
    p.add_argument("action", choices=["topics", "tail"])
    p.add_argument("topic", nargs="?", help="tail: the topic (`seam kafka topics` lists them)")
    p.add_argument("-n", type=int, default=10, help="tail: how many of the last messages (default 10)")
    p.add_argument("--follow", "-f", action="store_true", help="tail: keep printing new messages until Ctrl-C")
    p.add_argument("--full", action="store_true", help="tail: print whole values (default: 300 characters)")
    p.set_defaults(func=cmd_kafka)

    p = sub.add_parser(
        "quarantine",
        parents=[common],
        help="messages the sink would not apply: `seam quarantine list`, `show ID`, `skip ID [--note TEXT]`",
    )
    p.add_argument("action", choices=["list", "show", "skip"])
    p.add_argument("id", nargs="?", type=int, help="show, skip: the message's number (`seam quarantine list`)")
    p.add_argument("--all", action="store_true", help="list: the skipped ones too")
    p.add_argument("--note", help="skip: why (recorded with who and when)")
    p.set_defaults(func=cmd_quarantine)

    p = sub.add_parser("trigger", parents=[common], help="trigger an Airflow DAG run on the stack's Airflow")
    p.add_argument("dag_id")
    p.add_argument("--conf", help="run conf as JSON")
    p.add_argument("--wait", action="store_true", help="wait for the run to finish; exit 1 unless it succeeds")
    p.add_argument("--timeout", type=float, default=600)
    p.set_defaults(func=cmd_trigger)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.pipeline is None:
        args.pipeline = str(DEFAULT_PIPELINE)
        explicit = False
    else:
        explicit = True
    from seam_dev.stack import use_stack_env

    try:
        if args.command == "up":
            _stack().settings(create=True)  # credentials exist before anything reads the pipeline
        use_stack_env()
        if explicit:
            _pipeline(args)  # a broken pipeline fails every command, before it does anything
        return args.func(args, Processes())
    except SeamError as exc:  # Seam's own clear line; anything else is a bug and keeps its traceback
        print(one_line(exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("seam: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
