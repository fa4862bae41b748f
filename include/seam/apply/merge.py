"""An incremental window merged by key into the target table, and the table's watermark moved.

Delivery guarantee: exactly once per window; the merge and the watermark commit together with the batch,
and the watermark never moves back (a backfilled older window leaves it).
"""

from __future__ import annotations

from seam.apply import SinkError
from seam.apply.batch import OpenBatch
from seam.apply.decode import flagged_sql
from seam.apply.swap import ensure_schema
from seam.apply.target import create_table_sql, target_table
from seam.core.identifiers import qi
from seam.state.ledger import store_watermark
from seam.wire.boundary import End


def merge_window(conn, state_schema: str, batch: OpenBatch, end: End) -> int:
    """An incremental window: upsert its rows by key (soft-deleted rows are deleted), and move the
    table's watermark forward (never back: a backfilled older window leaves it) in this transaction."""
    begin = batch.begin
    if not begin.key:
        raise SinkError("an incremental window needs a key to merge by")
    stage, target = batch.stage, target_table(begin.db, begin.table)
    key = [qi(k) for k in begin.key]
    match = " AND ".join(f"t.{k} = s.{k}" for k in key)
    cols = ", ".join(qi(n) for n in batch.schema.names)
    ensure_schema(conn, begin.db)
    conn.execute(
        create_table_sql(
            target,
            batch.schema,
            tuple(begin.key),
            landing=batch.staging.landing,
            extra=f"PRIMARY KEY ({', '.join(key)})",
        ).replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1)
    )
    conn.execute(f"DELETE FROM {target} t USING {stage} s WHERE {match}")
    keep = f"WHERE NOT {flagged_sql(begin.soft_delete)}" if begin.soft_delete else ""
    merged = conn.execute(
        f"INSERT INTO {target} ({cols}) SELECT DISTINCT ON ({', '.join(key)}) {cols} "
        f"FROM {stage} {keep} ORDER BY {', '.join(key)}"
    ).rowcount
    conn.execute(f"DROP TABLE {stage}")
    conn.execute(f"DROP TABLE {batch.changes}")
    store_watermark(conn, state_schema, begin, clamped=bool(end.stats.get("clamped")))
    return merged
