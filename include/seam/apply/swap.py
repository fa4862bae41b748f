"""A full load made visible: END's check of what was staged, and the atomic replace of the target table.

Delivery guarantee: exactly once; everything here runs in the transaction that also marks the batch
committed and stores its position, so readers see the old table until it commits, then the whole batch.
"""

from __future__ import annotations

import itertools

import psycopg
from psycopg import sql as pgsql

from seam.apply import SinkError
from seam.apply.batch import OpenBatch
from seam.apply.cascades import INDEX_COMMENT as CASCADES_INDEX
from seam.apply.decode import flagged_sql
from seam.apply.target import target_table
from seam.core.identifiers import clipped, qi
from seam.core.schema import added_by_users
from seam.state.ledger import staging_tables, undropped
from seam.state.schema import xact_lock
from seam.wire.boundary import RECONCILE_PART, End, Tally

INDEX_BYTES_PER_ROW = 100  # what a key's index build sorts in memory per row (a BIGINT's: its tuple, its slot)
INDEX_MEMORY_KB = (256 * 1024, 1024 * 1024)  # ... at least, at most (never below the server's own setting)


def check_end(conn, schema: str, batch: OpenBatch, end: End) -> None:
    """The staged batch must be what END says was published (else SinkError: the batch is rejected); the
    output of retried or speculative Spark task attempts is dropped, unless a resumed load dropped it already
    (``schema``: the state schema, where that is recorded)."""
    winners = {(p.part, p.attempt): p for p in end.parts}
    for (part, attempt), p in winners.items():
        staged = batch.tallies.get((part, attempt), Tally())
        if (staged.rows, staged.checksum) != (p.rows, p.checksum):
            raise SinkError(
                f"part {part} (attempt {attempt}): staged {staged.rows} rows, checksum "
                f"{staged.checksum}; END says {p.rows} rows, checksum {p.checksum}"
            )
    if sum(p.rows for p in end.parts) != end.rows:
        raise SinkError(f"END's parts add up to {sum(p.rows for p in end.parts)} rows, END says {end.rows}")
    stage = batch.stage
    losers = set(batch.tallies) - set(winners)  # output of a retried or speculative Spark task attempt
    if losers:
        losers = undropped(conn, schema, batch.begin.batch, {pair: batch.tallies[pair].rows for pair in losers})
    if losers:  # (every staged row's attempt has a tally: the count below says so); IN is a hash join, NOT IN is not
        conn.execute(
            f"DELETE FROM {stage} WHERE (_seam_part, _seam_attempt) IN (SELECT * FROM unnest(%s::int[], %s::bigint[]))",
            ([p for p, _ in losers], [a for _, a in losers]),
        )
    snapshot_rows = sum(p.rows for p in end.parts if p.part != RECONCILE_PART)
    staged_rows = conn.execute(f"SELECT count(*) FROM {stage}").fetchone()[0]
    if staged_rows != snapshot_rows:  # the tallies count messages; this counts what reached the table
        raise SinkError(f"the staging table holds {staged_rows} rows, END's parts say {snapshot_rows}")
    conn.execute(f"ALTER TABLE {stage} DROP COLUMN _seam_part, DROP COLUMN _seam_attempt")


