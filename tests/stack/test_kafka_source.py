"""The Spark sink's Kafka source across a topic recreated on the broker (what a restart of the in-memory
broker does to every topic): the next read starts at the new topic's beginning and sees its messages at
once. Its long-lived consumer once kept the old topic's metadata for minutes (until librdkafka's periodic
refresh), so that a batch published right after a broker restart waited about five minutes."""

from __future__ import annotations

import json
import os
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from seam.wire.kafka_source import _TopicReader

pytestmark = pytest.mark.stack


def _create(admin: AdminClient, topic: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(15) == 0


def _read_until(reader: _TopicReader, start: dict, want: int, limit_s: float) -> tuple[list, dict, float]:
    began, rows = time.monotonic(), []
    while time.monotonic() - began < limit_s:
        batches, start = reader.read(start)
        rows += [tuple(r.values()) for batch in batches for r in batch.to_pylist()]  # Arrow record batches
        if len(rows) >= want:
            break
    return rows, start, time.monotonic() - began


def _recreate(admin: AdminClient, topic: str) -> None:
    admin.delete_topics([topic])[topic].result(15)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=5).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    _create(admin, topic)


def test_a_recreated_topic_is_read_from_its_beginning_at_once(stack):
    bootstrap = os.environ["SEAM_KAFKA_BOOTSTRAP"]
    topic = f"seam.source-test.{int(time.time() * 1000)}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, topic)
    _produce(bootstrap, topic, [b"old-%d" % i for i in range(5)])
    reader = _TopicReader({"bootstrap": bootstrap, "topics": json.dumps([topic])})
    start = reader.initialOffset()
    rows, start, _ = _read_until(reader, start, 5, 30)
    assert [r[4] for r in rows] == [b"old-%d" % i for i in range(5)]
    old_id = start[topic][0]

    _recreate(admin, topic)
    _produce(bootstrap, topic, [b"new-%d" % i for i in range(3)])

    rows, start, took = _read_until(reader, start, 3, 60)
    assert [r[4] for r in rows] == [b"new-0", b"new-1", b"new-2"], rows
    assert [r[2] for r in rows] == [0, 1, 2] and all(r[1] != old_id for r in rows)
    assert took < 20, f"the recreated topic's messages took {took:.0f} s to be read"
    assert start[topic][0] != old_id and start[topic][1] == 3


def test_a_topic_recreated_before_the_query_starts_is_read_from_its_beginning(stack):
    """The sink reads its stored offset (topic id and offset) and the broker recreates the topic before the
    Spark query asks for its first offsets: the stored offset counts in the topic that is gone. Once, the
    source paired it with the new topic's id, skipped the new topic's first messages (a full load's BEGIN)
    and delivered its END alone."""
    bootstrap = os.environ["SEAM_KAFKA_BOOTSTRAP"]
    topic = f"seam.source-test.{int(time.time() * 1000)}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, topic)
    _produce(bootstrap, topic, [b"old-%d" % i for i in range(5)])
    old_id = str(admin.describe_topics(TopicCollection([topic]))[topic].result(15).topic_id)
    _recreate(admin, topic)
    _produce(bootstrap, topic, [b"new-%d" % i for i in range(8)])

    stored = {topic: [old_id, 5]}  # what the sink stored after applying the old topic's five messages
    reader = _TopicReader({"bootstrap": bootstrap, "topics": json.dumps([topic]), "start": json.dumps(stored)})
    rows, start, _ = _read_until(reader, reader.initialOffset(), 8, 60)
    assert [r[4] for r in rows] == [b"new-%d" % i for i in range(8)], rows
    assert start[topic][0] != old_id and start[topic][1] == 8


class _SkipsOnce(Consumer):
    """The real client, whose first answer holding ``offsets`` of ``topic`` and a later one leaves them out (a
    fetch that came back short: a gap inside the answer, not at its end, where the next read starts anyway)."""

    topic, offsets, times = "", range(0), 0

    def consume(self, num_messages=1, timeout=-1):
        taken = super().consume(num_messages, timeout)
        cls = type(self)
        deadline = time.monotonic() + 5
        while cls.times and len(taken) < 100 and time.monotonic() < deadline:  # answers that hold the offsets
            taken += super().consume(num_messages, 0.1)
        ours = [m.offset() for m in taken if m.topic() == cls.topic]
        if cls.times and set(ours) & set(cls.offsets) and max(ours) > cls.offsets[-1]:
            cls.times -= 1
            taken = [m for m in taken if not (m.topic() == cls.topic and m.offset() in cls.offsets)]
        return taken


@pytest.mark.parametrize("replay", [False, True], ids=["next-micro-batch", "replayed-micro-batch"])
def test_offsets_a_broker_answer_skips_are_read_again(stack, monkeypatch, replay):
    """Seam's topics have no offset gaps: messages an answer of the broker left out are read again, in a new
    micro-batch and in one replayed between known offsets, for every topic read at the time."""
    bootstrap = os.environ["SEAM_KAFKA_BOOTSTRAP"]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [f"seam.source-gap-{n}.{int(time.time() * 1000)}" for n in "ab"]
    for topic in topics:
        _create(admin, topic)
        _produce(bootstrap, topic, [b"%s-%d" % (topic.encode(), i) for i in range(60)])
    monkeypatch.setattr("seam.wire.kafka_source.Consumer", _SkipsOnce)
    _SkipsOnce.topic, _SkipsOnce.offsets, _SkipsOnce.times = topics[0], range(20, 24), 1
    reader = _TopicReader({"bootstrap": bootstrap, "topics": json.dumps(topics)})
    start = reader.initialOffset()
    if replay:
        end = {t: [start[t][0], 60] for t in topics}
        rows = [tuple(r.values()) for batch in reader.readBetweenOffsets(start, end) for r in batch.to_pylist()]
    else:
        rows, start, _ = _read_until(reader, start, 120, 60)
    assert _SkipsOnce.times == 0, "no answer left the messages out: the test proved nothing"
    for topic in topics:
        assert [r[2] for r in rows if r[0] == topic] == list(range(60)), topic
