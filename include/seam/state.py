"""The ``seam`` state schema in the target: its tables, and the heartbeats of
the stream's parts.

Tables: ``batches`` (the load ledger), ``batch_parts``, ``offsets`` (Kafka
offsets stored with the data), ``positions`` (each table's applied source
position and stream state), ``watermarks``, ``held_changes``, and
``cascade_rows`` (rows changed by a foreign-key cascade, kept until every
table has applied past them), and ``stream_parts``: one row per pipeline and stream part (reader, sink) with
its last heartbeat, micro-batches done since it started, restarts and the
last error. ``seam stream status`` reads the parts from here, so it sees
them however they were started (the CLI, Airflow, a process supervisor, a
cluster) and on whichever host.

Delivery guarantee: none of its own; the sink writes positions and offsets
in the transaction of the data they describe. Heartbeats are best effort.
"""

from __future__ import annotations

import json
import os
import socket

from seam.records import Position
from seam.target import qi

PART_DEAD_AFTER_S = 20.0  # a part whose last heartbeat is older is down
PART_LOOPING_S = 120.0  # a part that restarted within this is restarting, not running


def state_ddl(schema: str) -> list[str]:
    s = qi(schema)
    return [
        f"CREATE SCHEMA IF NOT EXISTS {s}",
        f"""CREATE TABLE IF NOT EXISTS {s}.batches (
            batch_id text PRIMARY KEY, db text NOT NULL, tbl text NOT NULL, mode text NOT NULL,
            state text NOT NULL CHECK (state IN ('open', 'committed', 'rejected', 'superseded')),
            topic text NOT NULL, begin_offset bigint, end_offset bigint,
            position_file text, position_pos bigint,
            window_start text, window_end text,
            published_rows bigint, staged_rows bigint NOT NULL DEFAULT 0, final_rows bigint,
            published_checksum numeric(20,0),
            columns jsonb NOT NULL, key_columns jsonb NOT NULL, stats jsonb,
            error text,
            opened_at timestamptz NOT NULL DEFAULT now(), ended_at timestamptz, finished_at timestamptz)""",
        f"CREATE INDEX IF NOT EXISTS batches_table_idx ON {s}.batches (db, tbl, opened_at)",
        f"ALTER TABLE {s}.batches ADD COLUMN IF NOT EXISTS begin_window jsonb, ADD COLUMN IF NOT EXISTS soft_delete text",
        f"""CREATE TABLE IF NOT EXISTS {s}.batch_parts (
            batch_id text NOT NULL, part integer NOT NULL, attempt bigint NOT NULL,
            rows bigint NOT NULL, checksum numeric(20,0) NOT NULL,
            PRIMARY KEY (batch_id, part, attempt))""",
        f"""CREATE TABLE IF NOT EXISTS {s}.offsets (
            topic text NOT NULL, partition integer NOT NULL, next_offset bigint NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (topic, partition))""",
        f"ALTER TABLE {s}.offsets ADD COLUMN IF NOT EXISTS topic_id text",
        f"""CREATE TABLE IF NOT EXISTS {s}.positions (
            db text NOT NULL, tbl text NOT NULL, file text NOT NULL, pos bigint NOT NULL, row_index integer NOT NULL,
            batch_id text, updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (db, tbl))""",
        # the stream's view of a table: columns after ADD COLUMN, a stop on other DDL, the last gap seen,
        # the source time of the applied position (lag in seconds) and how many changes were applied
        f"""ALTER TABLE {s}.positions ADD COLUMN IF NOT EXISTS columns jsonb,
            ADD COLUMN IF NOT EXISTS stopped text, ADD COLUMN IF NOT EXISTS gap_at timestamptz,
            ADD COLUMN IF NOT EXISTS source_ms bigint, ADD COLUMN IF NOT EXISTS changes bigint NOT NULL DEFAULT 0""",
        # the GTID set executed through the position and the server it was read on (seam.gtid): NULL when
        # not known, never a set of another position
        f"ALTER TABLE {s}.positions ADD COLUMN IF NOT EXISTS gtids text, ADD COLUMN IF NOT EXISTS server text",
        f"""CREATE TABLE IF NOT EXISTS {s}.watermarks (
            db text NOT NULL, tbl text NOT NULL, cursor_column text NOT NULL, watermark text NOT NULL,
            batch_id text NOT NULL, window_start text, window_end text, clamped boolean NOT NULL DEFAULT false,
            updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (db, tbl, cursor_column))""",
        f"""CREATE TABLE IF NOT EXISTS {s}.held_changes (
            topic text NOT NULL, seq bigint NOT NULL, value bytea NOT NULL, PRIMARY KEY (topic, seq))""",
        # the rows a foreign-key cascade changed in a table at a source position, for the levels below it
        # (seam.cascades); a record with no rows says the cascade was applied and changed nothing
        f"""CREATE TABLE IF NOT EXISTS {s}.cascade_rows (
            db text NOT NULL, tbl text NOT NULL, file text NOT NULL, file_no integer NOT NULL, pos bigint NOT NULL,
            row_index integer NOT NULL, rows jsonb NOT NULL)""",
        f"CREATE INDEX IF NOT EXISTS cascade_rows_at_idx ON {s}.cascade_rows (db, tbl, file_no, pos, row_index)",
        f"ALTER TABLE {s}.cascade_rows ADD COLUMN IF NOT EXISTS recorded_at timestamptz NOT NULL DEFAULT now()",
        f"""CREATE TABLE IF NOT EXISTS {s}.stream_parts (
            pipeline text NOT NULL, part text NOT NULL, host text NOT NULL, pid integer NOT NULL,
            started_at timestamptz NOT NULL, beat_at timestamptz NOT NULL, batches bigint NOT NULL DEFAULT 0,
            restarts integer NOT NULL DEFAULT 0, failed_at timestamptz, last_error text, stopped_at timestamptz,
            PRIMARY KEY (pipeline, part))""",
    ]


