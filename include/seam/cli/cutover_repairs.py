"""Repairs the stream starts by itself: a table stopped at the cut-over of an online schema change (gh-ost,
pt-online-schema-change: ``RENAME TABLE t TO _t_old, _t_new TO t``), or at an ADD COLUMN whose value in the rows
there the stream cannot reproduce (``(UUID())``, a generated column: ``seam.source.stream_ddl``), is compared with
its source and repaired, then streams on, with no one running `seam repair` (``repair.after_cutover``, on by
default).

The sink records such a stop as due for a repair (``positions.repair_due``, in the stop's transaction). The
process that keeps the streaming sink running (``seam.cli.stream_parts.run_sink``) claims it (one UPDATE: of
two such processes only one gets it), starts `seam repair TABLE --after-cutover` detached (its output in
``<state dir>/logs/repair-<table>-<time>.log``) and adds that to the stop's reason. A repair that fails (more rows differ than
``repair.max_rows``, a column the comparison cannot follow) leaves the table STOPPED, adds why and its way
out to the reason, and alerts (``record_failure``); so does a repair that was killed.

The stop is alerted as any stop is (its reason says the stream repairs the table), and so is a failed repair.

Delivery guarantee: that of ``seam.repair`` (exactly once, as a batch). A repair that cannot run to its end
leaves the table stopped, its reason naming `seam repair TABLE`, as without this.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time

from seam.alerts import alert
from seam.config import state_dir
from seam.core.errors import first_line
from seam.core.pipeline import Pipeline, TableConfig
from seam.files import open_private, private_dir
from seam.load_run import job_env
from seam.state.connection import connect_state
from seam.state.positions import claim_due_repairs, note_stop

CHECK_EVERY_S = 2.0


class CutoverRepairs:
    """Started by the process that keeps the streaming sink running; ``tick`` on its connection, often."""

    def __init__(self, pipeline: Pipeline, tables: list[TableConfig]):
        self.pipeline, self.tables = pipeline, tables
        self.running: list[tuple[TableConfig, subprocess.Popen]] = []
        self.checked = 0.0

    def tick(self, conn, now: bool = False) -> None:
        """Reap the repairs that ended; every ``CHECK_EVERY_S`` (or ``now``) start the ones due."""
        ended = [(table, repair) for table, repair in self.running if repair.poll() is not None]  # (reaped)
        self.running = [(table, repair) for table, repair in self.running if repair.returncode is None]
        for table, repair in ended:
            if repair.returncode < 0:  # killed: it could not say so itself
                why = f"the repair (pid {repair.pid}) was killed (signal {-repair.returncode})"
                record_failure(self.pipeline, table, f"{why}; run `seam repair {table.name}`")
        if not self.pipeline.repair.after_cutover or (not now and time.monotonic() - self.checked < CHECK_EVERY_S):
            return
        self.checked = time.monotonic()
        schema = self.pipeline.target.state_schema
        for db, tbl in claim_due_repairs(conn, schema, [(t.db, t.table) for t in self.tables]):
            name, at = f"{db}.{tbl}", dt.datetime.now(dt.UTC)
            log = private_dir(state_dir() / "logs") / f"repair-{name}-{at:%Y%m%dT%H%M%S}.log"
            with open_private(log) as out:  # (not this process's output: a caller reading it to its end would wait)
                repair = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "seam.cli",
                        "--pipeline",
                        self.pipeline.path,
                        "repair",
                        name,
                        "--after-cutover",
                    ],
                    env=job_env(),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a sink restarted meanwhile does not take it down
                    close_fds=True,
                )
            self.running.append((self.pipeline.table(name), repair))
            note_stop(conn, schema, db, tbl, f"; an automatic repair started at {at:%Y-%m-%d %H:%M:%S} UTC (log {log})")
            print(f"seam: {name} stopped at a cut-over; repairing it (log {log})", file=sys.stderr, flush=True)


def record_failure(pipeline: Pipeline, table: TableConfig, failure: BaseException | str) -> None:
    """An automatic repair failed: the stopped table's reason says why and what to do (the error's line), and
    this is alerted."""
    why = failure if isinstance(failure, str) else first_line(failure)
    conn = connect_state(pipeline)
    try:
        note_stop(conn, pipeline.target.state_schema, table.db, table.table, f"; it failed: {why}")
    finally:
        conn.close()
    alert(pipeline, table.name, "automatic repair failed", why)
