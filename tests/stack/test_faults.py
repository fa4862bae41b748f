"""`make faults` in CI: the short list (one fault of each kind) under a running writer, each followed by
the way out Seam prints and the independent comparer (tests/faults/run.py has the whole list)."""

from __future__ import annotations

import pytest

from tests.faults.run import run_faults, table

pytestmark = pytest.mark.stack  # the short list restarts no service; its faults reach only its own sessions


def test_faults_short_list(stack):
    outcomes = run_faults(short=True, say=lambda m: print(f"[faults] {m}", flush=True))
    failed = [o for o in outcomes if not o.passed]
    assert not failed, "\n" + table(outcomes)
    assert len(outcomes) == 8
