"""Safe-window incremental loads: the rows whose cursor (``updated_at``) lies
in a window, published as one batch (BEGIN with the window, rows, END) that
the sink merges by key, moving the table's watermark in the same transaction.

The window is ``start < cursor <= end`` with ``end`` clamped to the source
database's clock minus the table's safety delay: a transaction that set
``updated_at = T`` but commits up to ``safety_delay`` later is still
invisible when the window containing T closes, so no window may close before
T + delay. The next window starts at the previous end (the watermark), so
rows sharing one timestamp on the edge land in exactly one window, and a
re-run of any window (a backfill) upserts the same current rows again:
idempotent. Windows are compared in the source's own clock and time zone
(DATETIME cursors: the server's time zone; TIMESTAMP cursors: UTC), never the
worker's.

An integer cursor (an auto-increment id, ``id > last``) has no time to delay
by: its window ends at the current maximum, which is unsafe when ids are
allocated by transactions that commit out of order (a lower id committing
after a higher one was loaded is skipped for good); use it only for
append-only tables written by one session at a time.

Deletes cannot be seen by a query: a ``soft_delete`` column (rows marked
deleted are removed from the target) covers soft deletes; hard deletes need
the binlog stream or a periodic full load.

Sync modes (``tables[].sync``): a table is kept current EITHER by windows or
by its stream, and full loads may run at any time in both. Windows are
refused on a ``sync: stream`` table (they would race the stream, and could
not see its hard deletes); the stream does not follow a ``sync: windows``
table, nor a streamed table whose last committed load was a window (it waits
for the next full load, which gives it an exact position to start from).
``soft_delete`` means the same in every mode: the target never holds a row
whose flag is set (a full load drops them at its swap, the stream deletes a
row when its flag is set, and a later hard delete of such a row is expected
to find nothing).

Delivery guarantee: at-least-once into Kafka, exactly-once as a batch (the
sink merges a window only on a matching END); a window's rows are read
without locks and may include newer versions of rows, which is harmless for
an upsert of current rows.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import pymysql

from seam.core.errors import ConfigurationError
from seam.core.identifiers import quote
from seam.core.pipeline import Pipeline, TableConfig
from seam.core.schema import TableSchema, added_by_users, redefined
from seam.source.checks import check_names
from seam.source.full_load import publish_chunks
from seam.source.publication import Publication
from seam.source.schema import read_schema
from seam.source.snapshot import ChunkPlan, plan_chunks
from seam.wire.boundary import End

INITIAL = "1970-01-01 00:00:00.000000"
_TIME_TYPES = {"datetime", "timestamp", "date"}
_INT_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}


def time_text(t: dt.datetime) -> str:
    """A window bound as MySQL reads it: four-digit years (strftime's %Y prints the year 99 as 99, read as 1999)."""
    return t.isoformat(sep=" ", timespec="microseconds")


class IncrementalError(ConfigurationError, ValueError):
    """A window or table that cannot be loaded incrementally; the message says why and what to do."""


@dataclass(frozen=True)
class Window:
    cursor: str
    start: str  # exclusive
    end: str  # inclusive, after the clamp
    requested_end: str
    clamped: bool

    def as_dict(self) -> dict[str, str]:
        return {
            "cursor": self.cursor,
            "start": self.start,
            "end": self.end,
            "requested_end": self.requested_end,
            "clamped": str(self.clamped).lower(),
        }


def _parse_time(value: str, what: str) -> dt.datetime:
    text = value.strip().replace("T", " ").rstrip("Z")
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise IncrementalError(
            f"{what} {value!r} is not a date or timestamp (use e.g. 2026-11-21 or 2026-11-21T06:00:00)"
        ) from None
    return parsed.replace(tzinfo=None)


def check_table(conn, pipeline: Pipeline, table: TableConfig) -> TableSchema:
    if table.sync != "windows":
        raise IncrementalError(
            f"{table.name} is kept current by its stream (tables[].sync: stream), and a window "
            "would race it; re-sync it with `seam load full " + table.name + "`, or set "
            f"sync: windows for it in {pipeline.path or 'the pipeline'}"
        )
    if not table.cursor:
        raise IncrementalError(
            f"{table.name} has no cursor column: set tables[].cursor (e.g. updated_at) in "
            f"{pipeline.path or 'the pipeline'} to load it incrementally"
        )
    if not table.key:
        raise IncrementalError(
            f"{table.name} is keyless: an incremental window is merged by key; load it with `seam load full` instead"
        )
    schema = read_schema(conn, table.db, table.table)
    check_names(schema)
    if table.cursor not in schema.names:
        raise IncrementalError(
            f"{table.name}: cursor column {table.cursor!r} is not in the table (columns: "
            f"{', '.join(schema.names)}); fix tables[].cursor"
        )
    kind = schema.column(table.cursor_column).data_type
    if kind not in _TIME_TYPES | _INT_TYPES:
        raise IncrementalError(
            f"{table.name}: cursor column {table.cursor!r} is {kind}; it must be a date/time "
            "(DATETIME, TIMESTAMP, DATE) or integer column"
        )
    if table.soft_delete and table.soft_delete not in schema.names:
        raise IncrementalError(f"{table.name}: soft_delete column {table.soft_delete!r} is not in the table")
    return schema


def check_cursor_values(conn, schema: TableSchema, table: TableConfig) -> None:
    """A row whose cursor is NULL or a zero date is in no window: its insert, or a change that leaves its
    cursor so, would never reach the target. Asked before each window (a probe of the cursor's index, when it
    has one)."""
    column = schema.column(table.cursor_column)
    x = quote(table.cursor_column)
    unwindowed = [f"{x} IS NULL"] if column.nullable else []
    if column.data_type in ("date", "datetime"):
        unwindowed.append(f"{x} < '0001-01-01'")
    elif column.data_type == "timestamp":
        unwindowed.append(f"{x} = '0000-00-00 00:00:00'")
    if not unwindowed:
        return
    with conn.cursor() as cur:
        cur.execute(f"SELECT 1 FROM {quote(table.db)}.{quote(table.table)} WHERE {' OR '.join(unwindowed)} LIMIT 1")
        if cur.fetchone() is None:
            return
    raise IncrementalError(
        f"{table.name}: rows whose cursor ({table.cursor}) is NULL or a zero date are in no window, so their "
        "inserts and changes would never reach the target; nothing was loaded: give them a cursor value at the "
        "source, or keep the table current by its stream (tables[].sync: stream)"
    )


def check_columns_unchanged(
    table: TableConfig, schema: TableSchema, in_target: list[str] | None, recorded: list[dict] | None
) -> str | None:
    """A window merges rows into the target table as it is (``in_target``: its column names, None when it
    does not exist yet): a column added, dropped or renamed at the source since then is refused now, with the
    way out (the sink rejected every such window, `column ... does not exist`); columns users added to the
    target are left be (``added_by_users``). A column whose definition
    changed since it was ``recorded`` (its last load, or DDL the stream followed) is said, and the window goes
    on: a narrower one fits, a wider one's values may not (the window is then rejected, and the line says why)."""
    theirs = added_by_users(in_target or [], recorded, schema.names)
    if in_target is not None and set(in_target) - set(theirs) != set(schema.names):
        added = [n for n in schema.names if n not in in_target]
        dropped = [n for n in in_target if n not in schema.names and n not in theirs]
        sides = [f"{what}: {', '.join(names)}" for what, names in (("added", added), ("dropped", dropped)) if names]
        raise IncrementalError(
            f"{table.name}: its columns changed at the source since its last load ({'; '.join(sides)}); a window "
            f"does not follow DDL, so nothing was loaded: run `seam load full {table.name}`"
        )
    changed = redefined(recorded or (), schema)
    if not changed:
        return None
    return (
        f"{table.name}: the definition of {', '.join(changed)} changed at the source since its last load; the "
        "window merges into the table as it is (a value it cannot hold rejects the window: then `seam load full "
        f"{table.name}`)"
    )


def source_now(conn, kind: str) -> dt.datetime:
    """The source's clock in the cursor's terms: UTC for TIMESTAMP, the server's time zone otherwise."""
    with conn.cursor() as cur:
        if kind == "timestamp":
            cur.execute("SET time_zone = '+00:00'")
        cur.execute("SELECT NOW(6)")
        now = cur.fetchone()[0]
        cur.execute("SET time_zone = DEFAULT")
    return now


def plan_window(
    pipeline: Pipeline, table: TableConfig, start: str | None, end: str | None, watermark: str | None
) -> tuple[TableSchema, Window]:
    """The window to load: from ``start`` (else the stored watermark, else the beginning) to ``end`` (else
    now), the end clamped to the source's now minus the safety delay. Raises IncrementalError on bad input."""
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs(), connect_timeout=10)
    try:
        schema = check_table(conn, pipeline, table)
        check_cursor_values(conn, schema, table)
        kind = schema.column(table.cursor_column).data_type
        if kind in _INT_TYPES:
            with conn.cursor() as cur:
                cur.execute(
                    f"SELECT COALESCE(MAX({quote(table.cursor_column)}), 0) FROM {quote(table.db)}.{quote(table.table)}"
                )
                top = int(cur.fetchone()[0])
            first = int(start) if start is not None else int(watermark or 0)
            last = min(int(end), top) if end is not None else top
            if end is not None and int(end) <= first:
                raise IncrementalError(f"window end {end} is not after its start {first}")
            return schema, Window(
                table.cursor_column,
                str(first),
                str(last),
                str(end if end is not None else top),
                end is not None and int(end) > top,
            )
        now = source_now(conn, kind)
    finally:
        conn.close()
    safe = now - dt.timedelta(seconds=table.safety_delay_s)
    lo = (
        _parse_time(start, "window start")
        if start is not None
        else (_parse_time(watermark, "stored watermark") if watermark else _parse_time(INITIAL, "initial"))
    )
    requested = _parse_time(end, "window end") if end is not None else now
    if end is not None and requested <= lo:
        raise IncrementalError(f"window end {end} is not after its start {time_text(lo)}")
    if start is not None and lo > now:
        raise IncrementalError(
            f"window start {start} is in the future (the source's clock says {time_text(now)}); nothing was loaded"
        )
    hi = min(requested, safe)
    if hi <= lo:
        raise IncrementalError(
            f"{table.name}: the window ({time_text(lo)}, {time_text(requested)}] "
            f"lies entirely within the safety delay ({table.safety_delay_s:g}s before the source's "
            f"now, {time_text(now)}); nothing is safe to load yet, try again later"
        )
    return schema, Window(table.cursor_column, time_text(lo), time_text(hi), time_text(requested), hi < requested)


