"""A Kafka source for Spark Structured Streaming written with PySpark's Python
Data Source API and confluent-kafka (Spark's own ``format("kafka")`` needs a
jar from Maven; deployments that have it can use it instead: the sink only
needs topic, offset, key, value and headers).

Offsets are ``{topic: next_offset}``. The stream starts from the offsets the
sink stored in the target (``start`` option), not from a Spark checkpoint:
the target is the system of record.

Delivery guarantee: at-least-once (a micro-batch may be read again after a
failure, deterministically, by ``readBetweenOffsets``); the sink skips what it
has already applied.
"""
from __future__ import annotations

import json

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

SCHEMA = "topic string, offset long, key binary, value binary, headers string"


class SeamKafkaSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "seam_kafka"

    def schema(self) -> str:
        return SCHEMA

    def simpleStreamReader(self, schema):
        return _TopicReader(self.options)


class _TopicReader(SimpleDataSourceStreamReader):
    def __init__(self, options):
        self.bootstrap = options["bootstrap"]
        self.topics = json.loads(options["topics"])
        self.start = json.loads(options.get("start", "{}"))
        self.max_messages = int(options.get("maxMessages", "50000"))

    def initialOffset(self) -> dict:
        return {t: int(self.start.get(t, 0)) for t in self.topics}

    def read(self, start: dict):
        rows, end = self._consume(start, None)
        return iter(rows), end

    def readBetweenOffsets(self, start: dict, end: dict):
        rows, _ = self._consume(start, end)
        return iter(rows)

    def _consume(self, start: dict, end: dict | None):
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "seam-stream-source",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        rows, reached = [], dict(start)
        try:
            for topic in self.topics:
                stop = end[topic] if end is not None else None
                if stop is not None and stop <= start[topic]:
                    continue
                consumer.assign([TopicPartition(topic, 0, int(start[topic]))])
                while len(rows) < self.max_messages or stop is not None:
                    batch = consumer.consume(5000, 0.3)
                    batch = [m for m in batch if m.error() is None]
                    if not batch:
                        if stop is None or reached[topic] >= stop:
                            break
                        continue
                    for m in batch:
                        if stop is not None and m.offset() >= stop:
                            break
                        headers = {k: v.decode() for k, v in (m.headers() or [])}
                        rows.append((topic, m.offset(), m.key(), m.value(), json.dumps(headers)))
                        reached[topic] = m.offset() + 1
                    if stop is not None and reached[topic] >= stop:
                        break
        finally:
            consumer.close()
        return rows, reached
