"""``seam load full`` and ``seam load incremental``: check everything, plan the batches (cascade order, a
resumed batch's kept chunks, a window), run them, and report rows, rows/s and the recorded binlog position.
The run itself (the Spark job and the sink as children, progress, stall and kill handling, the relay of
their log lines) is ``seam.load_run``.

The Spark job runs through ``spark-submit`` (the same entry point Airflow
runs), the sink in its own process (unless one already applies the table's
topic): either can be killed and re-run without harm (see ``seam.apply.sink``).

Delivery guarantee: that of the sink (exactly once, whole batches only).
Progress is the ledger's staged row count, i.e. rows safely in PostgreSQL.
"""

from __future__ import annotations

import json
import time
from contextlib import closing
from dataclasses import asdict

import pymysql

from seam.apply.lifecycle import REJECTED_FOR_ITS_ROWS
from seam.apply.sink import Sink
from seam.apply.target import column_names
from seam.core.identifiers import qi
from seam.core.pipeline import Pipeline, TableConfig
from seam.load_run import BatchRun, LoadError, Runner, sink_running, sink_through
from seam.source.full_load import Resume, plan_from_json, prepare
from seam.source.incremental import check_columns_unchanged, plan_window
from seam.source.schema import reachable, read_foreign_keys
from seam.state import ledger
from seam.state.connection import StateWatch, connect_state
from seam.state.ledger import batch_status, watermark
from seam.state.positions import applied_through
from seam.state.schema import try_lock
from seam.wire.boundary import Part, new_batch_id
from seam.wire.sink_pace import StagedOffsets
from seam.wire.topics import end_offsets, table_topic


def cascades_followed(pipeline: Pipeline, tables: list[TableConfig]) -> tuple[list[str], list[TableConfig], dict]:
    """One line per foreign-key rule the stream will apply to a loaded table (or from one), so that a user
    sees which deletes and key updates reach which synced children; and the tables in the order to load
    them: a parent before the tables its cascades reach, so that a level below is loaded at a later
    position than the level above (seam.apply.cascades needs the level above to have applied the change); and
    per table, the tables of the list its cascades reach (loaded again with it if its batch is rejected)."""
    keys = _cascading_keys(pipeline)
    loaded = {(t.db, t.table) for t in tables}
    lines = []
    for fk in keys:
        if fk.child in loaded or fk.parent in loaded:
            lines.append(
                f"cascade followed by the stream: {'.'.join(fk.parent)} -> {'.'.join(fk.child)} "
                f"({', '.join(fk.columns)}; {', '.join(fk.rules_followed())})"
            )
    reached = {fk.child for fk in keys if fk.parent != fk.child}
    for fk in keys:  # a loaded middle level whose lower level is not loaded with it
        if fk.parent in loaded and fk.parent in reached and fk.child != fk.parent and fk.child not in loaded:
            lines.append(
                f"note: cascades through {'.'.join(fk.parent)} continue into {'.'.join(fk.child)}; one "
                f"that happens while {'.'.join(fk.parent)} loads stops {'.'.join(fk.child)} until both are "
                f"loaded again: load them together (seam load full {'.'.join(fk.parent)} "
                f"{'.'.join(fk.child)})"
            )
    parents = {
        t: {fk.parent for fk in keys if fk.child == t and fk.parent != t and fk.parent in loaded} for t in loaded
    }
    ordered: list[TableConfig] = []
    done: set[tuple[str, str]] = set()
    while len(ordered) < len(tables):
        ready = [t for t in tables if (t.db, t.table) not in done and parents[(t.db, t.table)] <= done]
        for t in ready or [t for t in tables if (t.db, t.table) not in done][:1]:  # a cycle: as given
            ordered.append(t)
            done.add((t.db, t.table))
    below = {
        t.name: reachable((t.db, t.table), lambda p: [fk.child for fk in keys if fk.parent == p and fk.child in loaded])
        - {(t.db, t.table)}
        for t in tables
    }
    reach = {name: {f"{db}.{table}" for db, table in seen} for name, seen in below.items()}
    return lines, ordered, reach


def _cascading_keys(pipeline: Pipeline) -> list:
    """The foreign keys whose rules the stream follows into the pipeline's streamed tables."""

    streamed = {(t.db, t.table) for t in pipeline.tables if t.sync == "stream"}
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs())
    try:
        return [
            fk
            for fk in read_foreign_keys(conn, {t.db for t in pipeline.tables})
            if fk.rules_followed() and fk.child in streamed
        ]
    finally:
        conn.close()


