"""The full load, publishing side: snapshot a table in parallel with Spark,
reconcile the chunks to one binlog position, and publish the batch to the
table's topic between BEGIN and END (see ``seam.snapshot`` for the method and
``seam.boundary`` for the protocol).

Spark tasks publish their chunk's rows straight from the executors (one
idempotent producer per task, flushed before the task reports success) and
return the chunk's snapshot position, row count and checksum; the driver then
publishes the reconciliation changes and END, which names, per chunk, the task
attempt whose output counts.

Delivery guarantee: at-least-once into Kafka, exactly-once as a batch: a
batch whose END was not published (the job died) is never applied, a retried
task's extra output is discarded by the sink using END's attempt list.
"""
from __future__ import annotations

import functools
import json
import time
from dataclasses import asdict
from typing import Callable

import pymysql

from seam.boundary import (ATTEMPT_HEADER, CONTROL_HEADER, PART_HEADER, RECONCILE_PART, Begin, End, Part, Tally)
from seam.config import Pipeline, TableConfig
from seam.records import FORMAT_VERSION
from seam.schema import SchemaError, TableSchema, read_schema
from seam.snapshot import (ChunkPlan, SnapshotError, binlog_files, canonical_json_columns, check_source, chunk_sql,
                           plan_chunks, reconcile, snapshot_position)
from seam.spark import jdbc_options
from seam.topics import Publisher, ensure_topics, table_topic

CONTROL = [(CONTROL_HEADER, b"1")]


def prepare(pipeline: Pipeline, table: TableConfig) -> tuple[TableSchema, ChunkPlan]:
    """Read and check the source table: schema, configured key, binlog settings, privileges, chunks."""
    try:
        conn = pymysql.connect(**pipeline.source.pymysql_kwargs(), connect_timeout=10)
    except pymysql.err.OperationalError as exc:
        raise SnapshotError(f"source MySQL at {pipeline.source.host}:{pipeline.source.port} refused or is "
                            f"unreachable ({exc.args[-1]}): start it (`seam up mysql`) or fix the pipeline's "
                            "source") from None
    try:
        schema = read_schema(conn, table.db, table.table)
        missing = [k for k in table.key if k not in schema.names]
        if missing:
            raise SchemaError(f"{table.name}: key column(s) {', '.join(missing)} are not in the table "
                              f"(columns: {', '.join(schema.names)}); fix tables[].key in the pipeline")
        check_source(conn, schema)
        return schema, plan_chunks(conn, schema, table.key, pipeline.spark.partitions)
    finally:
        conn.close()


def publish_full_load(spark, pipeline: Pipeline, table: TableConfig, batch: str,
                      say: Callable[[str], None] = print) -> End:
    started = time.time()
    schema, plan = prepare(pipeline, table)
    topic = table_topic(pipeline, table)
    ensure_topics(pipeline, [topic])
    say(f"{table.name}: batch {batch}, {len(plan.chunks)} chunk(s)"
        + (f" on {plan.column}" if plan.column else " (no integer key: one consistent chunk)"))
    driver = Publisher(pipeline)
    begin = Begin(batch=batch, db=table.db, table=table.table, mode="full",
                  columns=[asdict(c) for c in schema.columns], key=list(table.key))
    driver.send(topic, begin.to_json(), b"__seam_control__", headers=CONTROL)
    driver.flush()

    options = {**jdbc_options(pipeline), "sessionInitStatement": "START TRANSACTION WITH CONSISTENT SNAPSHOT"}
    frames = [spark.read.format("jdbc").options(**options, dbtable=chunk_sql(schema, plan, c)).load()
              for c in plan.chunks]
    frame = _records(functools.reduce(lambda a, b: a.unionAll(b), frames), schema, table.key, batch,
                     int(started * 1000))
    publish = functools.partial(_publish_chunk, pipeline=pipeline, topic=topic,
                                json_columns=canonical_json_columns(schema))
    results = frame.mapInArrow(publish, "part int, attempt long, file string, pos long, rows long, "
                                        "checksum string").collect()
    read_done = time.time()
    if sorted(r.part for r in results) != [c.index for c in plan.chunks]:
        raise SnapshotError(f"chunks reported {sorted(r.part for r in results)}, expected one per chunk")
    parts = [Part(r.part, r.attempt, r.rows, int(r.checksum), r.file, r.pos) for r in results]
    positions = {p.part: snapshot_position(p.file, p.pos, schema) for p in parts}
    target = max(positions.values())
    say(f"{table.name}: {sum(p.rows for p in parts):,} rows read in {read_done - started:.1f}s; chunk positions "
        + ", ".join(str(positions[i]) for i in sorted(positions)) + f"; batch position {target}")

    changes = Tally()
    if len(set(positions.values())) > 1:
        conn = pymysql.connect(**pipeline.source.pymysql_kwargs())
        try:
            files = binlog_files(conn)
        finally:
            conn.close()
        if min(positions.values()).file not in files:
            raise SnapshotError(f"binlog {min(positions.values()).file} was purged during the load; re-run it "
                                "and keep binlogs longer (binlog_expire_logs_seconds)")
        headers = [(PART_HEADER, str(RECONCILE_PART).encode()), (ATTEMPT_HEADER, b"0")]
        for record in reconcile(pipeline.source, schema, table.key, plan, positions, target, batch):
            value = record.to_json()
            driver.send(topic, value, record.kafka_key(), headers=headers)
            changes.add(value)
    parts.append(Part(RECONCILE_PART, 0, changes.rows, changes.checksum))
    total = functools.reduce(Tally.merge, (Tally(p.rows, p.checksum) for p in parts), Tally())
    end = End(batch=batch, db=table.db, table=table.table, mode="full", position=target, parts=parts,
              rows=total.rows, checksum=total.checksum,
              stats={"read_s": round(read_done - started, 3), "reconciled_changes": changes.rows,
                     "publish_s": round(time.time() - started, 3)})
    driver.send(topic, end.to_json(), b"__seam_control__", headers=CONTROL)
    driver.flush()
    say(f"{table.name}: published {total.rows:,} messages ({changes.rows} reconciliation change(s)) in "
        f"{time.time() - started:.1f}s; END sent")
    return end


