"""The Structured Streaming sink: ``seam.kafka_source`` micro-batches applied by
``seam.sink.Sink`` in ``foreachBatch`` (BEGIN/END batches and change events
alike, one PostgreSQL transaction per micro-batch with the offsets).

Delivery guarantee: exactly once into PostgreSQL; the stream starts from the
offsets stored in the target and a replayed micro-batch changes nothing.
"""
from __future__ import annotations

import json
import tempfile

from seam.config import Pipeline, TableConfig
from seam.kafka_source import SeamKafkaSource
from seam.sink import Sink


def start_stream_sink(spark, pipeline: Pipeline, tables: list[TableConfig], trigger_seconds: float = 1.0):
    sink = Sink(pipeline, tables)
    start = sink.start_offsets()
    spark.dataSource.register(SeamKafkaSource)
    stream = (spark.readStream.format("seam_kafka").option("bootstrap", pipeline.kafka.bootstrap)
              .option("topics", json.dumps(sorted(start))).option("start", json.dumps(start)).load())
    query = (stream.writeStream.foreachBatch(lambda frame, _: sink.apply_rows(frame.collect()))
             .option("checkpointLocation", tempfile.mkdtemp(prefix="seam-stream-"))  # the target holds the offsets
             .trigger(processingTime=f"{trigger_seconds} seconds").start())
    return query, sink
