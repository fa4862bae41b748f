"""A batch's control messages go through a publisher leased per batch (``Publisher.lease``): the next batch of
the same process (the shared Spark driver) gets it back once every message of the last one was acknowledged,
so that only the process's first BEGIN waits for an idempotent producer's id. One that refused a message,
broke, or still holds messages is never handed on, nor one of other settings. A broker restarted in between
(the embedded broker forgets topics and producer ids) must not turn the next BEGIN, or the next task's rows
(``Publisher.shared``), into minutes of retries: a publisher from before the restart is not used again."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from seam.config import load_pipeline
from seam.core.schema import Column, TableSchema
from seam.source.publication import Publication
from seam.wire.boundary import Part, new_batch_id
from seam.wire.topics import Publisher, ensure_topics, table_topic, tail

pytestmark = pytest.mark.stack

SCHEMA = TableSchema("lease_test", "t", (Column("id", "int", "int(11)", False),), ("id",))


def _batch(pipeline, table) -> str:
    """BEGIN and END of an empty batch; its id."""
    publication = Publication(pipeline, table, new_batch_id())
    publication.begin("full", SCHEMA)
    publication.end("full", None, [Part(0, 1, 0, 0)])
    return publication.batch


def _controls(pipeline, topic: str) -> list[tuple[str, str]]:
    seen = [json.loads(value) for _, _, control, value in tail(pipeline, topic, 100, False) if control]
    return [(doc["control"], doc["batch"]) for doc in seen]


@pytest.fixture
def topic(stack):
    Publisher._idle.clear()
    pipeline = load_pipeline()
    name = f"seam.lease_test.{new_batch_id()}"
    ensure_topics(pipeline, [name])
    yield pipeline, name
    Publisher._idle.clear()


def test_a_released_publisher_serves_the_next_batch(topic):
    pipeline, name = topic
    first = Publisher.lease(pipeline, name)
    assert Publisher.lease(pipeline, name) is not first  # leased: nobody else gets it meanwhile
    first.release()
    assert Publisher.lease(pipeline, name) is first
    assert Publisher.lease(pipeline, name) is not first


def test_a_publisher_that_refused_broke_or_holds_messages_is_not_handed_on(topic):
    pipeline, name = topic
    refused, broken, busy = (Publisher.lease(pipeline, name) for _ in range(3))
    refused._on_delivery(_Error(), _Message(name))
    busy.send(name, b"sent, not flushed")
    for publisher in (refused, broken, busy):
        publisher.release()
    broken.fatal = "the producer failed for good"  # while it waited
    assert Publisher.lease(pipeline, name) not in (refused, broken, busy)


def test_other_producer_settings_get_their_own(topic):
    pipeline, name = topic
    wide = replace(pipeline, kafka=replace(pipeline.kafka, max_value_bytes=pipeline.kafka.max_value_bytes * 2))
    one = Publisher.lease(pipeline, name)
    one.release()
    assert Publisher.lease(wide, name) is not one
    assert Publisher.lease(pipeline, name) is one


def test_the_next_batch_gets_the_publisher_back_and_a_broker_restart_costs_seconds(stack, private_broker):
    Publisher._idle.clear()
    base = load_pipeline()
    pipeline = replace(base, kafka=replace(base.kafka, bootstrap=f"127.0.0.1:{private_broker.port('kafka')}"))
    table = replace(base.tables[0], db="lease_test", table="t", key=("id",))
    topic = table_topic(pipeline, table)

    first = _batch(pipeline, table)
    idle = [p for pool in Publisher._idle.values() for p in pool]
    assert len(idle) == 1  # released after END
    second = _batch(pipeline, table)
    assert [p for pool in Publisher._idle.values() for p in pool] == idle  # the same one, handed on and back
    assert _controls(pipeline, topic) == [("BEGIN", first), ("END", first), ("BEGIN", second), ("END", second)]

    private_broker.stop("kafka")
    private_broker.up(("kafka",), timeout=240, log=lambda m: None)
    ensure_topics(pipeline, [topic])
    started = time.monotonic()
    third = _batch(pipeline, table)
    assert time.monotonic() - started < 60  # not the producer's two-minute message timeout
    assert ("BEGIN", third) in _controls(pipeline, topic)
    assert _controls(pipeline, topic)[-1] == ("END", third)
    assert idle[0] not in [p for pool in Publisher._idle.values() for p in pool]  # from before the restart
    Publisher._idle.clear()

    # a Spark task's publisher (one per Python worker) too: a worker reused after the restart gets a new one
    tasks = Publisher.shared(pipeline, topic)
    assert Publisher.shared(pipeline, topic) is tasks
    private_broker.stop("kafka")
    private_broker.up(("kafka",), timeout=240, log=lambda m: None)
    ensure_topics(pipeline, [topic])
    assert Publisher.shared(pipeline, topic) is not tasks


class _Error:
    def str(self) -> str:
        return "Broker: Message size too large"


class _Message:
    def __init__(self, name: str):
        self._topic = name

    def topic(self) -> str:
        return self._topic
