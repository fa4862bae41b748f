"""Stream supervision: keep a pipeline's change reader and streaming sink running, and say when the stream
is unhealthy. The ``seam_stream`` DAG calls ``supervise`` every few minutes; any scheduler can.

A part is down when its heartbeat in the target (``seam.stream_parts``) is older than ``PART_DEAD_AFTER_S``,
when it stopped, or when it never started. The supervisor starts a down part again detached from the caller
(a worker slot is not held while the stream runs), its output in ``<log dir>/<pipeline>-<part>.log``; a
process of it that still runs on this host but no longer beats is killed first. Both parts resume from
the positions stored in the target, so a (re)start at any moment loses and doubles nothing. Then it
measures each streamed table's lag, and reports a problem for a table that is STOPPED or lags more than
``stream.max_lag_seconds``, and for a part that did not come up.

Delivery guarantee: none of its own; starting and stopping parts is safe at any time (see seam.source.streaming).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from seam.core.errors import SeamError
from seam.core.pipeline import Pipeline, TableConfig
from seam.files import open_private, private_dir
from seam.source.lag import stream_lag
from seam.state.connection import connect_state
from seam.state.parts import part_states, supervisor_ran
from seam.state.positions import applied_source_time

PARTS = ("reader", "sink")
ACTIONS = ("ensure", "start", "stop", "restart")


class SuperviseError(SeamError):
    """The stream's processes cannot be supervised as asked."""

    kind = "stream"


@dataclass
class Health:
    """What one supervision found and did."""

    parts: dict[str, dict] = field(default_factory=dict)  # part -> its state (seam.state.part_states) after
    actions: list[str] = field(default_factory=list)  # what was done, one line each
    lags: list = field(default_factory=list)  # seam.source.lag.TableLag per streamed table
    problems: list[str] = field(default_factory=list)  # why the stream is not healthy, one line each

    @property
    def healthy(self) -> bool:
        return not self.problems


def log_dir(pipeline: Pipeline) -> Path:
    path = Path(pipeline.stream.log_dir or os.environ.get("SEAM_STREAM_LOG_DIR") or Path.home() / ".seam" / "logs")
    return private_dir(path)


def part_command(pipeline: Pipeline, part: str, tables: list[TableConfig]) -> list[str]:
    """The command of one stream part (credentials travel in the environment, never in arguments)."""
    return [
        sys.executable,
        "-m",
        "seam.cli",
        "--pipeline",
        pipeline.path,
        "stream",
        part,
        *[a for t in tables for a in ("--table", t.name)],
    ]