def ensure_state(conn, schema: str) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(54010)")  # concurrent first runs must not race on DDL
        for stmt in state_ddl(schema):
            conn.execute(stmt)


def table_state(conn, schema: str, db: str, table: str) -> tuple[Position, str | None] | None:
    """A table's applied source position and why its stream stopped (None: running), or None if never loaded."""
    row = conn.execute(
        f"SELECT file, pos, row_index, stopped FROM {qi(schema)}.positions WHERE db = %s AND tbl = %s", (db, table)
    ).fetchone()
    return None if row is None else (Position(row[0], row[1], row[2]), row[3])


def applied_source_time(conn, schema: str, db: str, table: str) -> tuple[int | None, str | None] | None:
    """When (source time, epoch ms) the table's applied position was written at the source, and why its
    stream stopped (None: running); None if the target has no position for it."""
    row = conn.execute(
        f"SELECT source_ms, stopped FROM {qi(schema)}.positions WHERE db = %s AND tbl = %s", (db, table)
    ).fetchone()
    return None if row is None else (row[0], row[1])


def record_cascade(conn, schema: str, db: str, table: str, at: Position, rows: list) -> None:
    """What a cascade at ``at`` changed in a table: ``[deleted, old, new]`` per row (column -> text)."""
    conn.execute(
        f"INSERT INTO {qi(schema)}.cascade_rows (db, tbl, file, file_no, pos, row_index, rows) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (db, table, at.file, *at.sort_key, json.dumps(rows)),
    )


def recorded_cascade(conn, schema: str, db: str, table: str, at: Position) -> list | None:
    """The rows cascades at ``at`` changed in a table, or None if no cascade there was applied to it."""
    found = conn.execute(
        f"SELECT rows FROM {qi(schema)}.cascade_rows WHERE db = %s AND tbl = %s AND file_no = %s "
        "AND pos = %s AND row_index = %s",
        (db, table, *at.sort_key),
    ).fetchall()
    return None if not found else [row for (rows,) in found for row in rows]


def forget_cascades(conn, schema: str, tables: list[tuple[str, str]]) -> None:
    """Drop recorded cascade rows that every running table of ``tables`` has applied past, and that are ten
    minutes old: a table being loaded may still need them (its snapshot can precede them, and its position
    is known only at its END), so nothing goes while a load of one of them is open either."""
    s, names = qi(schema), ([db for db, _ in tables], [t for _, t in tables])
    if conn.execute(
        f"SELECT EXISTS (SELECT 1 FROM {s}.batches WHERE state = 'open' AND (db, tbl) IN "
        "(SELECT * FROM unnest(%s::text[], %s::text[])))",
        names,
    ).fetchone()[0]:
        return
    rows = conn.execute(
        f"SELECT file, pos FROM {s}.positions WHERE stopped IS NULL AND (db, tbl) IN "
        "(SELECT * FROM unnest(%s::text[], %s::text[]))",
        names,
    ).fetchall()
    if rows:
        low = min(Position.through(file, pos) for file, pos in rows)
        conn.execute(
            f"DELETE FROM {s}.cascade_rows WHERE (file_no, pos) < (%s, %s) AND "
            "recorded_at < now() - interval '10 minutes'",
            low.sort_key[:2],
        )


def part_started(conn, schema: str, pipeline: str, part: str, fresh: bool) -> None:
    """A stream part (re)starts; ``fresh``: a new start, not a restart after a failure (counts reset)."""
    s = qi(schema)
    conn.execute(
        f"INSERT INTO {s}.stream_parts (pipeline, part, host, pid, started_at, beat_at) "
        "VALUES (%s, %s, %s, %s, now(), now()) ON CONFLICT (pipeline, part) DO UPDATE SET "
        "host = EXCLUDED.host, pid = EXCLUDED.pid, started_at = now(), beat_at = now(), batches = 0, "
        "stopped_at = NULL" + (", restarts = 0, failed_at = NULL, last_error = NULL" if fresh else ""),
        (pipeline, part, socket.gethostname(), os.getpid()),
    )


