"""The chains of the tables a change reader follows.

Per followed table, the position published through (the head of its chain). Every message that extends a
chain carries the position before it (``prev``): a table's changes of one source transaction, HEARTBEAT,
SCHEMA, STOP, REBASE. The sink applies a message only on top of the position it has applied, so a lost
message shows as a gap and is never applied across. Which tables are followed, and from where, comes from
the target (``seam.state.positions``): its applied position, the columns and key, the load it follows
from; a STOPPED table is not followed until its stop is lifted there.

Besides the chain each table counts what was published but not yet applied, for back-pressure: past 3/4
of the bound (``kafka.max_unapplied_events`` / ``_bytes``) the reader slows down; at the bound it stops
reading until the sink has caught up to half of it (``hold_back``).

Delivery guarantee: at-least-once into Kafka. A chain moves when its message is handed to the producer;
the reader flushes before it polls the target, and after any failure it rewinds to the target's positions.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pymysql

from seam.alerts import alert
from seam.core.errors import StreamError
from seam.core.pipeline import Pipeline, TableConfig
from seam.core.position import Position
from seam.core.schema import Column, SchemaError, TableSchema
from seam.source.binlog import BinlogReader, Transaction
from seam.source.checks import check_streamable
from seam.source.record_images import unlike_type
from seam.source.rows import Decoder
from seam.source.schema import read_schema
from seam.source.snapshot import SnapshotError
from seam.source.stream_cascades import Cascades
from seam.state.positions import followed_tables
from seam.wire.boundary import CONTROL_HEADER, EXACT_MODES, Heartbeat, SchemaChange, StreamStop
from seam.wire.records import Record, key_of, normalize_row
from seam.wire.topics import Publisher, message_limit, table_topic

log = logging.getLogger("seam.streaming")

CONTROL_KEY = b"__seam_control__"
IDLE_BEAT_S = 5.0  # an idle table's heartbeat is sent again this often (``Chains.heartbeats``)
BEATS_PER_S = 200  # heartbeats a second over all tables, at most, to tables the binlog's changes passed by

Key = tuple[str, str]


class Rewind(Exception):
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
    # ALTERs read but not yet followed: the source's definition was already past them (seam.source.stream_ddl)
    pending: list = field(default_factory=list)
    declared_why: str | None = None  # why they could not be followed as their statements declared them
    # renamed away beside copies of it, one of which may take its name next (gh-ost's two-step cut-over): (the
    # RENAME, those copies, time.monotonic() when it was read); not current meanwhile, as with ``pending``
    away: tuple | None = None

    def unapplied(self) -> tuple[int, int]:
        return self.events - self.applied_events, self.bytes - self.applied_bytes

    def applied_to(self, applied: Position) -> None:
        while self.backlog and not self.backlog[0][0].after(applied):
            _, self.applied_events, self.applied_bytes = self.backlog.popleft()


def pending_rows(followed: Followed) -> str | None:
    """Why a table whose ALTERs wait (``pending``) cannot take rows: none, if none wait."""
    if followed.away is not None:
        return f"rows of a table of its name after it was renamed away at {followed.away[0].position}"
    if not followed.pending:
        return None
    first = followed.pending[0][0]
    return (
        f"its rows changed after the ALTER at {first.position}, which the stream could not check: the source's "
        "definition had been changed by a later statement already"
        + (f"; as its statements declared it: {followed.declared_why}" if followed.declared_why else "")
    )


class UnloggedDefinition(StreamError):
    """A followed table's rows carry other columns than the table Seam follows, with no ALTER in the binlog to
    explain them (the stop that follows names the remedy)."""


def check_logged_columns(followed: Followed, decoder: Decoder, catalog: Callable[[str, str], list[str]]) -> None:
    """Raises ``UnloggedDefinition`` when the binlog's rows of ``followed`` (its table map: ``decoder``) are not
    of its columns, by name and in order, or not of their exact types (``unlike_type``), and no waiting ALTER
    explains it: the table was altered by a statement the binlog does not hold (a DBA's ``sql_log_bin = 0``,
    or on another server of a chain). Read as before, such rows would drop an added column silently, go on
    with a renamed pair swapped, or round values to a scale the table no longer has. Columns the server keeps
    to itself (MariaDB's ``DB_ROW_HASH_1`` of a long UNIQUE key, MySQL's hidden ``my_row_id``) are in the
    map but not in the source's catalog (``catalog(db, table)``: its column names now, read only when the map
    differs).
    Checked once per table map and followed definition."""
    if followed.pending:
        return
    held = decoder.__dict__.get("_logged_check")
    if held is None or held[0] is not followed.schema:
        held = (followed.schema, _unlogged_change(followed.schema, decoder, catalog))
        decoder.__dict__["_logged_check"] = held
    if held[1] is not None:
        raise UnloggedDefinition(
            f"the binlog's rows carry other columns than the table Seam follows ({held[1]}): it was altered by a "
            "statement the binlog does not hold (sql_log_bin = 0, or another server)"
        )


def _unlogged_change(schema: TableSchema, decoder: Decoder, catalog: Callable[[str, str], list[str]]) -> str | None:
    have, names = schema.names, tuple(decoder.names)
    if names != have:
        shown = set(catalog(schema.db, schema.table))
        if shown:  # what neither Seam follows nor the catalog shows is the server's own
            names = tuple(n for n in names if n in have or n in shown)
    if names != have:
        added, gone = [n for n in names if n not in have], [n for n in have if n not in names]
        parts = ([f"added: {', '.join(added)}"] if added else []) + ([f"gone: {', '.join(gone)}"] if gone else [])
        return "; ".join(parts) or f"the same columns in another order: {', '.join(names)}"
    mapped = dict(zip(decoder.names, decoder.columns))
    retyped = [c.name for c in schema.columns if unlike_type(mapped[c.name], c)]
    return f"retyped: {', '.join(retyped)}" if retyped else None


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


def target_states(conn, state_schema: str) -> dict[Key, TargetState]:
    """Each table's applied position and what goes with it, as the sink committed them."""
    rows = followed_tables(conn, state_schema)
    return {(r[0], r[1]): TargetState(Position(r[2], r[3], r[4]), *r[5:]) for r in rows}


