"""A streamed table as the sink holds it: the decoder and statements for its current columns, its applied
position, and the changes of one run applied to it in one statement per kind (``merge_run``: COPY into a
temporary run table, then one DELETE and one INSERT ... ON CONFLICT).

Delivery guarantee: none of its own; ``resume_offset`` keeps a restarted sink from skipping anything held
in memory, and ``seam.apply.changes`` moves the position in the transaction that applies the changes.
"""

from __future__ import annotations

import collections
import itertools

from seam.apply import SinkError
from seam.apply.decode import flagged, record_decoder
from seam.apply.target import Landing, copy_rows, pg_type, row_converter, target_table
from seam.apply.txn_buffer import TransactionBuffer
from seam.core.identifiers import qi
from seam.core.position import Position
from seam.core.schema import TableSchema

_RUN_TABLES = itertools.count(1)  # names each StreamTable's temporary table uniquely in the sink's session


class StreamTable:
    """A table that receives change events: its schema, applied position, statements and open transaction."""

    def __init__(
        self,
        topic: str,
        schema: TableSchema,
        key: tuple[str, ...],
        applied: Position,
        source_ms: int | None,
        soft_delete: str | None,
        landing: Landing,
    ):
        self.topic, self.key, self.applied, self.source_ms, self.soft_delete = (
            topic,
            key,
            applied,
            source_ms,
            soft_delete,
        )
        self.landing = landing  # how values land in the target's columns
        self.postgis = landing.postgis  # spatial columns are PostGIS geometry (else bytea)
        self.buffer = TransactionBuffer()  # the transaction being received (its budget set by the applier)
        self.gap_reported_at: Position | None = None
        self.gap_reported_mono = 0.0  # when (time.monotonic)
        self.wait_logged: Position | None = None
        # complete transactions (and stream controls) behind one whose cascade waits for the level above:
        # (first offset, commit position, records or control)
        self.waiting: collections.deque = collections.deque()
        self.applied_changes = 0  # since the last stored position
        self.stored = applied  # the position as this sink last read or wrote it in the target's state
        self.dirty = False
        self.gtids: str | None = None  # the GTID set through ``applied`` (None: not known) and its server
        self.indexed: set[tuple[str, ...]] = set()  # columns cascades look rows up by, indexed (seam.apply.cascades)
        self.server: str | None = None
        self.use(schema)

    def use(self, schema: TableSchema) -> None:
        """(Re)build decoder, converter and statements for the table's columns."""
        self.schema, key = schema, self.key
        self.decode = record_decoder(schema, self.landing.nul).decode
        self.convert = row_converter(schema, self.landing)
        self.target = target_table(schema.db, schema.table)
        types = {c.name: pg_type(c, self.postgis) for c in schema.columns}
        names = schema.names
        self.key_index = [names.index(k) for k in key]
        self.soft_index = names.index(self.soft_delete) if self.soft_delete in names else None
        cols = ", ".join(qi(n) for n in names)
        values = ", ".join(f"%s::{types[n]}" for n in names)
        if key:
            match = " AND ".join(f"{qi(k)} = %s::{types[k]}" for k in key)
            self.delete_sql = f"DELETE FROM {self.target} WHERE {match}"
            updates = (
                ", ".join(f"{qi(n)} = EXCLUDED.{qi(n)}" for n in names if n not in key)
                or f"{qi(key[0])} = EXCLUDED.{qi(key[0])}"
            )
            on_conflict = f"ON CONFLICT ({', '.join(qi(k) for k in key)}) DO UPDATE SET {updates}"
            self.upsert_sql = f"INSERT INTO {self.target} ({cols}) VALUES ({values}) {on_conflict}"
            # one temporary table per table and columns, kept by the session, emptied for each run (a table of
            # its own per run would take a lock and catalog rows for each, until the commit)
            run = self.run_table = f"pg_temp.seam_run_{next(_RUN_TABLES)}"
            self.run_sql = (
                f"CREATE TEMPORARY TABLE IF NOT EXISTS {run} ON COMMIT DELETE ROWS AS SELECT {cols}, "
                f"NULL::boolean AS _seam_deleted, NULL::boolean AS _seam_must FROM {self.target} WITH NO DATA",
                f"COPY {run} FROM STDIN",
                f"SELECT count(*) FROM {self.target} t JOIN {run} r ON {self._match('t', 'r')} WHERE r._seam_must",
                f"DELETE FROM {self.target} t USING {run} r WHERE {self._match('t', 'r')} AND r._seam_deleted",
                f"INSERT INTO {self.target} ({cols}) SELECT {cols} FROM {run} WHERE NOT _seam_deleted {on_conflict}",
            )
        else:  # keyless: one row identical in every column goes, duplicates stay counted
            match = " AND ".join(f"{qi(n)} IS NOT DISTINCT FROM %s::{types[n]}" for n in names)
            self.delete_sql = (
                f"DELETE FROM {self.target} WHERE ctid = (SELECT ctid FROM {self.target} WHERE {match} LIMIT 1)"
            )
            self.upsert_sql = f"INSERT INTO {self.target} ({cols}) VALUES ({values})"

    def key_of(self, values: tuple) -> tuple:
        return tuple(values[i] for i in self.key_index)

    def key_row(self, key: tuple) -> tuple:
        """A row of the table's columns with only the key's values (the rest NULL)."""
        row = [None] * len(self.schema.names)
        for i, value in zip(self.key_index, key):
            row[i] = value
        return tuple(row)

    def _match(self, a: str, b: str) -> str:
        return " AND ".join(f"{a}.{qi(k)} = {b}.{qi(k)}" for k in self.key)

    def resume_offset(self, next_offset: int) -> int:
        """Where a restarted sink must read this topic from: nothing kept in memory may be skipped."""
        kept = [self.buffer.first_offset] if self.buffer.first_offset is not None else []
        if self.waiting:
            kept.append(self.waiting[0][0])
        return min(kept, default=next_offset)

    def removed(self, values: tuple | None) -> bool:
        """The row is flagged deleted: Seam keeps it out of the target."""
        return values is not None and self.soft_index is not None and flagged(values[self.soft_index])


