"""``seam stream reader``: the change reader as a process, in a module of its own that imports only what the
reader runs (not the sink, Spark's helpers or psutil): it starts reading a backlog sooner.

Delivery guarantee: that of ``seam.source.streaming``; a reader that loses its lock to another process exits 2
and publishes nothing more."""

from __future__ import annotations

import logging
import signal
import sys

from seam.cli.common import pipeline_of
from seam.cli.pipeline_watch import PipelineWatch
from seam.source.streaming import ChangeReader
from seam.state.owners import Owner


def log_to_stderr() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")


def cmd_stream_reader(args, procs) -> int:
    """``seam stream reader``: the change reader in this process."""
    pipeline = pipeline_of(args)
    tables = [pipeline.table(t) for t in args.table] if args.table else list(pipeline.tables)
    return run_reader(pipeline, tables, PipelineWatch(pipeline, list(args.table)))


def run_reader(pipeline, tables, watch: PipelineWatch) -> int:
    """The change reader, in the foreground until SIGTERM (or its pipeline file changed): binlog to the
    table topics."""
    log_to_stderr()
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    owner = Owner(pipeline, "change reader")
    try:
        ChangeReader(pipeline, tables).serve(
            should_stop=lambda: bool(stopping) or bool(owner.lost) or watch.changed(),
            restarting=lambda: watch.changed_to_valid and not stopping,
        )
    finally:
        owner.release()
    if watch.changed_to_valid and not stopping and not owner.lost:
        watch.restart()
    return exit_status(owner)


def exit_status(owner) -> int:
    """Exit status of a part whose loop ended: 2 when another process took its lock."""
    if owner.lost:
        print(f"seam: busy: {owner.lost}", file=sys.stderr)
        return 2
    return 0
