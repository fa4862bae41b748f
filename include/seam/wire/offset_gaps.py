"""Offsets that a topic's messages skip, as a sink reads them.

Seam's producers write no Kafka transactions and its topics are not compacted, so the offsets of a table topic
run without a gap. An answer of the broker that skips some lost messages on the way (a fetch cut short, a
broker short of memory): the sink reads again from the target's offsets, and the Spark sink's source from the
offset it reached, once. A gap found again at the same
place is the log's own (another producer's transaction markers, a compacted topic) and is let through; what
is really missing is still caught, by a full load's END check and by the stream's chain (``prev``).

Delivery guarantee: none of its own; it only tells the sink when to read again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

log = logging.getLogger("seam.wire")


class OffsetGaps:
    """Per topic: the offset the next message should have, and the gaps met (first missing offset)."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}
        self._met: dict[str, set[int]] = {}

    def reading_from(self, offsets: dict[str, int]) -> None:
        """The consumer reads each topic from this offset again (a negative one, its beginning, is not known
        here). Gaps below it are not read again."""
        self._next = {topic: offset for topic, offset in offsets.items() if offset >= 0}
        for topic, met in self._met.items():
            start = self._next.get(topic, 0)
            met.difference_update([g for g in met if g < start])

    def new_gap(self, topic: str, messages: list) -> tuple[int, int] | None:
        """The first gap in ``messages`` (one topic's, in offset order) not met before: its first and last
        missing offsets. Gaps met before are let through, and said."""
        first, last = messages[0].offset(), messages[-1].offset()
        expected = self._next.get(topic, first)
        self._next[topic] = last + 1
        if first == expected and last - first + 1 == len(messages):
            return None
        for start, end in _gaps(expected, messages):
            if self.first_time(topic, start, end):
                return start, end
        return None

    def first_time(self, topic: str, start: int, end: int) -> bool:
        """Whether the gap from ``start`` to ``end`` is met for the first time (then it is read again); else it
        is let through, and said."""
        met = self._met.setdefault(topic, set())
        if start not in met:
            met.add(start)
            return True
        log.warning(
            "topic %s: offsets %s to %s are not in its log (another producer's transaction markers, or a "
            "compacted topic); going on without them",
            topic,
            start,
            end,
        )
        return False


def _gaps(expected: int, messages: list) -> Iterator[tuple[int, int]]:
    last = expected - 1
    for m in messages:
        offset = m.offset()
        if offset > last + 1:
            yield last + 1, offset - 1
        last = max(last, offset)
