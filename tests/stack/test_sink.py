"""The sink's batch rules on the real broker and PostgreSQL, with batches
published by hand (no Spark): a wrong END is rejected and the old table stays;
output of a retried Spark task attempt is discarded; reconciliation changes
(update, delete, a key that moves) are applied in order; a superseded batch
leaves nothing behind."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, replace

import psycopg
import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, Message

from seam.apply import sink as sink_module
from seam.apply.batch import Stager
from seam.apply.sink import TOPIC_CHECK_S, Sink
from seam.config import parse_pipeline
from seam.core.position import Position
from seam.core.schema import Column, TableSchema
from seam.state import connection as connection_module
from seam.state import ledger
from seam.state.connection import StateWatch, scalar
from seam.wire.boundary import CONTROL_HEADER, RECONCILE_PART, Begin, End, Heartbeat, Part, Tally, new_batch_id
from seam.wire.records import Record
from seam.wire.topics import Publisher, ensure_topics, table_topic

pytestmark = pytest.mark.stack

SCHEMA = TableSchema(
    db="sink_test",
    table="ledger",
    primary_key=("id",),
    columns=(
        Column("id", "int", "int(11)", False),
        Column("amount", "decimal", "decimal(12,2)", False, numeric_scale=2),
        Column("note", "varchar", "varchar(20)", True),
        Column("blob", "blob", "blob", True),
    ),
)
POSITION = Position.through("mysql-bin.000001", 4000)


def _sink_pipeline(pipeline, bootstrap: str | None = None, tables: tuple[str, ...] = ("ledger",)):
    """The stack's pipeline with these tables of ``sink_test`` and a fresh topic prefix, so every test starts
    from empty topics (on ``bootstrap``'s broker when given)."""
    doc = yaml.safe_load(open(pipeline.path))
    doc["kafka"]["topic_prefix"] = f"sinktest{new_batch_id().replace('-', '')}"
    if bootstrap:
        doc["kafka"]["bootstrap"] = bootstrap
    doc["tables"] = [{"name": f"sink_test.{t}", "key": ["id"]} for t in tables]
    return parse_pipeline(doc, source="sink-test")


@pytest.fixture
def sink_pipeline(pipeline):
    return _sink_pipeline(pipeline)


def _row(i: int, amount: str = "1.00", note: str | None = "n") -> dict:
    return {"id": i, "amount": amount, "note": note, "blob": "AAE="}


def _record(
    batch: str, op: str, before: dict | None, after: dict | None, pos: int = 0, table: str = SCHEMA.table
) -> Record:
    image = after or before
    return Record(
        op=op,
        db=SCHEMA.db,
        table=table,
        key={"id": image["id"]},
        before=before,
        after=after,
        position=Position("mysql-bin.000001", pos or 4000, 0),
        snapshot=op == "r",
        batch=batch,
    )


class Batch:
    """Publishes one batch by hand, keeping the tallies END must carry."""

    def __init__(self, pipeline, publisher: Publisher, table: int = 0, columns: tuple[Column, ...] = SCHEMA.columns):
        self.pipeline, self.publisher = pipeline, publisher
        self.topic = table_topic(pipeline, pipeline.tables[table])
        self.table = pipeline.tables[table].table
        self.id = new_batch_id()
        self.tallies: dict[tuple[int, int], Tally] = {}
        begin = Begin(
            batch=self.id,
            db=SCHEMA.db,
            table=self.table,
            mode="full",
            columns=[asdict(c) for c in columns],
            key=["id"],
        )
        publisher.send(self.topic, begin.to_json(), b"c", headers=[(CONTROL_HEADER, b"1")])

    def send(self, record: Record, part: int = 0, attempt: int = 1) -> None:
        value = replace(record, part=part, attempt=attempt).to_json()
        self.publisher.send(self.topic, value, record.kafka_key())
        self.tallies.setdefault((part, attempt), Tally()).add(value)

    def rows(self, ids, amount: str = "1.00") -> Batch:
        """Snapshot rows for these ids, all from chunk 0, attempt 1."""
        for i in ids:
            self.send(_record(self.id, "r", None, _row(i, amount), table=self.table))
        return self

    def end(
        self,
        winners: list[tuple[int, int]],
        rows_delta: int = 0,
        position: Position | None = POSITION,
        stats: dict | None = None,
    ) -> None:
        parts = [
            Part(
                p,
                a,
                self.tallies.get((p, a), Tally()).rows + (rows_delta if p >= 0 else 0),
                self.tallies.get((p, a), Tally()).checksum,
            )
            for p, a in winners
        ]
        total = Tally()
        for p in parts:
            total = total.merge(Tally(p.rows, p.checksum))
        end = End(
            batch=self.id,
            db=SCHEMA.db,
            table=self.table,
            mode="full",
            position=position,
            parts=parts,
            rows=total.rows,
            checksum=total.checksum,
            stats=stats or {},
        )
        self.publisher.send(self.topic, end.to_json(), b"c", headers=[(CONTROL_HEADER, b"1")])
        self.publisher.flush()

    def cancel(self, why: str) -> None:
        """END without a position: the batch is given up (``Publication.cancel``)."""
        self.end([], position=None, stats={"cancelled": why})


def _complete(pipeline, publisher: Publisher, ids) -> Batch:
    """A whole snapshot batch of these ids: BEGIN, rows, a matching END."""
    batch = Batch(pipeline, publisher).rows(ids)
    batch.end([(0, 1)])
    return batch


def _apply(pipeline, *batches: str, parallel: bool = False) -> dict[str, str]:
    """Run a sink until these batches are final; ``parallel``: every run of rows staged by worker processes."""
    sink = Sink(pipeline)
    if parallel:
        sink.stager = Stager(workers=2, parallel_from=1)
    try:
        return sink.run(until_batches=set(batches), idle_exit=5)
    finally:
        sink.close()


def _table(pipeline, table: str = "ledger") -> list[tuple]:
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        return conn.execute(f'SELECT id, amount::text, note, blob FROM "sink_test"."{table}" ORDER BY id').fetchall()


def _ledger(pipeline, batch: str) -> tuple:
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        return conn.execute(
            "SELECT state, final_rows, error FROM seam.batches WHERE batch_id = %s", (batch,)
        ).fetchone()


@pytest.mark.parametrize("parallel", [False, True], ids=["staged-here", "staged-by-workers"])
def test_batches_commit_reject_discard_attempts_and_apply_changes(sink_pipeline, parallel):
    pipeline = sink_pipeline
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    publisher = Publisher(pipeline)

    first = _complete(pipeline, publisher, range(1, 6))
    assert _apply(pipeline, first.id, parallel=parallel) == {first.id: "committed"}
    old = _table(pipeline)
    assert [r[0] for r in old] == [1, 2, 3, 4, 5] and old[0][1:] == ("1.00", "n", b"\x00\x01")

    # END's count disagrees with what was staged: rejected, the old table stays, the reason is recorded
    wrong = Batch(pipeline, publisher).rows(range(1, 4), "9.99")
    wrong.end([(0, 1)], rows_delta=1)
    assert _apply(pipeline, wrong.id, parallel=parallel) == {wrong.id: "rejected"}
    state, _, error = _ledger(pipeline, wrong.id)
    assert state == "rejected" and "staged 3 rows" in error and "END says 4 rows" in error
    assert _table(pipeline) == old

    # a retried task: attempt 7 published part of chunk 0 and died, attempt 8 published all of it;
    # then reconciliation: update id 1, delete id 2, move id 3 to id 30, insert id 40
    retried = Batch(pipeline, publisher)
    retried.send(_record(retried.id, "r", None, _row(1, "5.00")), part=0, attempt=7)
    for i in (1, 2, 3):
        retried.send(_record(retried.id, "r", None, _row(i, "5.00")), part=0, attempt=8)
    retried.send(_record(retried.id, "r", None, _row(4, "5.00")), part=1, attempt=9)
    for record in (
        _record(retried.id, "u", _row(1, "5.00"), _row(1, "6.00", None), 4100),
        _record(retried.id, "d", _row(2, "5.00"), None, 4200),
        _record(retried.id, "u", _row(3, "5.00"), _row(30, "5.00"), 4300),
        _record(retried.id, "c", None, _row(40, "7.00"), 4400),
        _record(retried.id, "u", _row(40, "7.00"), _row(40, "8.00"), 4500),
    ):
        retried.send(record, part=RECONCILE_PART, attempt=0)
    retried.end([(0, 8), (1, 9), (RECONCILE_PART, 0)])
    assert _apply(pipeline, retried.id, parallel=parallel) == {retried.id: "committed"}
    assert _table(pipeline) == [
        (1, "6.00", None, b"\x00\x01"),
        (4, "5.00", "n", b"\x00\x01"),
        (30, "5.00", "n", b"\x00\x01"),
        (40, "8.00", "n", b"\x00\x01"),
    ]
    assert _ledger(pipeline, retried.id)[:2] == ("committed", 4)

    # a batch that never ends is superseded by the next BEGIN, and its staging tables are dropped
    stale = Batch(pipeline, publisher).rows([99])
    fresh = _complete(pipeline, publisher, [7])
    assert _apply(pipeline, fresh.id, parallel=parallel) == {stale.id: "superseded", fresh.id: "committed"}
    assert [r[0] for r in _table(pipeline)] == [7]
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        assert (
            conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'seam' AND tablename LIKE %s", (f"%{stale.id}",)
            ).fetchone()[0]
            == 0
        )
        offsets = conn.execute(
            "SELECT next_offset FROM seam.offsets WHERE topic = %s", (table_topic(pipeline, pipeline.tables[0]),)
        ).fetchone()[0]
    assert offsets == publisher.sent  # every message consumed exactly once, recorded with the data


