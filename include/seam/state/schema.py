"""The ``seam`` schema's tables, as versioned migrations, and the named advisory locks.

``ensure_state`` brings a target to the newest version under one lock: a target made by an older Seam (with
or without a ``schema_version`` table; the first migration is idempotent) upgrades in place.

Delivery guarantee: none (DDL under a lock, in one transaction).
"""

from __future__ import annotations

from seam.core.identifiers import qi

# Advisory lock keys. A plain key locks one thing; a key used as the seed of ``hashtextextended(name, key)``
# locks one name (a topic, a table) of a kind.
LOCKS = {
    "migrations": 54010,  # ensure_state: concurrent first runs must not race on DDL
    "topic": 54010,  # per topic, for as long as a sink applies it: a second sink would double-apply
    "table": 54011,  # per table: one command at a time publishes its batches (full loads, windows, repairs)
    "functions": 54012,  # validation's SQL helper functions
    "target_schema": 54013,  # creating a target database's schema (CREATE SCHEMA races with itself)
    "owner": 54014,  # per pipeline and role: one change reader, one stream sink (seam.state.owners)
    "load": 54015,  # per batch, for as long as the command that publishes it runs: its sink never abandons it
}


def migrations(schema: str) -> list[tuple[int, list[str]]]:
    """(version, statements) in order; a statement may never change once released: add a version.
    Its length: the state schema's whole history, as data."""
    s = qi(schema)
    return [
        (
            1,
            [
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
                # the GTID set executed through the position and the server it was read on (seam.source.gtid): NULL when
                # not known, never a set of another position
                f"ALTER TABLE {s}.positions ADD COLUMN IF NOT EXISTS gtids text, ADD COLUMN IF NOT EXISTS server text",
                f"""CREATE TABLE IF NOT EXISTS {s}.watermarks (
            db text NOT NULL, tbl text NOT NULL, cursor_column text NOT NULL, watermark text NOT NULL,
            batch_id text NOT NULL, window_start text, window_end text, clamped boolean NOT NULL DEFAULT false,
            updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (db, tbl, cursor_column))""",
                f"""CREATE TABLE IF NOT EXISTS {s}.held_changes (
            topic text NOT NULL, seq bigint NOT NULL, value bytea NOT NULL, PRIMARY KEY (topic, seq))""",
                # the rows a foreign-key cascade changed in a table at a source position, for the levels below it
                # (seam.apply.cascades); a record with no rows says the cascade was applied and changed nothing
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
            ],
        ),
        (
            2,
            [
                f"""CREATE TABLE IF NOT EXISTS {s}.validations (
            id text PRIMARY KEY, db text NOT NULL, tbl text NOT NULL, verdict text NOT NULL, mode text NOT NULL,
            scope text NOT NULL, target_position text, source_position text, source_rows bigint, target_rows bigint,
            missing bigint, extra bigint, different bigint, seconds double precision,
            checked_at timestamptz NOT NULL DEFAULT now(), report jsonb NOT NULL)""",
            ],
        ),
        (
            3,
            [  # transient target errors a part retried (seam.apply.retry), for `seam stream status`
                f"""ALTER TABLE {s}.stream_parts ADD COLUMN IF NOT EXISTS retries bigint NOT NULL DEFAULT 0,
            ADD COLUMN IF NOT EXISTS last_retry text""",
            ],
        ),
        (
            4,
            [
                # messages the sink would not apply (seam.state.quarantine), kept as they arrived
                f"""CREATE TABLE IF NOT EXISTS {s}.quarantine (
            id bigserial PRIMARY KEY, db text NOT NULL, tbl text NOT NULL, topic text NOT NULL,
            kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL, kafka_key bytea, value bytea,
            reason text NOT NULL, quarantined_at timestamptz NOT NULL DEFAULT now(),
            skipped_at timestamptz, skipped_by text, note text)""",
            ],
        ),
        (
            5,
            [  # a batch whose load is gone (seam.apply.sink: abandoned batches)
                f"ALTER TABLE {s}.batches DROP CONSTRAINT IF EXISTS batches_state_check",
                f"""ALTER TABLE {s}.batches ADD CONSTRAINT batches_state_check
            CHECK (state IN ('open', 'committed', 'rejected', 'superseded', 'abandoned'))""",
            ],
        ),
        (
            6,
            [  # who holds a named session lock (seam.state.owners), for the line that refuses a second one
                f"""CREATE TABLE IF NOT EXISTS {s}.lock_holders (
            kind text NOT NULL, name text NOT NULL, holder text NOT NULL, host text NOT NULL, pid integer NOT NULL,
            since timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (kind, name))""",
            ],
        ),
        (
            7,
            [  # a repair that found more differing rows than it may repair (seam.repair)
                f"ALTER TABLE {s}.batches DROP CONSTRAINT IF EXISTS batches_state_check",
                f"""ALTER TABLE {s}.batches ADD CONSTRAINT batches_state_check
            CHECK (state IN ('open', 'committed', 'rejected', 'superseded', 'abandoned', 'cancelled'))""",
            ],
        ),
        (
            8,
            [  # resumable full loads (seam.source.full_load): the batch's chunks, and the chunks published whole
                f"ALTER TABLE {s}.batches ADD COLUMN IF NOT EXISTS plan jsonb",
                f"""CREATE TABLE IF NOT EXISTS {s}.batch_parts_done (
            batch_id text NOT NULL, part integer NOT NULL, attempt bigint NOT NULL,
            rows bigint NOT NULL, checksum numeric(20,0) NOT NULL, file text, pos bigint,
            PRIMARY KEY (batch_id, part, attempt))""",
            ],
        ),
        (
            9,
            [  # failures of a part in a row (seam.state.parts): a part failing in a loop is named, with its cause
                f"ALTER TABLE {s}.stream_parts ADD COLUMN IF NOT EXISTS streak integer NOT NULL DEFAULT 0",
            ],
        ),
        (
            10,
            [  # when a part last did work (seam.state.parts): one that works again is not failing any more
                f"ALTER TABLE {s}.stream_parts ADD COLUMN IF NOT EXISTS worked_at timestamptz",
            ],
        ),
        (
            11,
            [  # a resumed load dropped the rows of a chunk it does not keep, as many as this said then
                f"ALTER TABLE {s}.batch_parts ADD COLUMN IF NOT EXISTS dropped_rows bigint",  # (ledger.drop_left_over)
            ],
        ),
        (
            12,
            [  # a stop the streaming sink's process repairs by itself (seam.cli.cutover_repairs): since when it waits
                f"ALTER TABLE {s}.positions ADD COLUMN IF NOT EXISTS repair_due timestamptz",
            ],
        ),
        (
            13,
            [  # a stream control (heartbeat, schema change, stop) held while a batch is open, in order with the changes
                f"ALTER TABLE {s}.held_changes ADD COLUMN IF NOT EXISTS control boolean NOT NULL DEFAULT false",
            ],
        ),
        (
            14,
            [  # the copies online schema changes build, as a change reader saw them (seam.state.ghost_tables)
                f"""CREATE TABLE IF NOT EXISTS {s}.ghost_tables (
            pipeline text NOT NULL, db text NOT NULL, name text NOT NULL, columns jsonb NOT NULL, alters jsonb,
            created jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (pipeline, db, name))""",
            ],
        ),
        (
            15,
            [  # where a copy was renamed or dropped: a reader that reads that again sees the copy there again
                f"ALTER TABLE {s}.ghost_tables ADD COLUMN IF NOT EXISTS gone jsonb",
            ],
        ),
    ]