class Chains:
    """The followed tables, the head of each one's chain, and the messages that extend them."""

    def __init__(self, pipeline: Pipeline, tables: dict[Key, TableConfig], catalog: Callable[[], Any] | None = None):
        self.pipeline, self.tables = pipeline, tables
        self.catalog = catalog  # the source's catalog connection, asked for when a table stops (``way_out``)
        self.followed: dict[Key, Followed] = {}
        self.stopped: dict[str, str] = {}  # table name -> why
        self.max_events = pipeline.kafka.max_unapplied_events
        self.max_bytes = pipeline.kafka.max_unapplied_bytes
        self.message_limit = message_limit(pipeline)
        self.over_bound = False  # a table went past the back-pressure bound in the last transaction
        self.paused_s = 0.0  # spent paused by back-pressure, and when the pause going on began
        self._pause_began: float | None = None
        self.here: str | None = None  # the source server (seam.source.gtid), read at each pass
        self.reading: BinlogReader | None = None  # the binlog being read: its GTID set anchors positions
        self._told_waiting: set[Key] = set()
        self._stopped_batch: dict[Key, str | None] = {}  # stopped by this reader: the load they stopped in

    # ------------------------------------------------------------ which tables, from where

    def follow(self, states: dict[Key, TargetState], reset: bool) -> list[Followed]:
        """Follow the tables the target has positions for; ``reset`` re-anchors every chain at the target.
        Returns the tables followed anew."""
        added = []
        for key, st in states.items():
            table = self.tables.get(key)
            if table is None or st.columns is None or not self._followable(key, table, st):
                continue
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

    def _followable(self, key: Key, table: TableConfig, st: TargetState) -> bool:
        """Whether the target's state lets the stream follow the table (not stopped, exactly loaded)."""
        if st.stopped:
            if self.followed.pop(key, None) or table.name not in self.stopped:
                log.error("%s: stream stopped: %s", table.name, st.stopped)
            self.stopped[table.name] = st.stopped
            self._stopped_batch.pop(key, None)  # the target has the stop: lifted there, the table goes on
            return False
        if key in self._stopped_batch and self._stopped_batch[key] == st.batch:
            return False  # stopped by this reader; the sink has not applied the STOP yet
        if st.last_load not in EXACT_MODES:  # a window was merged after the last full load: no exact position
            if self.followed.pop(key, None) or key not in self._told_waiting:
                log.warning(
                    "%s: its last load was a window; the stream follows it again after `seam load full %s`",
                    table.name,
                    table.name,
                )
                self._told_waiting.add(key)
            return False
        self.stopped.pop(table.name, None)
        self._stopped_batch.pop(key, None)
        return True

    def on_this_server(self, followed: Followed) -> bool:
        return followed.server is None or self.here is None or followed.server == self.here

    # ------------------------------------------------------------ extending a chain

    def anchor(self) -> dict:
        """What a published position carries besides file and pos: the GTID set through it and the server."""
        executed = self.reading.gtids if self.reading is not None else None
        return {"gtids": str(executed) if executed is not None and executed.flavour else None, "server": self.here}

    def advance(self, followed: Followed, position: Position, events: int, size: int) -> None:
        followed.published = position
        if self.reading is not None:
            followed.gtids = self.anchor()["gtids"]
        followed.events += events
        followed.bytes += size
        followed.backlog.append((position, followed.events, followed.bytes))

    def control(self, publisher: Publisher, followed: Followed, message) -> None:
        if isinstance(message, SchemaChange):
            message = replace(message, **self.anchor())
        value = message.to_json()
        publisher.send(followed.topic, value, CONTROL_KEY, headers=[(CONTROL_HEADER, b"1")])
        self.advance(followed, message.position, 1, len(value))

    def stop(self, publisher: Publisher, followed: Followed, position: Position, reason: str) -> None:
        """Stop one table's stream at ``position`` loudly: a STOP message, an alert, and the remedy."""
        if not position.after(followed.published):
            return
        reason = f"{reason}; {self.way_out(followed)}"
        self.control(publisher, followed, StreamStop(position, followed.published, reason))
        self.forget(followed, reason)

    def way_out(self, followed: Followed) -> str:
        """The cheapest way to take a stopped table up again, as it works when printed. A keyed table whose
        key is still the source's is repaired against the source as it is now: the repair makes the target's
        columns the source's where they changed (``seam.repair``: a column whose values do not cast is added
        afresh) and copies again only the rows that differ; more of them than ``repair.max_rows`` then names a
        full load, hence both are printed. Otherwise (no key, the key
        changed, the table gone) it is loaded again; a table the stream can no longer follow at all (made
        system-versioned) says why."""
        name = followed.table.name
        try:
            now = self._source_schema(followed)
        except SnapshotError as exc:
            return f"{exc}, then run `seam load full {name}`"
        key = followed.table.key
        if key and now is not None and now.primary_key == followed.schema.primary_key and set(key) <= set(now.names):
            if now.columns == followed.schema.columns:
                return f"run `seam repair {name} --full` to sync the table again (it copies again only the rows that differ)"
            return (
                f"run `seam repair {name} --full` to sync the table again (it gives the target the source's columns "
                f"and copies again only the rows that differ), or `seam load full {name}`"
            )
        return f"run `seam load full {name}` to sync the table again"

    def _source_schema(self, followed: Followed) -> TableSchema | None:
        """The table's definition on the source now, which the stream can follow (else ``SnapshotError``);
        None when it cannot be read (the table gone, the source away)."""
        if self.catalog is None:
            return None
        try:
            conn = self.catalog()
            now = read_schema(conn, followed.table.db, followed.table.table)
            check_streamable(conn, now)
        except (SchemaError, pymysql.MySQLError):
            return None
        return now

    def forget(self, followed: Followed, reason: str) -> None:
        """No longer follow a table that stopped (until its next load or repair)."""
        key = (followed.table.db, followed.table.table)
        del self.followed[key]
        self.stopped[followed.table.name] = reason
        self._stopped_batch[key] = followed.batch
        alert(self.pipeline, followed.table.name, "stream stopped", reason)

    def heartbeats(self, publisher: Publisher, here: Position, every_table: bool = False) -> None:
        """A HEARTBEAT to each table whose chain ends before ``here``, and again every ``IDLE_BEAT_S`` to one
        whose chain ends there: if the sink missed the last one (it was taking the table up again after a
        lifted stop), the next one shows it a gap, and it asks for the republication. A table behind is
        beaten at most every ``len(followed) / BEATS_PER_S`` seconds (a schema of hundreds of tables under a
        writer: each a second or two behind, not hundreds of messages a second), unless
        ``every_table`` (the binlog's end: every table is current there)."""
        seen, now = int(time.time() * 1000), time.monotonic()
        behind_every = 0.0 if every_table else len(self.followed) / BEATS_PER_S
        for f in self.followed.values():
            # not current: its ALTERs (its RENAME away) are not published yet; a restart reads them again
            if f.pending or f.away:
                continue
            if here.after(f.published):
                due = now - f.beat_at >= behind_every
            else:
                due = here == f.published and now - f.beat_at > IDLE_BEAT_S
            if due:
                value = Heartbeat(here, prev=f.published, seen_ms=seen, **self.anchor()).to_json()
                publisher.send(f.topic, value, CONTROL_KEY, headers=[(CONTROL_HEADER, b"1")])
                self.advance(f, here, 0, len(value))
                f.beat_at = now

    # ------------------------------------------------------------ a transaction's changes

    def publish_transaction(
        self, publisher: Publisher, txn: Transaction, cascades: Cascades
    ) -> tuple[int, dict[str, tuple[Followed, str]]]:
        """Publish one source transaction's changes of followed tables not yet published, each chained to its
        table's last, as they are read from the transaction's buffer (memory stays bounded whatever its size).
        Returns how many were sent, and the tables whose rows cannot be decoded or normalised with their
        schema (name -> (followed, why)): the caller stops them, never skips them. A table that fails part
        way has some of the transaction's changes in Kafka without the one flagged ``last``: the sink never
        applies them, and the STOP that follows drops them."""
        failed: dict[str, tuple[Followed, str]] = {}
        for (db, table), error in txn.errors.items():
            followed = self.followed.get((db, table))
            if followed is not None and txn.commit.after(followed.published):
                failed[followed.table.name] = (followed, pending_rows(followed) or error)
        out = _Outgoing(self, publisher, txn.commit, failed)
        for change in txn.changes:
            cascaded = (
                cascades.records(change, txn, self.followed, failed) if change.cascades and cascades.rules else []
            )
            followed = self.followed.get((change.db, change.table))
            if followed is None or not txn.commit.after(followed.published) or followed.table.name in failed:
                out.send_all(cascaded)
                continue
            why = pending_rows(followed)
            if why:
                failed[followed.table.name] = (followed, why)
                continue
            schema = followed.schema
            try:
                before, after = change.before, change.after
                if not change.records:
                    before = None if before is None else normalize_row(schema, before)
                    after = None if after is None else normalize_row(schema, after)
            except Exception as exc:  # noqa: BLE001 - named in the stop
                failed[followed.table.name] = (followed, f"{type(exc).__name__}: {exc}")
                continue
            record = Record(
                op=change.op,
                db=schema.db,
                table=schema.table,
                key=key_of(schema, followed.table.key, after or before),
                before=before,
                after=after,
                position=change.position,
                gtid=txn.gtid,
                ts_ms=txn.timestamp * 1000,
            )
            out.send(followed, record)
            out.send_all(cascaded)  # after the row itself: in a tree, the row may reference itself
        return out.finish(), failed

    def too_large(self, size: int) -> str:
        return (
            f"a change's record is {size:,} bytes, over the {self.message_limit:,} that a value of "
            f"kafka.max_value_bytes ({self.pipeline.kafka.max_value_bytes:,}) allows: raise kafka.max_value_bytes "
            "in the pipeline (on Apache Kafka also the broker's message.max.bytes for topics Seam did not create)"
        )

    # ------------------------------------------------------------ what the sink has applied

    def over(self, fraction: float) -> list[str]:
        """Tables with more published but unapplied than ``fraction`` of the back-pressure bound."""
        return [
            f.table.name
            for f in self.followed.values()
            if f.unapplied()[0] > self.max_events * fraction or f.unapplied()[1] > self.max_bytes * fraction
        ]

    def unapplied(self) -> dict[str, tuple[int, int]]:
        return {f.table.name: f.unapplied() for f in self.followed.values()}

    def hold_back(self, poll: Callable[[], None], should_stop: Callable[[], bool]) -> None:
        """Back-pressure: pause while any table has more published-but-unapplied than the bound, polling the
        target (``poll``) for what the sink has applied meanwhile."""
        self.over_bound = False
        if not self.over(1.0):
            if self.over(0.75):
                time.sleep(0.2)  # slow down before the bound
            return
        name = self.over(1.0)[0]
        log.warning(
            "back-pressure: %s has %s events / %s bytes published but not applied (bound %s / %s): "
            "pausing until the sink catches up",
            name,
            *self.unapplied()[name],
            self.max_events,
            self.max_bytes,
        )
        began = self._pause_began = time.monotonic()
        try:
            while self.over(0.5) and not should_stop():
                time.sleep(0.5)
                poll()
        finally:
            self._pause_began = None
            self.paused_s += time.monotonic() - began
        log.info("back-pressure released after %.1f s", time.monotonic() - began)

    def paused_for(self) -> float:
        """Seconds spent paused by back-pressure, including a pause going on now."""
        return self.paused_s + (time.monotonic() - self._pause_began if self._pause_began else 0.0)


