"""Kafka topics and clients for a pipeline: one topic per source table, named
``<prefix>.<db>.<table>``, with one partition so that every message of a table
(BEGIN, rows, END, change events) has a total order the sink can rely on.

Delivery guarantee: the producer is idempotent (no duplicates from its own
retries where the broker supports it) and ``flush`` waits for every
acknowledgement; nothing here depends on Kafka transactions, consumer groups
or high watermarks (the embedded broker gets those wrong). Sinks ``assign()``
partitions and keep their offsets in the target.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seam.core.errors import BrokerError
from seam.core.pipeline import Pipeline, TableConfig

# librdkafka's own log lines go through Python logging (quiet unless a command turns logging on)
_KAFKA_LOG = logging.getLogger("seam.kafka")
_LEGAL = re.compile(r"[^A-Za-z0-9_-]")
# a consumer's fetch, compressed (a message larger than a fetch still comes whole)
FETCH_MAX_BYTES = 2_000_000


def topic_name(pipeline: Pipeline, db: str, table: str) -> str:
    """``<prefix>.<db>.<table>``; characters Kafka forbids become ``_`` plus a short hash, so names stay unique."""
    parts = []
    for part in (db, table):
        clean = _LEGAL.sub("_", part)
        if clean != part:
            clean += "_" + hashlib.sha1(part.encode()).hexdigest()[:6]
        parts.append(clean)
    return ".".join([pipeline.kafka.topic_prefix, *parts])


def table_topic(pipeline: Pipeline, table: TableConfig) -> str:
    return topic_name(pipeline, table.db, table.table)


def message_limit(pipeline: Pipeline) -> int:
    """The largest message Seam sends: a row whose value is ``kafka.max_value_bytes`` (base64 makes bytes a
    third larger, JSON escapes some characters), with room for the rest of the record. Producers, consumers
    and the topics Seam creates are all set to take it."""
    return 2 * pipeline.kafka.max_value_bytes + 2**20


def producer_config(pipeline: Pipeline) -> dict:
    return {
        "bootstrap.servers": pipeline.kafka.bootstrap,
        "message.max.bytes": message_limit(pipeline),
        "enable.idempotence": True,
        # connect to the brokers as soon as they are known: with lazy connections, the idempotent producer's
        # first ask for its id found no broker up and retried after 500 ms, twice, so the first messages of
        # every command waited 0.5 - 1 s. The cost: a producer connects to every broker of the cluster
        "enable.sparse.connections": False,
        "acks": "all",
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "compression.type": "lz4",
        "queue.buffering.max.messages": 500_000,
        "message.timeout.ms": 120_000,
        "logger": _KAFKA_LOG,
    }


def _config_key(pipeline: Pipeline) -> str:
    """Publishers of equal producer settings are interchangeable."""
    return repr(sorted((k, str(v)) for k, v in producer_config(pipeline).items() if k != "logger"))


def consumer_config(pipeline: Pipeline) -> dict:
    return {
        "bootstrap.servers": pipeline.kafka.bootstrap,
        "group.id": f"seam-{pipeline.name}-sink",  # required by the client; never joined (assign only)
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",  # a stored offset past the log end must be noticed, not skipped
        "fetch.max.bytes": FETCH_MAX_BYTES,
        "max.partition.fetch.bytes": FETCH_MAX_BYTES // 2,
        "receive.message.max.bytes": receive_limit(pipeline),
        # prefetch: what the sink has not taken yet is its memory when it falls behind the change reader, and
        # the client overshoots its limits by one fetch (decompressed: about four times what the broker sent).
        # With 32 MB / 100,000 here and 50 MB fetches, a consumer behind its topic grew by 134 MB; with these
        # by about 80, reading 600,000 messages as fast (test consumer on the big-transaction topic)
        "queued.min.messages": 10_000,
        "queued.max.messages.kbytes": 4_096,
        # a full queue postpones the next fetch by this much: librdkafka's default (1 s, since 2.4) stalled a
        # consumer that drains it in milliseconds (87,000 messages/s instead of 600,000)
        "fetch.queue.backoff.ms": 10,
        # a fetch the broker holds while it has nothing new: the embedded broker answers one that waits only
        # when the wait is over, so a trickle of changes waited up to librdkafka's 500 ms (the stream's p95)
        "fetch.wait.max.ms": 50,
        "logger": _KAFKA_LOG,
    }


def receive_limit(pipeline: Pipeline) -> int:
    """A consumer's largest response: a full fetch, or one message of the largest size (which a fetch returns
    whole, whatever the fetch sizes say)."""
    return FETCH_MAX_BYTES + message_limit(pipeline)


def _admin_config(pipeline: Pipeline) -> dict[str, Any]:
    return {"bootstrap.servers": pipeline.kafka.bootstrap, "logger": _KAFKA_LOG}


_held_admins: dict[str, AdminClient] = {}  # bootstrap -> the client topic_ids keeps (librdkafka reconnects it)


def _broker_topics(pipeline: Pipeline, timeout: float):
    """An admin client and the broker's topics (name -> metadata); a clear error if the broker is down."""

    admin = AdminClient(_admin_config(pipeline))
    try:
        return admin, admin.list_topics(timeout=timeout).topics
    except KafkaException as exc:
        raise BrokerError(
            f"Kafka broker at {pipeline.kafka.bootstrap} is unreachable ({exc.args[0].str()}): "
            "start it (`seam up kafka`) or fix kafka.bootstrap in the pipeline"
        ) from None