def part_beat(conn, schema: str, pipeline: str, part: str, batches: int = 0) -> None:
    conn.execute(
        f"UPDATE {qi(schema)}.stream_parts SET beat_at = now(), batches = batches + %s "
        "WHERE pipeline = %s AND part = %s",
        (batches, pipeline, part),
    )


def part_failed(conn, schema: str, pipeline: str, part: str, error: str) -> None:
    conn.execute(
        f"UPDATE {qi(schema)}.stream_parts SET restarts = restarts + 1, failed_at = now(), "
        "last_error = %s, beat_at = now() WHERE pipeline = %s AND part = %s",
        (error[:1000], pipeline, part),
    )


def part_stopped(conn, schema: str, pipeline: str, part: str) -> None:
    conn.execute(
        f"UPDATE {qi(schema)}.stream_parts SET stopped_at = now() WHERE pipeline = %s AND part = %s", (pipeline, part)
    )


def supervisor_ran(conn, schema: str, pipeline: str, problems: list[str], stop: bool | None) -> None:
    """The stream supervisor's own heartbeat (part ``supervisor``) with its problems, if any; ``stop`` True
    records that the stream was stopped on request (a scheduled supervisor leaves it stopped), False that
    it was started (None: as it was)."""
    conn.execute(
        f"INSERT INTO {qi(schema)}.stream_parts (pipeline, part, host, pid, started_at, beat_at, last_error, "
        "stopped_at) VALUES (%s, 'supervisor', %s, %s, now(), now(), %s, CASE WHEN %s THEN now() END) "
        "ON CONFLICT (pipeline, part) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, beat_at = now(), "
        "last_error = EXCLUDED.last_error, stopped_at = CASE WHEN %s THEN now() WHEN %s THEN NULL "
        "ELSE stream_parts.stopped_at END",
        (
            pipeline,
            socket.gethostname(),
            os.getpid(),
            "; ".join(problems)[:1000] or None,
            bool(stop),
            stop is True,
            stop is False,
        ),
    )


def part_states(conn, schema: str, pipeline: str) -> dict[str, dict]:
    """Per part: ``state`` (running, starting, restarting, stopped, down) and what shows it."""
    rows = conn.execute(
        f"SELECT part, host, pid, batches, restarts, last_error, stopped_at IS NOT NULL, "
        f"extract(epoch FROM now() - beat_at), extract(epoch FROM now() - failed_at), "
        f"extract(epoch FROM now() - started_at) FROM {qi(schema)}.stream_parts WHERE pipeline = %s",
        (pipeline,),
    ).fetchall()
    out = {}
    for part, host, pid, batches, restarts, error, stopped, beat_age, failed_age, up_s in rows:
        if stopped:
            state = "stopped"
        elif beat_age > PART_DEAD_AFTER_S:
            state = "down"
        elif failed_age is not None and failed_age < PART_LOOPING_S:
            state = "restarting"
        elif batches == 0:
            state = "starting"
        else:
            state = "running"
        out[part] = dict(
            state=state,
            host=host,
            pid=pid,
            batches=batches,
            restarts=restarts,
            last_error=error,
            beat_age=float(beat_age),
            up_s=float(up_s),
            failed_age=None if failed_age is None else float(failed_age),
        )
    return out


def table_summary(conn, schema: str, db: str, table: str) -> dict:
    """What a person asks of one table after a run: its last committed full load (rows, seconds), its
    watermark (windows), and its last validation (verdict, target rows, when); absent parts are None."""
    s = qi(schema)
    load = conn.execute(
        f"SELECT final_rows, extract(epoch FROM finished_at - opened_at) FROM {s}.batches "
        "WHERE db = %s AND tbl = %s AND mode = 'full' AND state = 'committed' "
        "ORDER BY opened_at DESC LIMIT 1",
        (db, table),
    ).fetchone()
    mark = conn.execute(
        f"SELECT watermark FROM {s}.watermarks WHERE db = %s AND tbl = %s ORDER BY updated_at DESC LIMIT 1", (db, table)
    ).fetchone()
    checked = None
    if conn.execute("SELECT to_regclass(%s)", (f"{s}.validations",)).fetchone()[0]:
        checked = conn.execute(
            f"SELECT verdict, target_rows, checked_at FROM {s}.validations WHERE db = %s AND "
            "tbl = %s ORDER BY checked_at DESC LIMIT 1",
            (db, table),
        ).fetchone()
    return {
        "load_rows": load[0] if load else None,
        "load_seconds": float(load[1]) if load and load[1] else None,
        "watermark": mark[0] if mark else None,
        "verdict": checked[0] if checked else None,
        "rows": checked[1] if checked else None,
        "checked_at": checked[2] if checked else None,
    }