class _Outgoing:
    """One transaction's records on their way to Kafka. Each table's latest record is held back until the
    next one of that table (or the end) shows whether it is the table's last in the transaction."""

    def __init__(self, chains: Chains, publisher: Publisher, commit: Position, failed: dict):
        self.chains, self.publisher, self.commit, self.failed = chains, publisher, commit, failed
        self.held: dict[str, tuple[Followed, Record]] = {}
        self.sent: dict[str, list[int]] = {}  # table -> [records sent, bytes sent]
        self.too_large: dict[str, int] = {}  # table -> the size of a record the broker would refuse

    def send_all(self, records: list[tuple[Followed, Record]]) -> None:
        for followed, record in records:
            self.send(followed, record)

    def send(self, followed: Followed, record: Record) -> None:
        name = followed.table.name
        if name in self.failed or name in self.too_large or not self.commit.after(followed.published):
            return  # failed, or already published (or applied) for this table
        held = self.held.get(name)
        self.held[name] = (followed, record)
        if held is not None:
            self._publish(*held, last=False)

    def _publish(self, followed: Followed, record: Record, last: bool) -> None:
        name = followed.table.name
        tally = self.sent.setdefault(name, [0, 0])
        anchor = self.chains.anchor() if last else {}
        value = record.chained_json(
            self.commit, last, followed.published, tally[0], anchor.get("gtids"), anchor.get("server")
        )
        if len(value) > self.chains.message_limit:  # the broker would refuse it for ever: this table stops
            self.too_large[name] = len(value)
            return
        self.publisher.send(followed.topic, value, record.kafka_key())
        tally[0] += 1
        tally[1] += len(value)

    def finish(self) -> int:
        """Publish each table's last record, move its chain, and apply back-pressure; returns records sent."""
        chains = self.chains
        sent = 0
        for name, (followed, record) in self.held.items():
            if name not in self.failed and name not in self.too_large:
                self._publish(followed, record, last=True)
            if name in self.too_large:
                chains.stop(self.publisher, followed, self.commit, chains.too_large(self.too_large[name]))
                continue
            if name in self.failed:
                continue
            events, size = self.sent[name]
            chains.advance(followed, self.commit, events, size)
            sent += events
            events, size = followed.unapplied()
            if events > chains.max_events or size > chains.max_bytes:
                chains.over_bound = True  # checked after this transaction, not at the next poll
            elif events > 0.75 * chains.max_events or size > 0.75 * chains.max_bytes:
                time.sleep(0.002)  # the slowing half of back-pressure, per transaction
        return sent
