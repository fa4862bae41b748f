"""The copies online schema changes build beside followed tables (``seam.source.ghosts``), kept for a change
reader that starts again: what it saw before the position it starts from, it does not read again.

Delivery guarantee: none of its own. Losing it costs the repair after a cut-over more work, never a row.
"""

from __future__ import annotations

from psycopg.types.json import Jsonb

from seam.core.identifiers import qi


def saved_ghosts(conn, schema: str, pipeline: str) -> list[dict]:
    """The pipeline's copies as ``Ghosts.rows`` gave them."""
    rows = conn.execute(
        f"SELECT db, name, columns, alters, created, gone FROM {qi(schema)}.ghost_tables WHERE pipeline = %s "
        "ORDER BY updated_at, db, name",
        (pipeline,),
    ).fetchall()
    return [{"db": r[0], "name": r[1], "columns": r[2], "alters": r[3], "created": r[4], "gone": r[5]} for r in rows]


def save_ghosts(conn, schema: str, pipeline: str, ghosts: list[dict]) -> None:
    """The pipeline's copies now, in place of those saved before (one transaction)."""
    s = qi(schema)
    with conn.transaction():
        conn.execute(f"DELETE FROM {s}.ghost_tables WHERE pipeline = %s", (pipeline,))
        for g in ghosts:
            conn.execute(
                f"INSERT INTO {s}.ghost_tables (pipeline, db, name, columns, alters, created, gone) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    pipeline,
                    g["db"],
                    g["name"],
                    Jsonb(g["columns"]),
                    None if g["alters"] is None else Jsonb(g["alters"]),
                    Jsonb(g["created"]),
                    None if g.get("gone") is None else Jsonb(g["gone"]),
                ),
            )