def window_condition(schema: TableSchema, window: Window) -> str:
    column = "x." + quote(window.cursor)
    if schema.column(window.cursor).data_type in _INT_TYPES:
        return f"{column} > {int(window.start)} AND {column} <= {int(window.end)}"
    check_time_bounds(window)
    return f"{column} > '{window.start}' AND {column} <= '{window.end}'"


def check_time_bounds(window: Window) -> None:
    """Only our own formatted timestamps reach SQL (MySQL's or PostgreSQL's): a bound may come back from the
    target's stored watermarks, which a message wrote."""
    for value in (window.start, window.end):
        if not re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", value):
            raise IncrementalError(
                f"bad window bound {value!r}: expected YYYY-MM-DD HH:MM:SS.ffffff; if it is a "
                "stored watermark, check seam.watermarks"
            )


def publish_window(
    spark, pipeline: Pipeline, table: TableConfig, batch: str, window: Window, say: Callable[[str], None] = print
) -> End:
    """Publish one window: BEGIN (with the window), its rows read in parallel key chunks, END."""
    started = time.time()
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs(), connect_timeout=10)
    try:
        schema = check_table(conn, pipeline, table)
        plan: ChunkPlan = plan_chunks(conn, schema, table.key, pipeline.spark.partitions)
    finally:
        conn.close()
    publication = Publication(pipeline, table, batch)
    publication.begin("incremental", schema, window=window.as_dict())
    parts = publish_chunks(
        spark,
        pipeline=pipeline,
        topic=publication.topic,
        schema=schema,
        plan=plan,
        key=table.key,
        batch=batch,
        ts_ms=int(started * 1000),
        window=window_condition(schema, window),
        opening=None,
    ).parts
    end = publication.end(
        "incremental",
        None,
        parts,
        window=window.as_dict(),
        stats={
            "read_s": round(time.time() - started, 3),
            "clamped": window.clamped,
            "requested_end": window.requested_end,
        },
    )
    say(
        f"{table.name}: window ({window.start}, {window.end}] published: {end.rows:,} rows in "
        f"{time.time() - started:.1f}s; END sent"
    )
    return end
