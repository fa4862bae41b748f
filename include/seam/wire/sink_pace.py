"""Back-pressure between a load's publishers and its sink: the sink says how far each open batch is staged,
and the publishers stay at most ``kafka.max_unapplied_events`` rows (the change reader's bound) in front.

Why: a load that is killed part-way keeps what its sink staged (``seam.loads`` resumes from there). What was
published beyond that is staged by the retry either way, so a publisher far ahead of its sink (Spark reads
faster than PostgreSQL stages) made a resumed load cost nearly a clean one, and filled the broker for nothing.
A clean load loses nothing by it: the sink is the slower side, and it always has that many messages to take.

The report is the sink's consumer group's committed offset of the topic (``StagedReport``, sent after each
transaction that staged rows of an open batch). The sink never reads it back: it resumes from the offsets
stored with the data, as before.

Delivery guarantee: none; this only delays sends. Where no report comes (``FIRST_REPORT_S``), or it stops
moving for ``STALL_S``, the publisher goes on at full speed, as without it.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

from seam.core.pipeline import Pipeline
from seam.wire.topics import consumer_config

# A report that has not moved for this long is not waited for again by this publisher. Long: a sink that has
# stopped (killed with its load, whose Spark job is being cancelled) must not see its publishers run on at
# full speed, which its retry would stage again; a sink held up by a lock holds the load up either way.
STALL_S = 30.0
FIRST_REPORT_S = 3.0  # a topic no sink has ever reported on (a sink of an older Seam): not waited for longer
CHECK_EVERY_S = 0.1  # how often a waiting publisher asks for the report again


class _GroupClient:
    """A consumer of the sink's group that is never assigned and never joins: it only commits or reads offsets.
    Made at its first use (a small table's load never needs one)."""

    def __init__(self, pipeline: Pipeline):
        self._config = consumer_config(pipeline)
        self._client: Consumer | None = None

    def client(self) -> Consumer:
        if self._client is None:
            self._client = Consumer(self._config)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class StagedReport(_GroupClient):
    """The sink's side: commit the staged offsets of open batches to its group (asynchronously, best effort)."""

    def staged(self, offsets: dict[str, int]) -> None:
        """``offsets``: topic -> the offset after the last message staged and committed to the target."""
        if not offsets:
            return
        try:
            self.client().commit(offsets=[TopicPartition(t, 0, o) for t, o in offsets.items()], asynchronous=True)
        except KafkaException:
            pass  # a hint: a publisher without it goes on at full speed


class StagedOffsets(_GroupClient):
    """The reports read for several topics at once (a resumed load's wait for the running sink, seam.load_run)."""

    def read(self, topics: list[str]) -> dict[str, int]:
        """Topic -> the offset the sink reported staged through; a topic it never reported on is absent."""
        try:
            parts = self.client().committed([TopicPartition(t, 0) for t in topics], timeout=5)
        except KafkaException:
            return {}
        return {p.topic: p.offset for p in parts if p.offset >= 0}


class SinkPace(_GroupClient):
    """The publisher's side, for one topic: ``wait(queued)`` returns once the topic's end (plus ``queued``,
    what this producer holds that the broker has not acknowledged yet) is at most the bound past the sink's
    report, or at once when the report has stalled."""

    def __init__(self, pipeline: Pipeline, topic: str):
        super().__init__(pipeline)
        self._partition = TopicPartition(topic, 0)
        self._ahead = pipeline.kafka.max_unapplied_events
        self.off = False
        self.waited_s = 0.0

    def wait(self, queued: int, rows_per_message: float = 1.0) -> None:
        """``rows_per_message``: the bound counts rows, the topic's offsets count messages (blocks of rows)."""
        if self.off:
            return
        ahead = max(1, int(self._ahead / max(rows_per_message, 1.0)))
        started = time.monotonic()
        staged, moved = self._staged(), started
        # once per call: this task sends nothing while it waits, and the embedded broker answers this request
        # in time that grows with the topic's log (234 ms at 118 million messages, 9 ms at a thousand)
        end = self._end() + queued
        while not self.off:
            if end - (staged or 0) <= ahead:
                break
            time.sleep(CHECK_EVERY_S)
            now = self._staged()
            if now != staged:
                staged, moved = now, time.monotonic()
            elif time.monotonic() - moved > (STALL_S if staged is not None else FIRST_REPORT_S):
                self.off = True
        self.waited_s += time.monotonic() - started

    def _staged(self) -> int | None:
        """The sink's report; None when it never reported on this topic."""
        try:
            offset = self.client().committed([self._partition], timeout=5)[0].offset
        except KafkaException:
            self.off = True
            return None
        return offset if offset >= 0 else None

    def _end(self) -> int:
        try:
            return self.client().get_watermark_offsets(self._partition, timeout=5)[1]
        except KafkaException:
            self.off = True
            return 0