def cascade_groups(pipeline: Pipeline, tables: list[TableConfig]) -> list[list[TableConfig]]:
    """The tables split into groups that can load independently (for example in parallel): a table that
    a cascade reaches through another table of the list (a middle level) loads in one ``full_load`` with
    it, which orders them parents first (see seam.apply.cascades). Other tables are groups of their own."""
    keys = _cascading_keys(pipeline)
    wanted = {(t.db, t.table): t for t in tables}
    middle = {fk.child for fk in keys if fk.child != fk.parent}
    group = {name: {name} for name in wanted}
    for fk in keys:
        if fk.parent in middle and fk.parent != fk.child and fk.parent in wanted and fk.child in wanted:
            merged = group[fk.parent] | group[fk.child]
            for name in merged:
                group[name] = merged
    out, seen = [], set()
    for name in wanted:
        if name not in seen:
            seen |= group[name]
            out.append([wanted[n] for n in wanted if n in group[name]])
    return out


CATCH_UP_S = 300.0  # the longest a resumed load waits for the running sink to apply what the interrupted one published
CATCH_UP_STILL_S = 3.0  # ... unless it has not moved on the load's topics for this long: it holds a table up
CATCH_UP_CHECK_S = 0.2  # (a look every second cost a resumed load half a second on average)
# ... then for the killed job's tasks, until the rows of their chunks have not changed for this long (they wait
# for the sink's report in steps of 0.1 s), and at most this long in all
DEAD_TASKS_QUIET_S = 0.5
DEAD_TASKS_MAX_S = 15.0
DEAD_TASKS_CHECK_S = 0.1


def full_load(
    pipeline: Pipeline,
    tables: list[TableConfig],
    runner: Runner | None = None,
    *,
    stall_after: float = 300.0,
    rejected_retries: int = 1,
    restart: bool = False,
    raise_on_failure: bool = True,
) -> list[dict]:
    """Load each table fully; returns one summary per table. Raises LoadError if any batch did not commit
    (``raise_on_failure`` False: a failed table's summary says so in ``state`` and ``error``).
    A rejected batch (its END disagrees with what reached the sink) is loaded again ``rejected_retries`` times.
    A table whose earlier load was interrupted with its batch still open resumes it (the chunks published
    whole are kept), unless ``restart``. A load or repair of a table that another command runs is waited for."""
    runner = runner or Runner()
    say = runner.say
    schemas = {t.name: prepare(pipeline, t)[0] for t in tables}  # every check first: a bad table changes nothing
    lines, tables, reach = cascades_followed(pipeline, tables)
    for line in lines:
        say(line)
    with closing(StateWatch(pipeline, say)) as watch:  # closed, it releases the tables
        watch.take_tables(tables)  # a load of them that runs is waited for: its open batch is not interrupted
        resumes, results = ({}, {}) if restart else _resumable(pipeline, tables, schemas, say)
        for r in results.values():
            seconds = (r["finished_at"] - r["opened_at"]).total_seconds()
            r["seconds"], r["rows_per_s"] = round(seconds, 2), round((r["final_rows"] or 0) / max(seconds, 1e-3))
        todo = [t for t in tables if t.name not in results]
        for attempt in range(1 + rejected_retries):
            if not todo:
                break
            batches = {t.name: resumes[t.name][0] if t.name in resumes else new_batch_id() for t in todo}
            job_args = [
                a
                for t in todo
                for a in ("--table", t.name, "--batch", batches[t.name], "--resume", resumes.get(t.name, ("", "-"))[1])
            ]
            if any(reach[t.name] for t in todo):  # a level below must be loaded after the level above: one at a time
                job_args.append("--in-order")
            resumes = {}  # a batch loaded again after a rejection starts afresh
            results.update(BatchRun(pipeline, todo, batches, runner, stall_after).run("full_load", job_args))
            # a batch whose END disagrees with what reached the sink lost messages on the way (a broker that lost
            # data): it was rejected, nothing of it is visible, and a new batch is the remedy
            rejected = [
                t
                for t in todo
                if results[t.name]["state"] == "rejected"
                and not (results[t.name]["error"] or "").startswith(REJECTED_FOR_ITS_ROWS)
            ]
            if not rejected or attempt == rejected_retries:
                break
            for t in rejected:
                say(
                    f"{t.name}: batch {results[t.name]['batch']} was REJECTED ({results[t.name]['error']}); the target "
                    "keeps its previous data; loading it again with a new batch"
                )
            again = {t.name for t in rejected} | {n for t in rejected for n in reach[t.name]}  # and the levels below
            todo = [t for t in tables if t.name in again]
    failed = []
    for t in tables:
        r = results[t.name]
        if r["state"] == "committed":
            say(
                f"{t.name}: committed batch {r['batch']}: {r['final_rows'] or 0:,} rows in {r['seconds']:.1f}s "
                f"({r['rows_per_s']:,} rows/s), binlog position {r['position_file']}:{r['position_pos']}, "
                f"target table {qi(t.db)}.{qi(t.table)}"
            )
        else:
            failed.append(f"{t.name}: batch {r['batch']} {r['state']}: {r['error']}")
    if failed and raise_on_failure:
        raise LoadError("; ".join(failed) + " (the target keeps the previous data)")
    for line in failed:
        say(line + " (the target keeps the previous data)")
    return [results[t.name] for t in tables]


