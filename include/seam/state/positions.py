"""Each table's applied source position and stream state (``positions``), the Kafka offsets stored with
the data (``offsets``), change events held while a batch is open (``held_changes``), and the rows
foreign-key cascades changed (``cascade_rows``).

The sink moves a table's position in the transaction that applies the changes up to it; the change reader
reads positions to know where to publish from, and ``gap_at`` is how the sink asks it to publish again.

Delivery guarantee: none of its own; positions and offsets are exact because every function here runs in
the caller's transaction, the one that carries the data they describe.
"""

from __future__ import annotations

import json
from typing import Any

from seam.core.identifiers import qi
from seam.core.position import Position
from seam.state.ledger import any_open


def applied_position(conn, schema: str, db: str, table: str) -> Position | None:
    row = conn.execute(
        f"SELECT file, pos, row_index FROM {qi(schema)}.positions WHERE db = %s AND tbl = %s", (db, table)
    ).fetchone()
    return Position(*row) if row else None


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


def store_loaded_position(
    conn, schema: str, db: str, table: str, batch: str, at: Position, gtids, server, source_ms: int | None
) -> None:
    """A full load committed at ``at``: the table's stream starts there afresh (not stopped, no columns
    added, no gap, no changes counted)."""
    conn.execute(
        f"INSERT INTO {qi(schema)}.positions (db, tbl, file, pos, row_index, batch_id, gtids, server, "
        "source_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (db, tbl) DO UPDATE SET "
        "file = EXCLUDED.file, pos = EXCLUDED.pos, row_index = EXCLUDED.row_index, batch_id = EXCLUDED.batch_id, "
        "updated_at = now(), columns = NULL, stopped = NULL, repair_due = NULL, gap_at = NULL, "
        "source_ms = EXCLUDED.source_ms, "
        "changes = 0, gtids = EXCLUDED.gtids, server = EXCLUDED.server",
        (db, table, at.file, at.pos, at.row, batch, gtids, server, source_ms),
    )


def store_stream_position(
    conn,
    schema: str,
    db: str,
    table: str,
    at: Position,
    source_ms: int | None,
    changes: int,
    gtids,
    server,
    *,
    was: Position,
) -> bool:
    """The stream applied a table's changes through ``at`` (``changes`` more of them), if the table's position
    is still ``was`` (what the caller last read or wrote there); False, and nothing written, if another
    process moved it meanwhile (taking the row's lock, so that of two such writers the second waits for the
    first and then sees its position)."""
    cur = conn.execute(
        f"INSERT INTO {qi(schema)}.positions (db, tbl, file, pos, row_index, batch_id, source_ms, changes, gtids, "
        "server) VALUES (%s, %s, %s, %s, %s, NULL, %s, %s, %s, %s) ON CONFLICT (db, tbl) DO UPDATE SET "
        "file = EXCLUDED.file, pos = EXCLUDED.pos, row_index = EXCLUDED.row_index, source_ms = EXCLUDED.source_ms, "
        "changes = positions.changes + EXCLUDED.changes, gtids = EXCLUDED.gtids, server = EXCLUDED.server, "
        "updated_at = now() WHERE positions.file = %s AND positions.pos = %s "
        "AND positions.row_index IS NOT DISTINCT FROM %s",
        (db, table, at.file, at.pos, at.row, source_ms, changes, gtids, server, was.file, was.pos, was.row),
    )
    return cur.rowcount == 1


def stop_stream(conn, schema: str, db: str, table: str, reason: str, repair_due: bool = False) -> None:
    """The table's stream stops here (until its next full load or repair), for ``reason``; ``repair_due``: the
    process that runs the streaming sink starts its repair (``claim_due_repairs``)."""
    conn.execute(
        f"UPDATE {qi(schema)}.positions SET stopped = %s, repair_due = CASE WHEN %s THEN now() END "
        "WHERE db = %s AND tbl = %s",
        (reason, repair_due, db, table),
    )


