"""The demo schema: every awkward type stored as intended, and a writer that really writes."""

from __future__ import annotations

import json
import os

import pytest

from seam_dev import demo

pytestmark = pytest.mark.stack


def test_seed_creates_the_schema_with_edge_values(seeded):
    assert seeded == {"accounts": 100, "payments": 2000, "audit_log": 500, "type_zoo": 50}
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], "demo")
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA='demo' AND TABLE_NAME='audit_log'"
        )
        assert cur.fetchone()[0] == 0  # keyless: no index at all
        cur.execute("SELECT COUNT(*) - COUNT(DISTINCT logged_at, account_id, action, detail) FROM audit_log")
        assert cur.fetchone()[0] > 0  # and it has identical rows
        cur.execute(
            "SELECT amount, big_unsigned, happened_at, CAST(clock AS CHAR), flags, vintage, "
            "HEX(payload), doc, note FROM type_zoo WHERE id = 1"
        )
        amount, big, happened, clock, flags, vintage, payload, doc, note = cur.fetchone()
        assert str(amount) == "99999999999999.999999" and big == 2**64 - 1
        assert happened.isoformat() == "9999-12-31T23:59:59.999999"
        assert clock == "-838:59:59.000000" and flags == b"\x0f\xff" and vintage == 1901
        assert json.loads(doc)["tags"] == ["a", "ü"]
        cur.execute("SELECT COUNT(*) FROM type_zoo WHERE note LIKE '%💸%'")
        assert cur.fetchone()[0] > 0  # 4-byte UTF-8 survives
    conn.close()


def test_writer_runs_a_concurrent_mix(stack, pipeline):
    # its own database, so the shared seeded data stays as seeded for other tests
    demo.seed(pipeline, rows=500, admin_url=os.environ["SEAM_MYSQL_URL"], database="writer_test", log=lambda m: None)
    stats = demo.run_writer(
        os.environ["SEAM_MYSQL_URL"], rate=400, seconds=3, threads=2, seed=7, database="writer_test"
    )
    for op in ("insert payments", "update payments", "delete payments", "update accounts", "insert audit_log"):
        assert stats.get(op, 0) > 0, stats
    changes = sum(v for k, v in stats.items() if " " in k)
    assert 600 <= changes <= 1400, stats  # about rate x seconds
