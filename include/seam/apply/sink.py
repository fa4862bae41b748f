"""The PostgreSQL sink: applies table topics to the target, batch by batch.

This module is the router and its two runners (the Kafka loop, Spark's ``foreachBatch``) with the offsets;
a batch's lifecycle (BEGIN, staging, END) is ``seam.apply.lifecycle``, the other roles ``swap``, ``merge``
and ``changes``.

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
transactions and read_committed play no part in correctness. The same holds
when the broker no longer has a stored offset, or its answer skips offsets
(``seam.wire.offset_gaps``): every topic is read again from the stored ones.

Delivery guarantee: exactly once into PostgreSQL. Readers see the old table
until the END transaction commits, then the whole new batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from seam.alerts import alert
from seam.apply import PositionMoved, SinkError, TopicTaken
from seam.apply.batch import Stager
from seam.apply.changes import MALFORMED, ChangeApplier
from seam.apply.decode import SparkRowMessage
from seam.apply.lifecycle import BatchLifecycle
from seam.apply.read_ahead import ReadAhead, sorted_out
from seam.apply.retry import LOCK_WAIT, Retrier, connection_lost, transient
from seam.apply.transaction import TargetTransaction
from seam.core.errors import TargetError, first_line
from seam.core.pipeline import Pipeline, TableConfig
from seam.state import ledger, positions
from seam.state.connection import connect_target
from seam.state.owners import holder_of, record_holder
from seam.state.parts import part_beat
from seam.state.positions import forget_cascades
from seam.state.schema import ensure_state, held_by_another, try_lock
from seam.wire.boundary import (
    BLOCK_KINDS,
    Begin,
    End,
    Heartbeat,
    PartDone,
    SchemaChange,
    StreamStop,
    block_records,
    parse_control,
)
from seam.wire.offset_gaps import OffsetGaps
from seam.wire.records import no_cyclic_gc
from seam.wire.sink_pace import StagedReport
from seam.wire.topics import consumer_config, ensure_topics, table_topic, topic_ids

log = logging.getLogger("seam.sink")

# how often a running sink asks the broker for its topics' ids: a topic recreated under it (a broker that lost
# its topics on a restart, as the embedded one does; a topic deleted and created again) answers nothing at the
# old offset until its new log grows past it, then serves the middle of it
TOPIC_CHECK_S = 5.0


def _key(message) -> bytes | None:
    key = message.key()
    return key.encode() if isinstance(key, str) else key


class Sink:
    """Applies the topics of some tables of a pipeline to PostgreSQL. One sink per topic at a time."""

    def __init__(self, pipeline: Pipeline, tables: list[TableConfig] | None = None):
        self.pipeline = pipeline
        self.schema = pipeline.target.state_schema
        self.tables = {table_topic(pipeline, t): t for t in (tables or pipeline.tables)}
        self.retrier = Retrier()  # transient target errors: retried, counted
        self.finished: dict[str, str] = {}  # batch id -> final state once committed, for callers waiting on one
        self.topic_ids: dict[str, str] = {}
        self._offsets_lost: set[str] = set()  # topics whose stored offset the broker no longer has
        self._gaps = OffsetGaps()
        self._forgot_at = 0.0  # when recorded cascade rows were last pruned
        self.stager = Stager()  # rows the compiled stager cannot take are decoded on every core
        self.report = StagedReport(pipeline)  # how far open batches are staged, for their publishers' pace
        self._first_connect()

    def _first_connect(self) -> None:
        """The sink's session and what it holds from the target, made again when the session is cut while
        either is set up (a DBA's pg_terminate_backend, a failover): a transient error, retried as
        ``_recover`` retries one later (CI: a cut as the open batches were read ended a repair's own sink)."""
        delay = 1.0
        while True:
            conn = None
            try:
                self.conn = conn = self._connect()
                self._load_state()
                return
            except psycopg.Error as exc:
                if conn is not None:
                    conn.close()
                if not transient(exc):
                    raise
                self.retrier.note("sink", exc)
                log.warning(
                    "the sink's session was lost as it started (%s, transient): connecting again", first_line(exc)
                )
                delay = self.retrier.pause(delay)

    def _connect(self):
        conn = connect_target(self.pipeline)
        try:
            conn.autocommit = True
            ensure_state(conn, self.schema)
            for topic in self.tables:  # session locks: a second sink on the same topic would double-apply
                if not try_lock(conn, "topic", topic):
                    holder = holder_of(conn, self.schema, "topic", topic)
                    raise TopicTaken(topic, holder)
                record_holder(conn, self.schema, "topic", topic, "a Seam sink")
            conn.execute(f"SET lock_timeout = '{LOCK_WAIT}'")  # after the migrations' lock (seam.apply.retry)
            conn.autocommit = False
        except BaseException:
            conn.close()
            raise
        return conn

    def _load_state(self) -> None:
        """What the sink holds in memory, from what the target committed (at the start, and after a
        transaction failed for a transient reason)."""
        self.txn = TargetTransaction(self.conn)  # data, offsets and positions: one commit
        self.batches = BatchLifecycle(self.conn, self.txn, self.pipeline, self.tables, self.retrier, self.finished)
        self.open = self.batches.open
        self._next_offset: dict[str, int] = {}  # topic -> the offset after the last message consumed
        self.changes = ChangeApplier(
            self.conn, self.pipeline, self.tables, self.batches.landing, self._offset_read, self.retrier
        )

    def _recover(self, exc: BaseException) -> None:
        """A transaction failed for a transient reason: reconnect if the connection is gone, and start again
        from what the target committed (the caller reads the topics again from the stored offsets)."""
        self.retrier.note("sink", exc)
        delay = 1.0
        while True:
            log.warning("the sink's transaction failed (%s, transient): resuming from the target", first_line(exc))
            delay = self.retrier.pause(delay)
            try:
                if connection_lost(self.conn):
                    self.conn.close()
                    self.conn = self._connect()
                    self._load_state()
                else:  # a failed transaction (a commit cancelled too) ignores every command until its end
                    self.conn.rollback()
                    self._forget_what_was_read()
                return
            except psycopg.Error as again:
                if not transient(again) or self.retrier.stopping():
                    raise
                exc = again
            except TargetError as unreachable:  # the server is restarting: retried like any transient error
                self.retrier.note("sink", unreachable)
                exc = unreachable

    def _retrying(self, work):
        """``work()`` until it returns, recovering from each transient target error in between."""
        while True:
            try:
                return work()
            except (psycopg.Error, PositionMoved) as exc:
                if not isinstance(exc, PositionMoved) and not transient(exc):
                    raise
                self._recover(exc)

    # ------------------------------------------------------------ running

    def run(
        self,
        until_batches: set[str] | None = None,
        idle_exit: float | None = None,
        deadline: float | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        caught_up: bool = False,
        stream_part: bool = False,
    ) -> dict[str, str]:
        """Consume and apply until every batch in ``until_batches`` is final, idle for ``idle_exit`` s, stopped,
        or (``caught_up``) every topic is applied to its end. ``stream_part``: this is the stream's sink
        (``stream.sink: direct``), whose heartbeats `seam stream status` reads."""

        self.retrier.stopping = should_stop
        ensure_topics(self.pipeline, list(self.tables))
        self.topic_ids = topic_ids(self.pipeline, list(self.tables))
        config = {**consumer_config(self.pipeline), "enable.partition.eof": caught_up}
        consumer = Consumer(config)
        at_end: set[str] = set()
        last_message = checked = time.monotonic()
        ahead = self._read_from_target(consumer)
        try:
            while not should_stop():
                try:  # every step that touches the target: a transient error there is recovered from
                    if time.monotonic() - checked > TOPIC_CHECK_S:
                        checked = time.monotonic()
                        if until_batches is not None and self._caller_gone(until_batches):
                            break
                        if self._recreated():  # what was read of the old topics is void: again from the target
                            ahead.stop()
                            consumer.close()  # a new client: the old one's metadata still names the old topic
                            at_end.clear()
                            self._forget_what_was_read()
                            consumer = Consumer(config)
                            ahead = self._read_from_target(consumer)
                    if self._finished(until_batches, caught_up and len(at_end) == len(self.tables), deadline):
                        break
                    good = sorted_out(ahead.next(), at_end, self._offset_lost)
                    by_topic = self._by_topic(good) if good else {}
                    if good is None or self._skipped(by_topic):
                        # an offset the broker no longer has, or offsets its answer skipped: every topic is read
                        # again from the target's offsets (what was read ahead, of every topic, is dropped with it)
                        ahead.stop()
                        at_end.clear()
                        ahead = self._read_from_target(consumer)
                        continue
                    if not good:
                        self._idle()
                        if idle_exit is not None and time.monotonic() - last_message > idle_exit:
                            break
                        continue
                    last_message = time.monotonic()
                    self._apply_all(by_topic)
                    if stream_part:
                        self._beat()
                except (psycopg.Error, PositionMoved) as exc:
                    if not isinstance(exc, PositionMoved) and not transient(exc):
                        raise
                    ahead.stop()  # what it read is void: read again from the stored offsets
                    at_end.clear()
                    self._recover(exc)
                    ahead = self._read_from_target(consumer)
        finally:
            ahead.stop()
            consumer.close()
        return dict(self.finished)

    def _caller_gone(self, until_batches: set[str]) -> bool:
        """Whether the command this sink was started for is gone (killed with no cleanup: nothing holds the
        batches it waits for, ``StateWatch.hold``). Then it exits rather than hold the tables' topics until its
        timeout, which kept a stream's sink from taking them; the batches stay open for the next run to resume."""
        pending = sorted(until_batches - self.finished.keys())
        if not pending:
            return False  # all final: the sink is done, not orphaned
        try:
            with self.conn.transaction():  # a read: not the sink's unit of commit
                gone = not any(held_by_another(self.conn, "load", b) for b in pending)
        except psycopg.Error:
            return False  # looked at again; the next apply meets the error and recovers
        if gone:
            log.warning("nothing holds batch(es) %s: the command that started this sink is gone", ", ".join(pending))
        return gone

    def _idle(self) -> None:
        """Nothing new: transactions waiting for a level above are looked at, batches whose load is gone are
        abandoned."""
        if any(s.waiting for s in self.changes.streams.values()):  # the level above may be another sink's
            with self.txn():
                self.changes.release_waiting()
        if self.batches.stale():
            with self.txn():
                self._abandon_stale()

    def _finished(self, until_batches: set[str] | None, every_topic_at_end: bool, deadline: float | None) -> bool:
        """Whether ``run`` is done: the batches it waits for are final, or every topic is applied to its end."""
        if until_batches is not None and until_batches <= self.finished.keys():
            return True
        if every_topic_at_end:
            if any(s.waiting for s in self.changes.streams.values()):  # as an idle sink would, once
                with self.txn():
                    self.changes.release_waiting()
            return True  # every topic's messages up to its end are applied (with the lists before)
        if deadline is not None and time.time() > deadline:
            raise SinkError(f"timed out waiting for batch(es) {', '.join(sorted(until_batches or ()))}")
        return False

    def _read_from_target(self, consumer) -> ReadAhead:
        """Every topic assigned at the offset stored with the data (a recreated one at its beginning), read
        ahead. A session cut as the offsets are read (seen in CI, right after the sink connected) is retried."""
        stored = {t: OFFSET_BEGINNING for t in self.tables} | self._retrying(self._stored_offsets)
        consumer.assign([TopicPartition(t, 0, offset) for t, offset in stored.items()])
        self._gaps.reading_from(stored)
        return ReadAhead(consumer)

    def _forget_what_was_read(self) -> None:
        """What the sink holds in memory and in its session's tables, dropped: it reads again from the target."""
        self.changes.drop_run_tables()  # the session would keep them
        self.conn.commit()
        self._load_state()

    def close(self) -> None:
        self.stager.close()
        self.report.close()
        self.conn.close()

    def start_offsets(self) -> dict[str, tuple[str, int]]:
        """Where a stream of these topics starts: (topic id, offset) of the offsets stored with the data (0
        when none, or when the topic was recreated). The id goes with the offset: a topic the broker recreates
        after this call is read from its beginning, not from this offset."""
        ensure_topics(self.pipeline, list(self.tables))  # a broker that lost them (the embedded one, restarted)
        self.topic_ids = topic_ids(self.pipeline, list(self.tables))
        stored = self._stored_offsets()
        return {t: (self.topic_ids[t], max(0, stored.get(t, 0))) for t in self.tables}

    def apply_rows(self, rows) -> None:
        """Apply one Spark micro-batch (``seam.wire.kafka_source`` rows) in one transaction. Messages below the
        stored offsets (a micro-batch replayed after a failure) are skipped: replaying changes nothing. Rows
        carry their topic's id: a topic recreated on the broker starts again at offset 0. A transient target
        error (a lost connection included) applies the micro-batch again from what the target committed,
        instead of failing the query (which would restart the whole Spark job)."""
        self._retrying(lambda: self._apply_rows(rows))

    def _apply_rows(self, rows) -> None:
        for row in rows:
            if row.topic_id and self.topic_ids.get(row.topic) != row.topic_id:
                log.warning(
                    "topic %s was recreated on the broker (id %s): reading it from its beginning",
                    row.topic,
                    row.topic_id,
                )
                self.topic_ids[row.topic] = row.topic_id
                stream = self.changes.streams.get(row.topic)
                if stream is not None:
                    stream.buffer.clear()
        stored = self._stored_offsets()
        messages = [
            SparkRowMessage(row)
            for row in sorted(rows, key=lambda r: (r.topic, r.offset))
            if row.offset >= max(0, stored.get(row.topic, 0))
        ]
        if messages:
            self._apply_all(self._by_topic(messages))
        elif self.batches.stale():
            with self.txn():
                self._abandon_stale()
        self._beat()

    def _beat(self) -> None:
        """For `seam stream status`: the stream's sink applies, and the transient errors it retried."""
        retries, last = self.retrier.take()
        with self.conn.transaction():
            part_beat(self.conn, self.schema, self.pipeline.name, "sink", batches=1, retries=retries, last_retry=last)

    def _by_topic(self, messages: list) -> dict[str, list]:
        """Messages of any topics, in offset order per topic."""
        if len(self.tables) == 1:
            return {messages[0].topic(): messages}
        by_topic: dict[str, list] = {}
        for m in messages:
            by_topic.setdefault(m.topic(), []).append(m)
        return by_topic

    def _skipped(self, by_topic: dict[str, list]) -> bool:
        """Whether the broker's answer skipped offsets of a topic (``seam.wire.offset_gaps``) not met before."""
        for topic, messages in by_topic.items():
            gap = self._gaps.new_gap(topic, messages)
            if gap is not None:
                log.warning(
                    "topic %s: the broker's answer skipped offsets %s to %s; reading again from the target's offsets",
                    topic,
                    *gap,
                )
                return True
        return False

    def _apply_all(self, by_topic: dict[str, list]) -> None:
        """Messages by topic, in offset order, applied in ONE transaction with the offsets."""
        with no_cyclic_gc(), self.txn():
            for topic, batch in by_topic.items():
                self._apply(topic, batch)
            self._abandon_stale()
            if any(s.waiting for s in self.changes.streams.values()):
                self.changes.release_waiting()
            if time.monotonic() - self._forgot_at > 60:  # recorded cascade rows every table is past
                self._forgot_at = time.monotonic()
                forget_cascades(
                    self.conn,
                    self.pipeline.target.state_schema,
                    [(t.db, t.table) for t in self.pipeline.tables if t.sync == "stream"],
                )
        self.report.staged({t: self._next_offset[t] for t in by_topic if self.open.get(t) is not None})

    def _offset_lost(self, message) -> None:
        """The stored offset is not in the log (retention expired, or the broker lost the topic): the topic is
        read from its beginning until an offset of it is stored again."""
        log.warning(
            "topic %s no longer has offset %s (broker restarted or retention expired); reading it from "
            "its beginning. An open batch that lost messages fails its END check and is rejected.",
            message.topic(),
            message.offset(),
        )
        self._offsets_lost.add(message.topic())

    def _recreated(self) -> list[str]:
        """Topics whose id on the broker is not the one the sink reads (they were recreated); the new ids are
        taken. None found when the broker does not answer or lacks one of them (it is asked again later)."""
        try:
            now = topic_ids(self.pipeline, list(self.tables), timeout=5)
        except (KafkaException, TimeoutError):  # the broker is down or restarting
            return []
        changed = [t for t, topic_id in now.items() if topic_id != self.topic_ids.get(t)]
        for topic in changed:
            log.warning(
                "topic %s was recreated on the broker (id %s): reading it again from its beginning", topic, now[topic]
            )
        self.topic_ids.update(now)
        return changed

    def _stored_offsets(self) -> dict[str, int]:
        """Where to resume each topic: the stored offset, or the beginning of a topic that was recreated.

        A broker that lost a topic (the embedded one keeps topics in memory) serves an empty log under the
        same name, and a stored offset past its end just waits for ever; the topic's id tells them apart.
        """

        with self.conn.transaction():
            rows = positions.stored_offsets(self.conn, self.schema, list(self.tables))
        resume = {}
        for topic, offset, stored_id in rows:
            if topic in self._offsets_lost:
                resume[topic] = OFFSET_BEGINNING
            elif stored_id is not None and stored_id != self.topic_ids.get(topic):
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
        """Apply consumed messages of one topic (part of the caller's transaction): the runs of rows between
        control messages, then each control message."""
        start = 0
        for i, m in enumerate(messages):
            if m.headers():  # only control messages carry headers
                self._apply_run(topic, messages[start:i])
                start = i + 1
                control = self._control_of(topic, m)
                if control is None:
                    continue
                if isinstance(control, Begin):
                    self.batches.begin(topic, control, m.offset())
                elif isinstance(control, PartDone):
                    current = self.open[topic]
                    if current is not None and current.begin.batch == control.batch:
                        ledger.part_done(self.conn, self.schema, control)
                elif isinstance(control, End):
                    self.batches.end(topic, control, m.offset())
                    self.changes.replay_held(topic)
                elif self.open[topic] is None:
                    self.changes.control(topic, control, m.offset())
                else:  # a stream control: held with the change events, in order (it moves the table's chain)
                    positions.hold_changes(self.conn, self.schema, [(topic, m.offset(), m.value())], control=True)
        self._apply_run(topic, messages[start:])
        self._next_offset[topic] = messages[-1].offset() + 1
        self._store_offset(topic)
        self._offsets_lost.discard(topic)  # if this transaction fails, the stored offset errs again: lost again

    def _control_of(self, topic: str, message):
        """The control message, checked: it parses, and a BEGIN or END names the topic's own table (taken from
        the pipeline, never from the message). Else it is quarantined (None)."""
        try:
            control = parse_control(message.value())
        except MALFORMED as exc:
            reason = f"a control message that does not parse ({first_line(exc)})"
        else:
            table = self.tables[topic]
            named = (getattr(control, "db", table.db), getattr(control, "table", table.table))
            if named != (table.db, table.table):
                reason = f"a {type(control).__name__} naming table {named[0]}.{named[1]}, not this topic's {table.name}"
            elif isinstance(control, (Heartbeat, SchemaChange, StreamStop)) and control.prev is None:
                # the change reader chains every one to the table's last (seam.source.streaming): without it
                # the chain check could not tell a lost change
                reason = f"a {type(control).__name__} without prev (not the change reader's)"
            else:
                return control
        self.changes.quarantine(topic, message.offset(), _key(message), message.value(), reason)
        return None

    def _apply_run(self, topic: str, run: list) -> None:
        """Messages without a control message among them: staged into the open batch (change events that
        arrive meanwhile are held until its END), or else the table's change events."""
        batch = self.open[topic]
        if batch is None:
            self._changes(topic, run)
        elif run:
            values = [m.value() for m in run]
            blocks = bytes(BLOCK_KINDS.get(_key(m) or b"", 0) for m in run)
            held = self.batches.stage(
                topic, batch, self.stager.stage(batch.staging, values, [m.offset() for m in run], blocks)
            )
            if held is None:  # rejected: the change events held behind it and those of this run go to the table
                self.changes.replay_held(topic)
                self._changes(topic, run)
            elif held:
                self._hold(topic, run, blocks, held)
        self.changes.run_ops()

    def _changes(self, topic: str, run: list) -> None:
        """Messages taken as the table's change events (a block's records one by one: rows of a batch that is
        not open are dropped there, and what is not Seam's is quarantined)."""
        for m in run:
            records = block_records(_key(m), m.value())
            for value in records if records is not None else (m.value(),):
                self.changes.change(topic, value, m.offset(), _key(m))

    def _hold(self, topic: str, run: list, blocks: bytes, held: list[int]) -> None:
        """Keep the messages that were not the open batch's rows until its END (change events). A block is only
        ever rows of a batch: one holding anything else is not Seam's, and is quarantined whole (the batch then
        fails its END check)."""
        kept = [(topic, run[i].offset(), run[i].value()) for i in held if not blocks[i]]
        if kept:
            positions.hold_changes(self.conn, self.schema, kept)
        for i in held:
            if blocks[i]:
                reason = "a block of rows holding a record that is not a row of the open batch"
                self.changes.quarantine(topic, run[i].offset(), _key(run[i]), run[i].value(), reason)

    def _offset_read(self, topic: str) -> None:
        """Store the topic's offset if messages of it were read (a transaction released from waiting)."""
        if topic in self._next_offset:
            self._store_offset(topic)

    def _store_offset(self, topic: str) -> None:
        stream = self.changes.streams.get(topic)
        next_offset = self._next_offset[topic]
        resume = stream.resume_offset(next_offset) if stream else next_offset
        positions.store_offset(self.conn, self.schema, topic, resume, self.topic_ids.get(topic))

    def _abandon_stale(self) -> None:
        """Abandon the batches whose load is gone (killed as a whole process tree, its machine lost: nothing
        ran its cleanup; ``StateWatch.hold``): staging dropped, the ledger says why, and the table's change events held behind it
        are applied in order to the table as it was, so the stream goes on (and the reader's back-pressure,
        which counts them, lets go)."""
        for topic in self.batches.stale():
            batch = self.open[topic]
            assert batch is not None
            if held_by_another(self.conn, "load", batch.begin.batch):  # its command runs: rows will come
                batch.rows_at = time.monotonic()
                continue
            name = f"{batch.begin.db}.{batch.begin.table}"
            why = (
                f"abandoned: no rows of its load arrived for {self.pipeline.load.abandon_after:.0f} s (load.abandon_after); "
                f"the load is gone, the table keeps its previous data; run `seam load full {name}` again"
            )
            self.batches.drop_tables(batch)
            self.batches.finish(batch.begin.batch, "abandoned", error=why)
            self.open[topic] = None
            self.changes.replay_held(topic)
            log.error("batch %s of %s %s", batch.begin.batch, name, why)
            alert(self.pipeline, name, "load abandoned", why)
