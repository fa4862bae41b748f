"""The load ledger: one row per batch (``batches``: open, then committed, rejected or superseded), the
tallies of its parts (``batch_parts``), the watermarks of incremental tables, and validation verdicts.

A batch's staging tables live in the state schema too; ``staging_tables`` names them.

Delivery guarantee: none of its own; the sink moves a batch's state in the transaction that makes its data
visible (or drops it), so the ledger never says committed for data that is not there.
"""

from __future__ import annotations

import json

from seam.core.identifiers import qi

_STATUS = (
    "state",
    "staged_rows",
    "final_rows",
    "published_rows",
    "position_file",
    "position_pos",
    "error",
    "opened_at",
    "ended_at",
    "finished_at",
)


def staging_tables(batch_id: str) -> tuple[str, str]:
    """The names of a batch's staging tables in the state schema: its rows, and the changes that arrive
    during it (the sink fills, swaps and drops them with the batch's data)."""
    return f"stage_{batch_id}", f"changes_{batch_id}"


def open_batch(conn, schema: str, begin, topic: str, offset: int) -> None:
    """Record a batch from its BEGIN (``boundary.Begin``) at ``offset`` of ``topic``."""
    window = begin.window or {}
    conn.execute(
        f"INSERT INTO {qi(schema)}.batches (batch_id, db, tbl, mode, state, topic, begin_offset, window_start, "
        "window_end, columns, key_columns, begin_window, soft_delete, plan, opened_at) "
        "VALUES (%s, %s, %s, %s, 'open', %s, %s, %s, %s, %s, %s, %s, %s, %s, clock_timestamp())",
        (
            begin.batch,
            begin.db,
            begin.table,
            begin.mode,
            topic,
            offset,
            window.get("start"),
            window.get("end"),
            json.dumps(begin.columns),
            json.dumps(begin.key),
            json.dumps(begin.window) if begin.window else None,
            begin.soft_delete,
            json.dumps(begin.plan) if begin.plan else None,
        ),
    )


def part_done(conn, schema: str, done) -> None:
    """A chunk of an open batch was published whole (``boundary.PartDone``)."""
    p = done.part
    conn.execute(
        f"INSERT INTO {qi(schema)}.batch_parts_done VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (done.batch, p.part, p.attempt, p.rows, p.checksum, p.file, p.pos),
    )


# the chunks of open batches published whole whose staged rows are all there: one per part, its first attempt
_KEPT = (
    "SELECT DISTINCT ON (d.batch_id, d.part) d.batch_id, d.part, d.attempt, d.rows, d.checksum, d.file, d.pos "
    "FROM {s}.batch_parts_done d JOIN {s}.batch_parts p USING (batch_id, part, attempt) "
    "WHERE d.batch_id = ANY(%s) AND p.rows = d.rows AND p.checksum = d.checksum ORDER BY d.batch_id, d.part, d.attempt"
)


def resumable(conn, schema: str, db: str, table: str, topic: str) -> tuple[str, list, list, dict, list[tuple]] | None:
    """The table's open full-load batch on ``topic`` that can be resumed: (batch_id, columns, key columns,
    plan, chunks kept), a kept chunk being one published whole whose staged rows are all there: (part,
    attempt, rows, checksum, file, pos). A batch opened on another topic (the pipeline's topic prefix or
    name changed) is not: its sink is not this topic's, the next BEGIN supersedes it."""
    s = qi(schema)
    row = conn.execute(
        f"SELECT batch_id, columns, key_columns, plan FROM {s}.batches WHERE db = %s AND tbl = %s AND "
        "topic = %s AND state = 'open' AND mode = 'full' AND plan IS NOT NULL ORDER BY opened_at DESC LIMIT 1",
        (db, table, topic),
    ).fetchone()
    if row is None:
        return None
    kept = conn.execute(
        f"SELECT part, attempt, rows, checksum, file, pos FROM ({_KEPT.format(s=s)}) k", ([row[0]],)
    ).fetchall()
    return row[0], row[1], row[2], row[3], [(*k[:3], int(k[3]), *k[4:]) for k in kept]


# the parts of batches ``= ANY(%s)`` whose staged rows are not kept: FROM and WHERE of a query, as ``p``
_LEFT_OVER = (
    "FROM {s}.batch_parts p LEFT JOIN ({kept}) k USING (batch_id, part, attempt) "
    "WHERE p.batch_id = ANY(%s) AND k.part IS NULL"
)


def _left_over(schema: str) -> str:
    s = qi(schema)
    return _LEFT_OVER.format(s=s, kept=_KEPT.format(s=s))


