"""Row-by-row comparison of a source table and its target, for tests: both
sides are read and normalised with the record shape's rules, then compared
as multisets (keyless tables may hold identical rows)."""

from __future__ import annotations

import collections
import json

import psycopg
import pymysql

from seam.apply.target import normalize_target
from seam.core.identifiers import qi
from seam.source.schema import read_schema
from seam.wire.records import normalize_row


def _canon(row: dict) -> str:
    return json.dumps(row, sort_keys=True)


def source_rows(pipeline, db: str, table: str, snapshot: bool = False) -> tuple[collections.Counter, object]:
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs(utc=True))
    try:
        schema = read_schema(conn, db, table)
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            if snapshot:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cols = ", ".join("`" + c.replace("`", "``") + "`" for c in schema.names)
            cur.execute(f"SELECT {cols} FROM `{db.replace('`', '``')}`.`{table.replace('`', '``')}`")
            rows = collections.Counter(_canon(normalize_row(schema, r)) for r in cur.fetchall())
        return rows, schema
    finally:
        conn.close()


def target_rows(pipeline, schema) -> collections.Counter:
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        # a zero date is null in records; in a NOT NULL column the target holds it as -infinity (target.zero_dates)
        cols = ", ".join(
            f"NULLIF({qi(c.name)}, '-infinity')" if c.data_type in ("date", "datetime", "timestamp") else qi(c.name)
            for c in schema.columns
        )
        cur = conn.execute(f"SELECT {cols} FROM {qi(schema.db)}.{qi(schema.table)}")
        return collections.Counter(
            _canon({c.name: normalize_target(c, v) for c, v in zip(schema.columns, row)}) for row in cur
        )


def diff(source: collections.Counter, target: collections.Counter, limit: int = 5) -> str:
    missing, extra = source - target, target - source
    return (
        f"{sum(missing.values())} missing, {sum(extra.values())} extra; missing e.g. {list(missing)[:limit]}; "
        f"extra e.g. {list(extra)[:limit]}"
    )


def replay_to_now(pipeline, schema, rows_at: collections.Counter, position) -> collections.Counter:
    """Apply the binlog changes after ``position`` (until the binlog's current end) to a table image
    taken at ``position``: the result must equal the source table now. Keyed by whole rows, so it works
    for keyless tables too (a delete removes one identical row)."""
    from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

    from tests.support.library_binlog import binlog_values, library_stream

    image = collections.Counter(rows_at)
    stream = library_stream(pipeline, position, schema.db, [schema.table], server_offset=300)
    try:
        for event in stream:
            for row in event.rows:
                if isinstance(event, UpdateRowsEvent):
                    before = _canon(
                        normalize_row(schema, binlog_values(row["before_values"], row.get("before_none_sources")))
                    )
                    after = _canon(
                        normalize_row(schema, binlog_values(row["after_values"], row.get("after_none_sources")))
                    )
                elif isinstance(event, WriteRowsEvent):
                    before, after = (
                        None,
                        _canon(normalize_row(schema, binlog_values(row["values"], row.get("none_sources")))),
                    )
                else:
                    before, after = (
                        _canon(normalize_row(schema, binlog_values(row["values"], row.get("none_sources")))),
                        None,
                    )
                if before is not None:
                    assert image[before] > 0, f"binlog deletes a row the image at {position} does not have: {before}"
                    image[before] -= 1
                    if not image[before]:
                        del image[before]
                if after is not None:
                    image[after] += 1
    finally:
        stream.close()
    return image
