"""The full load, publishing side: snapshot a table in parallel with Spark,
reconcile the chunks to one binlog position, and publish the batch to the
table's topic between BEGIN and END (see ``seam.source.snapshot`` for the method and
``seam.wire.boundary`` for the protocol).

One Spark task per chunk reads it with the C MySQL client in its own
consistent snapshot (the source builds each row's JSON, see
``snapshot.chunk_sql``) and publishes its rows straight from the executor (one
idempotent producer per Python worker, flushed before the task reports
success); it returns the chunk's snapshot position, row count and checksum.
The driver then publishes the reconciliation changes and END, which names, per
chunk, the task attempt whose output counts. Rows never pass through the JVM:
Spark schedules, retries and scales out the reads, the bytes go from MariaDB
to Kafka in one Python process.

Resumable: BEGIN carries the chunk plan, and each task publishes a PART
message after its chunk's rows, which the sink records with the staged rows.
A load started again for a table whose batch is still open (``Resume``, from
``seam.loads``) keeps the chunks published whole and staged, reads only the
others (as new attempts, so a dead run's partial output is discarded like a
failed task's), and ends the same batch at one position: the kept chunks'
snapshot positions take part in the reconciliation like the new ones.

Delivery guarantee: at-least-once into Kafka, exactly-once as a batch: a
batch whose END was not published (the job died) is never applied, a retried
task's extra output is discarded by the sink using END's attempt list.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any, cast
from zlib import crc32  # boundary.message_hash, inlined in the hot loop

import pymysql

from seam.core.errors import raised_in_a_task
from seam.core.pipeline import Pipeline, TableConfig
from seam.core.position import Position
from seam.core.schema import SchemaError, TableSchema
from seam.source.checks import check_key_values, check_names, check_source, check_streamable
from seam.source.gtid import gtids_enabled, server_identity
from seam.source.gtid_positions import gtids_at, head_gtids
from seam.source.head import binlog_files
from seam.source.publication import Publication
from seam.source.row_json import RowJson, RowNotRendered
from seam.source.schema import read_schema
from seam.source.snapshot import (
    Chunk,
    ChunkPlan,
    ChunkRead,
    Opening,
    ShapeChangeError,
    SnapshotError,
    canonical_json_columns,
    chunk_sql,
    plan_chunks,
    read_chunk,
    reconcile,
    snapshot_opening,
    snapshot_position,
    source_head,
)
from seam.wire.boundary import (
    CONTROL_HEADER,
    FRAME_KEY,
    RECONCILE_PART,
    ROWS_KEY,
    End,
    Part,
    PartDone,
    Tally,
    blocks,
    frame_blocks,
)
from seam.wire.codecs import json_document
from seam.wire.records import no_cyclic_gc, record_json
from seam.wire.sink_pace import SinkPace
from seam.wire.topics import Publisher

CONTROL = [(CONTROL_HEADER, b"1")]


@dataclass(frozen=True)
class Resume:
    """An open batch of the table to continue: its chunk plan and the chunks kept (published whole, staged)."""

    plan: ChunkPlan
    kept: tuple[Part, ...]

    def to_json(self) -> str:
        return json.dumps({"plan": plan_json(self.plan), "kept": [asdict(p) for p in self.kept]})

    @classmethod
    def from_json(cls, text: str) -> Resume:
        doc = json.loads(text)
        return cls(plan_from_json(doc["plan"]), tuple(Part(**p) for p in doc["kept"]))


@dataclass(frozen=True)
class Published:
    """What a Spark job of chunks returns: a Part per chunk, and the seconds its tasks waited for the sink
    (``seam.wire.sink_pace``), with how many stopped waiting because the sink's report stalled."""

    parts: list[Part]
    waited_s: float = 0.0
    stalled: int = 0

    def pacing(self) -> str:
        """For the load's log: '' when the tasks did not wait."""
        if self.waited_s < 0.1 and not self.stalled:
            return ""
        return f"; tasks waited {self.waited_s:.1f}s for the sink" + (
            f" ({self.stalled} stopped waiting: its report stalled)" if self.stalled else ""
        )


def plan_json(plan: ChunkPlan) -> dict[str, Any]:
    return {"column": plan.column, "chunks": [[c.index, c.lo, c.hi] for c in plan.chunks]}


def plan_from_json(doc: dict[str, Any]) -> ChunkPlan:
    return ChunkPlan(doc["column"], tuple(Chunk(*c) for c in doc["chunks"]))