def _resumable(
    pipeline: Pipeline, tables: list[TableConfig], schemas: dict, say
) -> tuple[dict[str, tuple[str, str]], dict[str, dict]]:
    """Per table whose last full load was interrupted with its batch still open (and the same columns and
    key): (batch id, ``Resume`` as JSON for the Spark job). What the interrupted load published is applied
    first, so that every chunk it published whole is kept; a batch whose END it had published commits
    there, and is the table's load (second dict: its summary)."""
    conn = connect_state(pipeline)
    out, finished = {}, {}
    state = pipeline.target.state_schema
    try:
        interrupted = {t.name: ledger.resumable(conn, state, t.db, t.table, table_topic(pipeline, t)) for t in tables}
        waiting = [t for t in tables if interrupted[t.name]]
        if waiting:
            say(
                f"{', '.join(t.name for t in waiting)}: an interrupted load's batch is open; applying what it published"
            )
            open_batches = [found[0] for found in filter(None, interrupted.values())]
            for batch in open_batches:  # ours now: a sink held up meanwhile must not abandon it (``StateWatch.hold``)
                try_lock(conn, "load", batch)
            _catch_up(pipeline, waiting, conn, say, open_batches)
        for t in waiting:
            found = interrupted[t.name]
            assert found is not None  # waiting holds the interrupted ones
            batch = found[0]
            status = batch_status(conn, state, batch) or {}
            if status.get("state") == "committed":
                say(f"{t.name}: batch {batch} resumed: the interrupted load had published all of it; committed")
                finished[t.name] = {"table": t.name, "batch": batch, **status}
        for t in tables:
            if t.name in finished:
                continue
            found = ledger.resumable(conn, state, t.db, t.table, table_topic(pipeline, t))
            if found is None:
                continue
            batch, columns, key, plan, kept = found
            if columns != [asdict(c) for c in schemas[t.name].columns] or key != list(t.key):
                continue  # the table changed: a new batch supersedes the open one
            parts = tuple(
                Part(part, attempt, rows, checksum, file, pos) for part, attempt, rows, checksum, file, pos in kept
            )
            out[t.name] = (batch, Resume(plan_from_json(plan), parts).to_json())
    finally:
        conn.close()
    return out, finished


def _catch_up(pipeline: Pipeline, tables: list[TableConfig], conn, say, batches: list[str]) -> None:
    """Until what the interrupted load published is applied: by the running sink (what it is through,
    ``load_run.sink_through``, reaches the topics' ends as they were when this began, or stops moving on the
    topics short of them: it holds a table up), or by a sink run here
    until idle; then until the killed load's tasks stop publishing (``DeadTasks``). The stream's changes go on
    arriving behind the load's messages: waiting for the offsets to stop moving alone would wait for the whole
    timeout under any writer."""
    topics = [table_topic(pipeline, t) for t in tables]
    dead = DeadTasks(conn, pipeline.target.state_schema, batches)
    if not all(sink_running(conn, topic) for topic in topics):
        sink = Sink(pipeline, tables)
        try:
            sink.run(caught_up=True, deadline=time.time() + 900)
            while dead.publishing():
                sink.run(caught_up=True, deadline=time.time() + 900)
        finally:
            sink.close()
        dead.said(say, tables)
        return
    ends = end_offsets(pipeline, topics)
    reports = StagedOffsets(pipeline)
    last, began = None, time.time()
    moved = began  # when what the sink is behind by last changed
    try:
        while time.time() < began + CATCH_UP_S:
            through = sink_through(conn, pipeline, reports, topics)
            if ends and applied_through(through, ends):
                while dead.publishing():
                    pass
                dead.said(say, tables)
                say(f"{', '.join(t.name for t in tables)}: the running sink has applied what it published")
                return
            behind = {topic: offset for topic, offset in through.items() if offset < ends.get(topic, 0)}
            if behind != last:  # (another topic's stream changes may go on moving)
                last, moved = behind, time.time()
            elif time.time() - moved >= CATCH_UP_STILL_S:
                return
            time.sleep(CATCH_UP_CHECK_S)
    finally:
        reports.close()
    say(f"the running sink has not applied what the interrupted load published after {CATCH_UP_S:.0f} s: going on")