def _send_change(publisher: Publisher, topic: str, i: int, commit: int, seq: int, last: bool, prev: int) -> None:
    """Change event ``seq`` of a transaction that commits at ``commit``: the insert of row ``i``, chained to the
    table's change published before, the commit at ``prev``."""
    record = Record(
        op="c",
        db=SCHEMA.db,
        table=SCHEMA.table,
        key={"id": i},
        before=None,
        after=_row(i, "3.00"),
        position=Position(POSITION.file, commit - 100, seq),
        txn=Position.through(POSITION.file, commit),
        last=last,
        prev=Position.through(POSITION.file, prev),
        seq=seq,
    )
    publisher.send(topic, record.to_json(), record.kafka_key())


@pytest.mark.parametrize("budget", [64 << 20, 1], ids=["in-memory", "staged-in-the-target"])
def test_a_transaction_cut_in_two_by_a_batchs_begin_is_applied_whole_after_its_end(sink_pipeline, caplog, budget):
    """The change reader and a full load publish to the same topic: a stream transaction's first records can
    come before the batch's BEGIN and the rest after it. One that commits after the batch's position is
    applied whole after END, and what follows it (a heartbeat while the batch is open, the next transaction)
    follows on: no gap, no republication."""
    # 1 byte: the cut transaction's first records are staged in the target
    pipeline = replace(sink_pipeline, stream=replace(sink_pipeline.stream, max_transaction_memory=budget))
    topic = table_topic(pipeline, pipeline.tables[0])
    ensure_topics(pipeline, [topic])
    publisher = Publisher(pipeline)
    first = _complete(pipeline, publisher, range(1, 6))  # the stream starts at its position, 4000

    _send_change(publisher, topic, 10, 5000, 0, False, prev=3000)  # commits at 5000, after the next batch's 4500
    _send_change(publisher, topic, 11, 5000, 1, False, prev=3000)
    second = Batch(pipeline, publisher).rows(range(1, 4), "2.00")
    _send_change(publisher, topic, 12, 5000, 2, True, prev=3000)
    beat = Heartbeat(Position.through(POSITION.file, 5500), prev=Position.through(POSITION.file, 5000))
    publisher.send(topic, beat.to_json(), b"c", headers=[(CONTROL_HEADER, b"1")])  # the chain goes on from 5500
    _send_change(publisher, topic, 13, 6000, 0, True, prev=5500)
    second.end([(0, 1)], position=Position.through(POSITION.file, 4500))

    with caplog.at_level(logging.WARNING):
        assert _apply(pipeline, first.id, second.id) == {first.id: "committed", second.id: "committed"}
    assert [(r[0], r[1]) for r in _table(pipeline)] == [
        *[(i, "2.00") for i in (1, 2, 3)],
        *[(i, "3.00") for i in (10, 11, 12, 13)],
    ]
    assert not [r.message for r in caplog.records if "missing" in r.message or "lost" in r.message]
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        applied = conn.execute(
            "SELECT pos FROM seam.positions WHERE db = %s AND tbl = %s", (SCHEMA.db, SCHEMA.table)
        ).fetchone()
    assert applied == (6000,)


