"""The Structured Streaming sink: ``seam.wire.kafka_source`` micro-batches applied by
``seam.apply.sink.Sink`` in ``foreachBatch`` (BEGIN/END batches and change events
alike, one PostgreSQL transaction per micro-batch with the offsets).

Delivery guarantee: exactly once into PostgreSQL; the stream starts from the
offsets stored in the target and a replayed micro-batch changes nothing.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import threading
import time
from pathlib import Path

from seam.apply.decode import arrow_rows
from seam.apply.sink import Sink
from seam.config import state_dir
from seam.core.pipeline import Pipeline, TableConfig
from seam.wire.kafka_source import SeamKafkaSource
from seam.wire.topics import receive_limit

log = logging.getLogger("seam.sink")


def start_stream_sink(
    spark, pipeline: Pipeline, tables: list[TableConfig], trigger_seconds: float = 0.1, source: str = "seam"
):
    """Start the query; ``source="kafka"`` uses Spark's own Kafka source instead of ``seam_kafka`` (it needs
    the spark-sql-kafka jar, not installable here: untested on the embedded stack, and it cannot see a topic
    recreated by the broker, which ``seam_kafka`` follows by topic id)."""
    sink = Sink(pipeline, tables)
    start = sink.start_offsets()
    if source == "kafka":
        from pyspark.sql import functions as F

        headers = F.transform("headers", lambda h: F.struct(h["key"], h["value"].cast("string")))
        stream = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", pipeline.kafka.bootstrap)
            .option("assign", json.dumps({t: [0] for t in start}))
            .option("startingOffsets", json.dumps({t: {"0": o} for t, (_, o) in start.items()}))
            .option("includeHeaders", "true")
            .option("failOnDataLoss", "false")
            .load()
            .select(
                "topic",
                F.lit("").alias("topic_id"),
                "offset",
                "key",
                "value",
                F.coalesce(F.to_json(F.map_from_entries(headers)), F.lit("{}")).alias("headers"),
            )
        )
    else:
        spark.dataSource.register(SeamKafkaSource)
        stream = (
            spark.readStream.format("seam_kafka")
            .option("bootstrap", pipeline.kafka.bootstrap)
            .option("topics", json.dumps(sorted(start)))
            .option("start", json.dumps(start))
            .option("receiveMessageMaxBytes", str(receive_limit(pipeline)))
            .load()
        )
    query = (
        stream.writeStream.foreachBatch(lambda frame, _: _apply_micro_batch(sink, frame))
        .option("checkpointLocation", str(checkpoint_dir()))
        .trigger(processingTime=f"{trigger_seconds} seconds")
        .start()
    )
    return query, sink


def run_stream_sink(spark, pipeline: Pipeline, tables: list[TableConfig], source: str = "seam") -> None:
    """The query until it fails or SIGTERM: then it is stopped between micro-batches (the one running
    finishes, or is rolled back with its offsets), and Spark after it; nothing is left for a kill to cut."""
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    query, sink = start_stream_sink(spark, pipeline, tables, source=source)
    try:
        while not stopping.is_set() and query.isActive:
            query.awaitTermination(1.0)
        if stopping.is_set():
            log.info("stopping: the stream sink's query ends after its micro-batch")
            query.stop()
        else:
            query.awaitTermination()  # raises the query's error
    finally:
        sink.close()
        shutil.rmtree(checkpoint_dir(), ignore_errors=True)


def checkpoint_dir() -> Path:
    """A new Spark checkpoint for each start of the query, under the state dir. Spark needs one, but the
    offsets that count are the target's: a checkpoint is never read again (a query started again in the same
    process starts from the target, not from where the last one's checkpoint ended), and those of processes
    that ended are removed."""
    base = state_dir() / "checkpoints"
    base.mkdir(parents=True, exist_ok=True)
    for old in base.glob("stream-*"):
        pid = old.name.removeprefix("stream-").split("-")[0]
        if not (pid.isdigit() and Path(f"/proc/{pid}").exists()):
            shutil.rmtree(old, ignore_errors=True)
    return base / f"stream-{os.getpid()}-{time.time_ns()}"


def _apply_micro_batch(sink: Sink, frame) -> None:
    """One micro-batch: fetched as Arrow (columns, not a Row per message), applied in one transaction."""
    began = time.perf_counter()
    rows = arrow_rows(frame.toArrow())
    fetched = time.perf_counter()
    sink.apply_rows(rows)
    if rows:
        log.debug(
            "micro-batch of %d messages: fetched in %.2fs, applied in %.2fs",
            len(rows),
            fetched - began,
            time.perf_counter() - fetched,
        )
