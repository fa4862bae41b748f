"""``seam stream wait``: until every streamed table has applied the source's binlog as it is now.

It says what it waits for: the stream's parts that are starting (the sink's Spark start-up), restarting or down
(with their last error), tables behind (with how much binlog lies between them and the goal), tables that
stopped (named, with the reason).
A stopped table does not end the wait for the others unless ``fail_fast``. A target that goes away (a
restart, a failover) is waited for within the timeout, as the stream's parts wait for it.

Exit codes (``WAIT_*``): 0 every streamed table caught up; 1 the timeout passed with tables still behind;
3 the others caught up (or ``fail_fast``) but tables are STOPPED. 2 is the CLI's for bad input.

Delivery guarantee: none (reads only).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg
import pymysql

from seam.core.pipeline import Pipeline, TableConfig
from seam.core.position import Position
from seam.source.gtid import server_identity
from seam.source.snapshot import source_head
from seam.state.connection import StateWatch
from seam.state.parts import part_states
from seam.state.positions import positions_of

WAIT_CAUGHT_UP, WAIT_TIMEOUT, WAIT_STOPPED = 0, 1, 3
SAY_EVERY_S = 5.0


def _behind(goal: Position, file: str, pos: int) -> str:
    if file == goal.file:
        return f"{max(goal.pos - pos, 0):,} bytes of binlog behind"
    return f"at {file}:{pos}, the goal is in {goal.file}"


_STARTING = {
    "reader": "reader starting (connecting to the source's binlog)",
    "sink": "sink starting (Spark's start-up: no micro-batch yet)",
}


def _parts_not_running(conn, pipeline: Pipeline) -> list[str]:
    """The stream's parts that are not applying yet: starting (what they wait for), or restarting or down
    (with their last error)."""
    out = []
    for part, state in sorted(part_states(conn, pipeline.target.state_schema, pipeline.name).items()):
        if part not in _STARTING:
            continue
        if state["state"] == "starting":
            direct = part == "sink" and pipeline.stream.sink == "direct"
            out.append("sink starting (nothing applied yet)" if direct else _STARTING[part])
        elif state["state"] in ("restarting", "down"):
            error = f": {state['last_error']}" if state["last_error"] else ""
            out.append(f"{part} {state['state'].upper()}{error}")
    return out


def wait_for_stream(
    pipeline: Pipeline, tables: list[TableConfig], timeout: float, fail_fast: bool, say: Callable[[str], None]
) -> int:
    """Wait for lag 0 on ``tables``; one of the ``WAIT_*`` exit codes."""
    source = pymysql.connect(**pipeline.source.pymysql_kwargs())
    try:
        goal, here = source_head(source), server_identity(source)
    finally:
        source.close()
    watch = StateWatch(pipeline, say)
    streamed = [t for t in tables if t.sync == "stream"]
    started, last_said = time.monotonic(), 0.0
    told_stopped: set[str] = set()
    try:
        while True:
            due = time.monotonic() - started > timeout or time.monotonic() - last_said >= SAY_EVERY_S
            try:
                rows = positions_of(watch.conn, pipeline.target.state_schema)
                parts = _parts_not_running(watch.conn, pipeline) if due else []  # read only when said
            except psycopg.OperationalError as exc:
                if time.monotonic() - started > timeout:
                    say(
                        f"seam: the target stayed unreachable until the wait's timeout ({timeout:.0f}s); start it "
                        "(the stream's parts go on by themselves) and wait again"
                    )
                    return WAIT_TIMEOUT
                watch.reconnect(exc)
                continue
            behind: dict[str, str] = {}
            stopped: dict[str, str] = {}
            for t in streamed:
                row = rows.get((t.db, t.table))
                if row is None:
                    continue  # never loaded: nothing to follow
                file, pos, index, why, server = row
                if why:
                    stopped[t.name] = why
                elif server not in (None, here):  # not moved to this server yet (seam.source.gtid)
                    behind[t.name] = f"at {file}:{pos} of server {server}"
                elif goal.after(Position(file, pos, index)):
                    behind[t.name] = _behind(goal, file, pos)
            for name in sorted(set(stopped) - told_stopped):
                say(f"seam: {name} STOPPED: {stopped[name]}")
            told_stopped |= set(stopped)
            waited = time.monotonic() - started
            if stopped and (fail_fast or not behind):
                caught = "" if behind else "; every other streamed table caught up"
                say(f"seam: {len(stopped)} table(s) stopped: {', '.join(sorted(stopped))}{caught}")
                return WAIT_STOPPED
            if not behind:
                say(f"stream caught up: every streamed table has applied the binlog up to {goal} ({waited:.1f}s)")
                return WAIT_CAUGHT_UP
            if due:
                lines = parts + [f"{name}: {how}" for name, how in sorted(behind.items())]
                if waited > timeout:
                    say(
                        f"seam: the stream did not reach {goal} within {timeout:.0f}s; still behind: "
                        + "; ".join(lines)
                    )
                    return WAIT_TIMEOUT
                say(f"  waiting for the stream to apply up to {goal} ({waited:.0f}s): " + "; ".join(lines))
                last_said = time.monotonic()
            time.sleep(0.5)
    finally:
        watch.close()
