"""Binlog streaming: the change reader that follows tables from the binlog
position of their last committed full load.

Its size: the change reader is one loop over shared state (followed tables, rewinds, cascades, rebases after a
failover) plus the lag it reports; the next split is planned (cascade tracking and lag into their own
modules).

Positions and chains. The reader starts each table at the position the
target has applied (``seam.positions``, written by the sink in the same
transaction as the data), always a source transaction boundary. It reads
whole committed transactions from ``seam.source.binlog`` (which owns BEGIN/COMMIT,
savepoints, ROLLBACK, XA and GTIDs) and publishes each at its commit; each record carries the commit position
(``source.txn``), ``source.last`` on the table's last change of the
transaction, and ``source.prev``: the table's previously published position.
Between transactions HEARTBEAT messages (with their own ``prev``) tell the
sink that an idle table is current up to the reader's position. The sink
applies a transaction only if it has applied ``prev``; otherwise something
was lost between them (the embedded broker loses topics on restart,
retention can expire) and the sink records a gap instead of applying.

Republishing. The reader keeps no state of its own. It rewinds, re-reading
the target's positions and republishing from there, when the sink reports a
gap, when a table topic was recreated (its topic id changed), when a newly
loaded table's position lies behind it, and after any error (``serve``
retries). Republished changes the sink already has are skipped by position.

Another server. A table's last change in a transaction and each heartbeat
also carry the GTID set executed through their position and the server
they were read on, which the sink stores with the position. When the source
is another server at the start of a pass (a failover, or a replica), the
reader finds each moved table's set in the new server's binlog and publishes
REBASE first (``seam.source.gtid``); what it cannot find stops the stream with the
remedy, before anything is published. A transaction read twice (the binlog
library reconnected to another server behind the reader's back) restarts
the pass, which then moves the positions.

Back-pressure. Per table it counts the events and bytes published but not
yet applied (from the target's positions, not from Kafka). Past 3/4 of the
bound (``kafka.max_unapplied_events`` / ``_bytes``) it slows down; at the
bound it stops reading the binlog until the sink has caught up to half the
bound. One reader serves all its tables, so a stalled table pauses them all.

DDL. ``ALTER TABLE ... ADD COLUMN`` on a followed table publishes a SCHEMA
message (the sink adds the column) and the stream goes on. Any other DDL
that changes a followed table's rows or shape (DROP, MODIFY, CHANGE,
RENAME, TRUNCATE, CREATE OR REPLACE), a change to it logged as a statement
rather than as rows, rows that cannot be decoded with its columns, and an
XA commit whose prepared rows were purged publish STOP: that table's stream
stops with an error naming the cause and the remedy (a new full load);
other tables go on. Index and table-option changes are ignored.

Delivery guarantee: at-least-once into Kafka, whole source transactions in
binlog order per table (one partition per table topic, one producer);
exactly-once in the target through the sink's position and chain checks.
"""

from __future__ import annotations

import collections
import logging
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import pymysql

from seam.alerts import alert
from seam.apply.target import connect_state, connect_target, scalar
from seam.config import Pipeline, TableConfig
from seam.core.errors import SourceError
from seam.core.schema import Column, TableSchema
from seam.source.binlog import (
    SAME_SERVER_ID,
    BinlogReader,
    LostTransaction,
    RolledBack,
    Statement,
    Tick,
    Transaction,
    binlog_files,
    gtids_at,
    locate,
    replica_clash,
)
from seam.source.ddl import ddl_effect, followed_columns, swapped_clauses
from seam.source.gtid import GtidError, GtidSet, gtids_enabled, is_mariadb, server_identity
from seam.source.schema import COLUMN_FIELDS, column_from_row, reachable, read_foreign_keys, read_schema
from seam.source.snapshot import source_head
from seam.state.parts import part_beat, part_failed, part_started, part_stopped
from seam.state.positions import followed_tables, lag_sample, stop_stream
from seam.state.schema import ensure_state
from seam.wire.boundary import CONTROL_HEADER, EXACT_MODES, Heartbeat, Rebase, SchemaChange, StreamStop
from seam.wire.records import Position, Record, key_of, normalize, normalize_row
from seam.wire.topics import Publisher, ensure_topics, message_limit, table_topic, topic_ids

log = logging.getLogger("seam.streaming")

CONTROL_KEY = b"__seam_control__"
HEARTBEAT_EVERY_S = 0.5
IDLE_BEAT_S = 5.0  # an idle table's heartbeat is sent again this often (``_heartbeats``)
POLL_EVERY_S = 1.0


class StreamError(SourceError):
    """The stream cannot go on; the message says why and what to do."""


class _Rewind(Exception):
    """Read the binlog again from the target's positions (``reset``: forget what was published)."""

    def __init__(self, reason: str, reset: bool):
        super().__init__(reason)
        self.reset = reset


@dataclass
class Followed:
    table: TableConfig
    schema: TableSchema
    topic: str
    published: Position  # the head of the table's chain: its last published position
    batch: str | None  # the full load it follows from
    events: int = 0  # published since the last rewind (events, bytes) ...
    bytes: int = 0
    applied_events: int = 0  # ... of which the sink has applied
    applied_bytes: int = 0
    backlog: collections.deque = field(default_factory=collections.deque)  # (position, events, bytes) published
    gtids: str | None = None  # the GTID set through the applied position it started from, and the server that
    server: str | None = None  # position was read on (None: not recorded; taken to be this one)
    beat_at: float = 0.0  # when its last heartbeat was sent (time.monotonic)

    def unapplied(self) -> tuple[int, int]:
        return self.events - self.applied_events, self.bytes - self.applied_bytes

    def applied_to(self, applied: Position) -> None:
        while self.backlog and not self.backlog[0][0].after(applied):
            _, self.applied_events, self.applied_bytes = self.backlog.popleft()


