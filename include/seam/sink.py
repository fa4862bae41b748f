"""The PostgreSQL sink: applies table topics to the target, batch by batch.

How a full-load batch becomes visible, atomically:

- BEGIN: a ledger row (state ``open``) and two empty tables in the state
  schema: ``stage_<batch>`` for snapshot rows, ``changes_<batch>`` for the
  reconciliation changes. An older batch of the same table still open is
  marked ``superseded`` and its tables dropped: a half-published batch (the
  Spark job died) is never published.
- rows: COPYed into the staging tables; per (chunk, attempt) counts and
  checksums are kept in ``batch_parts``.
- END: in ONE transaction: the staged tallies must equal END's (else the
  batch is ``rejected``, its tables dropped, the old table untouched, the
  error recorded); output of discarded Spark task attempts is deleted; the
  key is added; changes are applied (last change per key wins); the old
  target table is dropped and the staging table renamed into its place; the
  ledger row becomes ``committed`` and the table's applied source position
  is stored.

Every transaction also stores the next Kafka offset of each topic it
consumed (``offsets``), so a restarted sink (SIGKILL included) resumes
exactly where its last commit ended: Kafka's redeliveries, consumer groups,
transactions and read_committed play no part in correctness.

Delivery guarantee: exactly once into PostgreSQL. Readers see the old table
until the END transaction commits, then the whole new batch.
"""

from __future__ import annotations

import collections
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any
from zlib import crc32  # boundary.message_hash, inlined in the hot loop

import msgspec
import psycopg

from seam import cascades
from seam.boundary import RECONCILE_PART, Begin, End, Heartbeat, Rebase, SchemaChange, StreamStop, Tally, parse_control
from seam.config import Pipeline, TableConfig
from seam.records import Position, no_cyclic_gc
from seam.schema import Column, TableSchema
from seam.state import ledger, positions
from seam.state.parts import part_beat
from seam.state.positions import forget_cascades
from seam.state.schema import ensure_state, try_lock, xact_lock
from seam.target import create_table_sql, ensure_postgis, has_spatial, pg_type, qi, row_converter, target_table
from seam.topics import consumer_config, ensure_topics, table_topic, topic_ids

log = logging.getLogger("seam.sink")

_CASCADE = object()  # the statement of a queued foreign-key cascade (seam.cascades applies it)


def record_decoder(schema: TableSchema, batch_rows: bool = False) -> msgspec.json.Decoder:
    """A decoder for one table's records whose row images decode straight into tuples' worth of fields
    (several times faster than dicts); a record missing a column fails to decode instead of loading NULL.
    ``batch_rows``: only what staging a batch needs (op, images, batch, part, attempt), the hot path."""
    # gc=False: these never form reference cycles, and untracked objects cost the cyclic GC nothing
    row = msgspec.defstruct(
        "Row",
        [(f"f{i}", Any, msgspec.field(name=n)) for i, n in enumerate(schema.names)],
        forbid_unknown_fields=True,
        gc=False,
    )  # a column the target does not know is an error
    fields: list[tuple[Any, ...]] = [("batch", str | None), ("part", int | None, None), ("attempt", int | None, None)]
    if not batch_rows:
        fields += [
            ("txn", dict | None, None),
            ("last", bool, False),
            ("file", str | None, None),
            ("pos", int | None, None),
            ("row", int, 0),
            ("prev", dict | None, None),
            ("seq", int | None, None),
            ("gtids", str | None, None),
            ("server", str | None, None),
        ]
    source = msgspec.defstruct("Source", fields, gc=False)  # other fields are skipped
    wire: list[tuple[Any, ...]] = [("op", str), ("before", row | None), ("after", row | None), ("source", source)]
    if not batch_rows:
        wire += [("ts_ms", int, 0), ("cascade", dict | None, None)]
    return msgspec.json.Decoder(msgspec.defstruct("Wire", wire, gc=False))


_SOURCE_ONLY: msgspec.json.Decoder[Any] = msgspec.json.Decoder(
    msgspec.defstruct(
        "Wire", [("source", msgspec.defstruct("S", [("batch", str | None, None), ("txn", dict | None, None)]))]
    )
)


class SinkError(RuntimeError):
    """The sink cannot go on; the message says why and what to do."""


def connect_target(pipeline: Pipeline) -> psycopg.Connection:
    t = pipeline.target
    try:
        return psycopg.connect(**t.conninfo(), connect_timeout=10, application_name="seam-sink")
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SinkError(
            f"target PostgreSQL at {t.host}:{t.port}/{t.database} is unreachable ({first}): "
            "start it (`seam up postgres`) or fix the pipeline's target"
        ) from None


def connect_state(pipeline: Pipeline) -> psycopg.Connection:
    """An autocommit connection to the target whose state schema exists (what every reader of it needs)."""
    conn = connect_target(pipeline)
    conn.autocommit = True
    ensure_state(conn, pipeline.target.state_schema)
    return conn


@dataclass
class OpenBatch:
    begin: Begin
    schema: TableSchema
    stage: str
    changes: str
    convert: Callable
    decode: Callable
    tallies: dict[tuple[int, int], Tally] = field(default_factory=dict)


class _RowMessage:
    """A Spark row from ``seam.kafka_source`` with the confluent-kafka Message methods the sink uses."""

    __slots__ = ("_row", "_headers")

    def __init__(self, row):
        self._row = row
        self._headers = [(k, v.encode()) for k, v in json.loads(row.headers).items()] or None

    def topic(self):
        return self._row.topic

    def offset(self):
        return self._row.offset

    def value(self):
        return bytes(self._row.value)

    def headers(self):
        return self._headers


