"""``seam stream start``: the stream's two parts started in the background, their heartbeats awaited.

A module of its own that imports little: the parts are started about a tenth of a second after the command is,
and a backlog waits for the change reader's first read. (``seam.cli.stream`` stops the parts and reports.)

Delivery guarantee: that of its parts (``seam.cli.stream_parts``); this module only starts them."""

from __future__ import annotations

import os
import sys
import time

from seam.cli.common import pipeline_of, table_args
from seam.core.errors import ONE_LINE, StreamError
from seam.processes import Processes
from seam.state.connection import connect_state
from seam.state.owners import OwnerTaken
from seam.state.parts import part_states, supervisor_ran


def stream_processes(pipeline) -> dict[str, str]:
    """The processes ``seam stream start`` runs, by part: named after the pipeline, so that pipelines side by
    side on one machine keep their PID files and logs apart."""
    return {part: f"{pipeline.name}-stream-{part}" for part in ("reader", "sink")}


def cmd_stream_start(args, procs: Processes) -> int:
    pipeline = pipeline_of(args)
    tables = table_args(pipeline, args)
    for part, name in stream_processes(pipeline).items():
        pid = procs.running(name)
        if pid:
            _same_file(pipeline, procs, name, pid)
            print(f"{name} already running (pid {pid}); it takes up changes to {pipeline.path} on its own")
            continue
        # the file by its absolute path: the part runs in the state dir
        cmd = [sys.executable, "-m", "seam.cli", "--pipeline", os.path.abspath(pipeline.path), "stream", part, *tables]
        pid = procs.start_process(name, cmd)
        print(f"{name} started (pid {pid}); log {procs.log_dir / (name + '.log')}")
    _await_parts(pipeline, procs, timeout=args.timeout)
    requested(pipeline, stop=False)
    print("stream started; `seam stream status` shows its state and lag, `seam stream wait` waits for lag 0")
    return 0


def _same_file(pipeline, procs: Processes, name: str, pid: int) -> None:
    """A running part of this pipeline's name must run from this very file: else the tables this command names
    would be left to a stream that does not know them."""
    running_from = procs.argument(name, "--pipeline")
    if running_from and os.path.realpath(running_from) != os.path.realpath(pipeline.path):
        raise OwnerTaken(
            f"a stream of pipeline {pipeline.name!r} already runs from {running_from} (pid {pid}), not from "
            f"{pipeline.path}: stop it (`seam --pipeline {running_from} stream stop`) or give this pipeline a name "
            "of its own (`name:` in the file)"
        )


def requested(pipeline, stop: bool) -> None:
    """Tell the stream supervisor (seam_stream) that a person started or stopped the stream."""
    conn = connect_state(pipeline)
    try:
        supervisor_ran(conn, pipeline.target.state_schema, pipeline.name, [], stop)
    finally:
        conn.close()


def _await_parts(pipeline, procs: Processes, timeout: float) -> None:
    """Until both parts have recorded a heartbeat in the target; a part that exits fails with its last line."""
    names = stream_processes(pipeline)
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
            if all(_beating(states.get(part, {}), time.monotonic() - began) for part in names):
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


def _beating(state: dict, waited_s: float) -> bool:
    """A part is up when it runs or starts, or when it failed in the last minutes (say, a sink that met a full
    load's sink on its topic) but has beaten since this command began and worked since it failed (a part that
    waits to try again beats too, without working)."""
    if state.get("state") in ("starting", "running"):
        return True
    return state.get("state") == "restarting" and state["beat_age"] < waited_s and bool(state.get("worked"))
