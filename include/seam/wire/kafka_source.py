"""A Kafka source for Spark Structured Streaming written with PySpark's Python
Data Source API and confluent-kafka (Spark's own ``format("kafka")`` needs a
jar from Maven; deployments that have it can use it instead: the sink only
needs topic, offset, key, value and headers).

Offsets are ``{topic: [topic_id, next_offset]}``. The stream starts from the
offsets the sink stored in the target (``start`` option, each with the id of
the topic it counts in), not from a Spark checkpoint: the target is the
system of record.

Delivery guarantee: at-least-once (a micro-batch may be read again after a
failure, deterministically, by ``readBetweenOffsets``); the sink skips what it
has already applied.
"""

from __future__ import annotations

import json
import logging
import time

from confluent_kafka import Consumer, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

from seam.wire.offset_gaps import OffsetGaps

log = logging.getLogger("seam.wire")

POLL = 5000  # messages asked of the consumer at a time
SCHEMA = "topic string, topic_id string, offset long, key binary, value binary, headers string"


class SeamKafkaSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "seam_kafka"

    def schema(self) -> str:
        return SCHEMA

    def simpleStreamReader(self, schema):
        return _TopicReader(self.options)


class _TopicReader(SimpleDataSourceStreamReader):
    """Offsets are ``{topic: [topic_id, next_offset]}``: a topic recreated on the broker (new id) is read
    from its beginning, not waited on past its end."""

    def __init__(self, options):
        self.bootstrap = options["bootstrap"]
        self.topics = json.loads(options["topics"])
        self.start = json.loads(options.get("start", "{}"))
        # per micro-batch: the runner process holds a batch's messages two or three times over (as Python
        # objects, as Arrow, in pyspark's prefetch cache); 50,000 grew the sink's processes by 400 MB more
        # under a transaction of millions of rows (benchmarks/big_transaction.py)
        self.max_messages = int(options.get("maxMessages", "20000"))
        # and in bytes: a message can be a block of a thousand snapshot rows (seam.wire.boundary.blocks)
        self.max_bytes = int(options.get("maxBytes", str(20_000 * 1_000)))
        self.max_wait_s = float(options.get("maxWaitSeconds", "0.5"))
        self.receive_limit = int(options.get("receiveMessageMaxBytes", "100000000"))  # librdkafka's default
        self._admin = None
        self._kafka = None
        self._gaps = OffsetGaps()

    def _ids(self) -> dict[str, str] | None:
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        try:
            futures = self._admin.describe_topics(TopicCollection(self.topics), request_timeout=5)
            return {t: str(f.result(5).topic_id) for t, f in futures.items()}
        except KafkaException:
            return None  # broker unreachable: no progress this time

    def initialOffset(self) -> dict:
        """The sink's start offsets with the topic ids they count in, not the broker's ids of now: a topic
        recreated between the sink's reading of its offsets and this call must be read from offset 0, not
        from an offset of the topic that is gone (that skipped a batch's BEGIN once)."""
        starts = {t: self.start.get(t, ["", 0]) for t in self.topics}
        return {t: [str(topic_id), int(offset)] for t, (topic_id, offset) in starts.items()}

    def read(self, start: dict):
        ids = self._ids()
        if ids is None:
            return iter([]), start
        if any(tid != ids[t] for t, (tid, _) in start.items()):
            self._forget_consumer()
        begin = {t: [ids[t], off if tid == ids[t] else 0] for t, (tid, off) in start.items()}
        rows, end = self._consume(begin, None)
        return _arrow(rows), end

    def readBetweenOffsets(self, start: dict, end: dict):
        if any(tid != end[t][0] for t, (tid, _) in start.items()):
            self._forget_consumer()
        begin = {t: [end[t][0], off if tid == end[t][0] else 0] for t, (tid, off) in start.items()}
        rows, _ = self._consume(begin, end)
        return _arrow(rows)

    def _forget_consumer(self) -> None:
        """A topic was recreated on the broker: a consumer's cached metadata would keep fetching the old one
        (until its periodic refresh, minutes later), so the next read starts a new consumer."""
        if self._kafka is not None:
            self._kafka.close()
            self._kafka = None

    def _consumer(self):
        """One long-lived consumer (clients created and destroyed per micro-batch once cost the runner its
        socket to the JVM)."""

        if self._kafka is None:
            self._kafka = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "receive.message.max.bytes": self.receive_limit,
                    "group.id": "seam-stream-source",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "queued.max.messages.kbytes": 16384,  # prefetched (librdkafka's default is 64 MB)
                    "fetch.wait.max.ms": 50,  # see seam.wire.topics.consumer_config
                    "fetch.queue.backoff.ms": 10,  # librdkafka waits 1 s after a full queue by default
                }
            )
        return self._kafka

    def _consume(self, start: dict, end: dict | None):
        consumer = self._consumer()
        rows: list = []
        reached = {t: list(v) for t, v in start.items()}
        wanted = {t: (end[t][1] if end is not None else None) for t in self.topics}
        todo = [t for t in self.topics if wanted[t] is None or wanted[t] > start[t][1]]
        if not todo:
            return rows, reached
        # assigned for this read only: a consumer left assigned to a topic that is then deleted (a broker that
        # lost its topics, a topic recreated) crashed in librdkafka's main thread (a segfault of the process)
        consumer.assign([TopicPartition(t, 0, int(start[t][1])) for t in todo])
        self._gaps.reading_from({t: int(start[t][1]) for t in todo})
        empty, began, size = 0, time.monotonic(), 0
        try:
            while todo and ((len(rows) < self.max_messages and size < self.max_bytes) or end is not None):
                if end is None and time.monotonic() - began > self.max_wait_s:
                    break  # a steady trickle must not hold the micro-batch back (latency)
                batch = [m for m in self._take(consumer, end is None) if m.error() is None]
                if not batch:
                    empty += 1
                    if end is None or empty > 30:
                        break  # (a replay whose messages the broker no longer has: the sink's checks decide)
                    continue
                empty = 0
                for m in batch:
                    topic = m.topic()
                    stop = wanted[topic]
                    if topic not in todo or m.offset() < reached[topic][1] or (stop is not None and m.offset() >= stop):
                        continue
                    if m.offset() > reached[topic][1] and self._gaps.first_time(
                        topic, reached[topic][1], m.offset() - 1
                    ):  # the broker's answer skipped offsets (seam.wire.offset_gaps): every topic read on from there
                        log.warning(
                            "topic %s: the broker's answer skipped offsets from %s; reading them again",
                            topic,
                            reached[topic][1],
                        )
                        for t in todo:
                            consumer.seek(TopicPartition(t, 0, int(reached[t][1])))
                        break
                    headers = m.headers()  # only control messages have any
                    text = json.dumps({k: v.decode() for k, v in headers}) if headers else "{}"
                    rows.append((topic, start[topic][0], m.offset(), m.key(), m.value(), text))
                    size += len(m.value() or b"")
                    reached[topic][1] = m.offset() + 1
                    if stop is not None and reached[topic][1] >= stop:
                        todo.remove(topic)
                if end is None and len(batch) < POLL:
                    break  # what the broker had is read: a trickle is not waited on (latency)
        finally:
            consumer.unassign()
        return rows, reached

    @staticmethod
    def _take(consumer, trickle: bool) -> list:
        """What the client has fetched, at once; when that is nothing, the first message within the wait and
        what came with it (a read of many that returns only when full would cost the whole wait in latency)."""
        if not trickle:
            return consumer.consume(POLL, 0.3)
        taken = consumer.consume(POLL, 0)
        if not taken:
            taken = consumer.consume(1, 0.1)
            if taken:
                taken += consumer.consume(POLL - 1, 0)
        return taken


def _arrow(rows: list[tuple]):
    """The rows as one Arrow record batch: Spark takes it as it is (tuples it would check and convert one by
    one, a third of a micro-batch's time)."""
    import pyarrow as pa

    if not rows:
        return iter([])
    columns = list(zip(*rows))
    types = (pa.string(), pa.string(), pa.int64(), pa.binary(), pa.binary(), pa.string())
    names = ("topic", "topic_id", "offset", "key", "value", "headers")
    return iter([pa.RecordBatch.from_arrays([pa.array(c, t) for c, t in zip(columns, types)], names=names)])