def ensure_topics(pipeline: Pipeline, topics: list[str], timeout: float = 15.0) -> None:
    """Create missing topics with the pipeline's partition count; a clear error if the broker is down."""

    admin, existing = _broker_topics(pipeline, timeout)
    missing = [t for t in topics if t not in existing]
    if not missing:
        return
    limit = {"max.message.bytes": str(message_limit(pipeline))}  # a broker's default is 1 MB
    futures = admin.create_topics(
        [NewTopic(t, pipeline.kafka.partitions, 1, config=limit) for t in missing], operation_timeout=timeout
    )
    for topic, future in futures.items():
        try:
            future.result(timeout)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise BrokerError(f"cannot create topic {topic}: {exc}") from None


def topic_ids(pipeline: Pipeline, topics: list[str], timeout: float = 15.0) -> dict[str, str]:
    """Each topic's id: a topic deleted and created again under the same name gets a new one. The reader asks
    every second: one admin client per broker address is kept (a new one costs 2.2 ms against 0.5 ms)."""
    admin = _held_admins.get(pipeline.kafka.bootstrap)
    if admin is None:
        admin = _held_admins[pipeline.kafka.bootstrap] = AdminClient(_admin_config(pipeline))
    futures = admin.describe_topics(TopicCollection(topics), request_timeout=timeout)
    return {topic: str(future.result(timeout).topic_id) for topic, future in futures.items()}


def end_offsets(pipeline: Pipeline, topics: list[str], timeout: float = 10.0) -> dict[str, int]:
    """Each topic's high watermark (partition 0), where the broker answers: every message acknowledged before
    this call lies below it (the embedded broker answers a little less: the first offset of its last batch,
    plus one). A topic the broker does not answer for is left out."""
    consumer = Consumer({**consumer_config(pipeline), "group.id": "seam-ends"})
    ends = {}
    try:
        for topic in topics:
            try:
                ends[topic] = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout)[1]
            except KafkaException:
                continue
    finally:
        consumer.close()
    return ends