def ensure_state(conn, schema: str) -> None:
    """Create or upgrade the state schema to the newest version (one transaction, under a lock)."""
    s = qi(schema)
    with conn.transaction():
        xact_lock(conn, "migrations")
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {s}.schema_version (version integer PRIMARY KEY, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        have = conn.execute(f"SELECT coalesce(max(version), 0) FROM {s}.schema_version").fetchone()[0]
        for version, statements in migrations(schema):
            if version > have:
                for statement in statements:
                    conn.execute(statement)
                conn.execute(f"INSERT INTO {s}.schema_version (version) VALUES (%s)", (version,))


def schema_version(conn, schema: str) -> int:
    """The state schema's version in this target (0: none)."""
    if conn.execute("SELECT to_regclass(%s)", (f"{qi(schema)}.schema_version",)).fetchone()[0] is None:
        return 0
    return conn.execute(f"SELECT coalesce(max(version), 0) FROM {qi(schema)}.schema_version").fetchone()[0]


def xact_lock(conn, name: str) -> None:
    """Take lock ``name`` until the current transaction ends."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCKS[name],))


def try_lock(conn, kind: str, name: str) -> bool:
    """Take the session lock on ``name`` of ``kind`` if it is free; whether it was taken."""
    return conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, %s))", (name, LOCKS[kind])).fetchone()[0]


def lock(conn, kind: str, name: str) -> None:
    """Take the session lock on ``name`` of ``kind``, waiting for it."""
    conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, %s))", (name, LOCKS[kind]))


def unlock(conn, kind: str, name: str) -> None:
    conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, %s))", (name, LOCKS[kind]))


def held_by_another(conn, kind: str, name: str) -> bool:
    """Whether another session holds the lock on ``name`` of ``kind``, read from ``pg_locks`` without taking it:
    taken and released to look, it made a sink starting at that moment find its topic held (a load's watch
    looked while its own sink started, and the sink exited)."""
    return conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
        "AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(%s, %s) AND pid <> pg_backend_pid())",
        (name, LOCKS[kind]),
    ).fetchone()[0]