def prepare(pipeline: Pipeline, table: TableConfig) -> tuple[TableSchema, ChunkPlan, Opening]:
    """Read and check the source table: schema, configured key, binlog settings, privileges, chunks, and how
    each chunk opens its snapshot (``seam.source.snapshot``: the method, and what the portable one locks)."""
    try:
        conn = pymysql.connect(**pipeline.source.pymysql_kwargs(), connect_timeout=10)
    except pymysql.err.OperationalError as exc:
        raise SnapshotError(
            f"source MySQL at {pipeline.source.host}:{pipeline.source.port} refused or is "
            f"unreachable ({exc.args[-1]}): start it (`seam up mysql`) or fix the pipeline's "
            "source"
        ) from None
    try:
        schema = read_schema(conn, table.db, table.table)
        missing = [k for k in table.key if k not in schema.names]
        if missing:
            raise SchemaError(
                f"{table.name}: key column(s) {', '.join(missing)} are not in the table "
                f"(columns: {', '.join(schema.names)}); fix tables[].key in the pipeline"
            )
        check_names(schema)
        check_source(conn, schema)
        if not table.incremental:
            check_streamable(conn, schema)
        check_key_values(conn, schema, table.key)
        # InnoDB's cascades into this table are not in the binlog, so chunks read at different positions could
        # not be reconciled: a child of a cascading key is read in one consistent snapshot
        opening = snapshot_opening(conn, pipeline, table)
        cascaded = opening.exact and bool(table.key)
        partitions = 1 if cascaded else pipeline.spark.partitions
        return schema, plan_chunks(conn, schema, table.key, partitions, pipeline.spark.min_chunk_rows), opening
    finally:
        conn.close()


def publish_full_load(
    spark,
    pipeline: Pipeline,
    table: TableConfig,
    batch: str,
    say: Callable[[str], None] = print,
    resume: Resume | None = None,
) -> End:
    """Publish a full load of ``table`` as ``batch`` (``resume``: continue that open batch). Its length: the
    publishing sequence in its order (BEGIN, the chunks, the batch's position, reconciliation, END)."""
    started = time.time()
    schema, plan, opening = prepare(pipeline, table)
    publication = Publication(pipeline, table, batch)
    kept: tuple[Part, ...] = ()
    if resume is not None:
        plan, kept = resume.plan, resume.kept
        say(f"{table.name}: batch {batch} resumed: {len(kept)} of {len(plan.chunks)} chunks kept")
    else:
        say(
            f"{table.name}: batch {batch}, {len(plan.chunks)} chunk(s)"
            + (
                f" on {plan.column}"
                if plan.column
                else " (one consistent chunk: no integer key, or a child of a cascading foreign key)"
            )
        )
        publication.begin("full", schema, plan=plan_json(plan))

    done = {p.part for p in kept}
    with _given_up_if_reshaped(publication):  # its chunks hold the old columns: nothing of the batch can be kept
        published = publish_chunks(
            spark,
            pipeline=pipeline,
            topic=publication.topic,
            schema=schema,
            plan=ChunkPlan(plan.column, tuple(c for c in plan.chunks if c.index not in done)),
            key=table.key,
            batch=batch,
            ts_ms=int(started * 1000),
            opening=opening,
            # a dead run's partial output of a chunk must not count as this run's: its attempts differ
            attempt_base=int(started) << 20 if resume is not None else 0,
        )
    parts = list(kept) + published.parts
    read_done = time.time()
    if sorted(p.part for p in parts) != [c.index for c in plan.chunks]:
        raise SnapshotError(f"chunks reported {sorted(p.part for p in parts)}, expected one per chunk")
    positions = {p.part: snapshot_position(p.file, p.pos, schema) for p in parts}
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs())
    try:
        files = binlog_files(conn)
        # low watermarks: the batch's position is the head now, after every chunk's snapshot opened
        if opening.exact or opening.method == "mariadb":
            target = max(positions.values())
            gtids = gtids_at(conn, target, pipeline.source) if gtids_enabled(conn) else None
        else:
            target, gtids = head_gtids(conn)
            target = target or source_head(conn)  # (which says what is wrong when there is no binlog)
        server = server_identity(conn)  # with the set, a stream can resume from it on a replica (seam.source.gtid)
    finally:
        conn.close()
    say(
        f"{table.name}: {sum(p.rows for p in parts):,} rows read in {read_done - started:.1f}s ({opening.method} "
        f"snapshot{published.pacing()}); chunk positions "
        + ", ".join(str(positions[i]) for i in sorted(positions))
        + f"; batch position {target}"
    )

    with _given_up_if_reshaped(publication):
        changes = _reconcile(pipeline, table, schema, plan, positions, target, files, publication, resume)
    parts.append(Part(RECONCILE_PART, 0, changes.rows, changes.checksum))
    end = publication.end(
        "full",
        target,
        parts,
        gtids=str(gtids) if gtids and gtids.flavour else None,
        server=server,
        stats={
            "snapshot_ms": int(started * 1000),  # the table is current as of then at least
            "read_s": round(read_done - started, 3),
            "waited_for_sink_s": round(published.waited_s, 3),
            "reconciled_changes": changes.rows,
            "publish_s": round(time.time() - started, 3),
        },
    )
    say(
        f"{table.name}: published {end.rows:,} messages ({changes.rows} reconciliation change(s)) in "
        f"{time.time() - started:.1f}s; END sent"
    )
    return end