class Publisher:
    """A producer that waits for queue space and fails loudly on any undelivered message."""

    def __init__(self, pipeline: Pipeline, give_up_after_s: float = 120):
        self.errors: list[str] = []
        self.fatal: str | None = None
        self.sent = 0
        self._config_key = _config_key(pipeline)
        self._drained = True  # every message sent was acknowledged (the last flush found none left)
        self._pipeline = pipeline
        self._known: tuple[str, str] | None = None  # (topic, its id) when last taken (``_remember``)
        # delivery reports for failures only: a Python callback per acknowledged message costs as much as the
        # produce call itself
        self._producer = Producer(
            {
                **producer_config(pipeline),
                "error_cb": self._on_error,
                "on_delivery": self._on_delivery,
                "delivery.report.only.error": True,
                "message.timeout.ms": int(give_up_after_s * 1000),
            }
        )

    def _on_error(self, err) -> None:
        if err.fatal():  # e.g. an idempotent producer whose broker lost its state: nothing more gets through
            self.fatal = err.str()

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.errors.append(f"{msg.topic()}: {err.str()}")

    def send(self, topic: str, value: bytes, key: bytes | None = None, headers=None) -> None:
        while True:
            try:
                # partition 0 always: a topic the broker auto-created (after losing it) may have more partitions,
                # and per-table order lives in one partition
                self._producer.produce(topic, value, key, partition=0, headers=headers)
                self._drained = False
                break
            except BufferError:
                self._producer.poll(0.05)
        self.sent += 1
        if self.sent % 10_000 == 0:
            self._producer.poll(0)

    def send_many(self, topic: str, values: list[bytes], keys: list[bytes]) -> None:
        """``send`` for many messages without headers, in one call. A message the full queue refused is sent
        again after the ones behind it: only for messages whose order does not matter (blocks of snapshot rows
        of one chunk)."""

        messages: list[dict[str, Any]] = [{"value": v, "key": k} for v, k in zip(values, keys)]
        self._drained = False
        while messages:
            try:
                queued = self._producer.produce_batch(topic, messages, partition=0)
            except BufferError:
                queued = 0
            if queued == len(messages):
                break
            failed = [m for m in messages if "_error" in m] if queued else messages
            for m in failed:
                error = m.pop("_error", None)
                if error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                    raise BrokerError(
                        f"a row of {topic} is about {len(m['value']):,} bytes as a record, over the limit that "
                        "kafka.max_value_bytes sets: raise kafka.max_value_bytes in the pipeline"
                    )
                if error is not None and error.code() != KafkaError._QUEUE_FULL:
                    raise BrokerError(f"cannot queue a message for {topic}: {error.str()}")
            messages = failed
            self._producer.poll(0.05)
        self.sent += len(values)
        self._producer.poll(0)

    def queued(self) -> int:
        """Messages sent that the broker has not acknowledged yet."""
        return len(self._producer)

    def flush(self, timeout: float = 120.0) -> None:
        """Wait for every acknowledgement; raise if anything was not delivered (and start afresh)."""
        deadline = time.monotonic() + timeout
        left = self._producer.flush(min(1.0, timeout))
        while left and self.fatal is None and time.monotonic() < deadline:
            left = self._producer.flush(1.0)
        self._raise_undelivered(left)
        if left:
            raise BrokerError(f"{left} message(s) not acknowledged by the broker within {timeout:.0f}s")
        self._drained = True

    def check(self) -> None:
        """Raise if a message sent so far was refused, as ``flush`` would, without waiting for those still on
        their way (the next check or flush sees them): a reader that checks every second keeps reading meanwhile."""
        self._producer.poll(0)
        self._raise_undelivered(len(self._producer))

    def _raise_undelivered(self, left: int) -> None:
        if self.fatal is not None:
            raise BrokerError(f"the Kafka producer failed for good ({self.fatal}); {left} message(s) undelivered")
        errors, self.errors = self.errors, []
        if errors:
            raise BrokerError(f"{len(errors)} message(s) were not delivered, first: {errors[0]}")

    def release(self) -> None:
        """Hand this publisher, every message of it acknowledged and none refused, to the next ``lease`` in this
        process; one that failed is dropped instead (a new one starts clean)."""
        if self.fatal is None and not self.errors and self._drained:
            with Publisher._lock:
                Publisher._idle.setdefault(self._config_key, []).append(self)

    @classmethod
    def lease(cls, pipeline: Pipeline, topic: str) -> Publisher:
        """A publisher of this process for one user at a time (a batch's control messages on ``topic``): one
        released earlier if there is one and its broker is still the one it knew (``_same_broker``). An
        idempotent producer's first message waits about 0.5 s for its producer id (librdkafka asks before it has
        a broker connection up, and asks again after 500 ms), which a long-lived process (the shared Spark
        driver) then pays once instead of at every BEGIN."""
        key = _config_key(pipeline)
        while True:
            with cls._lock:
                idle = cls._idle.get(key, [])
                publisher = idle.pop() if idle else None
            if publisher is None:
                return cls(pipeline)._remember(topic)
            if publisher.fatal is None and publisher._same_broker(topic):
                return publisher

    _idle: dict[str, list[Publisher]] = {}
    _lock = threading.Lock()
    _per_process: dict[str, Publisher] = {}

    @classmethod
    def shared(cls, pipeline: Pipeline, topic: str) -> Publisher:
        """One publisher per process and broker for ``topic``'s rows: an idempotent producer's start-up (its
        connection and producer id) is paid once, and Spark reuses its Python workers across tasks; a broker
        that restarted since (``_same_broker``) gets a new one. Callers flush before they report success."""
        publisher = cls._per_process.get(pipeline.kafka.bootstrap)
        if publisher is not None and publisher.fatal is None and publisher._same_broker(topic):
            return publisher
        publisher = cls._per_process[pipeline.kafka.bootstrap] = cls(pipeline)
        return publisher._remember(topic)

    def _remember(self, topic: str) -> Publisher:
        """Remember ``topic`` and the id the broker gives it now (none read: this publisher is not taken again)."""
        found = _topic_id(self._pipeline, topic)
        self._known = None if found is None else (topic, found)
        return self

    def _same_broker(self, topic: str) -> bool:
        """Whether the topic this publisher was last taken for is still there under the same id (then ``topic``
        is remembered instead). The embedded broker forgets its topics and its producers' ids when it restarts;
        a producer from before then is not refused but its messages time out after minutes
        (``message.timeout.ms``), which a load after a broker restart waited (127 s for ``tpch.orders``)."""
        if self._known is None:
            return False
        last, known = self._known
        if _topic_id(self._pipeline, last) != known:
            return False
        if last != topic:
            self._remember(topic)
        return True