def merge_run(cur, stream: StreamTable, run: list, truncate: bool = False) -> None:
    """A keyed table's run of changes as sets: the last image of each key it touches (or its deletion) is
    COPYed into a temporary table, then one DELETE and one upsert apply them all. The same rows as applying
    each change in order, in a handful of statements instead of one per change. A change that deletes a row
    must find it: one that the run itself deleted already is a divergence, and so is a row the run first
    touches by deleting it when the target does not have it.

    The temporary table is emptied with DELETE, which writes no catalog row; but the rows it deletes stay in
    it until the transaction ends, and each later run in the same transaction scans them. ``truncate`` empties
    it with TRUNCATE instead: for the many runs of one transaction staged in the target (a transaction of
    5,000,000 rows has 250), whose scans would otherwise grow with each run."""
    last: dict[tuple, tuple | None] = {}  # key -> its last image, None: deleted
    must_exist: set[tuple] = set()  # keys whose first change in the run deletes a row the target must hold
    absent = 0  # deletions of rows the run deleted already
    upsert, key_of = stream.upsert_sql, stream.key_of
    for _, sql, params, must_delete in run:
        if sql is upsert:
            last[key_of(params)] = params
            continue
        if must_delete:
            if params not in last:
                must_exist.add(params)
            elif last[params] is None:
                absent += 1
        last[params] = None
    if absent:
        raise SinkError(diverged(absent))
    create, copy_in, count_found, delete, upsert_all = stream.run_sql
    cur.execute(f"{create}; {'TRUNCATE' if truncate else 'DELETE FROM'} {stream.run_table}")
    deleted = sum(1 for image in last.values() if image is None)
    with cur.copy(copy_in) as copy:
        copy_rows(
            copy,
            (
                stream.key_row(key) + (True, key in must_exist) if image is None else image + (False, key in must_exist)
                for key, image in last.items()
            ),
        )
    if must_exist:
        found = cur.execute(count_found).fetchone()[0]
        if found != len(must_exist):
            raise SinkError(diverged(len(must_exist) - found))
    if deleted:
        cur.execute(delete)
    if deleted < len(last):
        cur.execute(upsert_all)


def diverged(missing: int) -> str:
    return f"{missing} change(s) delete rows the target does not have: the target diverged from the source"


def pos_dict(p: Position | None) -> dict | None:
    return None if p is None else {"file": p.file, "pos": p.pos, "row": p.row}