def test_a_full_load_given_up_by_its_job_leaves_the_table_as_it_was_and_applies_what_it_held(sink_pipeline):
    """A full load whose table changed shape under it can never end (its chunks hold the old columns): the job
    cancels its batch at once. The sink drops what was staged, the table keeps its rows and position, and the
    changes held while the batch was open are applied; before, only a repair could be cancelled, and the
    table's changes waited behind the open batch until load.abandon_after."""
    pipeline = sink_pipeline
    topic = table_topic(pipeline, pipeline.tables[0])
    ensure_topics(pipeline, [topic])
    publisher = Publisher(pipeline)
    first = _complete(pipeline, publisher, range(1, 6))  # at 4000
    given_up = Batch(pipeline, publisher).rows(range(1, 4), "2.00")
    _send_change(publisher, topic, 10, 5000, 0, True, prev=3000)  # held while the batch is open
    given_up.cancel("sink_test.ledger changed shape before it was read (columns n ...): run the full load again")
    assert _apply(pipeline, first.id, given_up.id) == {first.id: "committed", given_up.id: "cancelled"}
    assert [(r[0], r[1]) for r in _table(pipeline)] == [*[(i, "1.00") for i in range(1, 6)], (10, "3.00")]
    assert "changed shape" in _ledger(pipeline, given_up.id)[2]
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        applied = conn.execute(
            "SELECT pos FROM seam.positions WHERE db = %s AND tbl = %s", (SCHEMA.db, SCHEMA.table)
        ).fetchone()
    assert applied == (5000,)


def test_a_topic_lost_with_the_broker_is_read_from_its_new_beginning(pipeline, private_broker):
    """The embedded broker keeps topics in memory: after its restart the stored offset points past the end of
    an empty log that answers nothing. The sink must notice (topic id) and read the new topic from offset 0."""
    pipeline = _sink_pipeline(pipeline, bootstrap=f"127.0.0.1:{private_broker.port('kafka')}")
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    before = _complete(pipeline, Publisher(pipeline), range(1, 50))
    assert _apply(pipeline, before.id) == {before.id: "committed"}

    private_broker.stop("kafka")
    private_broker.up(("kafka",), log=lambda m: None)
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    after = _complete(pipeline, Publisher(pipeline), [500])
    assert _apply(pipeline, after.id) == {after.id: "committed"}
    assert [r[0] for r in _table(pipeline)] == [500]


