"""``seam stream stop|status|wait``: the stream's two parts stopped, and the state and lag of each table.
(``seam stream start`` is ``seam.cli.stream_start``; the parts in the foreground ``seam.cli.stream_parts``.)

Delivery guarantee: that of its parts (``seam.cli.stream_parts``); this module only stops and reports."""

from __future__ import annotations

import sys

from seam.cli.common import pipeline_of
from seam.cli.stream_ready import requested
from seam.cli.stream_start import stream_processes
from seam.processes import Processes
from seam.source.lag import stream_lag
from seam.state.connection import connect_state, connect_target
from seam.state.ledger import open_batches
from seam.state.parts import part_states
from seam.state.schema import held_by_another
from seam.supervise import stop_part
from seam.waiting import wait_for_stream


def cmd_stream(args, procs: Processes) -> int:
    pipeline = pipeline_of(args)
    tables = [pipeline.table(t) for t in args.table] if args.table else list(pipeline.tables)
    if args.action == "wait":
        return _stream_wait(pipeline, tables, timeout=args.timeout, fail_fast=args.fail_fast)
    if args.action == "stop":
        for name in stream_processes(pipeline).values():
            pid = procs.stop(name, leader_first=True)  # the sink stops its query, then Spark
            print(f"{name} stopped (pid {pid})" if pid else f"{name} was not running")
        for part, state in _part_states(pipeline).items():  # parts a supervisor started, on this host
            done = stop_part(state) if part in ("reader", "sink") else ""
            if done:
                print(f"stream-{part}: {done}")
        requested(pipeline, stop=True)
        return 0
    return _stream_status(pipeline, tables, procs)


def _part_states(pipeline) -> dict:
    conn = connect_state(pipeline)
    try:
        return part_states(conn, pipeline.target.state_schema, pipeline.name)
    finally:
        conn.close()


def _stream_wait(pipeline, tables, timeout: float, fail_fast: bool) -> int:
    def say(line: str) -> None:
        print(line, file=sys.stderr if line.startswith("seam:") else sys.stdout, flush=True)

    return wait_for_stream(pipeline, tables, timeout, fail_fast, say)


def _stream_status(pipeline, tables, procs: Processes) -> int:
    """The parts as their heartbeats in the target show them, then each table's position and lag. Exit 1 when
    a part is down, stopped or restarting, or a table is stopped."""
    tables = [t for t in tables if t.sync == "stream"]
    head, lags = stream_lag(pipeline, tables)
    conn = connect_target(pipeline)
    try:
        parts = part_states(conn, pipeline.target.state_schema, pipeline.name)
        batches = open_batches(conn, pipeline.target.state_schema)
        loading = {name for name, (batch, _, _) in batches.items() if held_by_another(conn, "load", batch)}
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
        applies = "micro-batches" if pipeline.stream.sink == "spark" else "transactions applied"
        what = {
            "running": f"{p['batches']:,} {'polls' if name == 'reader' else applies}",
            "starting": "nothing applied yet" if name == "sink" else "connecting",
            "restarting": f"{p['restarts']} restart(s)"
            + (f", failing {p['streak']} times in a row" if p["failing"] else "")
            + f", last error: {p['last_error']}",
            "stopped": f"stopped on an error: {p['last_error']}" if p["last_error"] else "stopped cleanly",
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
        if lag.table in batches:
            print(_held_behind(pipeline, lag.table, *batches[lag.table], lag.table in loading))
    return 1 if stopped or overall not in ("running", "starting") else 0


def _held_behind(pipeline, table: str, batch: str, mode: str, age: float, loading: bool) -> str:
    """Why a table's changes wait: a batch of it is open (they apply after its END)."""
    if loading:
        why = "its load runs"
    else:  # a killed or failed load: run again, or abandoned by the sink (seam.apply.sink)
        again = {
            "full": f"`seam load full {table}` resumes it",
            "incremental": f"`seam load incremental {table}` supersedes it",
        }.get(mode, f"`seam {mode} {table}` supersedes it")  # a repair
        why = (
            f"its load is gone: {again}, else the sink abandons it once no rows came for load.abandon_after "
            f"({pipeline.load.abandon_after:.0f} s) and the changes apply to the table as it was"
        )
    return f"  {'':30} changes held behind batch {batch} ({mode} load, open {age:.0f} s): {why}"