@dataclass
class TargetState:
    applied: Position
    batch: str | None
    stopped: str | None
    gap_at: object | None
    columns: list | None
    key: list | None
    last_load: str | None  # mode of the last committed batch: full or incremental
    gtids: str | None = None
    server: str | None = None


class ChangeReader:
    def __init__(self, pipeline: Pipeline, tables: list[TableConfig] | None = None):
        self.pipeline = pipeline
        # sync: windows tables are kept current by windows, never by the stream (see seam.source.incremental: modes)
        self.tables = {(t.db, t.table): t for t in (tables or pipeline.tables) if t.sync == "stream"}
        for t in tables or ():
            if t.sync != "stream":
                log.warning("%s is kept current by windows (sync: windows): the stream does not follow it", t.name)
        self.max_events = pipeline.kafka.max_unapplied_events
        self.max_bytes = pipeline.kafka.max_unapplied_bytes
        self.message_limit = message_limit(pipeline)
        self.followed: dict[tuple[str, str], Followed] = {}
        self.stopped: dict[str, str] = {}
        self.paused_s = 0.0
        self.rewinds = 0
        self._over_bound = False
        self._pause_began: float | None = None
        self._told_waiting: set[tuple[str, str]] = set()
        self._cascades: dict[tuple[str, str], list] | None = None  # read at the first pass and after DDL
        self._cycles: set[tuple[str, str]] = set()
        self._cycles_of: dict | None = None  # the cascades _cycles was computed from
        self._source_conn = None
        self._clash_checked = False  # another replica with our server_id, looked for before the first read
        self._stopped_batch: dict[tuple[str, str], str | None] = {}  # stopped tables: the load they stopped in
        self._target = connect_state(pipeline)
        self._rewound_at = scalar(self._target, "SELECT now()")
        self._here: str | None = server_identity(
            self._source()
        )  # the source server (seam.source.gtid), read at each pass
        self._reading: BinlogReader | None = None
        self._follow_from_target(reset=True)
        self._stop_purged()

    def close(self) -> None:
        self._target.close()
        if self._source_conn is not None:
            self._source_conn.close()

    def _source(self):
        """The reader's one source connection for catalog reads (foreign keys, engines, added columns)."""
        import pymysql

        if self._source_conn is None:
            self._source_conn = pymysql.connect(**self.pipeline.source.pymysql_kwargs(), autocommit=True)
        else:
            self._source_conn.ping(reconnect=True)
        return self._source_conn

    # ------------------------------------------------------------ target state

    def _target_state(self) -> dict[tuple[str, str], TargetState]:
        rows = followed_tables(self._target, self.pipeline.target.state_schema)
        return {(r[0], r[1]): TargetState(Position(r[2], r[3], r[4]), *r[5:]) for r in rows}

    def _follow_from_target(self, reset: bool, states: dict | None = None) -> list[Followed]:
        """Follow the tables the target has positions for; ``reset`` re-anchors every chain at the target."""
        added = []
        for key, st in (states if states is not None else self._target_state()).items():
            table = self.tables.get(key)
            if table is None or st.columns is None:
                continue
            if st.stopped:
                if self.followed.pop(key, None) or table.name not in self.stopped:
                    log.error("%s: stream stopped: %s", table.name, st.stopped)
                self.stopped[table.name] = st.stopped
                self._stopped_batch.pop(key, None)  # the target has the stop: lifted there, the table goes on
                continue
            if key in self._stopped_batch and self._stopped_batch[key] == st.batch:
                continue  # stopped by this reader; the sink has not applied the STOP yet
            if st.last_load not in EXACT_MODES:  # a window was merged after the last full load: no exact position
                if self.followed.pop(key, None) or key not in self._told_waiting:
                    log.warning(
                        "%s: its last load was a window; the stream follows it again after `seam load full %s`",
                        table.name,
                        table.name,
                    )
                    self._told_waiting.add(key)
                continue
            self.stopped.pop(table.name, None)
            self._stopped_batch.pop(key, None)
            if key in self.followed and not reset:
                continue
            schema = TableSchema(
                db=table.db,
                table=table.table,
                columns=tuple(Column(**c) for c in st.columns),
                primary_key=tuple(st.key or ()),
            )
            followed = Followed(
                table, schema, table_topic(self.pipeline, table), st.applied, st.batch, gtids=st.gtids, server=st.server
            )
            if key not in self.followed:
                added.append(followed)
            self.followed[key] = followed
        for key, table in self.tables.items():
            if key not in self.followed and table.name not in self.stopped and key not in self._told_waiting:
                log.warning(
                    "%s has no committed full load yet: waiting for one (`seam load full %s`)", table.name, table.name
                )
                self._told_waiting.add(key)
        return added

    def _stop_purged(self) -> None:
        """A table whose position is in a binlog the source no longer has (purged, expired) stops, with the
        way out; the other tables go on."""
        files = binlog_files(self._source())
        if not files:
            raise StreamError("the source's binary log is off (no binlog files): start it with --log-bin")
        for f in list(self.followed.values()):
            if self._on_this_server(f) and f.published.file not in files:
                self._position_lost(
                    f,
                    f"the source no longer has binlog {f.published.file} (purged; oldest is {files[0]}), so its "
                    f"changes after {f.published} are gone",
                    "keep binlogs longer (binlog_expire_logs_seconds)",
                )

    def _position_lost(self, f: Followed, why: str, advice: str) -> None:
        """Stop a table whose position cannot be read on this source (its binlog is gone, a failover without
        GTIDs) with the way out, in the target's state (no message can be placed at a lost position); the
        other tables go on."""
        way_out = (
            f"`seam repair {f.table.name} --full` (it copies again only the rows that differ)"
            if f.table.key
            else f"`seam load full {f.table.name}`"
        )
        reason = f"{why}: run {way_out}, and {advice}"
        stop_stream(self._target, self.pipeline.target.state_schema, f.table.db, f.table.table, reason)
        del self.followed[(f.table.db, f.table.table)]
        self.stopped[f.table.name] = reason
        log.error("%s: stream stopped: %s", f.table.name, reason)
        alert(self.pipeline, f.table.name, "stream stopped", reason)

    def _poll(self, here: Position | None, ids: dict[str, str]) -> None:
        """Update what the sink has applied; raise _Rewind when the binlog must be read again."""
        self._part(part_beat, batches=1)
        states = self._target_state()
        now = scalar(self._target, "SELECT now()")
        for key, f in list(self.followed.items()):
            st = states.get(key)
            if st is None:
                continue
            if st.stopped:
                self.followed.pop(key)
                self.stopped[f.table.name] = st.stopped
                continue
            f.applied_to(st.applied)
            if st.gap_at is not None and st.gap_at > self._rewound_at:
                self._rewound_at = now
                raise _Rewind(f"the sink reports changes of {f.table.name} missing after {st.applied}", reset=True)
        if ids:
            current = topic_ids(self.pipeline, sorted(ids))
            changed = [t for t, i in current.items() if ids.get(t) != i]
            if changed:
                self._rewound_at = now
                raise _Rewind(f"topic(s) {', '.join(changed)} were recreated on the broker (messages lost)", reset=True)
        added = self._follow_from_target(reset=False, states=states)
        behind = [f for f in added if here is not None and here.after(f.published)]
        if behind:
            raise _Rewind(f"{', '.join(f.table.name for f in behind)} newly loaded at an earlier position", reset=False)

    # ------------------------------------------------------------ running

    def serve(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        """Run until stopped, resuming from the target's positions after any failure (broker restart, lost
        source connection). A purged binlog is not retried: it needs a new full load. Heartbeats, restarts
        and the last error go to the target (``seam.state``) for ``seam stream status``."""
        self._part(part_started, fresh=True)
        try:
            self._serve(should_stop)
        except StreamError as exc:
            self._part(part_failed, error=str(exc))
            raise
        finally:
            self._part(part_stopped)

    def _part(self, record, **kwargs) -> None:
        try:
            record(self._target, self.pipeline.target.state_schema, self.pipeline.name, "reader", **kwargs)
        except Exception as exc:  # noqa: BLE001 - a heartbeat must never stop the stream
            log.warning("could not record the reader's state in the target (%s)", str(exc).splitlines()[0])

    def _serve(self, should_stop: Callable[[], bool]) -> None:
        while not should_stop():
            try:
                self.run(should_stop)
            except StreamError:
                raise
            except Exception as exc:  # noqa: BLE001 - every other failure is resumed from the target
                problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                log.warning("change reader interrupted (%s); resuming from the target's positions in 2 s", problem)
                self._part(part_failed, error=problem)
                time.sleep(2)
                try:
                    self._target.close()
                    self._target = connect_target(self.pipeline)
                    self._target.autocommit = True
                    self._follow_from_target(reset=True)
                except Exception as again:  # noqa: BLE001
                    log.warning("target not reachable yet (%s)", again)

    def run(self, should_stop: Callable[[], bool] = lambda: False, until_idle: bool = False) -> dict[str, int]:
        """Publish changes until stopped (or, with ``until_idle``, until the binlog's current end)."""
        stats = {"transactions": 0, "changes": 0, "rewinds": 0}
        topics = [table_topic(self.pipeline, t) for t in self.tables.values()]
        ensure_topics(self.pipeline, topics)
        # A broker that lost its producer state (a restart of an in-memory broker) rejects every retry until
        # the message times out; giving up after 30 s resumes from the target's positions sooner, exactly.
        publisher = Publisher(self.pipeline, give_up_after_s=30)
        try:
            while not should_stop():
                if not self.followed:
                    if until_idle:
                        break
                    time.sleep(POLL_EVERY_S)
                    self._follow_from_target(reset=False)
                    self._part(part_beat, batches=1)
                    continue
                self._here = server_identity(self._source())
                self._rebase(publisher)
                self._stop_purged()
                if not self.followed:
                    continue
                start = min(f.published for f in self.followed.values())
                try:
                    self._read(publisher, start, stats, should_stop, until_idle)
                    break
                except _Rewind as rewind:
                    publisher.flush()
                    stats["rewinds"] += 1
                    self.rewinds += 1
                    log.warning("rewinding: %s; republishing from the target's positions", rewind)
                    if rewind.reset:
                        ensure_topics(self.pipeline, topics)
                        self._follow_from_target(reset=True)
        finally:
            publisher.flush()
        return stats

    def _read(self, publisher: Publisher, start: Position, stats: dict, should_stop, until_idle: bool) -> None:
        src = self.pipeline.source
        if self._cascades is None:
            self._cascades = self._load_cascades()
        me = f"seam:{self.pipeline.name}"[:60]
        if not self._clash_checked:  # once: a clash that appears later knocks a reader off (SAME_SERVER_ID)
            other = replica_clash(self._source(), src.server_id, me)
            if other is not None:
                raise StreamError(_clash(src.server_id, f"a replica that reports itself as {other}"))
            self._clash_checked = True
        reader = BinlogReader(
            src,
            start,
            {db for db, _ in self.tables} | {p[0] for p in self._cascades},
            tables=set(self.tables) | set(self._cascades),
            blocking=not until_idle,
            server_id=src.server_id,
            heartbeat_s=1.0,
            report_as=me,
            gtids=self._gtids_at(start),
        )
        self._reading = reader
        ids = topic_ids(self.pipeline, sorted({f.topic for f in self.followed.values()}))
        log.info(
            "reading the binlog from %s for %s", start, ", ".join(sorted(f.table.name for f in self.followed.values()))
        )
        last_beat = last_poll = time.monotonic()
        between = True
        try:
            for item in reader:
                between = True
                if isinstance(item, Transaction):
                    records, failed = self._records(item)
                    stats["changes"] += self._publish(publisher, records, item.commit, item.timestamp)
                    stats["transactions"] += 1
                    for followed, error in failed.values():
                        self._stop(
                            publisher,
                            followed,
                            item.commit,
                            f"a change at {item.commit} cannot be read with the table's columns ({error})",
                        )
                elif isinstance(item, Statement):
                    self._statement(publisher, item)
                    between = not item.in_transaction
                elif isinstance(item, RolledBack):
                    self._rolled_back(publisher, item)
                elif isinstance(item, LostTransaction):
                    for followed in list(self.followed.values()):
                        self._stop(publisher, followed, item.position, item.reason)
                elif isinstance(item, Tick):
                    between = item.between
                now = time.monotonic()
                here = reader.here
                if between and here and now - last_beat > HEARTBEAT_EVERY_S:
                    # not flushed: linger.ms sends it soon, its chain (prev) guards it, the poll's flush checks it
                    self._heartbeats(publisher, here)
                    last_beat = now
                if now - last_poll > POLL_EVERY_S or self._over_bound:
                    publisher.flush()
                    self._poll(here, ids)
                    self._hold_back(publisher, here, ids, should_stop)
                    last_poll = time.monotonic()
                if should_stop():
                    break
            else:  # the binlog's end (until_idle): every table is current up to here, say so
                if between and reader.here:
                    self._heartbeats(publisher, reader.here)
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] == SAME_SERVER_ID:
                raise StreamError(
                    _clash(src.server_id, "another binlog reader (it took over this one's connection)")
                ) from None
            raise
        finally:
            reader.close()
            self._reading = None
        publisher.flush()

    def _hold_back(self, publisher: Publisher, here: Position | None, ids: dict, should_stop) -> None:
        """Back-pressure: pause while any table has more published-but-unapplied than the bound."""
        self._over_bound = False

        def over(fraction: float) -> list[str]:
            return [
                f.table.name
                for f in self.followed.values()
                if f.unapplied()[0] > self.max_events * fraction or f.unapplied()[1] > self.max_bytes * fraction
            ]

        if not over(1.0):
            if over(0.75):
                time.sleep(0.2)  # slow down before the bound
            return
        log.warning(
            "back-pressure: %s has %s events / %s bytes published but not applied (bound %s / %s): "
            "pausing until the sink catches up",
            over(1.0)[0],
            *self._unapplied_of(over(1.0)[0]),
            self.max_events,
            self.max_bytes,
        )
        began = self._pause_began = time.monotonic()
        try:
            while over(0.5) and not should_stop():
                time.sleep(0.5)
                self._poll(here, ids)
        finally:
            self._pause_began = None
            self.paused_s += time.monotonic() - began
        log.info("back-pressure released after %.1f s", time.monotonic() - began)

    def paused_for(self) -> float:
        """Seconds spent paused by back-pressure, including a pause going on now."""
        return self.paused_s + (time.monotonic() - self._pause_began if self._pause_began else 0.0)

    def _unapplied_of(self, name: str) -> tuple[int, int]:
        return next(f.unapplied() for f in self.followed.values() if f.table.name == name)

    def unapplied(self) -> dict[str, tuple[int, int]]:
        return {f.table.name: f.unapplied() for f in self.followed.values()}

    # ------------------------------------------------------------ publishing

    def _records(self, txn: Transaction) -> tuple[list[tuple[Followed, Record]], dict[str, tuple[Followed, str]]]:
        """The transaction's changes of followed tables not yet published, as records, and the tables whose
        rows cannot be decoded or normalised with their schema (to be stopped, never skipped)."""
        out, failed = [], {}
        for (db, table), error in txn.errors.items():
            followed = self.followed.get((db, table))
            if followed is not None and txn.commit.after(followed.published):
                failed[followed.table.name] = (followed, error)
        for change in txn.changes:
            cascaded = self._cascaded(change, txn, failed) if (change.db, change.table) in self._read_cascades else []
            followed = self.followed.get((change.db, change.table))
            if followed is None or not txn.commit.after(followed.published) or followed.table.name in failed:
                out.extend(cascaded)
                continue
            schema = followed.schema
            try:
                before = None if change.before is None else normalize_row(schema, change.before)
                after = None if change.after is None else normalize_row(schema, change.after)
            except Exception as exc:  # noqa: BLE001 - named in the stop
                failed[followed.table.name] = (followed, f"{type(exc).__name__}: {exc}")
                continue
            out.append(
                (
                    followed,
                    Record(
                        op=change.op,
                        db=schema.db,
                        table=schema.table,
                        key=key_of(schema, followed.table.key, after or before),
                        before=before,
                        after=after,
                        position=change.position,
                        gtid=txn.gtid,
                        ts_ms=txn.timestamp * 1000,
                    ),
                )
            )
            out.extend(cascaded)  # after the row itself: in a tree, the row may reference itself
        return [(f, r) for f, r in out if f.table.name not in failed], failed

    @property
    def _read_cascades(self) -> dict[tuple[str, str], list]:
        """The cascades, once the first pass has read them."""
        assert self._cascades is not None
        return self._cascades

    def _load_cascades(self) -> dict[tuple[str, str], list]:
        """Per parent table: its foreign keys into streamed tables whose rule the storage engine applies
        without logging rows (ON DELETE / ON UPDATE CASCADE or SET NULL), with the parent's schema."""
        conn = self._source()
        out: dict[tuple[str, str], list] = {}
        schemas: dict[tuple[str, str], TableSchema] = {}
        for fk in read_foreign_keys(conn, {db for db, _ in self.tables}):
            if fk.child in self.tables and fk.follows():
                if fk.parent not in schemas:
                    schemas[fk.parent] = read_schema(conn, *fk.parent)
                out.setdefault(fk.parent, []).append((fk, schemas[fk.parent]))
        if out != self._cascades:
            for parent, fks in out.items():
                log.info(
                    "following cascades of %s.%s into %s",
                    *parent,
                    ", ".join(f"{fk.child[0]}.{fk.child[1]} ({', '.join(fk.rules_followed())})" for fk, _ in fks),
                )
        return out

    def _cascaded(self, change, txn: Transaction, failed: dict) -> list[tuple[Followed, Record]]:
        """What the storage engine did to streamed tables because of a parent's change (not in the binlog),
        as ``x`` records at the parent's change. The first level names the parent's old (and new) values.
        A level below names the level above (``via``): which of its rows went is known only in the target,
        so the sink applies it with the rows it recorded there (see seam.wire.records). A table's keys into
        itself (a tree) are carried in the record: the sink repeats them until no row changes."""

        def publish(fk, cascade: dict) -> None:
            """Unless this level is published already, or not followed (stopped, not loaded): the levels
            below go on either way, and the sink stops a level whose level above it cannot use."""
            child = self.followed.get(fk.child)
            if child is None or child.table.name in failed or not txn.commit.after(child.published):
                return
            out.append(
                (
                    child,
                    Record(
                        op="x",
                        db=child.schema.db,
                        table=child.schema.table,
                        key={},
                        before=None,
                        after=None,
                        position=change.position,
                        gtid=txn.gtid,
                        ts_ms=txn.timestamp * 1000,
                        cascade={**cascade, **self._below(fk.child)},
                    ),
                )
            )

        out: list[tuple[Followed, Record]] = []
        reached: list[tuple[str, str]] = []
        for fk, parent in self._read_cascades[(change.db, change.table)]:
            try:
                old = (
                    [normalize(parent.column(c), change.before[c]) for c in fk.referenced]
                    if change.before is not None
                    else None
                )
                new = (
                    [normalize(parent.column(c), change.after[c]) for c in fk.referenced]
                    if change.after is not None
                    else None
                )
            except Exception as exc:  # noqa: BLE001 - named in the stop
                child = self.followed.get(fk.child)
                if child is not None:
                    failed[child.table.name] = (
                        child,
                        f"the cascade from {fk.parent[0]}.{fk.parent[1]} cannot be read ({type(exc).__name__}: {exc})",
                    )
                continue
            action = fk.action_for(change.op, old, new)
            if action is not None:
                publish(
                    fk,
                    {
                        "action": action,
                        "parent": f"{fk.parent[0]}.{fk.parent[1]}",
                        "columns": list(fk.columns),
                        "old": old,
                        "new": new if action == "update" else None,
                    },
                )
                reached.append(fk.child)
        expanded = set()
        while reached:  # breadth first: each table's keys into other tables, once per parent change
            table = reached.pop(0)
            if table in expanded:
                continue
            expanded.add(table)
            for fk, _ in self._read_cascades.get(table, []):
                if fk.child == table:
                    continue  # the sink repeats a table's keys into itself
                if fk.child in self._cyclic():
                    deeper = self.followed.get(fk.child)
                    if deeper is not None and txn.commit.after(deeper.published):
                        failed[deeper.table.name] = (
                            deeper,
                            f"a cascade through {'.'.join(table)} reaches it at "
                            f"{txn.commit} along a cycle of foreign keys between "
                            "tables (Seam follows a table's keys into itself, not "
                            "cycles through other tables)",
                        )
                    continue
                publish(fk, {"via": list(table), **fk.rule()})
                reached.append(fk.child)
        return out

    def _below(self, table: tuple[str, str]) -> dict:
        """What a cascaded table's record carries for the levels below it: its keys into itself (``self``),
        and the columns other streamed tables reference (``keep``: the sink records the changed rows). Every
        streamed table below counts, followed yet or not: a table loaded while this change is read gets its
        level of it when the reader rewinds for it, and then the rows must have been recorded."""
        fks = [fk for fk, _ in self._read_cascades.get(table, [])]
        own = [fk.rule() for fk in fks if fk.child == table]
        keep = sorted({c for fk in fks if fk.child != table for c in fk.referenced})
        return {**({"self": own} if own else {}), **({"keep": keep} if keep else {})}

    def _cyclic(self) -> set[tuple[str, str]]:
        """Tables on a cycle of cascading keys through other tables (a table's keys into itself excepted)."""
        if self._cycles_of is not self._cascades:
            edges = {p: {fk.child for fk, _ in fks if fk.child != p} for p, fks in self._read_cascades.items()}
            self._cycles = {t for t in edges if t in reachable(t, lambda n: edges.get(n, ()))}
            self._cycles_of = self._cascades
        return self._cycles

    def _publish(
        self, publisher: Publisher, pending: list[tuple[Followed, Record]], commit: Position, timestamp: int
    ) -> int:
        """Publish one source transaction's changes, table by table, each chained to the table's last."""
        by_table: dict[str, tuple[Followed, list[Record]]] = {}
        for followed, record in pending:
            if commit.after(followed.published):  # else already published (or applied) for this table
                by_table.setdefault(followed.table.name, (followed, []))[1].append(record)
        sent = 0
        for followed, records in list(by_table.values()):
            values = []
            for i, r in enumerate(records):
                last = i == len(records) - 1
                anchor = self._anchor() if last else {}
                values.append(
                    r.chained_json(commit, last, followed.published, i, anchor.get("gtids"), anchor.get("server"))
                )
            largest = max(map(len, values))
            if largest > self.message_limit:  # the broker would refuse it for ever: this table stops, no other
                self._stop(publisher, followed, commit, self._too_large(largest))
                del by_table[followed.table.name]
                continue
            for r, value in zip(records, values):
                publisher.send(followed.topic, value, r.kafka_key())
            self._advance(followed, commit, len(records), sum(map(len, values)))
            sent += len(records)
        for followed, _ in by_table.values():
            events, size = followed.unapplied()
            if events > self.max_events or size > self.max_bytes:
                self._over_bound = True  # checked after this transaction, not at the next poll
            elif events > 0.75 * self.max_events or size > 0.75 * self.max_bytes:
                time.sleep(0.002)  # the slowing half of back-pressure, per transaction
        return sent

    def _too_large(self, size: int) -> str:
        return (
            f"a change's record is {size:,} bytes, over the {self.message_limit:,} that a value of "
            f"kafka.max_value_bytes ({self.pipeline.kafka.max_value_bytes:,}) allows: raise kafka.max_value_bytes "
            "in the pipeline (on Apache Kafka also the broker's message.max.bytes for topics Seam did not create)"
        )

    def _advance(self, followed: Followed, position: Position, events: int, size: int) -> None:
        followed.published = position
        if self._reading is not None:
            followed.gtids = self._anchor()["gtids"]
        followed.events += events
        followed.bytes += size
        followed.backlog.append((position, followed.events, followed.bytes))

    # ------------------------------------------------------------ servers and GTID sets (seam.source.gtid)

    def _on_this_server(self, followed: Followed) -> bool:
        return followed.server is None or self._here is None or followed.server == self._here

    def _anchor(self) -> dict:
        """What a published position carries besides file and pos: the GTID set through it and the server."""
        executed = self._reading.gtids if self._reading is not None else None
        return {"gtids": str(executed) if executed is not None and executed.flavour else None, "server": self._here}

    def _gtids_at(self, start: Position) -> GtidSet | None:
        """The GTID set through the reader's start: as the target recorded it, else from the server."""
        for f in self.followed.values():
            if f.published == start and f.gtids and f.server == self._here:
                return GtidSet(f.gtids)
        conn = self._source()
        if not gtids_enabled(conn):
            return None
        return gtids_at(conn, start, self.pipeline.source)

    def _rebase(self, publisher: Publisher) -> None:
        """Tables whose applied position was read on another server (a failover, or the pipeline pointed at
        a replica): find each one's GTID set in this server's binlog and move its chain there (REBASE)."""
        moved = [f for f in self.followed.values() if not self._on_this_server(f)]
        if not moved:
            return
        here = self._here
        assert here is not None  # a table is on another server only when this one is known
        conn = self._source()
        logs_gtids, mariadb = gtids_enabled(conn), is_mariadb(conn)
        for f in moved:
            where = f"its position {f.published} was read on {f.server} and the source is {here} now"
            if not logs_gtids:
                self._position_lost(f, f"{where}, which logs no GTIDs", "set gtid_mode=ON for failovers")
                continue
            if not f.gtids:
                self._position_lost(f, f"{where}; it has no GTID set to find it by", "keep GTIDs on")
                continue
            try:
                at = locate(self.pipeline.source, GtidSet(f.gtids), mariadb)
            except GtidError as exc:
                self._position_lost(
                    f, f"{where}; its GTID set {f.gtids} cannot be found there ({exc})", "check the failover"
                )
                continue
            log.warning(
                "%s: the source is %s now, not %s: its GTID set %s ends at %s there; the stream goes on from there",
                f.table.name,
                self._here,
                f.server,
                f.gtids,
                at,
            )
            self._control(publisher, f, Rebase(at, f.published, f.gtids, here))
            f.server = self._here
        publisher.flush()

    def _heartbeats(self, publisher: Publisher, here: Position) -> None:
        """A HEARTBEAT to each table whose chain ends before ``here``, and again every ``IDLE_BEAT_S`` to one
        whose chain ends there: if the sink missed the last one (it was taking the table up again after a
        lifted stop), the next one shows it a gap, and it asks for the republication."""
        seen, now = int(time.time() * 1000), time.monotonic()
        for f in self.followed.values():
            if here.after(f.published) or (here == f.published and now - f.beat_at > IDLE_BEAT_S):
                value = Heartbeat(here, prev=f.published, seen_ms=seen, **self._anchor()).to_json()
                publisher.send(f.topic, value, CONTROL_KEY, headers=[(CONTROL_HEADER, b"1")])
                self._advance(f, here, 0, len(value))
                f.beat_at = now

    def _control(self, publisher: Publisher, followed: Followed, message) -> None:
        if isinstance(message, SchemaChange):
            message = replace(message, **self._anchor())
        value = message.to_json()
        publisher.send(followed.topic, value, CONTROL_KEY, headers=[(CONTROL_HEADER, b"1")])
        self._advance(followed, message.position, 1, len(value))

    # ------------------------------------------------------------ DDL

    def _stop(self, publisher: Publisher, followed: Followed, position: Position, reason: str) -> None:
        """Stop one table's stream at ``position`` loudly: a STOP message, an alert, and the remedy."""
        if not position.after(followed.published):
            return
        reason = f"{reason}; re-run `seam load full {followed.table.name}` to sync the table again"
        self._control(publisher, followed, StreamStop(position, followed.published, reason))
        self._forget(followed, reason)

    def _forget(self, followed: Followed, reason: str) -> None:
        """No longer follow a table that stopped (until its next load or repair)."""
        key = (followed.table.db, followed.table.table)
        del self.followed[key]
        self.stopped[followed.table.name] = reason
        self._stopped_batch[key] = followed.batch
        alert(self.pipeline, followed.table.name, "stream stopped", reason)

    def _statement(self, publisher: Publisher, statement: Statement) -> None:
        """A query event outside the transaction grammar: DDL, or a statement the stream cannot follow."""
        if _MAY_CHANGE_KEYS.search(statement.query):
            cascades = self._load_cascades()
            grown = set(cascades) - set(self._cascades or {})
            self._cascades = cascades
            if grown:  # the reader must decode the new parents' rows from here on
                raise _Rewind(
                    f"a foreign key from {', '.join('.'.join(p) for p in sorted(grown))} now cascades "
                    f"into a streamed table ({statement.position})",
                    reset=False,
                )
        for (db, table), followed in list(self.followed.items()):
            effect = ddl_effect(statement.query, statement.schema, db, table)
            if effect is None or not statement.position.after(followed.published):
                continue
            change = self._followed_change(followed, statement, *effect)
            if isinstance(change, str):
                self._stop(
                    publisher,
                    followed,
                    statement.position,
                    f"a statement at {statement.position} that the "
                    f"stream cannot follow: {statement.query.strip()[:300]!r} ({change})",
                )
                continue
            self._control(publisher, followed, change)
            if change.stop:
                self._forget(followed, change.stop)
                continue
            followed.schema = replace(followed.schema, columns=tuple(Column(**c) for c in change.columns))
            log.info("%s: %s at %s followed; the stream goes on", followed.table.name, effect[0], statement.position)

    def _followed_change(self, followed: Followed, statement: Statement, kind: str, detail) -> SchemaChange | str:
        """The SCHEMA message that follows a statement changing the table (``seam.source.ddl``), or why the
        table stops."""
        if kind == "truncate":
            columns = [asdict(c) for c in followed.schema.columns]
            ddl = statement.query.strip()[:1000]
            return SchemaChange(statement.position, followed.published, columns, {}, ddl, truncate=True)
        if kind == "alter":
            if statement.in_transaction:  # DDL commits implicitly: inside a transaction it is not what it seems
                return "ALTER TABLE inside a transaction"
            return self._altered(followed, detail, statement.query, statement.position)
        if kind == "cutover":
            change = self._altered(followed, None, statement.query, statement.position)
            swapped = ".".join(detail)
            if isinstance(change, str):
                return f"an online schema change's cut-over swapped in {swapped}: {change}"
            return replace(
                change,
                stop=f"the cut-over of an online schema change at {statement.position} swapped in {swapped} "
                f"(gh-ost, pt-online-schema-change): the target took its columns; run `seam repair "
                f"{followed.table.name}` to compare the rows the tool copied and go on streaming",
            )
        return str(detail)

    def _rolled_back(self, publisher: Publisher, rolled: RolledBack) -> None:
        """A ROLLBACK logged with rows: undone in transactional tables; a non-transactional table kept them, and
        the stream cannot tell which of them persisted in order, so that table stops."""
        touched = {(c.db, c.table) for c in rolled.changes} | set(rolled.errors)
        for key in touched:
            followed = self.followed.get(key)
            if followed is None:
                continue
            engine = self._engine(*key)
            if engine.lower() in _TRANSACTIONAL:
                continue
            self._stop(
                publisher,
                followed,
                rolled.position,
                f"a rolled-back transaction at {rolled.position} "
                f"changed it, and its engine {engine} does not roll back",
            )

    def _engine(self, db: str, table: str) -> str:
        with self._source().cursor() as cur:
            cur.execute(
                "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (db, table)
            )
            row = cur.fetchone()
        return str(row[0]) if row and row[0] else "unknown"

    def _altered(self, followed: Followed, clauses: list[tuple] | None, ddl: str, position: Position):
        """The SCHEMA message for an ALTER whose column clauses the target can follow (checked against the
        source's definition now, ``seam.source.ddl.followed_columns``); a string (the reason) otherwise.
        ``clauses`` None: a table swapped in by a cut-over, compared by column name."""
        with self._source().cursor() as cur:
            cur.execute(
                f"SELECT {COLUMN_FIELDS}, COLUMN_DEFAULT FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                (followed.table.db, followed.table.table),
            )
            now = [(column_from_row(r), r[6]) for r in cur.fetchall()]
        if clauses is None:
            clauses = swapped_clauses(followed.schema.columns, [c for c, _ in now])
        result = followed_columns(followed.schema.columns, followed.schema.primary_key, clauses, now)
        if isinstance(result, str):
            return result
        columns, renamed, defaults = result
        by_name = {c.name: c for c in columns}
        defaults = {n: None if v is None else normalize(by_name[n], v) for n, v in defaults.items()}
        return SchemaChange(
            position, followed.published, [asdict(c) for c in columns], defaults, ddl.strip()[:1000], renamed=renamed
        )