def _staged_open(pipeline, ids) -> Batch:
    """A batch's BEGIN and rows of these ids (chunk 0), applied by a sink as far as they go: left open."""
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    batch = Batch(pipeline, Publisher(pipeline)).rows(ids)
    batch.publisher.flush()
    sink = Sink(pipeline)
    try:
        sink.run(caught_up=True, deadline=time.time() + 120)
    finally:
        sink.close()
    assert _ledger(pipeline, batch.id)[0] == "open"
    return batch


def test_an_open_batch_goes_on_on_a_topic_the_broker_lost(pipeline, private_broker):
    """A resumed full load (issue 33) after the broker lost its topics (the embedded one, restarted): the
    batch's BEGIN and first chunk were staged, then its other chunk and END arrive on the recreated topic
    without a BEGIN. The sink keeps what was staged (it is the target's) and commits the batch."""
    pipeline = _sink_pipeline(pipeline, bootstrap=f"127.0.0.1:{private_broker.port('kafka')}")
    batch = _staged_open(pipeline, range(1, 50))

    private_broker.stop("kafka")
    private_broker.up(("kafka",), log=lambda m: None)
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    batch.publisher = Publisher(pipeline)
    for i in range(50, 60):
        batch.send(_record(batch.id, "r", None, _row(i)), part=1, attempt=1)
    batch.end([(0, 1), (1, 1)])
    assert _apply(pipeline, batch.id) == {batch.id: "committed"}
    assert [r[0] for r in _table(pipeline)] == list(range(1, 60))


def test_a_batch_left_open_under_another_topic_is_superseded_by_the_next(pipeline):
    """A load interrupted, then the pipeline's topic prefix changed: no sink reads the old topic any more, so
    its open batch would never end (and keep the cascade records). The table's next batch, on the new topic,
    supersedes it: staging dropped, the ledger says why, and a resumed load never continues it here."""
    before, after = _sink_pipeline(pipeline), _sink_pipeline(pipeline)  # a topic prefix each
    left = _staged_open(before, range(1, 10))

    ensure_topics(after, [table_topic(after, after.tables[0])])
    fresh = _complete(after, Publisher(after), [7])
    assert _apply(after, fresh.id) == {left.id: "superseded", fresh.id: "committed"}
    state, _, error = _ledger(pipeline, left.id)
    assert state == "superseded" and fresh.id in error, error
    assert [r[0] for r in _table(pipeline)] == [7]
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        assert conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'seam' AND tablename LIKE %s", (f"%{left.id}",)
        ).fetchone() == (0,)


def test_a_running_sink_reads_a_topic_recreated_under_it_from_its_beginning(pipeline, private_broker):
    """A sink that keeps running while the broker loses its topics (a restart) and they are created again: at
    its old offset it waited until the new log grew past it, then read from the middle of a batch and never
    saw its BEGIN (the streaming sink under `make torture`). It must notice the new topic id and read from 0."""
    pipeline = _sink_pipeline(pipeline, bootstrap=f"127.0.0.1:{private_broker.port('kafka')}")
    topic = table_topic(pipeline, pipeline.tables[0])
    ensure_topics(pipeline, [topic])
    sink = Sink(pipeline)
    stop = threading.Event()
    thread = threading.Thread(target=sink.run, kwargs={"should_stop": stop.is_set}, daemon=True)
    thread.start()

    def committed(batch: str) -> bool:
        deadline = time.monotonic() + 60
        while sink.finished.get(batch) != "committed" and time.monotonic() < deadline and thread.is_alive():
            time.sleep(0.2)
        return sink.finished.get(batch) == "committed"

    try:
        before = _complete(pipeline, Publisher(pipeline), range(1, 50))
        assert committed(before.id)
        private_broker.stop("kafka")
        time.sleep(TOPIC_CHECK_S + 6)  # the sink asks for the topics while the broker is down: it goes on
        assert thread.is_alive(), "the sink stopped while the broker was down"
        private_broker.up(("kafka",), log=lambda m: None)
        ensure_topics(pipeline, [topic])
        after = _complete(pipeline, Publisher(pipeline), range(100, 300))  # its log passes the old offset
        assert committed(after.id), "the running sink did not read the recreated topic from its beginning"
    finally:
        stop.set()
        thread.join(60)
        sink.close()
    assert [r[0] for r in _table(pipeline)] == list(range(100, 300))


class _LosesAnOffsetOnce(Consumer):
    """The real client, in lists of a few messages; the first list that holds another topic's messages is
    preceded by OFFSET_OUT_OF_RANGE for ``lost``. That is Apache Kafka's answer to an offset that retention
    removed; the embedded broker never removes one, so that answer alone is made up here."""

    lost: str = ""

    def consume(self, num_messages=1, timeout=-1):
        taken = super().consume(min(num_messages, 5), timeout)
        if type(self).lost and any(m.topic() != self.lost for m in taken):
            error = Message(topic=self.lost, partition=0, offset=3, error=KafkaError(KafkaError.OFFSET_OUT_OF_RANGE))
            taken, type(self).lost = [error, *taken], ""
        return taken