@contextlib.contextmanager
def _given_up_if_reshaped(publication: Publication) -> Iterator[None]:
    """A table that changed shape under its load: the batch can never end, so it is cancelled at once (the sink
    drops it and applies the changes it held) instead of being left open for a run that would resume it."""
    try:
        yield
    except ShapeChangeError as exc:
        publication.cancel("full", str(exc))
        raise


def _reconcile(pipeline, table, schema, plan, positions, target, files, publication, resume) -> Tally:
    """The changes between the chunks' snapshots and the batch's position, published as the reconciliation
    part; a resumed batch whose kept chunks cannot be reconciled says to start afresh."""
    changes = Tally()
    if not any(target.after(p) for p in positions.values()):
        return changes
    try:
        if min(positions.values()).file not in files:
            raise SnapshotError(
                f"binlog {min(positions.values()).file} was purged during the load; re-run it "
                "and keep binlogs longer (binlog_expire_logs_seconds)"
            )
        for record in reconcile(pipeline.source, schema, table.key, plan, positions, target, publication.batch):
            value = replace(record, part=RECONCILE_PART, attempt=0).to_json()
            publication.send(value, record.kafka_key())
            changes.add(value)
    except SnapshotError as exc:
        if resume is None or isinstance(exc, ShapeChangeError):  # (a shape change gives the batch up)
            raise
        # run again, the load would resume the same batch and meet the same: the kept chunks are the cause
        raise SnapshotError(
            f"{exc} (this load resumed batch {publication.batch}, whose kept chunks were read before that: start "
            f"afresh with `seam load full {table.name} --restart`)"
        ) from None
    return changes


def publish_chunks(
    spark,
    *,
    pipeline: Pipeline,
    topic: str,
    schema: TableSchema,
    plan: ChunkPlan,
    key: tuple[str, ...],
    batch: str,
    ts_ms: int,
    window: str | None = None,
    opening: Opening | None = None,
    attempt_base: int = 0,
) -> Published:
    """The Spark job: one task per chunk reads it in its own snapshot and publishes its rows; one Part each.
    ``opening`` None: no position (an incremental window)."""
    if not plan.chunks:
        return Published([])
    rows = RowJson.of(schema, key)
    reads = [ChunkRead(c.index, chunk_sql(schema, plan, c, rows, window), rows, opening, schema) for c in plan.chunks]
    task = functools.partial(
        _publish_chunk,
        pipeline=pipeline,
        topic=topic,
        db=schema.db,
        table=schema.table,
        batch=batch,
        ts_ms=ts_ms,
        keyed=bool(key),
        json_columns=canonical_json_columns(schema),
        attempt_base=attempt_base,
    )
    try:
        done = spark.sparkContext.parallelize(reads, len(reads)).mapPartitions(task).collect()
    except Exception as exc:
        raised = raised_in_a_task(exc, (ShapeChangeError,))  # a chunk's SnapshotError (a privilege): one line
        if raised is None:
            raise
        raise raised from None
    return Published([part for part, _, _ in done], sum(w for _, w, _ in done), sum(1 for _, _, off in done if off))