def start_part(pipeline: Pipeline, part: str, tables: list[TableConfig], env: dict[str, str]) -> int:
    """Start one part detached (its own session, so it outlives the caller); returns its pid."""
    out = log_dir(pipeline) / f"{pipeline.name}-{part}.log"
    with open_private(out) as sink:
        proc = subprocess.Popen(
            part_command(pipeline, part, tables),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    return proc.pid


def _group(pgid: int) -> list[int]:
    """The live processes of a stream part's process group on this host (a part is its group's leader, so
    its pid is the group id): the part and its children, such as the sink's spark-submit and JVM, which
    outlive a leader killed with SIGKILL."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z" and (b"seam" in cmdline or b"spark" in cmdline):
            out.append(int(stat.parent.name))
    return out


def alive_here(state: dict) -> bool | None:
    """Whether the process of a part recorded as ``state`` still runs on this host (None: it ran elsewhere).
    Its children alone (a Spark job orphaned by a killed sink) do not count: they are stopped before a restart."""
    pid = state.get("pid")
    if not pid or state.get("host") != socket.gethostname():
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        zombie = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
    return not zombie and b"seam.cli" in cmdline and b"stream" in cmdline


def stop_part(state: dict, grace_s: float = 60.0) -> str:
    """Stop a part recorded as ``state`` if it runs on this host: SIGTERM to the part, then to what is left of
    its process group, then SIGKILL."""
    pid, host = state.get("pid"), state.get("host")
    if not pid:
        return ""
    if host != socket.gethostname():
        return (
            ""
            if state.get("state") in ("stopped", "down")
            else f"pid {pid} was started on {host}, not on this host: stop it there"
        )
    if not _group(pid):
        return ""
    # the part alone first: the sink stops its query, then Spark (signalled together, Spark's Python workers
    # die under a running micro-batch and the log shows an error); then what is left of its group
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while _group(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while _group(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _group(pid):
        _signal(pid, signal.SIGKILL)
        return f"killed process group {pid} (still there {grace_s:.0f}s after SIGTERM)"
    return f"stopped process group {pid}"


def _signal(pgid: int, sig: int) -> None:
    for member in _group(pgid):
        try:
            os.kill(member, sig)
        except ProcessLookupError:
            pass


def _states(pipeline: Pipeline) -> dict[str, dict]:
    conn = connect_state(pipeline)
    try:
        return part_states(conn, pipeline.target.state_schema, pipeline.name)
    finally:
        conn.close()


def supervise(
    pipeline: Pipeline,
    *,
    action: str = "ensure",
    tables: list[TableConfig] | None = None,
    env: dict[str, str] | None = None,
    start_timeout: float = 180.0,
    say: Callable[[str], None] = print,
) -> Health:
    """Bring the stream to what ``action`` asks (ensure: running, restarting what is down; start; stop;
    restart), then measure it. Raises SuperviseError only for a bad action."""
    if action not in ACTIONS:
        raise SuperviseError(f"action {action!r} is not one of {', '.join(ACTIONS)}")
    chosen = list(tables or [])  # the parts follow these; none chosen: every streamed table, as the file changes
    tables = [t for t in (chosen or pipeline.tables) if t.sync == "stream"]
    env = {**os.environ, **(env or {})}
    health = Health()
    states = _states(pipeline)
    if action == "ensure" and states.get("supervisor", {}).get("state") == "stopped":
        health.actions.append(
            "the stream was stopped on request: left stopped (trigger seam_stream with action=start to start it)"
        )
        say(health.actions[-1])
        health.parts = states
        _record(pipeline, health, stop=None)
        return health
    if action in ("stop", "restart"):
        for part in PARTS:
            done = stop_part(states.get(part, {}))
            if done:
                health.actions.append(f"{part}: {done}")
        if action == "stop":
            for line in health.actions:
                say(line)
            health.parts = _states(pipeline)
            _record(pipeline, health, stop=True)
            return health
        states = {}
    started = {}
    for part in PARTS:
        state = states.get(part)
        if state is not None and state["state"] in ("running", "starting", "restarting"):
            if alive_here(state) is not False:
                continue
            state = {**state, "state": "gone"}  # killed on this host, before its heartbeat went stale
        why = "never started" if state is None else f"{state['state']} (last heartbeat {state['beat_age']:.0f}s ago)"
        if state is not None and state["state"] == "stopped" and action == "ensure":
            health.problems.append(
                f"{part} is stopped"
                + (f" (last error: {state['last_error']})" if state.get("last_error") else "")
                + ": trigger seam_stream with action=start (or `seam stream start`)"
            )
            continue
        if state is not None:
            stop_part(state, grace_s=10)  # a hung process of it must not run next to the new one
        started[part] = start_part(pipeline, part, chosen, env)
        health.actions.append(f"{part}: was {why}; started pid {started[part]}")
    for line in health.actions:
        say(line)
    if started:
        _await(pipeline, started, start_timeout, health)
    health.parts = _states(pipeline)
    _measure(pipeline, tables, health)
    _record(pipeline, health, stop=False if action in ("start", "restart") else None)
    return health


def _record(pipeline: Pipeline, health: Health, stop: bool | None) -> None:
    conn = connect_state(pipeline)
    try:
        supervisor_ran(conn, pipeline.target.state_schema, pipeline.name, health.problems, stop)
    finally:
        conn.close()


def _await(pipeline: Pipeline, started: dict[str, int], timeout: float, health: Health) -> None:
    """Until each started part beats from its new process (or its process exits, or time runs out)."""
    deadline = time.monotonic() + timeout
    waiting = dict(started)
    while waiting and time.monotonic() < deadline:
        states = _states(pipeline)
        for part, pid in list(waiting.items()):
            s = states.get(part, {})
            if s.get("pid") == pid and s.get("state") in ("running", "starting"):
                del waiting[part]
            elif not _group(pid):
                tail = (log_dir(pipeline) / f"{pipeline.name}-{part}.log").read_text(errors="replace").strip()
                health.problems.append(f"{part} exited at once: {tail.splitlines()[-1] if tail else 'no output'}")
                del waiting[part]
        time.sleep(0.5)
    for part in waiting:
        health.problems.append(
            f"{part} recorded no heartbeat within {timeout:.0f}s of its start; see "
            f"{log_dir(pipeline) / f'{pipeline.name}-{part}.log'}"
        )


def _measure(pipeline: Pipeline, tables: list[TableConfig], health: Health) -> None:
    for part in PARTS:
        s = health.parts.get(part)
        if s is None or s["state"] in ("down", "stopped"):
            health.problems.append(f"{part} is {'not started' if s is None else s['state']}")
        elif s["failing"]:  # not a one-off (a broker restart): the same part fails again and again
            health.problems.append(
                f"{part} keeps failing ({s['streak']} failures in a row, retried with back-off), last error: "
                f"{s['last_error']}; its log has the whole error"
            )
    if not tables:
        return
    _, health.lags = stream_lag(pipeline, tables, sample_s=1.0)
    bound = pipeline.stream.max_lag_seconds
    for lag in health.lags:
        if lag.stopped:
            health.problems.append(f"{lag.table} is STOPPED: {lag.stopped}")
        elif lag.behind_seconds is not None and lag.behind_seconds > bound:
            health.problems.append(
                f"{lag.table} lags {lag.behind_seconds:,.0f}s (more than stream.max_lag_seconds "
                f"{bound:,.0f}s): {lag.behind_events:,} events behind"
            )


def lag_lines(health: Health) -> list[str]:
    """One line per table: position, distance and lag, for a task log or a terminal."""
    out = []
    for lag in health.lags:
        if lag.applied is None:
            out.append(f"{lag.table}: no committed full load yet")
        elif lag.stopped:
            out.append(f"{lag.table}: STOPPED at {lag.applied}")
        else:
            seconds = "?" if lag.behind_seconds is None else f"{lag.behind_seconds:.1f}"
            events = "?" if lag.behind_events is None else f"{lag.behind_events:,}"
            out.append(f"{lag.table}: applied {lag.applied}, {events} events / {seconds} s behind")
    return out


def stream_passed(pipeline, table, day_end: dt.datetime) -> str | None:
    """None when the stream has applied the source past ``day_end`` for ``table``; else why not, one line."""
    conn = connect_state(pipeline)
    try:
        found = applied_source_time(conn, pipeline.target.state_schema, table.db, table.table)
    finally:
        conn.close()
    if found is None:
        return f"{table.name} has no committed full load: run `seam load full {table.name}`"
    source_ms, stopped = found
    if stopped:
        return f"{table.name}: its stream is STOPPED ({stopped})"
    if source_ms is None or source_ms < day_end.timestamp() * 1000:
        at = (
            "nothing yet"
            if source_ms is None
            else dt.datetime.fromtimestamp(source_ms / 1000, dt.UTC).isoformat(timespec="seconds")
        )
        return (
            f"{table.name}: the stream has applied the source up to {at}, not past the day's end "
            f"{day_end.isoformat()}; is the stream running (seam_stream)?"
        )
    return None