def test_an_offset_the_broker_no_longer_has_costs_no_other_topic_a_message(pipeline, monkeypatch):
    """A topic whose stored offset is gone is read from its beginning, and every other topic from its stored
    offset. The read-ahead dropped at that moment holds other topics' messages: reading on from the client's
    position lost them, and their batch failed its END check (a reload of a table nothing happened to)."""
    pipeline = _sink_pipeline(pipeline, tables=("ledger", "ledger_b"))
    lost, other = (table_topic(pipeline, t) for t in pipeline.tables)
    ensure_topics(pipeline, [lost, other])
    publisher = Publisher(pipeline)
    first = _complete(pipeline, publisher, range(1, 6))
    assert _apply(pipeline, first.id) == {first.id: "committed"}

    again = _complete(pipeline, publisher, [500])
    bystander = Batch(pipeline, publisher, table=1).rows(range(1, 201))
    bystander.end([(0, 1)])
    _LosesAnOffsetOnce.lost = lost
    monkeypatch.setattr("seam.apply.sink.Consumer", _LosesAnOffsetOnce)
    assert _apply(pipeline, again.id, bystander.id) == {again.id: "committed", bystander.id: "committed"}
    assert not _LosesAnOffsetOnce.lost, "the lost offset was never reported: the test proved nothing"
    assert [r[0] for r in _table(pipeline)] == [500]
    assert [r[0] for r in _table(pipeline, "ledger_b")] == list(range(1, 201))


class _SkipsOffsets(Consumer):
    """The real client, in lists of a few messages, that leaves out of its answers the messages of ``topic`` at
    ``offsets``: the first ``times`` answers that hold them (a broker's fetch that came back short)."""

    topic, offsets, times = "", range(0), 0

    def consume(self, num_messages=1, timeout=-1):
        taken = super().consume(min(num_messages, 5), timeout)
        cls = type(self)
        if cls.times and any(m.topic() == cls.topic and m.offset() in cls.offsets for m in taken):
            cls.times -= 1
            taken = [m for m in taken if not (m.topic() == cls.topic and m.offset() in cls.offsets)]
        return taken


@pytest.mark.parametrize(
    ("times", "state"), [(1, "committed"), (1_000, "rejected")], ids=["left-out-once", "not-in-the-log"]
)
def test_offsets_a_broker_answer_skips_are_read_again(sink_pipeline, monkeypatch, times, state):
    """Seam's topics have no offset gaps. Messages a broker's answer left out once are read again (the
    batch commits, not a reload); a gap that stays (another producer's transaction markers, a compacted topic)
    is let through, and the batch that truly lacks them is rejected at END, as before, not read for ever."""
    pipeline = sink_pipeline
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    batch = _complete(pipeline, Publisher(pipeline), range(1, 101))
    _SkipsOffsets.topic, _SkipsOffsets.offsets = batch.topic, range(40, 43)  # BEGIN is offset 0
    _SkipsOffsets.times = times
    monkeypatch.setattr("seam.apply.sink.Consumer", _SkipsOffsets)
    assert _apply(pipeline, batch.id) == {batch.id: state}
    if state == "committed":
        assert _SkipsOffsets.times == 0, "no answer left the messages out: the test proved nothing"
        assert [r[0] for r in _table(pipeline)] == list(range(1, 101))
    else:
        assert "staged 97 rows" in _ledger(pipeline, batch.id)[2]


def test_a_transaction_left_failed_is_recovered_from(sink_pipeline):
    """A cancel that lands on a COMMIT (the cancel storm of `make faults`: on the sink's heartbeat) leaves the
    session in a failed transaction, where the recovery's own statements failed and the sink exited. The
    recovery must end that transaction first, then apply as before."""
    pipeline = sink_pipeline
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    sink = Sink(pipeline)
    try:
        with pytest.raises(psycopg.errors.DivisionByZero):
            sink.conn.execute("SELECT 1 / 0")
        sink._recover(psycopg.errors.QueryCanceled("canceling statement due to user request"))
        batch = _complete(pipeline, Publisher(pipeline), range(1, 6))
        assert sink.run(until_batches={batch.id}, idle_exit=5) == {batch.id: "committed"}
    finally:
        sink.close()
    assert [r[0] for r in _table(pipeline)] == list(range(1, 6))


def _connects_again_and_applies(pipeline, cuts: list[int], caplog) -> None:
    """A sink whose first session is cut (its pid in ``cuts``) connects again, says so, and applies a batch."""
    with caplog.at_level("WARNING", logger="seam.sink"):
        sink = Sink(pipeline)
    try:
        assert cuts and sink.conn.info.backend_pid != cuts[0]
        assert "the sink's session was lost as it started" in caplog.text
        batch = _complete(pipeline, Publisher(pipeline), range(1, 4))
        assert sink.run(until_batches={batch.id}, idle_exit=5) == {batch.id: "committed"}
    finally:
        sink.close()