_MAY_CHANGE_KEYS = re.compile(r"\bFOREIGN\b|\bCONSTRAINT\b|^\s*(CREATE|DROP|RENAME)\b", re.I)
_TRANSACTIONAL = {"innodb", "xtradb", "rocksdb", "tokudb", "ndbcluster", "ndb"}


def _clash(server_id: int, who: str) -> str:
    return (
        f"server_id {server_id} is used by {who}: each binlog reader needs its own; give this pipeline a "
        f"source.server_id of its own in the pipeline file (or stop the other `seam stream` of this pipeline)"
    )


# ------------------------------------------------------------------ lag ----


@dataclass(frozen=True)
class TableLag:
    table: str
    applied: Position | None
    behind_bytes: int | None  # binlog bytes between the applied position and the source's head
    behind_events: int | None  # row events of this table in between (capped at ``EVENT_SCAN_CAP``)
    behind_seconds: float | None
    changes_per_s: float | None
    stopped: str | None


EVENT_SCAN_CAP = 200_000


def table_events_between(
    pipeline: Pipeline, files: list[str], db: str, table: str, start: Position, head: Position
) -> int:
    """Row events of ``db.table`` in the binlog after ``start`` up to ``head`` (each is preceded by a
    Table_map event naming the table), counted on the source without reading row data."""
    import pymysql

    if start.file not in files:
        return EVENT_SCAN_CAP
    count, scanned = 0, 0
    names = tuple(f"({n})".encode() for n in (f"`{db}`.`{table}`", f"{db}.{table}"))
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs(), use_unicode=False)  # Info holds raw bytes
    try:
        with conn.cursor() as cur:
            for file in files[files.index(start.file) :]:
                cur.execute(
                    f"SHOW BINLOG EVENTS IN %s FROM {int(start.pos) if file == start.file else 4} "
                    f"LIMIT {EVENT_SCAN_CAP - scanned}",
                    (file,),
                )
                for _, _, kind, _, _, info in cur.fetchall():
                    scanned += 1
                    if kind == b"Table_map" and info.endswith(names):
                        count += 1
                if file == head.file or scanned >= EVENT_SCAN_CAP:
                    break
    finally:
        conn.close()
    return count


