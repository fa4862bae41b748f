"""``seam stream start``'s wait for the parts it started: both heartbeats in the target, or the one line that
says why a part could not start; and the record that a person started or stopped the stream.

Delivery guarantee: none of its own (it reads and records the parts' states); that of the parts
(``seam.cli.stream_parts``)."""

from __future__ import annotations

import time

from seam.core.errors import ONE_LINE, StreamError
from seam.processes import Processes
from seam.state.connection import connect_state
from seam.state.parts import part_states, supervisor_ran


def requested(pipeline, stop: bool) -> None:
    """Tell the stream supervisor (seam_stream) that a person started or stopped the stream."""
    conn = connect_state(pipeline)
    try:
        supervisor_ran(conn, pipeline.target.state_schema, pipeline.name, [], stop)
    finally:
        conn.close()


def await_parts(pipeline, procs: Processes, names: dict[str, str], timeout: float) -> None:
    """Until both parts (``names``: part -> process) have recorded a heartbeat in the target; a part that exits
    fails with its last line."""
    conn = connect_state(pipeline)
    began = time.monotonic()
    deadline = began + timeout
    try:
        while True:
            for name in names.values():
                if not procs.running(name):
                    log = procs.log_dir / f"{name}.log"
                    tail = log.read_text().strip().splitlines()[-1:] if log.exists() else []
                    last = ONE_LINE.sub("", tail[0]) if tail else f"see {log}"  # its own "seam: kind: "
                    raise StreamError(f"{name} stopped at once: {last}")
            states = part_states(conn, pipeline.target.state_schema, pipeline.name)
            if all(beating(states.get(part, {}), time.monotonic() - began) for part in names):
                return
            for part in names:
                state = states.get(part, {})
                if state.get("failing") and state["up_s"] < time.monotonic() - began:  # started by this command
                    raise StreamError(
                        f"the {part} keeps failing ({state['streak']} failures in a row), last error: "
                        f"{state['last_error']}; it goes on retrying with back-off: fix the cause (or `seam stream "
                        "stop`)"
                    )
            if time.monotonic() > deadline:
                raise StreamError(
                    f"the stream's parts recorded no heartbeat within {timeout:.0f}s; see "
                    f"{procs.log_dir}/{pipeline.name}-stream-*.log"
                )
            time.sleep(0.5)
    finally:
        conn.close()


def beating(state: dict, waited_s: float) -> bool:
    """A part is up when it runs or starts, or when it failed in the last minutes (say, a sink that met a full
    load's sink on its topic) but has beaten since this command began and worked since it failed (a part that
    waits to try again beats too, without working)."""
    if state.get("state") in ("starting", "running"):
        return True
    return state.get("state") == "restarting" and state["beat_age"] < waited_s and bool(state.get("worked"))