def _cut_at_first_call(monkeypatch, owner, name: str, conn_of) -> list[int]:
    """``owner.name``'s first call has PostgreSQL end the session ``conn_of(*args)`` first (its pid goes into
    the list returned, before the cut), then runs as before on the lost session; later calls just run."""
    real, cuts = getattr(owner, name), []

    def cut_once(*args):
        if not cuts:
            conn = conn_of(*args)
            cuts.append(conn.info.backend_pid)
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return real(*args)

    monkeypatch.setattr(owner, name, cut_once)
    return cuts


def test_a_sink_whose_session_is_cut_as_it_starts_connects_again(sink_pipeline, monkeypatch, caplog):
    """A session cut while the sink sets it up (seen in CI: every session of a pipeline terminated while a
    repair's own sink started) is a transient error: the sink connects again, where it exited with a traceback.
    The cut is PostgreSQL's own, on the sink's session, as its state is being ensured."""
    pipeline = sink_pipeline
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    cuts = _cut_at_first_call(monkeypatch, sink_module, "ensure_state", lambda conn, *_: conn)
    _connects_again_and_applies(pipeline, cuts, caplog)
    assert [r[0] for r in _table(pipeline)] == [1, 2, 3]


def _cut_once_made(monkeypatch, pipeline) -> list[int]:
    """The next session Seam makes on the target is cut by PostgreSQL (a DBA's ``pg_terminate_backend`` from
    another session) right after it was made, before Seam has set it up. Returns the list its pid goes into."""
    real_connect, cuts = psycopg.connect, []

    def connect(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        if not cuts:
            cuts.append(conn.info.backend_pid)
            with real_connect(**pipeline.target.conninfo(), autocommit=True) as dba:
                dba.execute("SELECT pg_terminate_backend(%s, 10000)", (cuts[0],))
        return conn

    monkeypatch.setattr(connection_module.psycopg, "connect", connect)
    return cuts


def test_a_session_cut_before_it_is_set_up_is_a_cut_not_an_unreachable_target(sink_pipeline, monkeypatch, caplog):
    """A session cut after it was made but before Seam lifted ``idle_session_timeout`` in it was reported as
    'target ... is unreachable', which nothing retries: seen in CI, a ``seam stream wait`` exited 2 while the
    sink it watched went on. Both the sink and a command's state watch connect again, as after a later cut."""
    pipeline = sink_pipeline
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    cuts = _cut_once_made(monkeypatch, pipeline)
    _connects_again_and_applies(pipeline, cuts, caplog)
    cuts = _cut_once_made(monkeypatch, pipeline)
    said: list[str] = []
    watch = StateWatch(pipeline, said.append)
    try:
        assert cuts and watch.conn.info.backend_pid != cuts[0]
        assert said[0].startswith("lost the target's connection") and said[1:] == ["the target is back"], said
        assert scalar(watch.conn, "SELECT current_setting('idle_session_timeout')") == "0"
    finally:
        watch.close()


def test_a_sink_whose_session_is_cut_as_it_reads_its_offsets_reads_them_again(sink_pipeline, monkeypatch, caplog):
    """A session cut right after the sink connected, as it reads the offsets stored with the data (seen in CI:
    a repair's own sink, every session of the pipeline terminated), is a transient error like the others: the
    sink connects again and reads them, where it exited with a traceback. The cut is PostgreSQL's own."""
    pipeline = sink_pipeline
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    cuts = _cut_at_first_call(monkeypatch, sink_module.positions, "stored_offsets", lambda conn, *_: conn)
    sink = Sink(pipeline)
    try:
        batch = _complete(pipeline, Publisher(pipeline), range(1, 4))
        with caplog.at_level("WARNING", logger="seam.sink"):
            assert sink.run(until_batches={batch.id}, idle_exit=5) == {batch.id: "committed"}
        assert cuts and sink.conn.info.backend_pid != cuts[0]
        assert "the sink's transaction failed" in caplog.text
    finally:
        sink.close()
    assert [r[0] for r in _table(pipeline)] == [1, 2, 3]


def test_a_sink_whose_session_is_cut_as_it_reads_its_open_batches_starts_again(sink_pipeline, monkeypatch, caplog):
    """A session cut right after the sink connected, as it reads which batches are open (seen in CI: a repair's
    own sink exited 2, "the target broke off the command", and the repair gave up), is transient like a cut
    as it connects: the sink connects again and reads them again. The cut is PostgreSQL's own."""
    pipeline = sink_pipeline
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    cuts = _cut_at_first_call(monkeypatch, sink_module.BatchLifecycle, "load_open", lambda lifecycle, _: lifecycle.conn)
    _connects_again_and_applies(pipeline, cuts, caplog)
    assert [r[0] for r in _table(pipeline)] == [1, 2, 3]


def test_a_sink_whose_session_is_cut_while_it_is_idle_goes_on(sink_pipeline, monkeypatch, caplog):
    """The steps of an idle sink that touch the target (held transactions released, stale batches abandoned)
    recover from a cut as an apply does, where the sink exited 2. The cut is PostgreSQL's own."""
    pipeline = sink_pipeline
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    cuts = _cut_at_first_call(monkeypatch, Sink, "_idle", lambda sink: sink.conn)
    sink = Sink(pipeline)
    try:
        with caplog.at_level("WARNING", logger="seam.sink"):
            assert sink.run(idle_exit=1) == {}
        assert cuts and sink.conn.info.backend_pid != cuts[0]
        assert "the sink's transaction failed" in caplog.text
        batch = _complete(pipeline, Publisher(pipeline), range(1, 4))
        assert sink.run(until_batches={batch.id}, idle_exit=5) == {batch.id: "committed"}
    finally:
        sink.close()
    assert [r[0] for r in _table(pipeline)] == [1, 2, 3]


def test_an_open_batch_read_again_from_its_begin_is_staged_once(sink_pipeline):
    """If the topic is read again from before an open batch (offsets reset), its rows must not be staged twice."""
    pipeline = sink_pipeline
    topic = table_topic(pipeline, pipeline.tables[0])
    ensure_topics(pipeline, [topic])
    publisher = Publisher(pipeline)
    batch = Batch(pipeline, publisher).rows(range(1, 11))
    publisher.flush()
    assert _apply(pipeline, batch.id) == {}  # no END yet: staged, open
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        conn.execute("UPDATE seam.offsets SET next_offset = 0 WHERE topic = %s", (topic,))
    batch.end([(0, 1)])
    assert _apply(pipeline, batch.id) == {batch.id: "committed"}
    assert [r[0] for r in _table(pipeline)] == list(range(1, 11))


def test_structured_streaming_sink_applies_batches_and_resumes_from_the_target(sink_pipeline):
    """The Spark Structured Streaming sink (Python Data Source Kafka reader + foreachBatch) commits batches
    as they arrive; restarted with a fresh checkpoint it resumes from the offsets stored in the target."""
    from seam.apply.stream_sink import start_stream_sink
    from seam.spark import spark_session

    pipeline = sink_pipeline
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    publisher = Publisher(pipeline)
    first = _complete(pipeline, publisher, range(1, 21))

    def wait_for(batch_id):
        deadline = time.time() + 120
        while time.time() < deadline:
            state = _ledger(pipeline, batch_id)
            if state and state[0] != "open":
                return state[0]
            time.sleep(0.5)
        raise AssertionError(f"batch {batch_id} not applied by the stream")

    spark = spark_session(pipeline, "seam-test-stream-sink")
    query, sink = start_stream_sink(spark, pipeline, list(pipeline.tables))
    try:
        assert wait_for(first.id) == "committed"
        second = _complete(pipeline, publisher, range(100, 105))
        assert wait_for(second.id) == "committed"
    finally:
        query.stop()
        sink.close()
    assert [r[0] for r in _table(pipeline)] == list(range(100, 105))

    query, sink = start_stream_sink(spark, pipeline, list(pipeline.tables))  # fresh checkpoint: offsets from PG
    try:
        third = _complete(pipeline, publisher, range(200, 203))
        assert wait_for(third.id) == "committed"
        deadline = time.time() + 15  # the commit is in PostgreSQL before Spark reports the micro-batch's progress
        while not sum(p["numInputRows"] for p in query.recentProgress) and time.time() < deadline:
            time.sleep(0.2)
        read = sum(p["numInputRows"] for p in query.recentProgress)
    finally:
        query.stop()
        sink.close()
    assert read == 5, "the restarted stream must read only the new batch (BEGIN, 3 rows, END), nothing again"
    assert [r[0] for r in _table(pipeline)] == [200, 201, 202]
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        states = conn.execute(
            "SELECT batch_id, state FROM seam.batches WHERE batch_id = ANY(%s)", ([first.id, second.id],)
        ).fetchall()
    assert sorted(s for _, s in states) == ["committed", "committed"]


def test_a_batch_whose_load_is_gone_is_abandoned_and_leaves_nothing(sink_pipeline):
    """A load killed as a whole process tree between BEGIN and END (no cleanup ran): after load.abandon_after
    without its rows the sink abandons the batch: its staging tables are dropped, the ledger says why, the
    table keeps its committed data, and a new batch of the table commits. While the command that publishes
    the batch still runs (it holds the batch: ``StateWatch.hold``) the batch is never abandoned, however long
    no rows come (CI: a sink held up for 20 s abandoned all six batches of a live load)."""
    pipeline = replace(sink_pipeline, load=replace(sink_pipeline.load, abandon_after=2.0))
    topic = table_topic(pipeline, pipeline.tables[0])
    ensure_topics(pipeline, [topic])
    publisher = Publisher(pipeline)
    first = _complete(pipeline, publisher, range(1, 6))
    assert _apply(pipeline, first.id) == {first.id: "committed"}
    dead = Batch(pipeline, publisher).rows(range(1, 100))  # its END never comes
    publisher.flush()
    load = StateWatch(pipeline, say=lambda _: None)
    load.hold([dead.id])
    try:
        sink = Sink(pipeline)
        try:
            sink.run(idle_exit=6)  # three times load.abandon_after without a row
        finally:
            sink.close()
        assert _ledger(pipeline, dead.id)[0] == "open", "a batch whose load runs was abandoned"
    finally:
        load.close()  # the load is gone
    sink = Sink(pipeline)
    try:
        sink.run(idle_exit=6)
    finally:
        sink.close()
    state, _, error = _ledger(pipeline, dead.id)
    assert state == "abandoned" and "load.abandon_after" in error and "seam load full sink_test.ledger" in error
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'seam' AND tablename IN (%s, %s)",
            ledger.staging_tables(dead.id),
        ).fetchone()[0]
    assert left == 0
    assert [r[0] for r in _table(pipeline)] == list(range(1, 6))
    again = _complete(pipeline, publisher, range(1, 8))
    assert _apply(pipeline, again.id) == {again.id: "committed"}
    assert [r[0] for r in _table(pipeline)] == list(range(1, 8))