def stream_lag(pipeline: Pipeline, tables: list[TableConfig], sample_s: float = 1.0) -> tuple[Position, list[TableLag]]:
    """Per table: where the source is, what the target has applied, and the distance in bytes, events and
    seconds (from the two databases' positions, never from Kafka), plus the sink's recent changes/s."""
    import pymysql

    source = pymysql.connect(**pipeline.source.pymysql_kwargs())
    target = connect_target(pipeline)
    target.autocommit = True
    ensure_state(target, pipeline.target.state_schema)

    def read() -> dict:
        return lag_sample(target, pipeline.target.state_schema)

    try:
        first, began = read(), time.monotonic()
        time.sleep(sample_s)
        second, elapsed = read(), time.monotonic() - began
        head = source_head(source)
        files = binlog_files(source)
        here = server_identity(source)
        out = []
        for t in tables:
            row = second.get((t.db, t.table))
            if row is None:
                out.append(TableLag(t.name, None, None, None, None, None, None))
                continue
            file, pos, row_index, source_ms, changes, stopped, now_ms, server = row
            applied = Position(file, pos, row_index)
            if server not in (None, here):  # read on another server; the reader has not moved it here yet
                out.append(TableLag(t.name, applied, None, None, None, None, stopped))
                continue
            behind_bytes: int | None
            if applied.file == head.file:
                behind_bytes = max(0, head.pos - applied.pos)
            else:
                sizes = _binlog_sizes(source)
                names = files[files.index(applied.file) :] if applied.file in files else []
                behind_bytes = sum(sizes.get(f, 0) for f in names) - applied.pos if names else None
            events = table_events_between(pipeline, files, t.db, t.table, applied, head) if behind_bytes else 0
            seconds = 0.0 if not events else (max(0.0, (now_ms - source_ms) / 1000) if source_ms else None)
            before = first.get((t.db, t.table))
            rate = (changes - before[4]) / elapsed if before else None
            out.append(TableLag(t.name, applied, behind_bytes, events, seconds, rate, stopped))
        return head, out
    finally:
        source.close()
        target.close()


def _binlog_sizes(conn) -> dict[str, int]:
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return {r[0]: int(r[1]) for r in cur.fetchall()}
