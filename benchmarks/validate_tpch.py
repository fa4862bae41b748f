"""The validation case of ``benchmarks/harness.py``: TPC-H ``orders`` (MariaDB source vs PostgreSQL target),
Seam vs reladiff.

1. ``tpch.orders`` at the scale factor, loaded into the target with a fresh ``seam load full`` (the DAGs
   validate right after their loads).
2. Equal tables: ``seam.validate.validation.validate`` and ``reladiff.diff_tables`` (all columns, its defaults:
   bisection factor 32, threshold 16384, the two databases queried in parallel), each timed.
3. Ten scattered differences made in the target (4 changed values, 3 deleted rows, 3 extra rows): both
   again; each must report exactly those 10 keys. Then the target is put back as it was.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))
sys.path.insert(0, str(ROOT / "benchmarks"))


COLUMNS = (
    "o_custkey",
    "o_orderstatus",
    "o_totalprice",
    "o_orderdate",
    "o_orderpriority",
    "o_clerk",
    "o_shippriority",
    "o_comment",
)


def _target(pipeline):
    import psycopg

    return psycopg.connect(**pipeline.target.conninfo(), autocommit=True)


def load(path: str, rows: int) -> None:
    """A fresh full load, so the target's position is recent: validation runs right after loads (that is
    how the DAGs run it); one long after its load pays a binlog scan when some bucket differs."""
    print(f"loading tpch.orders into the target ({rows:,} rows)...", flush=True)
    done = subprocess.run(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", "tpch.orders"],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        sys.exit(f"seam load full failed:\n{done.stdout}\n{done.stderr}")


def run_seam(pipeline, rows: int) -> tuple[float, set]:
    from seam.validate.validation import validate

    started = time.time()
    report = validate(pipeline, pipeline.table("tpch.orders"), limit=100, say=lambda m: None)
    seconds = time.time() - started
    keys = {int(d.key["o_orderkey"]) for d in report.differences}
    print(
        f"seam validate:  {report.verdict:8} {seconds:6.2f}s = {rows / seconds:>10,.0f} rows/s  "
        f"({report.missing} missing, {report.extra} extra, {report.different} different; "
        f"{sum(b.state != 'equal' for b in report.buckets)} of {len(report.buckets)} buckets compared row by row)",
        flush=True,
    )
    return seconds, keys


def run_reladiff(pipeline, rows: int) -> tuple[float, set]:
    import reladiff

    s, t = pipeline.source, pipeline.target
    started = time.time()
    a = reladiff.connect_to_table(
        f"mysql://{s.user}:{s.password.reveal()}@{s.host}:{s.port}/tpch", "orders", "o_orderkey", extra_columns=COLUMNS
    )
    b = reladiff.connect_to_table(
        f"postgresql://{t.user}:{t.password.reveal()}@{t.host}:{t.port}/{t.database}",
        ("tpch", "orders"),
        "o_orderkey",
        extra_columns=COLUMNS,
    )
    found = list(reladiff.diff_tables(a, b))
    seconds = time.time() - started
    keys = {int(row[0]) for _, row in found}
    print(
        f"reladiff:       {'equal' if not found else 'mismatch':8} {seconds:6.2f}s = {rows / seconds:>10,.0f} rows/s  "
        f"({len(found)} +/- rows, {len(keys)} keys)",
        flush=True,
    )
    return seconds, keys


def scatter_differences(pipeline) -> tuple[set, callable]:
    """Ten differences spread over the key range; returns their keys and a function that undoes them."""
    with _target(pipeline) as conn:
        keys = [
            r[0]
            for r in conn.execute(
                "SELECT o_orderkey FROM tpch.orders WHERE o_orderkey % 100003 = 7 ORDER BY o_orderkey"
            ).fetchall()
        ]
        step = max(1, len(keys) // 8)
        picked = keys[::step][:7]
        changed, deleted = picked[:4], picked[4:7]
        top = conn.execute("SELECT max(o_orderkey) FROM tpch.orders").fetchone()[0]
        extra = [top + 1, top + 1000, -5]
        saved = conn.execute("SELECT * FROM tpch.orders WHERE o_orderkey = ANY(%s)", (deleted,)).fetchall()
        conn.execute(
            "UPDATE tpch.orders SET o_totalprice = o_totalprice + 0.01 WHERE o_orderkey = ANY(%s)", (changed[:2],)
        )
        conn.execute("UPDATE tpch.orders SET o_comment = o_comment || 'x' WHERE o_orderkey = ANY(%s)", (changed[2:],))
        conn.execute("DELETE FROM tpch.orders WHERE o_orderkey = ANY(%s)", (deleted,))
        for key in extra:
            conn.execute(
                "INSERT INTO tpch.orders SELECT %s, o_custkey, o_orderstatus, o_totalprice, o_orderdate, "
                "o_orderpriority, o_clerk, o_shippriority, o_comment FROM tpch.orders WHERE o_orderkey = %s",
                (key, changed[0]),
            )

    def undo() -> None:
        with _target(pipeline) as conn:
            conn.execute(
                "UPDATE tpch.orders SET o_totalprice = o_totalprice - 0.01 WHERE o_orderkey = ANY(%s)", (changed[:2],)
            )
            conn.execute(
                "UPDATE tpch.orders SET o_comment = left(o_comment, -1) WHERE o_orderkey = ANY(%s)", (changed[2:],)
            )
            conn.execute("DELETE FROM tpch.orders WHERE o_orderkey = ANY(%s)", (extra,))
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO tpch.orders VALUES ({', '.join(['%s'] * 9)})", saved)

    return set(changed) | set(deleted) | set(extra), undo