def replace_table(conn, batch: OpenBatch, end: End, recorded: list[dict] | None) -> int:
    """A full load's staged rows, with the changes that arrived during it applied (last change per key
    wins) and soft-deleted rows left out, replace the target table in the caller's transaction; returns its
    rows. ``recorded``: the columns Seam last gave the table (the others are users')."""
    stage, changes = batch.stage, batch.changes
    key = [qi(k) for k in batch.begin.key]
    final_rows = sum(p.rows for p in end.parts if p.part != RECONCILE_PART)  # the winners' staged rows
    if key:
        conn.execute(  # the key's index in one in-memory sort: 5,000,000 rows took 2.5 s with 256MB, 1.8 s with 512MB
            "SELECT set_config('maintenance_work_mem', greatest(setting::bigint, %s)::text, true) FROM pg_settings "
            "WHERE name = 'maintenance_work_mem'",
            (min(INDEX_MEMORY_KB[1], max(INDEX_MEMORY_KB[0], final_rows * INDEX_BYTES_PER_ROW // 1024)),),
        )
        conn.execute(f"ALTER TABLE {stage} ADD PRIMARY KEY ({', '.join(key)})")
        match = " AND ".join(f"s.{k} = c.{k}" for k in key)
        cols = ", ".join(qi(n) for n in batch.schema.names)
        final_rows -= conn.execute(f"DELETE FROM {stage} s USING {changes} c WHERE {match}").rowcount
        final_rows += conn.execute(
            f"INSERT INTO {stage} ({cols}) SELECT {cols} FROM (SELECT DISTINCT ON ({', '.join(key)}) * FROM "
            f"{changes} ORDER BY {', '.join(key)}, _seam_seq DESC) last WHERE NOT _seam_deleted"
        ).rowcount
    elif conn.execute(f"SELECT EXISTS (SELECT 1 FROM {changes})").fetchone()[0]:
        raise SinkError("changes arrived for a keyless table's snapshot, which is read as one chunk")
    if batch.begin.soft_delete:  # the target never holds rows flagged deleted, whatever the mode
        final_rows -= conn.execute(f"DELETE FROM {stage} WHERE {flagged_sql(batch.begin.soft_delete)}").rowcount
    _swap(conn, batch, recorded)
    conn.execute(f"DROP TABLE {changes}")
    return final_rows


def patch_table(conn, batch: OpenBatch) -> int:
    """A repair (``seam.repair``): the target rows with a key the batch names, by a row (the source's row at
    the batch's position) or by a delete (a row the source does not have), are replaced by the batch's rows,
    in the caller's transaction; the rest of the table stays as it is. Returns the rows written."""
    stage, changes, target = batch.stage, batch.changes, target_table(batch.begin.db, batch.begin.table)
    key = [qi(k) for k in batch.begin.key]
    if not key:
        raise SinkError("a repair needs the table's key")
    match = " AND ".join(f"t.{k} = s.{k}" for k in key)
    conn.execute(f"DELETE FROM {target} t USING {changes} s WHERE {match}")
    conn.execute(f"DELETE FROM {target} t USING {stage} s WHERE {match}")
    if batch.begin.soft_delete:
        conn.execute(f"DELETE FROM {stage} WHERE {flagged_sql(batch.begin.soft_delete)}")
    cols = ", ".join(qi(n) for n in batch.schema.names)
    written = conn.execute(f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {stage}").rowcount
    conn.execute(f"DROP TABLE {stage}")
    conn.execute(f"DROP TABLE {changes}")
    return written


def _swap(conn, batch: OpenBatch, recorded: list[dict] | None) -> None:
    """Put the staged table in the target table's place, in the caller's transaction, keeping what users
    built on it. A table with views, user indexes, triggers, policies, foreign keys pointing at it or columns
    of their own is refilled in place (TRUNCATE + INSERT: it keeps its identity, and all of those; their
    columns take their defaults); otherwise the staged table is renamed into place (no copy) and takes over
    the old table's grants and comments, its primary key named after the table."""
    db, name = batch.begin.db, batch.begin.table
    target, stage = target_table(db, name), batch.stage
    ensure_schema(conn, db)
    old = conn.execute("SELECT to_regclass(%s)::oid", (target,)).fetchone()[0]
    before = _columns(conn, old) if old is not None else []
    own = added_by_users([c[0] for c in before], recorded, batch.schema.names)
    if old is not None and (own or _has_dependents(conn, old)):
        new = conn.execute("SELECT to_regclass(%s)::oid", (stage,)).fetchone()[0]
        before, after = [c for c in before if c[0] not in own], _columns(conn, new)
        if [c[:2] for c in before] != [c[:2] for c in after]:
            what = (
                f"columns users added ({', '.join(own)})"
                if own
                else "objects that depend on it (views, indexes, triggers, policies or foreign keys)"
            )
            raise SinkError(
                f"{target} has {what} and its columns changed on the source: drop those, load again, then add "
                "them back (the previous table stays)"
            )
        cols = ", ".join(qi(n) for n in batch.schema.names)
        conn.execute(f"TRUNCATE {target}")
        conn.execute(f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {stage}")
        for (column, _, was), (_, _, now) in zip(before, after):  # NOT NULL as the load has it (views allow it)
            if was != now:
                conn.execute(f"ALTER TABLE {target} ALTER COLUMN {qi(column)} {'SET' if now else 'DROP'} NOT NULL")
        conn.execute(f"DROP TABLE {stage}")
        return
    kept = _grants_and_comments(conn, old, target, batch.schema.names) if old is not None else []
    kept += _cascade_indexes(conn, old, batch.schema.names) if old is not None else []
    conn.execute(f"DROP TABLE IF EXISTS {target}")
    conn.execute(f"ALTER TABLE {stage} SET SCHEMA {qi(db)}")
    conn.execute(f"ALTER TABLE {qi(db)}.{qi(staging_tables(batch.begin.batch)[0])} RENAME TO {qi(name)}")
    for (constraint,) in conn.execute(
        "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = 'p'", (target,)
    ).fetchall():
        conn.execute(f"ALTER TABLE {target} RENAME CONSTRAINT {qi(constraint)} TO {qi(_free_key_name(conn, db, name))}")
    for statement in kept:
        conn.execute(statement)


def _cascade_indexes(conn, table_oid: int, columns: tuple[str, ...]) -> list[str]:
    """Statements that give a table replacing this one the indexes cascades made on it (seam.apply.cascades)
    whose columns it still has: built in the swap, not at the next cascade, which would hold the stream."""
    out = []
    for definition, name, indexed in conn.execute(
        "SELECT pg_get_indexdef(i.indexrelid), quote_ident(n.nspname) || '.' || quote_ident(c.relname), "
        "(SELECT array_agg(a.attname::text) FROM pg_attribute a WHERE a.attrelid = i.indrelid AND "
        "a.attnum = ANY(i.indkey::int2[])) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE i.indrelid = %s AND "
        "obj_description(i.indexrelid, 'pg_class') = %s",
        (table_oid, CASCADES_INDEX),
    ).fetchall():
        if set(indexed) <= set(columns):
            out += [definition, f"COMMENT ON INDEX {name} IS '{CASCADES_INDEX}'"]
    return out


def _free_key_name(conn, db: str, name: str) -> str:
    """``<table>_pkey``, or PostgreSQL's next (``_pkey1`` ...) when an index holds that name: the old table's,
    renamed in the target, keeps its own."""
    for n in itertools.count():
        suffix = f"_pkey{n or ''}"
        candidate = clipped(name, 63 - len(suffix.encode())) + suffix
        if conn.execute("SELECT to_regclass(%s)", (f"{qi(db)}.{qi(candidate)}",)).fetchone()[0] is None:
            return candidate
    raise AssertionError("unreachable")


def ensure_schema(conn, name: str) -> None:
    """CREATE SCHEMA IF NOT EXISTS is not safe against a concurrent one (two sinks committing their first
    tables of one database at once): serialise the creation."""
    if conn.execute("SELECT to_regnamespace(%s)", (qi(name),)).fetchone()[0] is None:
        xact_lock(conn, "target_schema")
        try:  # the other sink's schema is committed now, yet this session's catalog cache may not show it
            with conn.transaction():
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {qi(name)}")
        except psycopg.errors.UniqueViolation:
            pass


def _has_dependents(conn, table_oid: int) -> bool:
    """Views, user indexes, triggers, row policies or foreign keys of other tables on this table (the indexes
    cascades make are Seam's: ``_cascade_indexes``)."""
    return conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid WHERE d.classid = "
        "'pg_rewrite'::regclass AND d.refobjid = %(t)s AND r.ev_class <> %(t)s) "
        "OR EXISTS (SELECT 1 FROM pg_index WHERE indrelid = %(t)s AND NOT indisprimary "
        "AND obj_description(indexrelid, 'pg_class') IS DISTINCT FROM %(seam)s) "
        "OR EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = %(t)s AND NOT tgisinternal) "
        "OR EXISTS (SELECT 1 FROM pg_policy WHERE polrelid = %(t)s) "
        "OR EXISTS (SELECT 1 FROM pg_constraint WHERE confrelid = %(t)s AND conrelid <> %(t)s)",
        {"t": table_oid, "seam": CASCADES_INDEX},
    ).fetchone()[0]


def _columns(conn, table_oid: int) -> list[tuple]:
    """(name, type, not null) per column; varchar(n) as text: a table loaded before CHAR/VARCHAR kept their
    length (as text) takes the rows of a new load of the same columns in place, as one loaded before NOT NULL
    date columns stayed NOT NULL does (its columns take the new NOT NULL)."""
    return conn.execute(
        "SELECT attname, regexp_replace(format_type(atttypid, atttypmod), '^character varying\\(\\d+\\)$', "
        "'text'), attnotnull FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped "
        "ORDER BY attnum",
        (table_oid,),
    ).fetchall()


def _grants_and_comments(conn, table_oid: int, target: str, columns: tuple[str, ...]) -> list:
    """Statements that give a table replacing ``target`` the old table's grants and comments."""

    out = []
    for privilege, grantee, grantable in conn.execute(
        "SELECT a.privilege_type, CASE WHEN a.grantee = 0 THEN NULL ELSE pg_get_userbyid(a.grantee) END, "
        "a.is_grantable FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = %s AND a.grantee <> c.relowner",
        (table_oid,),
    ).fetchall():
        to = pgsql.SQL("PUBLIC") if grantee is None else pgsql.Identifier(grantee)
        out.append(
            pgsql.SQL("GRANT {} ON {} TO {}{}").format(
                pgsql.SQL(privilege), pgsql.SQL(target), to, pgsql.SQL(" WITH GRANT OPTION" if grantable else "")
            )
        )
    comment = conn.execute("SELECT obj_description(%s, 'pg_class')", (table_oid,)).fetchone()[0]
    if comment is not None:
        out.append(pgsql.SQL("COMMENT ON TABLE {} IS {}").format(pgsql.SQL(target), pgsql.Literal(comment)))
    for column, text in conn.execute(
        "SELECT attname, col_description(attrelid, attnum) FROM pg_attribute WHERE "
        "attrelid = %s AND attnum > 0 AND NOT attisdropped AND "
        "col_description(attrelid, attnum) IS NOT NULL",
        (table_oid,),
    ).fetchall():
        if column not in columns:
            continue  # dropped on the source
        out.append(
            pgsql.SQL("COMMENT ON COLUMN {}.{} IS {}").format(
                pgsql.SQL(target), pgsql.Identifier(column), pgsql.Literal(text)
            )
        )
    return out
