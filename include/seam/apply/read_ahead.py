"""The sink's read-ahead: a thread that consumes one list of messages ahead of the sink, so that the next list
is read from the broker while the current one is applied; and the client's events sorted out of such a list
(a topic's end, an offset no longer in the log, a broker error).

Delivery guarantee: none of its own. What it read counts only once applied: the sink stores offsets with the
data, and what was read ahead and not applied when it stops is dropped (read again from the stored offsets).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from confluent_kafka import KafkaError

from seam.apply import SinkError
from seam.wire.records import no_cyclic_gc


class ReadAhead:
    """Consumes in a thread, one list of messages ahead of the sink, so that the next list is read while the
    current one is applied. What it read counts only once applied: offsets are stored with the data."""

    def __init__(self, consumer):
        self._consumer = consumer
        self._lists: queue.Queue = queue.Queue(maxsize=1)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._read, name="seam-sink-read-ahead", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while not self._stopped.is_set():
                with no_cyclic_gc():  # Message objects are many and short-lived, see no_cyclic_gc
                    item: list | BaseException = self._take()
                self._hand_over(item)
        except Exception as exc:  # noqa: BLE001 (any failure of the read: the sink raises it in its own thread)
            self._hand_over(exc)

    def _take(self) -> list:
        """What the client has fetched, at once; when that is nothing, the first message within 0.1 s and what
        came with it. (A batch read with a wait returns only when full or when the wait is over: every quiet
        moment would cost the whole wait in latency.)"""
        taken = self._consumer.consume(50_000, 0)
        if not taken:
            taken = self._consumer.consume(1, 0.1)
            if taken:
                taken += self._consumer.consume(49_999, 0)
        return taken

    def _hand_over(self, item) -> None:
        while not self._stopped.is_set():
            try:
                self._lists.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def next(self) -> list:
        """The next list of messages (empty after 0.1 s without any)."""
        item = self._lists.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def stop(self) -> None:
        """Stop reading; what was read ahead and not taken is dropped (at once: a hand-over waiting for room
        would otherwise hold the stop, and every load's last step, for its whole timeout)."""
        self._stopped.set()
        while self._thread.is_alive():
            try:
                self._lists.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(0.01)


def sorted_out(messages: list, at_end: set[str], offset_lost: Callable) -> list | None:
    """The messages without the client's events (a topic's end noted in ``at_end``); None when a stored offset
    is no longer in its topic's log (``offset_lost`` is told which)."""
    good = []
    for m in messages:
        error = m.error()
        if error is None:
            good.append(m)
            at_end.discard(m.topic())
        elif error.code() == KafkaError._PARTITION_EOF:
            at_end.add(m.topic())
        elif error.code() == KafkaError.OFFSET_OUT_OF_RANGE:
            offset_lost(m)
            return None
        else:
            raise SinkError(f"Kafka error on {m.topic()}: {error.str()}")
    return good