class StreamTable:
    """A table that receives change events: its schema, applied position, statements and open transaction."""

    def __init__(
        self,
        topic: str,
        schema: TableSchema,
        key: tuple[str, ...],
        applied: Position,
        source_ms: int | None,
        soft_delete: str | None,
        postgis: bool = True,
    ):
        self.topic, self.key, self.applied, self.source_ms, self.soft_delete = (
            topic,
            key,
            applied,
            source_ms,
            soft_delete,
        )
        self.postgis = postgis  # spatial columns are PostGIS geometry (else bytea)
        self.buffer: list[tuple[int, object]] = []  # (offset, record) of the transaction being received
        self.buffer_txn: Position | None = None
        self.buffer_at: Position | None = None
        self.gap_reported_at: Position | None = None
        self.wait_logged: Position | None = None
        # complete transactions (and stream controls) behind one whose cascade waits for the level above:
        # (first offset, commit position, records or control)
        self.waiting: collections.deque = collections.deque()
        self.applied_changes = 0  # since the last stored position
        self.dirty = False
        self.gtids: str | None = None  # the GTID set through ``applied`` (None: not known) and its server
        self.server: str | None = None
        self.use(schema)

    def use(self, schema: TableSchema) -> None:
        """(Re)build decoder, converter and statements for the table's columns."""
        self.schema, key = schema, self.key
        self.decode, self.convert = record_decoder(schema).decode, row_converter(schema, self.postgis)
        self.target = target_table(schema.db, schema.table)
        types = {c.name: pg_type(c, self.postgis) for c in schema.columns}
        names = schema.names
        self.key_index = [names.index(k) for k in key]
        self.soft_index = names.index(self.soft_delete) if self.soft_delete in names else None
        cols = ", ".join(qi(n) for n in names)
        values = ", ".join(f"%s::{types[n]}" for n in names)
        if key:
            match = " AND ".join(f"{qi(k)} = %s::{types[k]}" for k in key)
            self.delete_sql = f"DELETE FROM {self.target} WHERE {match}"
            updates = (
                ", ".join(f"{qi(n)} = EXCLUDED.{qi(n)}" for n in names if n not in key)
                or f"{qi(key[0])} = EXCLUDED.{qi(key[0])}"
            )
            self.upsert_sql = (
                f"INSERT INTO {self.target} ({cols}) VALUES ({values}) "
                f"ON CONFLICT ({', '.join(qi(k) for k in key)}) DO UPDATE SET {updates}"
            )
        else:  # keyless: one row identical in every column goes, duplicates stay counted
            match = " AND ".join(f"{qi(n)} IS NOT DISTINCT FROM %s::{types[n]}" for n in names)
            self.delete_sql = (
                f"DELETE FROM {self.target} WHERE ctid = (SELECT ctid FROM {self.target} WHERE {match} LIMIT 1)"
            )
            self.upsert_sql = f"INSERT INTO {self.target} ({cols}) VALUES ({values})"

    def key_of(self, values: tuple) -> tuple:
        return tuple(values[i] for i in self.key_index)

    def resume_offset(self, next_offset: int) -> int:
        """Where a restarted sink must read this topic from: nothing kept in memory may be skipped."""
        kept = [self.buffer[0][0]] if self.buffer else []
        if self.waiting:
            kept.append(self.waiting[0][0])
        return min(kept, default=next_offset)

    def removed(self, values: tuple | None) -> bool:
        """The row is flagged deleted: Seam keeps it out of the target."""
        return values is not None and self.soft_index is not None and _flagged(values[self.soft_index])


def schema_from_begin(begin: Begin) -> TableSchema:
    return TableSchema(
        db=begin.db, table=begin.table, columns=tuple(Column(**c) for c in begin.columns), primary_key=tuple(begin.key)
    )