def claim_due_repairs(conn, schema: str, tables: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Of ``tables``, those whose stop waits for a repair (``stop_stream``), no longer due once returned: of
    two callers only one gets each."""
    rows = conn.execute(
        f"UPDATE {qi(schema)}.positions SET repair_due = NULL WHERE repair_due IS NOT NULL AND stopped IS NOT NULL "
        "AND (db, tbl) IN (SELECT * FROM unnest(%s::text[], %s::text[])) RETURNING db, tbl",
        ([d for d, _ in tables], [t for _, t in tables]),
    ).fetchall()
    return [(db, tbl) for db, tbl in rows]


def note_stop(conn, schema: str, db: str, table: str, note: str) -> None:
    """Add ``note`` (what was done about it) to the reason a stopped table gives; nothing if it runs."""
    conn.execute(
        f"UPDATE {qi(schema)}.positions SET stopped = stopped || %s WHERE db = %s AND tbl = %s AND stopped IS NOT NULL",
        (note, db, table),
    )


def store_columns(conn, schema: str, db: str, table: str, columns: list[dict]) -> None:
    """The table's columns after an ADD COLUMN the stream followed."""
    conn.execute(
        f"UPDATE {qi(schema)}.positions SET columns = %s WHERE db = %s AND tbl = %s",
        (json.dumps(columns), db, table),
    )


def report_gap(conn, schema: str, db: str, table: str) -> None:
    """Ask the change reader to publish the table's changes again from its applied position. The time is the
    clock's, not the transaction's start: the reader compares it with when it last rewound."""
    conn.execute(
        f"UPDATE {qi(schema)}.positions SET gap_at = clock_timestamp() WHERE db = %s AND tbl = %s", (db, table)
    )


def stream_start(conn, schema: str, db: str, tbl: str) -> tuple | None:
    """Where the stream of a table starts: (db, tbl, columns, key columns, file, pos, row, source_ms, mode of its
    last committed load, gtids, server), or None without a committed load or when stopped. The table's last
    load, whatever topic it went through, as the change reader takes it (``followed_tables``): looked up by the
    topic, a pipeline whose topic_prefix had changed since the load found none, and its sink passed over every
    change the reader published, with the stream RUNNING."""
    s = qi(schema)
    return conn.execute(
        f"SELECT b.db, b.tbl, coalesce(p.columns, b.columns), b.key_columns, p.file, p.pos, p.row_index, "
        f"p.source_ms, b.mode, p.gtids, p.server FROM {s}.batches b JOIN {s}.positions p ON p.db = b.db "
        "AND p.tbl = b.tbl WHERE b.db = %s AND b.tbl = %s AND b.state = 'committed' AND p.stopped IS NULL "
        "ORDER BY b.finished_at DESC LIMIT 1",
        (db, tbl),
    ).fetchone()


def followed_tables(conn, schema: str) -> list[tuple]:
    """Per table with a position: db, tbl, file, pos, row, batch, stopped, gap_at, columns, key columns,
    mode of its last committed load, gtids, server (what the change reader follows)."""
    s = qi(schema)
    return conn.execute(
        f"SELECT p.db, p.tbl, p.file, p.pos, p.row_index, p.batch_id, p.stopped, p.gap_at, "
        f"coalesce(p.columns, b.columns), b.key_columns, b.mode, p.gtids, p.server FROM {s}.positions p "
        f"LEFT JOIN LATERAL (SELECT columns, key_columns, mode FROM {s}.batches b WHERE b.db = p.db "
        "AND b.tbl = p.tbl AND b.state = 'committed' ORDER BY b.finished_at DESC LIMIT 1) b ON true"
    ).fetchall()


def lag_sample(conn, schema: str) -> dict[tuple[str, str], tuple]:
    """Per table: file, pos, row, source_ms, changes, stopped, the target's clock (ms), server."""
    rows = conn.execute(
        f"SELECT db, tbl, file, pos, row_index, source_ms, changes, stopped, "
        f"(extract(epoch FROM clock_timestamp()) * 1000)::bigint, server FROM {qi(schema)}.positions"
    ).fetchall()
    return {(r[0], r[1]): r[2:] for r in rows}


def positions_of(conn, schema: str) -> dict[tuple[str, str], tuple]:
    """Per table: file, pos, row, stopped, server."""
    rows = conn.execute(f"SELECT db, tbl, file, pos, row_index, stopped, server FROM {qi(schema)}.positions").fetchall()
    return {(r[0], r[1]): r[2:] for r in rows}


def validation_point(conn, schema: str, db: str, table: str) -> tuple | None:
    """What validation compares at: file, pos, row, updated_at, stopped, source_ms, server."""
    return conn.execute(
        f"SELECT file, pos, row_index, updated_at, stopped, source_ms, server FROM {qi(schema)}.positions "
        "WHERE db = %s AND tbl = %s",
        (db, table),
    ).fetchone()


def stored_offsets(conn, schema: str, topics: list[str]) -> list[tuple[str, int, str | None]]:
    """(topic, next offset, topic id) stored for these topics."""
    return conn.execute(
        f"SELECT topic, next_offset, topic_id FROM {qi(schema)}.offsets WHERE partition = 0 AND topic = ANY(%s)",
        (topics,),
    ).fetchall()


def applied_through(through: dict[str, int], ends: dict[str, int]) -> bool:
    """Whether the offsets a sink is through (topic -> next offset) reach each topic's end in ``ends``
    (``wire.topics.end_offsets``)."""
    return all(through.get(topic, -1) >= end for topic, end in ends.items())


def store_offset(conn, schema: str, topic: str, next_offset: int, topic_id: str | None) -> None:
    conn.execute(
        f"INSERT INTO {qi(schema)}.offsets (topic, partition, next_offset, topic_id) "
        "VALUES (%s, 0, %s, %s) ON CONFLICT (topic, partition) DO UPDATE SET "
        "next_offset = EXCLUDED.next_offset, topic_id = EXCLUDED.topic_id, updated_at = now()",
        (topic, next_offset, topic_id),
    )


def hold_changes(conn, schema: str, rows: list[tuple[str, int, Any]], control: bool = False) -> None:
    """Keep change events (topic, offset, value) that arrived while a batch of their table is open, or the
    stream's control messages (``control``)."""
    copy = f"COPY {qi(schema)}.held_changes (topic, seq, value, control) FROM STDIN"
    with conn.cursor().copy(copy) as cp:
        for row in rows:
            cp.write_row((*row, control))


def take_held(conn, schema: str, topic: str) -> list[tuple[int, bytes, bool]]:
    """The topic's held messages (offset, value, whether a control message), removed."""
    return conn.execute(
        f"DELETE FROM {qi(schema)}.held_changes WHERE topic = %s RETURNING seq, value, control", (topic,)
    ).fetchall()


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
    if any_open(conn, schema, tables):
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