def _records(frame, schema: TableSchema, key: tuple[str, ...], batch: str, ts_ms: int, snapshot: bool = True):
    """Each row as its serialised record and Kafka key, built in the JVM (the source already made every value
    canonical, see ``snapshot.column_sql``); the same bytes ``records.record_json`` would produce."""
    from pyspark.sql import functions as F

    options = {"ignoreNullFields": "false"}
    alias = {name: f"c{i}" for i, name in enumerate(schema.names)}
    after = F.to_json(F.struct(*[F.col(alias[n]).alias(n) for n in schema.names]), options)
    record_key = F.to_json(F.struct(*[F.col(alias[k]).alias(k) for k in key]), options) if key else after
    kafka_key = F.to_json(F.struct(*[F.col(alias[k]).alias(k) for k in sorted(key or schema.names)]), options)

    def text(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)

    position = [F.lit('"file":"'), F.col("_snap_file"), F.lit('","pos":'), F.col("_snap_pos")] if snapshot \
        else [F.lit('"file":null,"pos":null')]  # an incremental window is a query, not a binlog snapshot
    value = F.concat(
        F.lit(f'{{"v":{FORMAT_VERSION},"op":"r","ts_ms":{ts_ms},"key":'), record_key,
        F.lit(',"before":null,"after":'), after,
        F.lit(f',"source":{{"db":{text(schema.db)},"table":{text(schema.table)},"snapshot":{str(snapshot).lower()},'
              f'"batch":{text(batch)},'), *position,
        F.lit(',"row":0,"gtid":null}}'))
    value = value.cast("binary")
    return frame.select("_seam_part", "_snap_file", "_snap_pos", "_seam_row", value.alias("value"),
                        kafka_key.cast("binary").alias("key"), F.crc32(value).alias("crc"))


def _publish_chunk(batches, *, pipeline: Pipeline, topic: str, json_columns: list[str]):
    """Runs on an executor for one chunk: publish its rows, return its position, count and checksum."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark import TaskContext

    attempt = TaskContext.get().taskAttemptId()
    publisher = Publisher.shared(pipeline)
    publisher.flush()  # nothing of an earlier (failed) task may be counted in this one
    tally = Tally()
    part = file = pos = None
    headers = None
    for rb in batches:
        if not rb.num_rows:
            continue
        if part is None:
            part = rb.column("_seam_part")[0].as_py()
            file, pos = rb.column("_snap_file")[0].as_py(), rb.column("_snap_pos")[0].as_py()
            headers = [(PART_HEADER, str(part).encode()), (ATTEMPT_HEADER, str(attempt).encode())]
        if rb.column("_seam_row").null_count == rb.num_rows:  # the marker row of an empty chunk
            continue
        values, keys = rb.column("value").to_pylist(), rb.column("key").to_pylist()
        if json_columns:
            for value, key in zip(values, keys):
                value = _canonical_json_values(value, json_columns)
                publisher.send(topic, value, key, headers=headers)
                tally.add(value)
        else:
            for value, key in zip(values, keys):
                publisher.send(topic, value, key, headers=headers)
            tally.add_many(len(values), int(pc.sum(rb.column("crc")).as_py() or 0))
    publisher.flush()
    yield pa.RecordBatch.from_pydict({"part": [part], "attempt": [attempt], "file": [file],
                                      "pos": [int(pos) if pos is not None else None], "rows": [tally.rows],
                                      "checksum": [str(tally.checksum)]},
                                     schema=pa.schema([("part", pa.int32()), ("attempt", pa.int64()),
                                                       ("file", pa.string()), ("pos", pa.int64()),
                                                       ("rows", pa.int64()), ("checksum", pa.string())]))


def _canonical_json_values(value: bytes, columns: list[str]) -> bytes:
    """Re-serialise a record whose JSON columns hold documents as stored (key order, spaces) canonically."""
    doc = json.loads(value)
    for name in columns:
        text = doc["after"][name]
        if text is not None:
            doc["after"][name] = json.dumps(json.loads(text), sort_keys=True, ensure_ascii=False,
                                            separators=(",", ":"))
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
