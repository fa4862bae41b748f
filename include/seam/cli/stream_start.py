"""``seam stream start``: the stream's two parts started in the background, their heartbeats awaited.

A module of its own that imports little, and the state's modules (psycopg) only once both parts are
spawned: the change reader starts a tenth of a second after the command does, and a backlog waits for the
reader's own start, not for this command's imports. (``seam.cli.stream_ready`` awaits the parts;
``seam.cli.stream`` stops them and reports.)

Delivery guarantee: that of its parts (``seam.cli.stream_parts``); this module only starts them."""

from __future__ import annotations

import os
import sys

from seam.cli.common import pipeline_of, table_args
from seam.core.errors import OwnerTaken
from seam.processes import Processes


def stream_processes(pipeline) -> dict[str, str]:
    """The processes ``seam stream start`` runs, by part: named after the pipeline, so that pipelines side by
    side on one machine keep their PID files and logs apart."""
    return {part: f"{pipeline.name}-stream-{part}" for part in ("reader", "sink")}


def cmd_stream_start(args, procs: Processes) -> int:
    pipeline = pipeline_of(args)
    tables = table_args(pipeline, args)
    names = stream_processes(pipeline)
    for part, name in names.items():
        pid = procs.running(name)
        if pid:
            _same_file(pipeline, procs, name, pid)
            print(f"{name} already running (pid {pid}); it takes up changes to {pipeline.path} on its own")
            continue
        # the file by its absolute path: the part runs in the state dir
        cmd = [sys.executable, "-m", "seam.cli", "--pipeline", os.path.abspath(pipeline.path), "stream", part, *tables]
        pid = procs.start_process(name, cmd)
        print(f"{name} started (pid {pid}); log {procs.log_dir / (name + '.log')}")
    # imported here, after the spawns: psycopg's import (0.09 s) ran before the reader's start until then
    from seam.cli.stream_ready import await_parts, requested

    await_parts(pipeline, procs, names, timeout=args.timeout)
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