def test_a_loads_own_sink_exits_once_its_load_is_gone_leaving_the_batch_to_resume(sink_pipeline):
    """A load's own sink (`seam sink --until-batch`, in a session of its own) whose load was killed with no
    cleanup (SIGKILL of the command alone, an OOM kill) exits within seconds, and the batch stays open for the
    next run to resume. It used to apply on until its timeout (an hour), holding the table's topic, which a
    stream's sink could not take meanwhile. While the load runs (it holds the batch) the sink stays."""
    pipeline = sink_pipeline
    ensure_topics(pipeline, [table_topic(pipeline, pipeline.tables[0])])
    publisher = Publisher(pipeline)
    open_batch = Batch(pipeline, publisher).rows(range(1, 10))  # its END never comes
    publisher.flush()
    load = StateWatch(pipeline, say=lambda _: None)
    load.hold([open_batch.id])
    sink = Sink(pipeline)
    ended: list[float] = []
    runner = threading.Thread(
        target=lambda: (sink.run(until_batches={open_batch.id}, deadline=time.time() + 120), ended.append(1))
    )
    try:
        runner.start()
        runner.join(2 * TOPIC_CHECK_S + 1)
        assert runner.is_alive(), "the sink of a running load exited"
        load.close()  # the load is gone
        gone = time.monotonic()
        runner.join(60)
        assert ended and time.monotonic() - gone < TOPIC_CHECK_S + 5
    finally:
        load.close()
        runner.join(130)
        sink.close()
    assert _ledger(pipeline, open_batch.id)[0] == "open"
    # the next load would resume it; abandoned here, so that the next test's sink finds no open batch to supersede
    sink = Sink(replace(pipeline, load=replace(pipeline.load, abandon_after=1.0)))
    try:
        sink.run(idle_exit=3)
    finally:
        sink.close()
    assert _ledger(pipeline, open_batch.id)[0] == "abandoned"