def left_over_rows(conn, schema: str, batch_ids: list[str]) -> dict[str, int]:
    """Per batch: the rows staged of chunks that are not kept (an interrupted load's unfinished chunks, or
    a duplicate attempt), which END drops. Read before a resumed batch's job starts, they stay the same."""
    rows = conn.execute(
        f"SELECT p.batch_id, sum(p.rows) {_left_over(schema)} GROUP BY p.batch_id", (batch_ids, batch_ids)
    ).fetchall()
    return {batch: int(n) for batch, n in rows}


def left_over_parts(conn, schema: str, batch_id: str) -> list[tuple[int, int]]:
    """The (part, attempt) pairs of a batch whose staged rows are left over (``left_over_rows``): read before a
    resumed batch's job starts, they are the dead run's only (its new attempts are not kept until done)."""
    return conn.execute(
        f"SELECT p.part, p.attempt {_left_over(schema)} ORDER BY 1, 2", ([batch_id], [batch_id])
    ).fetchall()


def drop_left_over(conn, schema: str, batch_id: str, pairs: list[tuple[int, int]]) -> int:
    """Delete from a resumed batch's staging table the rows of ``pairs`` (``left_over_parts``), and record how
    many their tallies said then (``dropped_rows``), in one transaction; returns the rows deleted. Run by the
    resumed load while its job publishes. END drops again the pairs not recorded or whose tallies grew since:
    a dead attempt's messages can still arrive while the killed job's tasks are being cancelled (``undropped``)."""
    if not pairs:
        return 0
    s = qi(schema)
    stage = f"{s}.{qi(staging_tables(batch_id)[0])}"
    with conn.transaction():
        if conn.execute("SELECT to_regclass(%s)", (stage,)).fetchone()[0] is None:
            return 0
        # the tallies before the DELETE, recorded after it (its row locks held only to the commit): rows staged
        # after this read make them differ, and END drops those
        found = conn.execute(
            f"SELECT p.part, p.attempt, p.rows FROM {s}.batch_parts p JOIN unnest(%s::int[], %s::bigint[]) AS "
            "d(part, attempt) USING (part, attempt) WHERE p.batch_id = %s",
            ([p for p, _ in pairs], [a for _, a in pairs], batch_id),
        ).fetchall()
        parts, attempts, rows = ([row[i] for row in found] for i in range(3))
        dropped = conn.execute(
            f"DELETE FROM {stage} WHERE (_seam_part, _seam_attempt) IN (SELECT * FROM unnest(%s::int[], %s::bigint[]))",
            (parts, attempts),
        ).rowcount
        conn.execute(
            f"UPDATE {s}.batch_parts p SET dropped_rows = d.rows FROM unnest(%s::int[], %s::bigint[], %s::bigint[]) "
            "AS d(part, attempt, rows) WHERE p.batch_id = %s AND (p.part, p.attempt) = (d.part, d.attempt)",
            (parts, attempts, rows, batch_id),
        )
    return dropped


def undropped(conn, schema: str, batch_id: str, losers: dict[tuple[int, int], int]) -> set[tuple[int, int]]:
    """Of a batch's losing (part, attempt) pairs (-> the rows their tallies say now), those whose staged rows
    may still be there: all but the ones a resumed load dropped when their tallies said as much
    (``drop_left_over``)."""
    rows = conn.execute(
        f"SELECT part, attempt, dropped_rows FROM {qi(schema)}.batch_parts WHERE batch_id = %s AND dropped_rows "
        "IS NOT NULL",
        (batch_id,),
    ).fetchall()
    done = {(part, attempt) for part, attempt, dropped in rows if losers.get((part, attempt)) == dropped}
    return set(losers) - done


def batch_state(conn, schema: str, batch_id: str) -> str | None:
    row = conn.execute(f"SELECT state FROM {qi(schema)}.batches WHERE batch_id = %s", (batch_id,)).fetchone()
    return row[0] if row else None


def restart_staging(conn, schema: str, batch_id: str) -> None:
    """Forget what was staged of a batch (its BEGIN came again)."""
    conn.execute(f"DELETE FROM {qi(schema)}.batch_parts WHERE batch_id = %s", (batch_id,))
    conn.execute(f"UPDATE {qi(schema)}.batches SET staged_rows = 0 WHERE batch_id = %s", (batch_id,))


