"""``seam.spark.each_table``, the driver's threads that publish many tables' batches at once: every result
once, and after a table's ``SeamError`` no new table starts, the running ones end, and that error (not a
``CancelledError`` of a table that never started) is what the job reports."""

from __future__ import annotations

import threading
import time

import pytest

from seam.core.errors import SeamError
from seam.spark import each_table


def test_every_table_once_whatever_the_parallelism():
    for parallel in (1, 3, 16):
        got = dict(each_table(list(range(10)), lambda n: n * n, parallel))
        assert got == {n: n * n for n in range(10)}


def test_a_failed_table_stops_new_ones_lets_running_ones_end_and_is_raised():
    started, ended = [], []
    lock = threading.Lock()
    both_running = threading.Barrier(2)

    def work(n: int) -> int:
        with lock:
            started.append(n)
        if n in (0, 1):
            both_running.wait(timeout=10)  # table 0 fails while table 1 runs
        if n == 0:
            raise SeamError("table 0: one clear line")
        time.sleep(0.3 if n == 1 else 0.1)  # a table takes a while: the error is seen before the queue is done
        with lock:
            ended.append(n)
        return n

    yielded = []
    with pytest.raises(SeamError, match="table 0: one clear line"):
        for item, result in each_table(list(range(8)), work, parallel=2):
            yielded.append((item, result))
    assert 1 in ended and (1, 1) in yielded  # the running one ended and was reported
    assert len(started) <= 4, started  # the queued ones never started (the one a free thread took at once may)