def test_a_row_the_target_cannot_hold_rejects_its_batch_not_the_sink(pipeline):
    """A batch row whose value the target's column cannot hold (an amount past DECIMAL(12,2)): its COPY fails.
    The batch is rejected, with why, and the sink goes on: a batch of another table in the same run commits
    (the COPY error crashed the sink, which read the same rows again after each restart: every table stalled)."""
    pipeline = _sink_pipeline(pipeline, tables=("ledger", "other"))
    ensure_topics(pipeline, [table_topic(pipeline, t) for t in pipeline.tables])
    publisher = Publisher(pipeline)
    bad = Batch(pipeline, publisher).rows(range(1, 5))
    bad.send(_record(bad.id, "r", None, _row(5, amount="123456789012345.00")))
    bad.rows(range(6, 9))
    bad.end([(0, 1)])
    good = Batch(pipeline, publisher, table=1).rows([1, 2])
    good.end([(0, 1)])
    assert _apply(pipeline, bad.id, good.id) == {bad.id: "rejected", good.id: "committed"}
    state, _, error = _ledger(pipeline, bad.id)
    assert "a row of it cannot be staged" in error and "numeric field overflow" in error, error
    assert [r[0] for r in _table(pipeline, "other")] == [1, 2]


def test_a_batch_whose_tables_the_target_cannot_make_is_rejected_not_the_sink(pipeline):
    """A BEGIN naming a column PostgreSQL cannot hold (64 bytes: a load refuses such a table before it
    starts, so this BEGIN is not from a load of this version): the batch is rejected with why, and the sink
    goes on with the other tables (it crashed at the BEGIN, and again after every restart)."""
    pipeline = _sink_pipeline(pipeline, tables=("ledger", "other"))
    ensure_topics(pipeline, [table_topic(pipeline, t) for t in pipeline.tables])
    publisher = Publisher(pipeline)
    columns = (*SCHEMA.columns, Column("c" * 64, "int", "int", True))
    bad = Batch(pipeline, publisher, columns=columns).rows(range(1, 5))
    bad.end([(0, 1)])
    good = Batch(pipeline, publisher, table=1).rows([1, 2])
    good.end([(0, 1)])
    assert _apply(pipeline, bad.id, good.id) == {bad.id: "rejected", good.id: "committed"}
    state, _, error = _ledger(pipeline, bad.id)
    assert "its staging tables cannot be made in the target" in error and "63-byte" in error, error
    assert [r[0] for r in _table(pipeline, "other")] == [1, 2]
