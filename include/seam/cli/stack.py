"""``seam up|down|status|env|seed|writer|trigger``: the embedded stack, the demo data, a table's history and
Airflow runs from the command line.

Delivery guarantee: none (commands; the library's rooms state theirs)."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
import urllib.parse

from seam.cli.common import pipeline_of
from seam.core.identifiers import qi
from seam.processes import Processes
from seam.spark_driver import driver_status
from seam.state.connection import connect_state
from seam.state.ledger import table_history
from seam_dev import demo
from seam_dev.airflow_api import AirflowClient
from seam_dev.settings import SERVICES, StackError
from seam_dev.stack import EmbeddedStack


def _stack():
    """The embedded development stack (``seam_dev``), for the commands that manage it."""
    return EmbeddedStack()


def cmd_up(args, procs: Processes) -> int:
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
        return _table_status(pipeline_of(args), [pipeline_of(args).table(t) for t in args.tables])
    rows = _stack().status()
    for r in rows:
        state = "up" if r.running else "down"
        pid = f"pid {r.pid}" if r.pid else ""
        print(f"{r.name:9} {state:5} port {r.port:<6} {pid:11} {r.connect}" + (f"  [{r.detail}]" if r.detail else ""))
    for socket_path in sorted(procs.run_dir.glob("spark-driver-*.sock")):
        driver = driver_status(socket_path)  # seam.spark_driver's, started by loads: not a service of the stack
        if driver is not None and "pid" in driver:
            doing = "running a job" if driver["busy"] else "idle"
            print(f"{'spark':9} {'up':5} {'':11} pid {driver['pid']:<7} shared Spark driver, {doing}: {socket_path}")
    return 0 if all(r.running for r in rows) else 3


def _table_status(pipeline, tables) -> int:
    """Per table: watermark and last window (incremental), last batches from the ledger, stream position."""
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
    pipeline = pipeline_of(args)
    demo.seed(pipeline, rows=args.rows, admin_url=os.environ.get("SEAM_MYSQL_URL"), reset=not args.keep)
    return 0


def cmd_writer(args, procs: Processes) -> int:
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