class Sink:
    """Applies the topics of some tables of a pipeline to PostgreSQL. One sink per topic at a time."""

    def __init__(self, pipeline: Pipeline, tables: list[TableConfig] | None = None):
        self.pipeline = pipeline
        self.schema = pipeline.target.state_schema
        self.tables = {table_topic(pipeline, t): t for t in (tables or pipeline.tables)}
        self.conn = connect_target(pipeline)
        self.conn.autocommit = True
        ensure_state(self.conn, pipeline.target.state_schema)
        for topic in self.tables:  # session locks: a second sink on the same topic would double-apply
            if not try_lock(self.conn, "topic", topic):
                raise SinkError(
                    f"another Seam sink is already applying topic {topic}; stop it first (or let it apply this batch)"
                )
        self.conn.autocommit = False
        self._postgis: bool | None = None  # whether spatial columns land as geometry: asked when first needed
        self.open: dict[str, OpenBatch | None] = {topic: self._load_open(topic) for topic in self.tables}
        self.finished: dict[str, str] = {}  # batch id -> final state, for callers waiting on a batch
        self.streams: dict[str, StreamTable] = {}  # topic -> change-event state, loaded on first use
        self.topic_ids: dict[str, str] = {}
        self._ops: list[tuple[StreamTable, str, tuple, bool]] = []  # change statements not yet executed
        self._no_stream: set[str] = set()  # topics whose table has no committed load, or a stopped stream
        self._next_offset: dict[str, int] = {}  # topic -> the offset after the last message consumed
        self._forgot_at = 0.0  # when recorded cascade rows were last pruned

    # ------------------------------------------------------------ running

    def run(
        self,
        until_batches: set[str] | None = None,
        idle_exit: float | None = None,
        deadline: float | None = None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> dict[str, str]:
        """Consume and apply until every batch in ``until_batches`` is final, idle for ``idle_exit`` s, or stopped."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        ensure_topics(self.pipeline, list(self.tables))
        self.topic_ids = topic_ids(self.pipeline, list(self.tables))
        consumer = Consumer(consumer_config(self.pipeline))
        stored = self._stored_offsets()
        consumer.assign([TopicPartition(t, 0, stored.get(t, OFFSET_BEGINNING)) for t in self.tables])
        last_message = time.monotonic()
        try:
            while not should_stop():
                if until_batches is not None and until_batches <= self.finished.keys():
                    break
                if deadline is not None and time.time() > deadline:
                    raise SinkError(f"timed out waiting for batch(es) {', '.join(sorted(until_batches or ()))}")
                with no_cyclic_gc():  # Message objects are many and short-lived, see no_cyclic_gc
                    messages = consumer.consume(50_000, 0.5)
                good = []
                for m in messages:
                    if m.error() is None:
                        good.append(m)
                    elif m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    elif m.error().code() == KafkaError.OFFSET_OUT_OF_RANGE:
                        self._offset_lost(consumer, m)
                    else:
                        raise SinkError(f"Kafka error on {m.topic()}: {m.error().str()}")
                if not good:
                    if any(s.waiting for s in self.streams.values()):  # the level above may be another sink's
                        with self.conn.transaction():
                            self._release_waiting()
                    if idle_exit is not None and time.monotonic() - last_message > idle_exit:
                        break
                    continue
                last_message = time.monotonic()
                self._apply_all(good)
        finally:
            consumer.close()
        return dict(self.finished)

    def close(self) -> None:
        self.conn.close()

    def start_offsets(self) -> dict[str, int]:
        """Where a stream of these topics starts: the offsets stored with the data (0 when none)."""
        self.topic_ids = topic_ids(self.pipeline, list(self.tables))
        stored = self._stored_offsets()
        return {t: max(0, stored.get(t, 0)) for t in self.tables}

    def apply_rows(self, rows) -> None:
        """Apply one Spark micro-batch (``seam.kafka_source`` rows) in one transaction. Messages below the
        stored offsets (a micro-batch replayed after a failure) are skipped: replaying changes nothing. Rows
        carry their topic's id: a topic recreated on the broker starts again at offset 0."""
        for row in rows:
            if row.topic_id and self.topic_ids.get(row.topic) != row.topic_id:
                log.warning(
                    "topic %s was recreated on the broker (id %s): reading it from its beginning",
                    row.topic,
                    row.topic_id,
                )
                self.topic_ids[row.topic] = row.topic_id
                stream = self.streams.get(row.topic)
                if stream is not None:
                    stream.buffer.clear()
        stored = self._stored_offsets()
        messages = [
            _RowMessage(row)
            for row in sorted(rows, key=lambda r: (r.topic, r.offset))
            if row.offset >= max(0, stored.get(row.topic, 0))
        ]
        if messages:
            self._apply_all(messages)
        with self.conn.transaction():  # for `seam stream status`: micro-batches are being applied
            part_beat(self.conn, self.pipeline.target.state_schema, self.pipeline.name, "sink", batches=1)

    def _apply_all(self, messages: list) -> None:
        """Messages of any topics, in offset order per topic, applied in ONE transaction with the offsets."""
        if len(self.tables) == 1:
            by_topic: dict[str, list] = {messages[0].topic(): messages}
        else:
            by_topic = {}
            for m in messages:
                by_topic.setdefault(m.topic(), []).append(m)
        with no_cyclic_gc(), self.conn.transaction():
            for topic, batch in by_topic.items():
                self._apply(topic, batch)
            if any(s.waiting for s in self.streams.values()):
                self._release_waiting()
            if time.monotonic() - self._forgot_at > 60:  # recorded cascade rows every table is past
                self._forgot_at = time.monotonic()
                forget_cascades(
                    self.conn,
                    self.pipeline.target.state_schema,
                    [(t.db, t.table) for t in self.pipeline.tables if t.sync == "stream"],
                )

    def _offset_lost(self, consumer, message) -> None:
        """The stored offset is past the log: the broker lost or recreated the topic."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        topic = message.topic()
        log.warning(
            "topic %s no longer has offset %s (broker restarted or retention expired); reading it from "
            "its beginning. An open batch that lost messages fails its END check and is rejected.",
            topic,
            message.offset(),
        )
        consumer.seek(TopicPartition(topic, 0, OFFSET_BEGINNING))

    def _stored_offsets(self) -> dict[str, int]:
        """Where to resume each topic: the stored offset, or the beginning of a topic that was recreated.

        A broker that lost a topic (the embedded one keeps topics in memory) serves an empty log under the
        same name, and a stored offset past its end just waits for ever; the topic's id tells them apart.
        """
        from confluent_kafka import OFFSET_BEGINNING

        with self.conn.transaction():
            rows = positions.stored_offsets(self.conn, self.schema, list(self.tables))
        resume = {}
        for topic, offset, stored_id in rows:
            if stored_id is not None and stored_id != self.topic_ids.get(topic):
                log.warning(
                    "topic %s was recreated on the broker (id %s, was %s): its earlier messages are gone; "
                    "reading the new topic from its beginning (an open batch that lost messages fails "
                    "its END check; the change reader republishes from the target's positions)",
                    topic,
                    self.topic_ids.get(topic),
                    stored_id,
                )
                resume[topic] = OFFSET_BEGINNING
            else:
                resume[topic] = offset
        return resume

    # ------------------------------------------------------------ applying

    def _apply(self, topic: str, messages: list) -> None:
        """Apply consumed messages of one topic (part of the caller's transaction). The hot loop: one
        decode, one CRC and one tuple per row; bookkeeping per message group, not per row."""
        stage_rows: list[tuple] = []
        change_rows: list[tuple] = []
        held: list[tuple] = []  # change events that arrive while a full load of the table is open
        sums: dict[tuple[int, int], list[int]] = {}  # (part, attempt) -> [rows, crc sum] since the last flush

        def flush():
            batch = self.open[topic]
            if batch is not None:
                for kind, (rows, crc) in sums.items():
                    batch.tallies.setdefault(kind, Tally()).add_many(rows, crc)
                self._copy(batch, stage_rows, change_rows)
            if held:
                positions.hold_changes(self.conn, self.schema, held)
            self._run_ops()
            stage_rows.clear()
            change_rows.clear()
            held.clear()
            sums.clear()

        batch = self.open[topic]
        for m in messages:
            if m.headers():  # only control messages carry headers
                flush()
                control = parse_control(m.value())
                if isinstance(control, Begin):
                    self._begin(topic, control, m.offset())
                elif isinstance(control, End):
                    self._end(topic, control, m.offset())
                    self._replay_held(topic)
                elif batch is None:  # stream control; while a full load is open its END decides the position
                    self._stream_control(topic, control, m.offset())
                batch = self.open[topic]
                continue
            value = m.value()
            if batch is None:
                self._stream_change(topic, value, m.offset())
                continue
            try:
                doc = batch.decode(value)
            except msgspec.ValidationError:  # not this batch's columns: a change event (or garbage, which END catches)
                held.append((topic, m.offset(), value))
                continue
            source = doc.source
            if source.batch != batch.begin.batch:
                if source.batch is None:  # a change event, held until the batch's END: applied if after it
                    held.append((topic, m.offset(), value))
                continue  # else a superseded batch's rows
            kind = (source.part, source.attempt)
            tally = sums.get(kind)
            if tally is None:
                tally = sums[kind] = [0, 0]
            tally[0] += 1
            tally[1] += crc32(value)
            if doc.op == "r":
                stage_rows.append(batch.convert(doc.after) + kind)
            else:
                seq = m.offset() * 2
                if doc.before is not None and (doc.after is None or _key(batch, doc.after) != _key(batch, doc.before)):
                    change_rows.append(batch.convert(doc.before) + (seq, True))  # deleted, or its key moved
                if doc.after is not None:
                    change_rows.append(batch.convert(doc.after) + (seq + 1, False))
        flush()
        self._next_offset[topic] = messages[-1].offset() + 1
        self._store_offset(topic)

    def _store_offset(self, topic: str) -> None:
        stream = self.streams.get(topic)
        next_offset = self._next_offset[topic]
        resume = stream.resume_offset(next_offset) if stream else next_offset
        positions.store_offset(self.conn, self.schema, topic, resume, self.topic_ids.get(topic))

    # ------------------------------------------------------------ change events

    def _stream_change(self, topic: str, value: bytes, offset: int) -> None:
        """Buffer a change until its source transaction is complete for this table, then apply it whole,
        if it is new (after the applied position) and follows on from it (its ``prev`` is applied)."""
        stream = self.streams.get(topic) or (None if topic in self._no_stream else self._load_stream(topic))
        if stream is None:
            return  # no committed full load (or the table's stream stopped): nothing to apply changes to
        try:
            doc = stream.decode(value)
        except msgspec.ValidationError as exc:  # other columns: fine for what is applied already, else an error
            source = _SOURCE_ONLY.decode(value).source
            if source.batch is not None or not Position.through(source.txn["file"], source.txn["pos"]).after(
                stream.applied
            ):
                return  # a batch row (of a batch never opened here, or superseded), or an applied change
            self.stop_table(stream, f"a change at {source.txn} does not match the table's columns ({exc})")
            return
        if doc.source.batch is not None:
            return  # rows of a batch whose BEGIN this sink never saw (superseded, or before its time)
        commit = Position.through(doc.source.txn["file"], doc.source.txn["pos"])
        if not commit.after(stream.applied):
            return  # its transaction is already in the target (a snapshot or an applied transaction)
        at, seq = Position(doc.source.file, doc.source.pos, doc.source.row), doc.source.seq
        if stream.buffer and (
            stream.buffer_txn != commit
            or not (  # records before seq: by position
                stream.buffer_at < at if seq is None else seq == len(stream.buffer)
            )
        ):
            log.info("%s: incomplete transaction %s dropped (its publisher restarted)", topic, stream.buffer_txn)
            stream.buffer.clear()
        if seq is not None and seq != len(stream.buffer):
            return  # the rest of a transaction whose start this sink did not see
        stream.buffer.append((offset, doc))
        stream.buffer_txn, stream.buffer_at = commit, at
        if not doc.source.last:
            return
        first, docs = stream.buffer[0][0], [d for _, d in stream.buffer]
        stream.buffer.clear()
        if stream.waiting or not self._take_transaction(stream, commit, docs):
            stream.waiting.append((first, commit, docs))

    def _take_transaction(self, stream: StreamTable, commit: Position, docs: list) -> bool:
        """Queue a complete transaction if it is new and follows on; False if it must wait (a cascade it
        carries needs the level above to have applied the same change: see seam.cascades)."""
        if not commit.after(stream.applied) or not self._follows_on(stream, docs[-1].source.prev, commit):
            return True
        verdict = cascades.waits_for(self.conn, self.pipeline.target.state_schema, docs, commit)
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
            self.stop_table(stream, verdict[1])
            return True
        self._queue_transaction(stream, docs)
        stream.applied, stream.source_ms, stream.dirty = commit, docs[-1].ts_ms, True
        stream.gtids, stream.server = docs[-1].source.gtids, docs[-1].source.server or stream.server
        stream.applied_changes += len(docs)
        return True

    def _release_waiting(self) -> None:
        """Apply what waited for a cascade's level above, as far as it can go now (inside the caller's
        transaction)."""
        for stream in [s for s in self.streams.values() if s.waiting]:
            while stream.waiting and self.streams.get(stream.topic) is stream:
                _, commit, item = stream.waiting[0]
                if isinstance(item, list):
                    if not self._take_transaction(stream, commit, item):
                        break
                    stream.waiting.popleft()
                else:
                    stream.waiting.popleft()
                    self._stream_control(stream.topic, item, None)
            self._run_ops()
            if stream.topic in self._next_offset:
                self._store_offset(stream.topic)

    def _follows_on(self, stream: StreamTable, prev: dict | None, at: Position) -> bool:
        """The chain check: the table's previous published position must be applied already."""
        if prev is None or not Position(**prev).after(stream.applied):
            return True
        self._report_gap(stream, f"changes between {stream.applied} and {at} are missing (lost by Kafka)")
        return False

    def _report_gap(self, stream: StreamTable, what: str) -> None:
        """Ask the change reader to publish again from the target's position (``gap_at``)."""
        if stream.gap_reported_at != stream.applied:  # once per applied position: the reader rewinds once
            stream.gap_reported_at = stream.applied
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

    def _run_ops(self) -> None:
        """Execute queued change statements, table by table in order, runs of the same statement pipelined
        (executemany), then store each touched table's position: one transaction with the caller's offsets.
        Each table's statements run in a savepoint: a table whose changes fail (a divergence, a value the
        target refuses) is STOPPED with the reason, and the other tables go on."""
        ops, self._ops = self._ops, []
        by_table: dict[str, list] = {}
        for op in ops:
            by_table.setdefault(op[0].topic, []).append(op)
        for table_ops in by_table.values():
            stream = table_ops[0][0]
            try:
                with self.conn.transaction():
                    self._execute(table_ops)
            except (psycopg.Error, SinkError) as exc:
                problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                self.stop_table(stream, f"changes up to {stream.applied} could not be applied ({problem})")
        for stream in self.streams.values():
            if stream.dirty:
                self._store_position(stream)

    def _execute(self, ops: list) -> None:
        with self.conn.cursor() as cur:
            i = 0
            while i < len(ops):
                stream, sql, params, must_delete = ops[i]
                if sql is _CASCADE:
                    try:
                        cascades.apply(cur, self.pipeline.target.state_schema, stream, *params)
                    except cascades.CascadeError as exc:
                        raise SinkError(str(exc)) from None
                    i += 1
                    continue
                j = i + 1
                while j < len(ops) and ops[j][1] is sql and ops[j][3] == must_delete:
                    j += 1
                cur.executemany(sql, [params for _, _, params, _ in ops[i:j]])
                if must_delete and cur.rowcount != j - i:
                    raise SinkError(
                        f"{j - i - cur.rowcount} change(s) delete rows the target does not have: the "
                        "target diverged from the source"
                    )
                i = j

    def stop_table(self, stream: StreamTable, reason: str) -> None:
        """Stop applying changes to one table (until its next full load), record why, and alert."""
        from seam.alerts import alert

        name = f"{stream.schema.db}.{stream.schema.table}"
        reason = f"{reason}; re-run `seam load full {name}`: its BEGIN supersedes the unapplied changes"
        positions.stop_stream(self.conn, self.schema, stream.schema.db, stream.schema.table, reason)
        self.streams.pop(stream.topic, None)
        self._no_stream.add(stream.topic)
        alert(self.pipeline, name, "stream stopped", reason)

    def _stream_control(self, topic: str, control, offset: int | None) -> None:
        """A heartbeat, schema change, stop or rebase; ``offset`` None: it waited behind a transaction."""
        stream = self.streams.get(topic) or (None if topic in self._no_stream else self._load_stream(topic))
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
        if not self._follows_on(stream, _pos_dict(control.prev), control.position):
            return
        self._run_ops()
        if topic not in self.streams:
            return  # its pending changes just stopped the table
        if isinstance(control, SchemaChange):
            self._add_columns(stream, control)
        elif isinstance(control, StreamStop):
            log.error("%s: stream stopped: %s", stream.target, control.reason)
            positions.stop_stream(self.conn, self.schema, stream.schema.db, stream.schema.table, control.reason)
            del self.streams[topic]
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
        self._run_ops()
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

    def _add_columns(self, stream: StreamTable, change: SchemaChange) -> None:
        from psycopg import sql as pgsql

        schema = replace(stream.schema, columns=tuple(Column(**c) for c in change.columns))
        for column in schema.columns:
            if column.name in stream.schema.names:
                continue
            default = change.defaults.get(column.name)
            ddl = f"ALTER TABLE {stream.target} ADD COLUMN {qi(column.name)} {pg_type(column, stream.postgis)}"
            if default is not None:
                value = row_converter(replace(schema, columns=(column,)), stream.postgis)(
                    msgspec.defstruct("One", [("v", Any)])(default)
                )[0]
                self.conn.execute(pgsql.SQL(ddl + " DEFAULT {}").format(pgsql.Literal(value)))
                self.conn.execute(f"ALTER TABLE {stream.target} ALTER COLUMN {qi(column.name)} DROP DEFAULT")
            else:
                self.conn.execute(ddl)
            log.info("%s: column %s added (%s)", stream.target, column.name, change.ddl[:200])
        positions.store_columns(self.conn, self.schema, stream.schema.db, stream.schema.table, change.columns)
        stream.use(schema)

    def _replay_held(self, topic: str) -> None:
        """After a full load's END: the change events held while it was open, in topic order; those at or
        before the batch's position are skipped by the position check, the rest applied after it."""
        self.streams.pop(topic, None)  # a committed batch brings a new schema and position
        self._no_stream.discard(topic)
        rows = positions.take_held(self.conn, self.schema, topic)
        for seq, value in sorted(rows):
            self._stream_change(topic, bytes(value), seq)
        self._run_ops()

    def _store_position(self, stream: StreamTable) -> None:
        positions.store_stream_position(
            self.conn,
            self.schema,
            stream.schema.db,
            stream.schema.table,
            stream.applied,
            stream.source_ms,
            stream.applied_changes,
            stream.gtids,
            stream.server,
        )
        stream.applied_changes, stream.dirty = 0, False

    def _load_stream(self, topic: str) -> StreamTable | None:
        config = self.tables[topic]
        row = positions.stream_start(self.conn, self.schema, topic)
        # changes apply only to a streamed table whose last load was a full load (see seam.incremental: modes)
        if row is None or row[8] != "full" or config.sync != "stream":
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
            self._spatial_as_geometry(schema),
        )
        stream.gtids, stream.server = row[9], row[10]
        return stream

    def _copy(self, batch: OpenBatch, stage_rows: list, change_rows: list) -> None:
        cols = ", ".join(qi(n) for n in batch.schema.names)
        with self.conn.cursor() as cur:
            if stage_rows:
                with cur.copy(f"COPY {batch.stage} ({cols}, _seam_part, _seam_attempt) FROM STDIN") as cp:
                    for row in stage_rows:
                        cp.write_row(row)
            if change_rows:
                with cur.copy(f"COPY {batch.changes} ({cols}, _seam_seq, _seam_deleted) FROM STDIN") as cp:
                    for row in change_rows:
                        cp.write_row(row)
            ledger.store_tallies(cur, self.schema, batch.begin.batch, batch.tallies)

    def _begin(self, topic: str, begin: Begin, offset: int) -> None:
        known = ledger.batch_state(self.conn, self.schema, begin.batch)
        current = self.open[topic]
        if known and current is not None and current.begin.batch == begin.batch:
            # the topic is being read again from before this batch (offsets reset by hand, or a replay):
            # start its staging afresh, or every row would be staged twice and the batch rejected
            log.warning("BEGIN of open batch %s seen again: staging it from the start", begin.batch)
            self.conn.execute(f"TRUNCATE {current.stage}, {current.changes}")
            ledger.restart_staging(self.conn, self.schema, begin.batch)
            current.tallies.clear()
            return
        if known:
            log.warning("BEGIN of batch %s seen again (state %s); ignored", begin.batch, known)
            return
        previous = self.open[topic]
        if previous is not None:
            self._drop_tables(previous)
            self._finish(
                previous.begin.batch, "superseded", error=f"superseded by batch {begin.batch} before its END arrived"
            )
            log.warning(
                "batch %s of %s.%s superseded by %s (it never ended)",
                previous.begin.batch,
                begin.db,
                begin.table,
                begin.batch,
            )
        batch = self._open_batch(begin)
        schema, key = batch.schema, tuple(begin.key)
        postgis = self._spatial_as_geometry(schema)
        self.conn.execute(
            create_table_sql(
                batch.stage,
                schema,
                key,
                postgis=postgis,
                extra="_seam_part integer NOT NULL, _seam_attempt bigint NOT NULL",
            )
        )
        self.conn.execute(
            create_table_sql(
                batch.changes,
                schema,
                key,
                postgis=postgis,
                extra="_seam_seq bigint NOT NULL, _seam_deleted boolean NOT NULL",
            )
        )
        ledger.open_batch(self.conn, self.schema, begin, topic, offset)
        self.open[topic] = batch
        log.info("batch %s of %s.%s opened (%s)", begin.batch, begin.db, begin.table, begin.mode)

    def _end(self, topic: str, end: End, offset: int) -> None:
        batch = self.open[topic]
        if batch is None or batch.begin.batch != end.batch:
            log.warning("END of batch %s ignored: it is not the open batch of %s.%s", end.batch, end.db, end.table)
            return
        ledger.batch_ended(self.conn, self.schema, end, offset)
        try:
            with self.conn.transaction():  # a savepoint: a rejected batch leaves nothing behind
                final_rows = self._publish(batch, end)
        except (psycopg.Error, SinkError) as exc:
            error = str(exc).strip().splitlines()[0]
            self._drop_tables(batch)
            self._finish(end.batch, "rejected", error=error)
            log.error("batch %s of %s.%s REJECTED, the previous table stays: %s", end.batch, end.db, end.table, error)
        else:
            ledger.store_final_rows(self.conn, self.schema, end.batch, final_rows)
            self._finish(end.batch, "committed")
            if end.mode == "incremental":
                log.info("window %s of %s.%s merged: %s rows", end.window, end.db, end.table, final_rows)
                self.open[topic] = None
                return
            positions.store_loaded_position(
                self.conn,
                self.schema,
                end.db,
                end.table,
                end.batch,
                end.position,
                end.gtids,
                end.server,
                (end.stats or {}).get("snapshot_ms"),
            )
            log.info(
                "batch %s of %s.%s committed: %s rows at %s", end.batch, end.db, end.table, final_rows, end.position
            )
        self.open[topic] = None

    def _publish(self, batch: OpenBatch, end: End) -> int:
        """Verify the staged batch against END, finish it, and swap it in. Raises to reject."""
        winners = {(p.part, p.attempt): p for p in end.parts}
        for (part, attempt), p in winners.items():
            staged = batch.tallies.get((part, attempt), Tally())
            if (staged.rows, staged.checksum) != (p.rows, p.checksum):
                raise SinkError(
                    f"part {part} (attempt {attempt}): staged {staged.rows} rows, checksum "
                    f"{staged.checksum}; END says {p.rows} rows, checksum {p.checksum}"
                )
        if sum(p.rows for p in end.parts) != end.rows:
            raise SinkError(f"END's parts add up to {sum(p.rows for p in end.parts)} rows, END says {end.rows}")
        stage, changes = batch.stage, batch.changes
        if set(batch.tallies) - set(winners):  # output of a retried or speculative Spark task attempt
            self.conn.execute(
                f"DELETE FROM {stage} WHERE (_seam_part, _seam_attempt) NOT IN "
                f"(SELECT * FROM unnest(%s::int[], %s::bigint[]))",
                ([p for p, _ in winners], [a for _, a in winners]),
            )
        self.conn.execute(f"ALTER TABLE {stage} DROP COLUMN _seam_part, DROP COLUMN _seam_attempt")
        if batch.begin.mode == "incremental":
            return self._merge_window(batch, end)
        key = [qi(k) for k in batch.begin.key]
        final_rows = sum(p.rows for p in end.parts if p.part != RECONCILE_PART)  # the winners' staged rows
        if key:
            self.conn.execute("SET LOCAL maintenance_work_mem = '256MB'")  # the key's index in one in-memory sort
            self.conn.execute(f"ALTER TABLE {stage} ADD PRIMARY KEY ({', '.join(key)})")
            match = " AND ".join(f"s.{k} = c.{k}" for k in key)
            cols = ", ".join(qi(n) for n in batch.schema.names)
            final_rows -= self.conn.execute(f"DELETE FROM {stage} s USING {changes} c WHERE {match}").rowcount
            final_rows += self.conn.execute(
                f"INSERT INTO {stage} ({cols}) SELECT {cols} FROM (SELECT DISTINCT ON ({', '.join(key)}) * FROM "
                f"{changes} ORDER BY {', '.join(key)}, _seam_seq DESC) last WHERE NOT _seam_deleted"
            ).rowcount
        elif self.conn.execute(f"SELECT EXISTS (SELECT 1 FROM {changes})").fetchone()[0]:
            raise SinkError("changes arrived for a keyless table's snapshot, which is read as one chunk")
        if batch.begin.soft_delete:  # the target never holds rows flagged deleted, whatever the mode
            final_rows -= self.conn.execute(
                f"DELETE FROM {stage} WHERE {_flagged_sql(batch.begin.soft_delete)}"
            ).rowcount
        self._swap(batch)
        self.conn.execute(f"DROP TABLE {changes}")
        return final_rows

    def _swap(self, batch: OpenBatch) -> None:
        """Put the staged table in the target table's place, in the caller's transaction, keeping what users
        built on it. A table with views, user indexes, triggers, policies or foreign keys pointing at it is
        refilled in place (TRUNCATE + INSERT: it keeps its identity, and all of those); otherwise the staged
        table is renamed into place (no copy) and takes over the old table's grants and comments, its
        primary key named after the table."""
        db, name = batch.begin.db, batch.begin.table
        target, stage = target_table(db, name), batch.stage
        _ensure_schema(self.conn, db)
        old = self.conn.execute("SELECT to_regclass(%s)::oid", (target,)).fetchone()[0]
        if old is not None and _has_dependents(self.conn, old):
            new = self.conn.execute("SELECT to_regclass(%s)::oid", (stage,)).fetchone()[0]
            if _columns(self.conn, old) != _columns(self.conn, new):
                raise SinkError(
                    f"{target} has objects that depend on it (views, indexes, triggers, policies or "
                    f"foreign keys) and its columns changed on the source: drop those objects, load "
                    f"again, then recreate them (the previous table stays)"
                )
            cols = ", ".join(qi(n) for n in batch.schema.names)
            self.conn.execute(f"TRUNCATE {target}")
            self.conn.execute(f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {stage}")
            self.conn.execute(f"DROP TABLE {stage}")
            return
        kept = _grants_and_comments(self.conn, old, target, batch.schema.names) if old is not None else []
        self.conn.execute(f"DROP TABLE IF EXISTS {target}")
        self.conn.execute(f"ALTER TABLE {stage} SET SCHEMA {qi(db)}")
        self.conn.execute(
            f"ALTER TABLE {qi(db)}.{qi(ledger.staging_tables(batch.begin.batch)[0])} RENAME TO {qi(name)}"
        )
        for (constraint,) in self.conn.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = 'p'", (target,)
        ).fetchall():
            self.conn.execute(f"ALTER TABLE {target} RENAME CONSTRAINT {qi(constraint)} TO {qi(name[:58] + '_pkey')}")
        for statement in kept:
            self.conn.execute(statement)

    def _merge_window(self, batch: OpenBatch, end: End) -> int:
        """An incremental window: upsert its rows by key (soft-deleted rows are deleted), and move the
        table's watermark forward (never back: a backfilled older window leaves it) in this transaction."""
        begin = batch.begin
        if not begin.key:
            raise SinkError("an incremental window needs a key to merge by")
        stage, target = batch.stage, target_table(begin.db, begin.table)
        key = [qi(k) for k in begin.key]
        match = " AND ".join(f"t.{k} = s.{k}" for k in key)
        cols = ", ".join(qi(n) for n in batch.schema.names)
        _ensure_schema(self.conn, begin.db)
        self.conn.execute(
            create_table_sql(
                target,
                batch.schema,
                tuple(begin.key),
                postgis=self._spatial_as_geometry(batch.schema),
                extra=f"PRIMARY KEY ({', '.join(key)})",
            ).replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1)
        )
        self.conn.execute(f"DELETE FROM {target} t USING {stage} s WHERE {match}")
        keep = f"WHERE NOT {_flagged_sql(begin.soft_delete)}" if begin.soft_delete else ""
        merged = self.conn.execute(
            f"INSERT INTO {target} ({cols}) SELECT DISTINCT ON ({', '.join(key)}) {cols} "
            f"FROM {stage} {keep} ORDER BY {', '.join(key)}"
        ).rowcount
        self.conn.execute(f"DROP TABLE {stage}")
        self.conn.execute(f"DROP TABLE {batch.changes}")
        ledger.store_watermark(self.conn, self.schema, begin, clamped=bool(end.stats.get("clamped")))
        return merged

    # ------------------------------------------------------------ state

    def _open_batch(self, begin: Begin) -> OpenBatch:
        schema = schema_from_begin(begin)
        stage, changes = ledger.staging_tables(begin.batch)
        return OpenBatch(
            begin=begin,
            schema=schema,
            stage=f"{qi(self.schema)}.{qi(stage)}",
            changes=f"{qi(self.schema)}.{qi(changes)}",
            convert=row_converter(schema, self._spatial_as_geometry(schema)),
            decode=record_decoder(schema, batch_rows=True).decode,
        )

    def _spatial_as_geometry(self, schema: TableSchema) -> bool:
        """PostGIS geometry for the table's spatial columns, or bytea (``seam.target.ensure_postgis``); asked of
        the target once, when the first table with spatial columns arrives."""
        if not has_spatial(schema):
            return True
        if self._postgis is None:
            self._postgis = ensure_postgis(self.conn)
        return self._postgis

    def _load_open(self, topic: str) -> OpenBatch | None:
        with self.conn.transaction():
            found = ledger.open_batch_of(self.conn, self.schema, topic)
            if found is None:
                return None
            row, parts = found
            batch = self._open_batch(
                Begin(
                    batch=row[0],
                    db=row[1],
                    table=row[2],
                    mode=row[3],
                    columns=row[4],
                    key=row[5],
                    window=row[6],
                    soft_delete=row[7],
                )
            )
            for part, attempt, rows, checksum in parts:
                batch.tallies[(part, attempt)] = Tally(rows, int(checksum))
        return batch

    def _drop_tables(self, batch: OpenBatch) -> None:
        self.conn.execute(f"DROP TABLE IF EXISTS {batch.stage}")
        self.conn.execute(f"DROP TABLE IF EXISTS {batch.changes}")

    def _finish(self, batch_id: str, state: str, error: str | None = None) -> None:
        ledger.finish_batch(self.conn, self.schema, batch_id, state, error)
        self.finished[batch_id] = state


