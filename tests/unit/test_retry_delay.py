"""How long a stream part waits after a failure (``seam.state.parts.retry_delay``): at once again after a
pass that ran for a while, doubling up to half a minute while passes keep failing quickly; and the wait ends early
when the part is asked to stop (``wait_unless``)."""

from __future__ import annotations

import time

from seam.state.parts import PART_DEAD_AFTER_S, PART_LOOPING_S, RETRY_FIRST_S, RETRY_MAX_S, retry_delay, wait_unless


def test_quick_failures_back_off_up_to_half_a_minute_and_a_long_pass_starts_over():
    delays, delay = [], None
    for _ in range(8):
        delay = retry_delay(delay, ran_s=0.3)
        delays.append(delay)
    assert delays == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]
    assert (RETRY_FIRST_S, RETRY_MAX_S) == (2.0, 30.0)
    assert retry_delay(60.0, ran_s=PART_LOOPING_S + 1) == RETRY_FIRST_S  # a broker restart after hours


def test_a_back_off_ends_when_the_part_is_stopped():
    asked = time.monotonic() + 0.3
    began = time.monotonic()
    wait_unless(lambda: time.monotonic() > asked, 30.0)
    assert time.monotonic() - began < 2.0
    began = time.monotonic()
    wait_unless(lambda: False, 0.6)
    assert 0.55 < time.monotonic() - began < 2.0


def test_a_part_waiting_to_try_again_beats_so_it_is_not_down():
    beats: list[float] = []
    began = time.monotonic()
    wait_unless(lambda: False, 1.0, beat=lambda: beats.append(time.monotonic() - began), every=0.3)
    assert 2 <= len(beats) <= 3 and all(b - a >= 0.29 for a, b in zip([0.0, *beats], beats)), beats
    assert wait_unless.__defaults__[-1] < PART_DEAD_AFTER_S / 2  # by default: well inside the time to DOWN