def store_tallies(cur, schema: str, batch_id: str, tallies: dict) -> None:
    """What was staged of a batch: rows and checksum per (part, attempt) (``boundary.Tally``), and the sum."""
    for (part, attempt), tally in tallies.items():
        cur.execute(
            f"INSERT INTO {qi(schema)}.batch_parts VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (batch_id, part, attempt) DO UPDATE SET rows = EXCLUDED.rows, "
            "checksum = EXCLUDED.checksum",
            (batch_id, part, attempt, tally.rows, tally.checksum),
        )
    cur.execute(
        f"UPDATE {qi(schema)}.batches SET staged_rows = %s WHERE batch_id = %s",
        (sum(t.rows for t in tallies.values()), batch_id),
    )


def batch_ended(conn, schema: str, end, offset: int) -> None:
    """Record a batch's END (``boundary.End``) at ``offset``: what was published, and at which position."""
    conn.execute(
        f"UPDATE {qi(schema)}.batches SET ended_at = clock_timestamp(), end_offset = %s, "
        "position_file = %s, position_pos = %s, published_rows = %s, published_checksum = %s, stats = %s "
        "WHERE batch_id = %s",
        (
            offset,
            end.position.file if end.position else None,
            end.position.pos if end.position else None,
            end.rows,
            end.checksum,
            json.dumps(end.stats),
            end.batch,
        ),
    )


def store_final_rows(conn, schema: str, batch_id: str, rows: int) -> None:
    conn.execute(f"UPDATE {qi(schema)}.batches SET final_rows = %s WHERE batch_id = %s", (rows, batch_id))


BATCHES_CHANNEL = "seam_batches"  # NOTIFY'd with a batch id when it becomes final (delivered at the commit)


def finish_batch(conn, schema: str, batch_id: str, state: str, error: str | None = None) -> None:
    # clock time, not the transaction's: BEGIN and END of a small batch are often applied in one transaction
    conn.execute(
        f"UPDATE {qi(schema)}.batches SET state = %s, error = %s, finished_at = clock_timestamp() WHERE batch_id = %s",
        (state, error, batch_id),
    )
    conn.execute("SELECT pg_notify(%s, %s)", (BATCHES_CHANNEL, batch_id))  # a waiting load wakes at the commit


def open_batch_of(conn, schema: str, topic: str) -> tuple[tuple, list[tuple]] | None:
    """The topic's open batch, if any: (batch_id, db, tbl, mode, columns, key columns, window, soft delete)
    and its parts' tallies (part, attempt, rows, checksum)."""
    s = qi(schema)
    row = conn.execute(
        f"SELECT batch_id, db, tbl, mode, columns, key_columns, begin_window, soft_delete "
        f"FROM {s}.batches WHERE topic = %s AND state = 'open' ORDER BY opened_at DESC LIMIT 1",
        (topic,),
    ).fetchone()
    if row is None:
        return None
    parts = conn.execute(
        f"SELECT part, attempt, rows, checksum FROM {s}.batch_parts WHERE batch_id = %s", (row[0],)
    ).fetchall()
    return row, parts


BATCH_KINDS = {"full": "full load", "incremental": "window load", "repair": "repair"}  # a batch's mode, said


def open_on_other_topics(conn, schema: str, db: str, table: str, topic: str) -> list[str]:
    """The table's open batches that were opened on another topic than ``topic``."""
    rows = conn.execute(
        f"SELECT batch_id FROM {qi(schema)}.batches WHERE db = %s AND tbl = %s AND state = 'open' AND "
        "topic IS DISTINCT FROM %s",
        (db, table, topic),
    ).fetchall()
    return [r[0] for r in rows]


def batch_status(conn, schema: str, batch_id: str) -> dict | None:
    row = conn.execute(
        f"SELECT {', '.join(_STATUS)} FROM {qi(schema)}.batches WHERE batch_id = %s", (batch_id,)
    ).fetchone()
    return None if row is None else dict(zip(_STATUS, row))


def last_committed(conn, schema: str, db: str, table: str) -> tuple | None:
    """(mode, finished_at) of the table's last committed batch."""
    return conn.execute(
        f"SELECT mode, finished_at FROM {qi(schema)}.batches WHERE db = %s AND tbl = %s AND "
        "state = 'committed' ORDER BY finished_at DESC LIMIT 1",
        (db, table),
    ).fetchone()


def committed_columns(conn, schema: str, db: str, table: str) -> list[dict] | None:
    """The columns (``Column`` as dicts) the target table was last given: by DDL the stream followed since its
    last committed batch, else by that batch."""
    s = qi(schema)
    row = conn.execute(
        f"SELECT coalesce(p.columns, b.columns) FROM {s}.batches b LEFT JOIN {s}.positions p ON p.db = b.db "
        "AND p.tbl = b.tbl WHERE b.db = %s AND b.tbl = %s AND b.state = 'committed' ORDER BY b.finished_at DESC "
        "LIMIT 1",
        (db, table),
    ).fetchone()
    return None if row is None else row[0]