def _ensure_schema(conn, name: str) -> None:
    """CREATE SCHEMA IF NOT EXISTS is not safe against a concurrent one (two sinks committing their first
    tables of one database at once): serialise the creation."""
    if conn.execute("SELECT to_regnamespace(%s)", (qi(name),)).fetchone()[0] is None:
        xact_lock(conn, "target_schema")
        try:  # the other sink's schema is committed now, yet this session's catalog cache may not show it
            with conn.transaction():
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {qi(name)}")
        except psycopg.errors.UniqueViolation:
            pass


def _has_dependents(conn, table_oid: int) -> bool:
    """Views, user indexes, triggers, row policies or foreign keys of other tables on this table."""
    return conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid WHERE d.classid = "
        "'pg_rewrite'::regclass AND d.refobjid = %(t)s AND r.ev_class <> %(t)s) "
        "OR EXISTS (SELECT 1 FROM pg_index WHERE indrelid = %(t)s AND NOT indisprimary) "
        "OR EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = %(t)s AND NOT tgisinternal) "
        "OR EXISTS (SELECT 1 FROM pg_policy WHERE polrelid = %(t)s) "
        "OR EXISTS (SELECT 1 FROM pg_constraint WHERE confrelid = %(t)s AND conrelid <> %(t)s)",
        {"t": table_oid},
    ).fetchone()[0]


