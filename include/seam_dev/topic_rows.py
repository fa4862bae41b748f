"""How many rows a load has put on its table's topic, for tests and benchmarks that act part-way through one.

A full load sends its rows many to a message (``seam.wire.boundary.blocks``), so a topic's offsets count blocks,
not rows: the rows are estimated from the offsets and the size of the last blocks (a chunk's blocks hold alike
rows, so all but its last are alike)."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from seam.core.pipeline import Pipeline
from seam.wire.boundary import block_records
from seam.wire.topics import consumer_config, ensure_topics

LOOK_BACK = 4  # the last messages may be a chunk's PART and its last, short block


def topic_end(pipeline: Pipeline, topic: str) -> int:
    """The topic's high watermark: how many messages were published to it."""
    ensure_topics(pipeline, [topic])
    consumer = Consumer({**consumer_config(pipeline), "group.id": "seam-dev-topic-rows"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def rows_per_message(pipeline: Pipeline, topic: str, end: int) -> int:
    """The most rows in one of the last messages before ``end`` (1 when none is a block)."""
    consumer = Consumer({**consumer_config(pipeline), "group.id": "seam-dev-topic-rows"})
    most = 1
    try:
        start = max(0, end - LOOK_BACK)
        consumer.assign([TopicPartition(topic, 0, start)])
        seen = start
        while seen < end:
            message = consumer.poll(5)
            if message is None:
                break
            if message.error() is not None:
                continue
            records = block_records(message.key(), message.value())
            most = max(most, len(records) if records is not None else 1)
            seen = (message.offset() or 0) + 1
    finally:
        consumer.close()
    return most


def rows_published(pipeline: Pipeline, topic: str, since: int) -> int:
    """About how many rows were published to the topic after offset ``since`` (its end when that was taken)."""
    end = topic_end(pipeline, topic)
    return 0 if end <= since else (end - since) * rows_per_message(pipeline, topic, end)