def committed_tables(conn, schema: str) -> set[tuple[str, str]]:
    """(db, tbl) of every table with a committed batch."""
    return set(conn.execute(f"SELECT DISTINCT db, tbl FROM {qi(schema)}.batches WHERE state = 'committed'").fetchall())


def open_batches(conn, schema: str) -> dict[str, tuple[str, str, float]]:
    """Per table (db.tbl) its newest open batch: (batch id, mode, seconds since it opened)."""
    rows = conn.execute(
        f"SELECT DISTINCT ON (db, tbl) db || '.' || tbl, batch_id, mode, extract(epoch FROM now() - opened_at)::float8 "
        f"FROM {qi(schema)}.batches WHERE state = 'open' ORDER BY db, tbl, opened_at DESC"
    ).fetchall()
    return {name: (batch, mode, age) for name, batch, mode, age in rows}


def any_open(conn, schema: str, tables: list[tuple[str, str]]) -> bool:
    """Whether a batch of one of these tables is open."""
    return conn.execute(
        f"SELECT EXISTS (SELECT 1 FROM {qi(schema)}.batches WHERE state = 'open' AND (db, tbl) IN "
        "(SELECT * FROM unnest(%s::text[], %s::text[])))",
        ([db for db, _ in tables], [t for _, t in tables]),
    ).fetchone()[0]


def store_watermark(conn, schema: str, begin, clamped: bool) -> None:
    """An incremental window (``begin.window``) was merged: the watermark moves to its end, never back."""
    window = begin.window or {}
    conn.execute(
        f"INSERT INTO {qi(schema)}.watermarks (db, tbl, cursor_column, watermark, batch_id, window_start, "
        "window_end, clamped) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (db, tbl, cursor_column) DO "
        "UPDATE SET watermark = greatest(watermarks.watermark, EXCLUDED.watermark), batch_id = EXCLUDED.batch_id, "
        "window_start = EXCLUDED.window_start, window_end = EXCLUDED.window_end, clamped = EXCLUDED.clamped, "
        "updated_at = now()",
        (
            begin.db,
            begin.table,
            window.get("cursor", ""),
            window.get("end", ""),
            begin.batch,
            window.get("start"),
            window.get("end"),
            clamped,
        ),
    )


def watermark(conn, schema: str, db: str, table: str, cursor: str | None) -> str | None:
    row = conn.execute(
        f"SELECT watermark FROM {qi(schema)}.watermarks WHERE db = %s AND tbl = %s AND cursor_column = %s",
        (db, table, cursor or ""),
    ).fetchone()
    return row[0] if row else None


def record_validation(conn, schema: str, vid: str, db: str, table: str, report) -> None:
    """Store a validation report (``seam.validate.validation.Report``) under the id ``vid``."""
    conn.execute(
        f"INSERT INTO {qi(schema)}.validations (id, db, tbl, verdict, mode, scope, "
        "target_position, source_position, source_rows, target_rows, missing, extra, different, seconds, report) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            vid,
            db,
            table,
            report.verdict,
            report.mode,
            report.scope,
            report.target_position,
            report.source_position,
            report.source_rows,
            report.target_rows,
            report.missing,
            report.extra,
            report.different,
            report.seconds,
            json.dumps(report.as_dict(), default=str),
        ),
    )


def table_history(conn, schema: str, db: str, table: str) -> dict:
    """What ``seam status TABLE`` prints: watermarks, the last five batches, the position, the last verdict."""
    s = qi(schema)
    return {
        "watermarks": conn.execute(
            f"SELECT cursor_column, watermark, window_start, window_end, clamped, updated_at FROM {s}.watermarks "
            "WHERE db = %s AND tbl = %s",
            (db, table),
        ).fetchall(),
        "batches": conn.execute(
            f"SELECT batch_id, mode, state, window_start, window_end, final_rows, published_rows, "
            f"extract(epoch FROM finished_at - opened_at), stats->>'clamped', error FROM {s}.batches "
            "WHERE db = %s AND tbl = %s ORDER BY opened_at DESC LIMIT 5",
            (db, table),
        ).fetchall(),
        "position": conn.execute(
            f"SELECT file, pos, stopped FROM {s}.positions WHERE db = %s AND tbl = %s", (db, table)
        ).fetchone(),
        "validation": conn.execute(
            f"SELECT verdict, checked_at, missing, extra, different, report->>'html' FROM {s}.validations "
            "WHERE db = %s AND tbl = %s ORDER BY checked_at DESC LIMIT 1",
            (db, table),
        ).fetchone(),
    }