def _topic_id(pipeline: Pipeline, topic: str) -> str | None:
    """The topic's id on the broker now; None when it has none or does not answer."""
    try:
        return topic_ids(pipeline, [topic]).get(topic)
    except Exception:  # noqa: BLE001 - gone, or no answer
        return None


def list_topics(pipeline: Pipeline, timeout: float = 15.0) -> list[tuple[str, int]]:
    """(topic, partitions) of every topic on the broker, by name; what `seam kafka topics` prints."""
    _, topics = _broker_topics(pipeline, timeout)
    return sorted((name, len(t.partitions)) for name, t in topics.items() if not name.startswith("__"))


def tail(pipeline: Pipeline, topic: str, last: int, follow: bool, should_stop=lambda: False):
    """Yield (offset, key, is_control, value) of the last ``last`` messages of partition 0, then, with
    ``follow``, new ones as they come. No consumer group is joined and nothing is committed."""

    if topic not in dict(list_topics(pipeline)):
        raise BrokerError(f"no topic {topic} on {pipeline.kafka.bootstrap}: `seam kafka topics` lists them")
    consumer = Consumer(
        {
            **consumer_config(pipeline),
            "group.id": "seam-tail",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        # the embedded broker reports the high watermark as the first offset of the last batch + 1, so read
        # from a little earlier to the real end and keep the last ``last``
        start = max(low, high - last - 10_000) if last else high
        consumer.assign([TopicPartition(topic, 0, start)])
        recent: list = []
        at_end = False
        while not should_stop():
            message = consumer.poll(0.5)
            if message is None:
                if at_end and not follow:
                    break
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    if not at_end:
                        at_end = True
                        yield from recent[-last:] if last else []
                        recent = []
                    if not follow:
                        break
                    continue
                raise BrokerError(f"Kafka error on {topic}: {error.str()}")
            item = (message.offset(), message.key(), bool(message.headers()), message.value())
            if at_end:
                yield item
            else:
                recent.append(item)
                if len(recent) > 2 * max(last, 1):
                    del recent[: len(recent) - max(last, 1)]
    finally:
        consumer.close()