class DeadTasks:
    """The killed load's Spark tasks: a cancelled job's Python tasks run on, waiting for the sink (``SinkPace``)
    and then finishing their chunk as it stages them. Their chunks are kept if the resumed load waits for them,
    not read again: ``publishing`` is True while the rows staged of chunks not kept (``ledger.left_over_rows``)
    have changed within ``DEAD_TASKS_QUIET_S`` (at most ``DEAD_TASKS_MAX_S`` in all), False at once if there
    are none once what the load published is applied."""

    def __init__(self, conn, schema: str, batches: list[str]):
        self.conn, self.schema, self.batches = conn, schema, batches
        self.rows: dict[str, int] | None = None
        self.seen = self.moved = 0.0

    def publishing(self) -> bool:
        if self.rows is not None:
            time.sleep(DEAD_TASKS_CHECK_S)
        rows, now = ledger.left_over_rows(self.conn, self.schema, self.batches), time.monotonic()
        if self.rows is None:
            self.rows, self.seen, self.moved = rows, now, now
        elif rows != self.rows:
            self.rows, self.moved = rows, now
        return bool(rows) and now - self.moved < DEAD_TASKS_QUIET_S and now - self.seen < DEAD_TASKS_MAX_S

    def said(self, say, tables: list[TableConfig]) -> None:
        if self.moved > self.seen:
            say(
                f"{', '.join(t.name for t in tables)}: the interrupted load's tasks went on publishing their "
                f"chunks; applied for {self.moved - self.seen:.1f} s until they stopped"
            )


def incremental_load(
    pipeline: Pipeline,
    tables: list[TableConfig],
    runner: Runner | None = None,
    *,
    start: str | None = None,
    end: str | None = None,
) -> list[dict]:
    """Load one window per table (see ``seam.source.incremental``); returns one summary per table. Windows of the same
    table are serialised (``StateWatch.take_tables``), whoever starts them."""
    runner = runner or Runner()
    with closing(StateWatch(pipeline, runner.say)) as watch:  # closed, it releases the tables
        watch.take_tables(tables)  # windows of one table never run at once, nor beside its full load: our turn
        return _incremental_locked(pipeline, tables, watch.conn, runner, start, end)


def _incremental_locked(
    pipeline: Pipeline, tables: list[TableConfig], conn, runner: Runner, start: str | None, end: str | None
) -> list[dict]:
    say = runner.say
    windows = {}
    for table in tables:  # every window is checked before anything is published
        mark = watermark(conn, pipeline.target.state_schema, table.db, table.table, table.cursor)
        schema, windows[table.name] = plan_window(pipeline, table, start, end, mark)
        recorded = ledger.committed_columns(conn, pipeline.target.state_schema, table.db, table.table)
        changed = check_columns_unchanged(table, schema, column_names(conn, table.db, table.table), recorded)
        if changed:
            say(changed)
    for table in tables:
        w = windows[table.name]
        say(
            f"{table.name}: window {w.cursor} in ({w.start}, {w.end}]"
            + (
                f" (CLAMPED: requested end {w.requested_end} is within the {table.safety_delay_s:g}s safety delay "
                "of the source's clock)"
                if w.clamped
                else ""
            )
        )
    batches = {t.name: new_batch_id() for t in tables}
    job_args = [
        a
        for t in tables
        for a in ("--table", t.name, "--batch", batches[t.name], "--window", json.dumps(windows[t.name].__dict__))
    ]
    results = BatchRun(pipeline, tables, batches, runner, stall_after=300.0).run("incremental_load", job_args)
    failed = []
    for t in tables:
        r = results[t.name]
        w = windows[t.name]
        r.update(window_start=w.start, window_end=w.end, requested_end=w.requested_end, clamped=w.clamped)
        if r["state"] == "committed":
            say(
                f"{t.name}: committed window ({w.start}, {w.end}] as batch {r['batch']}: {r['final_rows'] or 0:,} "
                f"rows merged in {r['seconds']:.1f}s; watermark {w.end}" + (" (clamped)" if w.clamped else "")
            )
        else:
            failed.append(f"{t.name}: batch {r['batch']} {r['state']}: {r['error']}")
    if failed:
        raise LoadError("; ".join(failed) + " (the target keeps the previous data)")
    return [results[t.name] for t in tables]