def record_frame(
    db: str,
    table: str,
    batch: str,
    ts_ms: int,
    snapshot: bool,
    file: str | None,
    pos: int | None,
    part: int,
    attempt: int,
) -> tuple[bytes, bytes, bytes]:
    """(head, middle, tail): ``head + key + middle + after + tail`` is ``records.record_json`` of a snapshot row,
    byte for byte; the task renders key and after (``row_json``), this function the rest."""
    # private-use placeholders where the key and image dicts go, cut out again below
    key: Any = "\ue000"
    after: Any = "\ue001"
    text = record_json(
        "r",
        db,
        table,
        key,
        None,
        after,
        Position(cast(str, file), cast(int, pos), 0),  # None without a binlog position: the record says null
        snapshot,
        batch,
        None,
        ts_ms,
        part=part,
        attempt=attempt,
    )
    head, rest = text.split(json.dumps(key, ensure_ascii=False).encode())
    middle, tail = rest.split(json.dumps(after, ensure_ascii=False).encode())
    return head, middle, tail


def _publish_chunk(
    reads,
    *,
    pipeline: Pipeline,
    topic: str,
    db: str,
    table: str,
    batch: str,
    ts_ms: int,
    keyed: bool,
    json_columns: list[str],
    attempt_base: int,
):
    """Runs on an executor for one chunk: read and publish its rows, return its position, count and
    checksum, with the seconds it waited for the sink and whether it stopped waiting.

    The task renders each row's key and image as JSON from the columns' text (``row_json``, compiled); rows go
    many to a message, in a frame (``boundary``: blocks), with the CRCs of their records, all in C."""
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None  # runs as a Spark task
    attempt = attempt_base + context.taskAttemptId()
    publisher = Publisher.shared(pipeline, topic)
    publisher.flush()  # nothing of an earlier (failed) task may be counted in this one
    pace = SinkPace(pipeline, topic)
    try:
        for read in reads:
            waited = pace.waited_s
            with no_cyclic_gc():
                part = _publish_read(
                    read,
                    pipeline,
                    publisher,
                    pace,
                    topic=topic,
                    db=db,
                    table=table,
                    batch=batch,
                    ts_ms=ts_ms,
                    attempt=attempt,
                    keyed=keyed,
                    json_columns=json_columns,
                )
            yield part, pace.waited_s - waited, pace.off
    finally:
        pace.close()


def _publish_read(
    read: ChunkRead,
    pipeline: Pipeline,
    publisher: Publisher,
    pace: SinkPace,
    *,
    topic: str,
    db: str,
    table: str,
    batch: str,
    ts_ms: int,
    attempt: int,
    keyed: bool,
    json_columns: list[str],
) -> Part:
    tally = Tally()
    head = file = pos = None
    sent = 0  # messages: blocks of rows (``boundary.blocks``)
    try:
        for file, pos, rows in read_chunk(pipeline.source, read):
            if head is None:
                head, middle, tail = record_frame(
                    db, table, batch, ts_ms, read.snapshot, file, pos, read.index, attempt
                )
            if not rows:
                continue
            if json_columns:  # records re-serialised whole (canonical JSON documents), in blocks of records
                values = [head + (k if keyed else a) + middle + a + tail for a, k in rows]
                values = [_canonical_json_values(v, json_columns) for v in values]
                crcs, messages, key = sum(map(crc32, values)), blocks(values), ROWS_KEY
            else:
                messages, crcs = frame_blocks(rows, keyed, head, middle, tail)
                key = FRAME_KEY
            if tally.rows:  # not far past what the sink staged, that being what a kill loses (a small chunk never asks)
                pace.wait(publisher.queued(), tally.rows / sent)
            publisher.send_many(topic, messages, [key] * len(messages))
            tally.add_many(len(rows), crcs)
            sent += len(messages)
    except RowNotRendered as exc:  # never publish a row as null
        raise SnapshotError(
            f"{db}.{table}: the source returned a row of chunk {read.index} that is not its JSON ({exc}: a row "
            "larger than max_allowed_packet, or a value MariaDB cannot print); raise max_allowed_packet "
            "(SET GLOBAL) and re-run the load"
        ) from None
    publisher.flush()
    part = Part(read.index, attempt, tally.rows, tally.checksum, file, pos)
    publisher.send(topic, PartDone(batch, db, table, part).to_json(), b"__seam_control__", headers=CONTROL)
    publisher.flush()
    return part


def _canonical_json_values(value: bytes, columns: list[str]) -> bytes:
    """Re-serialise a record whose JSON columns hold documents as stored (key order, spaces, numbers as printed)
    in their record form (``json_document``)."""
    doc = json.loads(value)
    for name in columns:
        text = doc["after"][name]
        if text is not None:
            doc["after"][name] = json_document(text)
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
