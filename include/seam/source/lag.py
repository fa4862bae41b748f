"""How far behind the source each streamed table is: binlog bytes, the table's own row events and seconds
between the target's applied position and the source's head, read from the two databases (never from
Kafka), plus the sink's recent rate. ``seam stream status``, ``seam stream wait``, the supervisor and
``seam summary`` print it.

Delivery guarantee: none (reads only).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pymysql

from seam.core.pipeline import Pipeline, TableConfig
from seam.core.position import Position
from seam.source.gtid import server_identity
from seam.source.head import binlog_files, binlog_sizes
from seam.source.snapshot import source_head
from seam.state.connection import connect_target
from seam.state.positions import lag_sample
from seam.state.schema import ensure_state


@dataclass(frozen=True)
class TableLag:
    table: str
    applied: Position | None
    behind_bytes: int | None  # binlog bytes between the applied position and the source's head
    behind_events: int | None  # row events of this table in between (capped at ``EVENT_SCAN_CAP``)
    behind_seconds: float | None
    changes_per_s: float | None
    stopped: str | None


EVENT_SCAN_CAP = 200_000


def table_events_between(
    pipeline: Pipeline, files: list[str], db: str, table: str, start: Position, head: Position
) -> int:
    """Row events of ``db.table`` in the binlog after ``start`` up to ``head`` (each is preceded by a
    Table_map event naming the table), counted on the source without reading row data."""
    if start.file not in files:
        return EVENT_SCAN_CAP
    count, scanned = 0, 0
    names = tuple(f"({n})".encode() for n in (f"`{db}`.`{table}`", f"{db}.{table}"))
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs(), use_unicode=False)  # Info holds raw bytes
    try:
        with conn.cursor() as cur:
            for file in files[files.index(start.file) :]:
                cur.execute(
                    f"SHOW BINLOG EVENTS IN %s FROM {int(start.pos) if file == start.file else 4} "
                    f"LIMIT {EVENT_SCAN_CAP - scanned}",
                    (file,),
                )
                for _, _, kind, _, _, info in cur.fetchall():
                    scanned += 1
                    if kind == b"Table_map" and info.endswith(names):
                        count += 1
                if file == head.file or scanned >= EVENT_SCAN_CAP:
                    break
    finally:
        conn.close()
    return count


def stream_lag(pipeline: Pipeline, tables: list[TableConfig], sample_s: float = 1.0) -> tuple[Position, list[TableLag]]:
    """Per table: where the source is, what the target has applied, and the distance in bytes, events and
    seconds (from the two databases' positions, never from Kafka), plus the sink's recent changes/s."""
    source = pymysql.connect(**pipeline.source.pymysql_kwargs())
    target = connect_target(pipeline)
    target.autocommit = True
    ensure_state(target, pipeline.target.state_schema)

    def read() -> dict:
        return lag_sample(target, pipeline.target.state_schema)

    try:
        first, began = read(), time.monotonic()
        time.sleep(sample_s)
        second, elapsed = read(), time.monotonic() - began
        head = source_head(source)
        files = binlog_files(source)
        here = server_identity(source)
        out = []
        for t in tables:
            row = second.get((t.db, t.table))
            if row is None:
                out.append(TableLag(t.name, None, None, None, None, None, None))
                continue
            file, pos, row_index, source_ms, changes, stopped, now_ms, server = row
            applied = Position(file, pos, row_index)
            if server not in (None, here):  # read on another server; the reader has not moved it here yet
                out.append(TableLag(t.name, applied, None, None, None, None, stopped))
                continue
            behind_bytes: int | None
            if applied.file == head.file:
                behind_bytes = max(0, head.pos - applied.pos)
            else:
                sizes = binlog_sizes(source)
                names = files[files.index(applied.file) :] if applied.file in files else []
                behind_bytes = sum(sizes.get(f, 0) for f in names) - applied.pos if names else None
            events = table_events_between(pipeline, files, t.db, t.table, applied, head) if behind_bytes else 0
            seconds = 0.0 if not events else (max(0.0, (now_ms - source_ms) / 1000) if source_ms else None)
            before = first.get((t.db, t.table))
            # (a load that committed between the two looks starts the count again: no rate, not a negative one)
            rate = (changes - before[4]) / elapsed if before and changes >= before[4] else None
            out.append(TableLag(t.name, applied, behind_bytes, events, seconds, rate, stopped))
        return head, out
    finally:
        source.close()
        target.close()