def _columns(conn, table_oid: int) -> list[tuple]:
    return conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute WHERE "
        "attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        (table_oid,),
    ).fetchall()


def _grants_and_comments(conn, table_oid: int, target: str, columns: tuple[str, ...]) -> list:
    """Statements that give a table replacing ``target`` the old table's grants and comments."""
    from psycopg import sql as pgsql

    out = []
    for privilege, grantee, grantable in conn.execute(
        "SELECT a.privilege_type, CASE WHEN a.grantee = 0 THEN NULL ELSE pg_get_userbyid(a.grantee) END, "
        "a.is_grantable FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = %s AND a.grantee <> c.relowner",
        (table_oid,),
    ).fetchall():
        to = pgsql.SQL("PUBLIC") if grantee is None else pgsql.Identifier(grantee)
        out.append(
            pgsql.SQL("GRANT {} ON {} TO {}{}").format(
                pgsql.SQL(privilege), pgsql.SQL(target), to, pgsql.SQL(" WITH GRANT OPTION" if grantable else "")
            )
        )
    comment = conn.execute("SELECT obj_description(%s, 'pg_class')", (table_oid,)).fetchone()[0]
    if comment is not None:
        out.append(pgsql.SQL("COMMENT ON TABLE {} IS {}").format(pgsql.SQL(target), pgsql.Literal(comment)))
    for column, text in conn.execute(
        "SELECT attname, col_description(attrelid, attnum) FROM pg_attribute WHERE "
        "attrelid = %s AND attnum > 0 AND NOT attisdropped AND "
        "col_description(attrelid, attnum) IS NOT NULL",
        (table_oid,),
    ).fetchall():
        if column not in columns:
            continue  # dropped on the source
        out.append(
            pgsql.SQL("COMMENT ON COLUMN {}.{} IS {}").format(
                pgsql.SQL(target), pgsql.Identifier(column), pgsql.Literal(text)
            )
        )
    return out


def _flagged_sql(column: str) -> str:
    """A row's soft-delete flag is set: anything but NULL, 0 and false."""
    return f"coalesce({qi(column)}::text, '0') NOT IN ('0', 'false')"


def _flagged(value) -> bool:
    return value is not None and str(value).lower() not in ("0", "false")


def _pos_dict(p: Position | None) -> dict | None:
    return None if p is None else {"file": p.file, "pos": p.pos, "row": p.row}


def _key(batch: OpenBatch, image) -> dict:
    values = dict(zip(batch.schema.names, msgspec.structs.astuple(image)))
    return {k: values[k] for k in batch.begin.key} if batch.begin.key else values
