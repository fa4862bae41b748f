"""`make torture` in CI: a short fixed seed of the randomized differential test (tests/torture/run.py).

The seeded workload (multi-table transactions, savepoints, XA, rollbacks, upserts, REPLACE, key moves,
DELETE ... LIMIT, cascading parent deletes and key updates, a keyless table, a 40,000-row transaction)
runs while the tables are loaded, one is loaded again (that load SIGKILLed part way, then run again), rows
of one table are tampered with in the target and repaired, and the reader, the sink and the broker are
SIGKILLed; the independent comparer must then find every table equal to its source. CI runs it with the
portable snapshot method (MySQL 8's) forced, and the Structured Streaming sink (``stream.sink: spark``):
every other stack test loads with MariaDB's method, and streams with the default, direct sink."""

from __future__ import annotations

import pytest

from tests.torture.run import torture

pytestmark = pytest.mark.stack


def test_torture_short_fixed_seed(stack, private_broker, monkeypatch):
    monkeypatch.setenv("SEAM_SNAPSHOT", "portable")
    report = torture(
        seed=1,
        duration=20,
        big_rows=40_000,
        say=lambda m: print(f"[torture] {m}", flush=True),
        broker=private_broker,
        sink="spark",
    )
    assert report["result"] == "equal" and not report["differences"], report
    assert all(n >= 1 for n in report["kills"].values()), report["kills"]
    assert len(report["loads"]) == 2, report["loads"]  # every table, then one again mid-run (killed, then again)
    assert len(report["repairs"]) == 1 and "differing row(s) found" in report["repairs"][0], report["repairs"]
    assert report["transactions"]["in all"] > 200, report["transactions"]
    assert all(report["transactions"][shape] > 0 for shape in ("savepoints", "rollback", "xa", "xa_rollback"))
    assert report["changes_applied"] > 40_000, report["changes_applied"]
    assert report["snapshot"] == "portable" and report["sink"] == "spark"
