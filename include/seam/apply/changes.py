"""A streamed table's change events as the sink applies them: the source transaction being received, the
``prev`` chain, the transactions waiting behind a cascade of the level above, and the stream controls
(STOP, REBASE, SCHEMA). The table itself (decoder, statements, position) is ``seam.apply.stream_table``.

Its size: the change-event path is one state machine (the transaction being received, the ``prev`` chain,
transactions waiting behind a cascade, stream controls) over state its steps share.

Delivery guarantee: none of its own; ``resume_offset`` keeps a restarted sink from skipping anything held
here in memory, and the position moves in the transaction that applies the changes up to it.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import replace

import msgspec
import psycopg

from seam.alerts import alert
from seam.apply import PositionMoved, SinkError, cascades
from seam.apply.decode import SOURCE_ONLY, schema_from_begin
from seam.apply.follow_ddl import alter_target
from seam.apply.retry import LOCK_WAIT, LockWait, Retrier, changed_in_target, refused, transient
from seam.apply.stream_table import StreamTable, diverged, merge_run, pos_dict
from seam.apply.target import landing_in, target_table
from seam.apply.txn_buffer import StagedTransaction, TransactionBuffer, drop_all_staged, drop_staged
from seam.core.errors import TargetError, first_line
from seam.core.pipeline import Pipeline, TableConfig
from seam.core.position import Position
from seam.core.schema import Column
from seam.state import positions, quarantine
from seam.wire.boundary import EXACT_MODES, Begin, Heartbeat, Rebase, SchemaChange, StreamStop, parse_control

log = logging.getLogger("seam.sink")

# what decoding a message that is not Seam's raises
MALFORMED = (msgspec.DecodeError, KeyError, TypeError, ValueError, AttributeError)
_CASCADE = object()  # the statement of a queued foreign-key cascade (seam.apply.cascades applies it)
GAP_AGAIN_S = 15.0  # a gap still there after this is reported again


class ChangeApplier:
    """The change events of one sink's streamed tables: each source transaction is applied whole, once, if it
    follows on from the table's applied position (its ``prev``); one whose foreign-key cascade needs the
    level above waits behind it; stream controls (heartbeats, added columns, stops, rebases) move the
    position. Everything runs in the sink's current transaction, with the offsets it stores."""

    def __init__(
        self,
        conn,
        pipeline: Pipeline,
        tables: dict[str, TableConfig],
        landing,
        store_offset,
        retrier: Retrier,
    ):
        self.conn, self.pipeline, self.tables, self.retrier = conn, pipeline, tables, retrier
        self.schema = pipeline.target.state_schema
        self.landing = landing  # (TableSchema) -> Landing: how its values land (seam.apply.lifecycle)
        self.store_offset = store_offset  # (topic) -> None: a released transaction moves its topic's offset
        self.streams: dict[str, StreamTable] = {}  # topic -> change-event state, loaded on first use
        self._ops: list[tuple[StreamTable, str, tuple, bool]] = []  # change statements not yet executed
        self._no_stream: set[str] = set()  # topics whose table has no committed load, or a stopped stream
        self._no_stream_at = time.monotonic()  # when _no_stream was last emptied, to be asked again
        self._garbage: list[str] = []  # staged transactions' tables to drop (seam.apply.txn_buffer)

    def change(self, topic: str, value: bytes, offset: int, key: bytes | None = None) -> None:
        """Buffer a change until its source transaction is complete for this table, then apply it whole,
        if it is new (after the applied position) and follows on from it (its ``prev`` is applied). A message
        that is not a Seam change record is quarantined, and stops its table only."""
        try:
            self._change(topic, value, offset)
        except MALFORMED as exc:
            self.quarantine(topic, offset, key, value, f"not a Seam change record ({first_line(exc)})")

    def quarantine(self, topic: str, offset: int, key: bytes | None, value: bytes | None, reason: str) -> None:
        """Keep a message the sink will not apply (``seam.state.quarantine``) and stop its table, in the
        transaction that moves the topic's offset past it; the other tables go on."""
        table = self.tables[topic]
        id_ = quarantine.add(self.conn, self.schema, table.db, table.table, topic, offset, key, value, reason)
        why = quarantine.stop_reason(id_, table.name, topic, offset, reason)
        log.error("%s: STOPPED: %s", table.name, why)
        stream = self._stream_of(topic)
        if stream is not None:
            self.stop_table(stream, why, remedy=False)
        else:
            positions.stop_stream(self.conn, self.schema, table.db, table.table, why)
            alert(self.pipeline, table.name, "message quarantined", why)

    def _stream_of(self, topic: str) -> StreamTable | None:
        """The topic's streamed table, or None (no committed full load, or stopped: asked again every few
        seconds, so a table whose stop was lifted goes on)."""
        stream = self.streams.get(topic)
        if stream is not None:
            return stream
        if topic in self._no_stream:
            if time.monotonic() - self._no_stream_at < 5:
                return None
            self._no_stream.clear()
            self._no_stream_at = time.monotonic()
        return self._load_stream(topic)

    def _change(self, topic: str, value: bytes, offset: int) -> None:
        stream = self._stream_of(topic)
        if stream is None:
            return  # no committed full load (or the table's stream stopped): nothing to apply changes to
        try:
            doc = stream.decode(value)
        except msgspec.ValidationError as exc:  # other columns: fine for what is applied already, else an error
            source = SOURCE_ONLY.decode(value).source
            if source.batch is not None or not Position.through(source.txn["file"], source.txn["pos"]).after(
                stream.applied
            ):
                return  # a batch row (of a batch never opened here, or superseded), or an applied change
            self.stop_table(stream, f"a change at {source.txn} does not match the table's columns ({exc})")
            return
        if doc.source.batch is not None:
            return  # rows of a batch whose BEGIN this sink never saw (superseded, or before its time)
        if doc.source.prev is None:  # the change reader chains every change (quarantined by ``change``)
            raise ValueError("a change without source.prev, which the chain check needs")
        commit = Position.through(doc.source.txn["file"], doc.source.txn["pos"])
        if not commit.after(stream.applied):
            return  # its transaction is already in the target (a snapshot or an applied transaction)
        at, seq = Position(doc.source.file, doc.source.pos, doc.source.row), doc.source.seq
        buffer = stream.buffer
        if buffer and (
            buffer.commit != commit
            or not (  # records before seq: by position
                (buffer.at is not None and buffer.at < at) if seq is None else seq == len(buffer)
            )
        ):
            log.info("%s: incomplete transaction %s dropped (its publisher restarted)", topic, buffer.commit)
            buffer.clear()
        if seq is not None and seq != len(buffer):
            return  # the rest of a transaction whose start this sink did not see
        buffer.add(self.conn, offset, value, doc)
        buffer.commit, buffer.at = commit, at
        if not doc.source.last:
            return
        first = buffer.first_offset
        docs = buffer.take()
        if stream.waiting or not self._take_transaction(stream, commit, docs):
            stream.waiting.append((first, commit, docs))

    def _take_transaction(self, stream: StreamTable, commit: Position, docs: list | StagedTransaction) -> bool:
        """Queue a complete transaction if it is new and follows on (one staged in the target is applied at
        once); False if it must wait (a cascade it carries needs the level above to have applied the same
        change: see seam.apply.cascades)."""
        last = docs.last if isinstance(docs, StagedTransaction) else docs[-1]
        if not commit.after(stream.applied) or not self._follows_on(stream, last.source.prev, commit):
            self._drop_staged(docs)
            return True
        verdict = None
        if isinstance(docs, list):
            verdict = cascades.waits_for(self.conn, self.pipeline.target.state_schema, docs, commit)
        elif docs.cascades:
            records = docs.records(self.conn, stream.decode)
            verdict = cascades.waits_for(self.conn, self.pipeline.target.state_schema, records, commit)
        if verdict is not None and verdict[0] == "wait":
            if stream.wait_logged != commit:
                stream.wait_logged = commit
                log.warning(
                    "%s: the transaction at %s waits for %s to apply the cascade it continues (if that "
                    "table is not loaded, load it)",
                    stream.target,
                    commit,
                    verdict[1],
                )
            return False
        if verdict is not None:
            self._drop_staged(docs)
            self.stop_table(stream, verdict[1])
            return True
        if isinstance(docs, StagedTransaction):
            self._apply_staged(stream, docs)
        else:
            self._queue_transaction(stream, docs)
        stream.applied, stream.source_ms, stream.dirty = commit, last.ts_ms, True
        stream.gtids, stream.server = last.source.gtids, last.source.server or stream.server
        stream.applied_changes += len(docs)
        return True

    def _apply_staged(self, stream: StreamTable, staged: StagedTransaction) -> None:
        """A transaction staged in the target (larger than the memory budget): after the changes queued before
        it, its changes a slice at a time, all in one savepoint: applied whole, or the table is stopped (or,
        waiting on a lock, left for the reader to publish again) with none of them applied."""
        self.run_ops()
        if self.streams.get(stream.topic) is not stream:
            return  # what was queued before it stopped the table

        def apply() -> None:
            for docs in staged.slices(self.conn, stream.decode):
                ops: list = []
                self._transaction_ops(stream, docs, ops)
                self._execute(ops, truncate=True)

        log.info("%s: applying a transaction of %s changes staged in the target", stream.target, f"{len(staged):,}")
        try:
            self.retrier.run(self.conn, apply, f"changes of {stream.target}", lock_waits=False)
        except LockWait as exc:
            self._defer(stream, str(exc))
        except (psycopg.Error, TargetError) as exc:
            if transient(exc):
                raise  # the connection is gone, and the transaction with it: the sink resumes from the target
            self.stop_table(
                stream,
                f"a transaction at {staged.last.source.txn} could not be applied ({refused(exc)})",
                repairable=changed_in_target(exc) is None,
            )
        self._drop_staged(staged)

    def _drop_staged(self, docs) -> None:
        if isinstance(docs, StagedTransaction):
            drop_staged(self.conn, [docs.table])

    def release_waiting(self) -> None:
        """Apply what waited for a cascade's level above, as far as it can go now (inside the caller's
        transaction)."""
        for stream in [s for s in self.streams.values() if s.waiting]:
            while stream.waiting and self.streams.get(stream.topic) is stream:
                _, commit, item = stream.waiting[0]
                if isinstance(item, (list, StagedTransaction)):
                    if not self._take_transaction(stream, commit, item):
                        break
                    stream.waiting.popleft()
                else:
                    stream.waiting.popleft()
                    self.control(stream.topic, item, None)
            self.run_ops()
            self.store_offset(stream.topic)

    def _follows_on(self, stream: StreamTable, prev: dict | None, at: Position) -> bool:
        """The chain check: the table's previous published position must be applied already."""
        if prev is None or not Position(**prev).after(stream.applied):
            return True
        # another process moved the table's position (another pipeline's sink, whose heartbeat the reader then
        # continued from): read again from the target, not a gap (a false 'lost by Kafka' and a rewind each time)
        self._unless_moved(stream)
        self._report_gap(stream, f"changes between {stream.applied} and {at} are missing (lost by Kafka)")
        return False

    def _report_gap(self, stream: StreamTable, what: str) -> None:
        """Ask the change reader to publish again from the target's position (``gap_at``)."""
        # once per applied position (the reader rewinds once), and again while it stays there: a republication
        # can miss the sink (it arrived while the table's stop was being lifted, or the reader rewound just
        # before this report and ignored it), and then nothing would ever ask again
        if stream.gap_reported_at != stream.applied or time.monotonic() - stream.gap_reported_mono > GAP_AGAIN_S:
            stream.gap_reported_at, stream.gap_reported_mono = stream.applied, time.monotonic()
            log.warning("%s: %s; waiting for the change reader to republish", stream.target, what)
            positions.report_gap(self.conn, self.schema, stream.schema.db, stream.schema.table)

    def _queue_transaction(self, stream: StreamTable, docs: list) -> None:
        ops: list = []
        try:
            self._transaction_ops(stream, docs, ops)
        except SinkError as exc:
            self.stop_table(stream, str(exc))
            return
        self._ops.extend(ops)

    def _transaction_ops(self, stream: StreamTable, docs: list, ops: list) -> None:
        for doc in docs:
            if doc.op == "x":  # a foreign-key cascade: a predicate on the child's key columns, 0..n rows
                try:
                    cascade = cascades.parse(doc.cascade, stream.schema.names, stream.target)
                except cascades.CascadeError as exc:
                    raise SinkError(str(exc)) from None
                ops.append(
                    (stream, _CASCADE, (cascade, Position(doc.source.file, doc.source.pos, doc.source.row)), False)
                )
                continue
            before = stream.convert(doc.before) if doc.before is not None else None
            after = stream.convert(doc.after) if doc.after is not None else None
            after_removed = stream.removed(after)
            if before is not None and (
                after is None or after_removed or not stream.key or stream.key_of(before) != stream.key_of(after)
            ):
                # a row flagged deleted before this change is not in the target: Seam removed it, no divergence
                ops.append(
                    (
                        stream,
                        stream.delete_sql,
                        stream.key_of(before) if stream.key else before,
                        not stream.removed(before),
                    )
                )
            if after is not None and not after_removed:
                ops.append((stream, stream.upsert_sql, after, False))

    def run_ops(self) -> None:
        """Execute queued change statements, table by table in order, runs of the same statement pipelined
        (executemany), then store each touched table's position: one transaction with the caller's offsets.
        Each table's statements run in a savepoint: a table whose changes fail (a divergence, a value the
        target refuses) is STOPPED with the reason, and the other tables go on; a transient error (a lock
        wait cancelled, a deadlock) is retried (``seam.apply.retry``), and a lost connection goes up."""
        ops, self._ops = self._ops, []
        by_table: dict[str, list] = {}
        for op in ops:
            by_table.setdefault(op[0].topic, []).append(op)
        for table_ops in by_table.values():
            stream = table_ops[0][0]
            what = f"changes of {stream.target}"
            try:
                self.retrier.run(self.conn, functools.partial(self._execute, table_ops), what, lock_waits=False)
            except LockWait as exc:
                self._defer(stream, str(exc))
            except (psycopg.Error, TargetError) as exc:
                if transient(exc):
                    raise  # the connection is gone, and the transaction with it: the sink resumes from the target
                self.stop_table(
                    stream,
                    f"changes up to {stream.applied} could not be applied ({refused(exc)})",
                    repairable=changed_in_target(exc) is None,
                )
        for stream in self.streams.values():
            if stream.dirty:
                self._store_position(stream)
        if self._garbage:
            drop_staged(self.conn, self._garbage)

    def _defer(self, stream: StreamTable, why: str) -> None:
        """A table whose changes wait on another session's lock: they are left unapplied in this transaction
        (its position does not move) and the table is taken up again from the target's position, so its next
        change reports a gap and the change reader publishes them again; the other tables go on."""
        log.warning(
            "%s: its changes wait on a lock another session holds (%s, lock_timeout %s): left for the change "
            "reader to publish again; the other tables go on",
            stream.target,
            why,
            LOCK_WAIT,
        )
        self._forget(self.streams.pop(stream.topic, None))

    def _execute(self, ops: list, truncate: bool = False) -> None:
        """One table's queued statements in order: the changes between two cascades as one run (``truncate``:
        see ``merge_run``)."""
        stream, run = ops[0][0], []
        with self.conn.cursor() as cur:
            for op in ops:
                if op[1] is not _CASCADE:
                    run.append(op)
                    continue
                self._execute_run(cur, stream, run, truncate)
                run = []
                try:
                    cascades.apply(cur, self.pipeline.target.state_schema, stream, *op[2])
                except cascades.CascadeError as exc:
                    raise SinkError(str(exc)) from None
            self._execute_run(cur, stream, run, truncate)

    def _execute_run(self, cur, stream: StreamTable, run: list, truncate: bool = False) -> None:
        if not run:
            return
        if stream.key:
            merge_run(cur, stream, run, truncate)
            return
        i = 0  # a keyless table: its statements in order, runs of the same one pipelined (executemany)
        while i < len(run):
            _, sql, _, must_delete = run[i]
            j = i + 1
            while j < len(run) and run[j][1] is sql and run[j][3] == must_delete:
                j += 1
            cur.executemany(sql, [params for _, _, params, _ in run[i:j]])
            if must_delete and cur.rowcount != j - i:
                raise SinkError(diverged(j - i - cur.rowcount))
            i = j

    def stop_table(
        self, stream: StreamTable, reason: str, remedy: bool = True, repairable: bool = True, repair_due: bool = False
    ) -> None:
        """Stop applying changes to one table (until its next full load), record why, and alert. The remedy
        said is a repair where one can take the table up (keyed, and ``repairable``), else a full load;
        ``repair_due``: the sink's process starts that repair itself (``seam.cli.cutover_repairs``). A
        table whose position another process moved is not stopped (``PositionMoved``): a change that no
        longer fits may be one that process applied already."""
        name = f"{stream.schema.db}.{stream.schema.table}"
        self._unless_moved(stream)
        if remedy:
            reason = f"{reason}; " + (
                f"run `seam repair {name}` (it copies again only the rows that differ, and the stream goes on), "
                f"or `seam load full {name}`"
                if stream.key and repairable
                else f"re-run `seam load full {name}`: its BEGIN supersedes the unapplied changes"
            )
        if repair_due:
            reason += "; the stream repairs it by itself (repair.after_cutover)"
        positions.stop_stream(self.conn, self.schema, stream.schema.db, stream.schema.table, reason, repair_due)
        self._forget(self.streams.pop(stream.topic, None))
        self._no_stream.add(stream.topic)
        alert(self.pipeline, name, "stream stopped", reason)

    def control(self, topic: str, control, offset: int | None) -> None:
        """A heartbeat, schema change, stop or rebase; ``offset`` None: it waited behind a transaction."""
        stream = self._stream_of(topic)  # a table whose stop was lifted (`seam quarantine skip`) is asked again
        if stream is None:
            return
        if isinstance(control, Rebase):
            if stream.waiting and offset is not None:
                stream.waiting.append((offset, control.position, control))
            else:
                self._rebase(stream, control)
            return
        if not control.position.after(stream.applied):
            return
        if stream.buffer and offset is not None:  # a transaction cut short: its publisher restarted
            stream.buffer.clear()
        if stream.waiting and offset is not None:  # in order behind the transaction that waits
            stream.waiting.append((offset, control.position, control))
            return
        if not self._follows_on(stream, pos_dict(control.prev), control.position):
            return
        self.run_ops()
        if topic not in self.streams:
            return  # its pending changes just stopped the table
        if isinstance(control, SchemaChange) and not self._follow_schema(stream, control):
            return
        if isinstance(control, SchemaChange) and control.stop:  # a cut-over, a fill unknown: compared and repaired
            self.stop_table(stream, control.stop, remedy=False, repair_due=self.pipeline.repair.after_cutover)
        elif isinstance(control, StreamStop):
            log.error("%s: stream stopped: %s", stream.target, control.reason)
            positions.stop_stream(self.conn, self.schema, stream.schema.db, stream.schema.table, control.reason)
            self._forget(self.streams.pop(topic))
            self._no_stream.add(topic)
        stream.applied, stream.dirty = control.position, True
        stream.gtids, stream.server = getattr(control, "gtids", None), getattr(control, "server", None) or stream.server
        if isinstance(control, Heartbeat):
            stream.source_ms = control.seen_ms
        if not isinstance(control, StreamStop):
            self._store_position(stream)

    def _rebase(self, stream: StreamTable, rebase: Rebase) -> None:
        """The source is another server now: the applied position moves to where its GTID set ends there,
        if it is still the one the reader started from (else the reader looks again: a gap)."""
        if stream.server == rebase.server and stream.applied == rebase.position:
            return  # taken already (the reader restarted before it saw that)
        if stream.applied != rebase.prev:
            self._report_gap(
                stream,
                f"a move to server {rebase.server} was found from {rebase.prev}, not from the applied {stream.applied}",
            )
            return
        self.run_ops()
        log.warning(
            "%s: the source is %s now; position %s there continues %s (GTID set %s)",
            stream.target,
            rebase.server,
            rebase.position,
            stream.applied,
            rebase.gtids,
        )
        stream.applied, stream.gtids, stream.server, stream.dirty = rebase.position, rebase.gtids, rebase.server, True
        self._store_position(stream)

    def _follow_schema(self, stream: StreamTable, change: SchemaChange) -> bool:
        """DDL the source ran (``seam.source.ddl``) made on the target's table, in this transaction: TRUNCATE,
        renamed, dropped, widened and added columns, and the table's recorded columns. False when the table
        was left for later (a lock another session holds) or stopped (the target refused)."""
        schema = replace(stream.schema, columns=tuple(Column(**c) for c in change.columns))
        try:
            self.retrier.run(
                self.conn,
                functools.partial(alter_target, self.conn, self.schema, stream, schema, change),
                "DDL",
                lock_waits=False,
            )
        except LockWait as exc:
            self._defer(stream, str(exc))
            return False
        except (psycopg.Error, TargetError) as exc:
            if transient(exc):
                raise
            self.stop_table(  # a repair does not follow DDL: only a full load gives the table the new columns
                stream, f"the target could not follow {change.ddl[:200]!r} ({refused(exc)})", repairable=False
            )
            return False
        log.info("%s: followed %s", stream.target, change.ddl[:200])
        self._drop_run_table(stream)
        stream.use(schema)
        return True

    def drop_run_tables(self) -> None:
        """Every table's run table and staged transactions (the sink's session is kept, its streamed tables
        are loaded again)."""
        for stream in self.streams.values():
            self._drop_run_table(stream)
        drop_all_staged(self.conn)

    def _forget(self, stream: StreamTable | None) -> None:
        """A table taken out of ``streams``: its run table, and the transactions it had staged, are dropped."""
        self._drop_run_table(stream)
        if stream is not None:
            stream.buffer.clear()
            self._garbage += [item.table for _, _, item in stream.waiting if isinstance(item, StagedTransaction)]
            drop_staged(self.conn, self._garbage)

    def _drop_run_table(self, stream: StreamTable | None) -> None:
        """A table's run table has the columns it had: the session would keep it (and empty it at every commit)
        after the table's StreamTable is rebuilt with a new one."""
        if stream is not None and stream.key:
            self.conn.execute(f"DROP TABLE IF EXISTS {stream.run_table}")

    def replay_held(self, topic: str) -> None:
        """After a full load's END (or its batch rejected or abandoned): the change events and stream controls
        held while it was open, in topic order; those at or before the batch's position are skipped by the
        position check, the rest applied after it. They start with the first records of a transaction the
        batch's BEGIN cut in two, received before it. Without those, or without a heartbeat held, a transaction
        after them would find its chain broken (a gap: the change reader would republish from there)."""
        old = self.streams.pop(topic, None)  # a committed batch brings a new schema and position
        cut = None
        if old is not None and old.buffer:
            cut, old.buffer = old.buffer, TransactionBuffer(old.buffer.budget, self._garbage)
        self._forget(old)
        self._no_stream.discard(topic)
        if cut is not None:
            for offset, value in cut.messages(self.conn):
                self.change(topic, value, offset)
            cut.clear()
        for seq, value, control in sorted(positions.take_held(self.conn, self.schema, topic)):
            if control:  # checked as it arrived (Sink._control_of)
                self.control(topic, parse_control(bytes(value)), seq)
            else:
                self.change(topic, bytes(value), seq)
        self.run_ops()

    def _store_position(self, stream: StreamTable) -> None:
        stored = positions.store_stream_position(
            self.conn,
            self.schema,
            stream.schema.db,
            stream.schema.table,
            stream.applied,
            stream.source_ms,
            stream.applied_changes,
            stream.gtids,
            stream.server,
            was=stream.stored,
        )
        if not stored:
            self._moved(stream)
        stream.stored, stream.applied_changes, stream.dirty = stream.applied, 0, False

    def _unless_moved(self, stream: StreamTable) -> None:
        """``PositionMoved`` if another process moved the table's position since this sink read it."""
        now = positions.applied_position(self.conn, self.schema, stream.schema.db, stream.schema.table)
        if now != stream.stored:
            self._moved(stream, now)

    def _moved(self, stream: StreamTable, now=None) -> None:
        """Another process moved the table's position since this sink read it (to ``now``, read if not given):
        raises ``PositionMoved``."""
        if now is None:
            now = positions.applied_position(self.conn, self.schema, stream.schema.db, stream.schema.table)
        raise PositionMoved(
            f"{stream.schema.db}.{stream.schema.table}: another process moved its applied position from "
            f"{stream.stored} to {now} (a pipeline of another name whose sink applies the table from topics of "
            "its own? then both apply every change, each in turn); reading again from the target"
        )

    def _load_stream(self, topic: str) -> StreamTable | None:
        config = self.tables[topic]
        row = positions.stream_start(self.conn, self.schema, config.db, config.table)
        # changes apply only to a streamed table whose last load was a full load (see seam.source.incremental: modes)
        if row is None or row[8] not in EXACT_MODES or config.sync != "stream":
            self._no_stream.add(topic)
            return None
        schema = schema_from_begin(Begin(batch="", db=row[0], table=row[1], mode="full", columns=row[2], key=row[3]))
        stream = self.streams[topic] = StreamTable(
            topic,
            schema,
            tuple(row[3]),
            Position(row[4], row[5], row[6]),
            row[7],
            config.soft_delete,
            landing_in(self.conn, target_table(row[0], row[1]), schema, self.landing(schema)),
        )
        stream.gtids, stream.server = row[9], row[10]
        stream.buffer = TransactionBuffer(self.pipeline.stream.max_transaction_memory, self._garbage)
        return stream
