"""``Publisher.lease``/``release``: a batch's control messages go through a publisher of its own, which a
long-lived process (the shared Spark driver) hands to its next batch once every message of it was acknowledged,
so that only the first BEGIN of the process waits for an idempotent producer's id. A publisher that refused a
message, broke for good, or still holds messages is never handed on; publishers of other settings are never
mixed. Real librdkafka producers, pointed at a port where no broker listens (none of this needs one)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from seam.config import DEFAULT_PIPELINE, load_pipeline
from seam.wire.topics import Publisher

ENV = {"SEAM_MYSQL_PASSWORD": "s", "SEAM_TARGET_PASSWORD": "t", "SEAM_KAFKA_BOOTSTRAP": "127.0.0.1:9"}


@pytest.fixture
def pipeline():
    Publisher._idle.clear()
    yield load_pipeline(DEFAULT_PIPELINE, env=ENV)
    Publisher._idle.clear()


def test_a_released_publisher_serves_the_next_batch(pipeline):
    first = Publisher.lease(pipeline)
    assert Publisher.lease(pipeline) is not first  # leased: nobody else gets it meanwhile
    first.release()
    assert Publisher.lease(pipeline) is first
    assert Publisher.lease(pipeline) is not first


def test_a_publisher_that_refused_a_message_is_dropped(pipeline):
    failed = Publisher.lease(pipeline)
    failed._on_delivery(_Error(), _Message("seam.demo.t"))
    failed.release()
    assert Publisher.lease(pipeline) is not failed


def test_a_publisher_broken_while_idle_is_skipped(pipeline):
    broken = Publisher.lease(pipeline)
    broken.release()
    broken.fatal = "the broker lost the producer's state"
    assert Publisher.lease(pipeline) is not broken


def test_a_publisher_with_messages_on_their_way_is_dropped(pipeline):
    busy = Publisher.lease(pipeline)
    busy.send("seam.demo.t", b"never acknowledged: no broker")
    busy.release()
    assert Publisher.lease(pipeline) is not busy


def test_other_producer_settings_get_their_own(pipeline):
    wide = replace(pipeline, kafka=replace(pipeline.kafka, max_value_bytes=pipeline.kafka.max_value_bytes * 2))
    one = Publisher.lease(pipeline)
    one.release()
    assert Publisher.lease(wide) is not one
    assert Publisher.lease(pipeline) is one


class _Error:
    def str(self) -> str:
        return "Broker: Message size too large"


class _Message:
    def __init__(self, topic: str):
        self._topic = topic

    def topic(self) -> str:
        return self._topic
