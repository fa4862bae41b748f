"""A batch's lifecycle in the sink: BEGIN opens it (a ledger row and two staging tables), its rows are COPYed
into them with per-(chunk, attempt) tallies, END checks the tallies and makes the batch visible in one
transaction (a full load replaces the table, a window merges, a repair patches), or rejects it and leaves
the table as it was. A batch whose load is gone is found stale. See ``seam.apply.sink`` for the whole.

Delivery guarantee: exactly once, whole batches only: everything here runs in the sink's transaction,
which commits with the Kafka offsets.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import psycopg

from seam.apply.batch import OpenBatch, Staged, Staging
from seam.apply.decode import schema_from_begin
from seam.apply.merge import merge_window
from seam.apply.retry import Retrier, refused, target_addition, transient
from seam.apply.swap import check_end, patch_table, replace_table
from seam.apply.target import Landing, create_table_sql, ensure_postgis, has_spatial, landing_in, target_table
from seam.apply.transaction import TargetTransaction
from seam.core.errors import TargetError, first_line, target_limit
from seam.core.identifiers import qi
from seam.core.pipeline import Pipeline
from seam.core.schema import TableSchema
from seam.state import ledger, positions
from seam.wire.boundary import Begin, End, Tally

log = logging.getLogger("seam.sink")


# how a rejection's reason begins when the batch's own rows are why: loading the table again gives the same
UNSTAGEABLE = "a row of it cannot be staged"
UNMADE = "its staging tables cannot be made in the target"
NOT_UNIQUE = "the key"
REFUSED = "the target table refuses its rows"
LIMITED = "a limit set on the target is too small for it"  # not the rows, but a new batch meets it as well
REJECTED_FOR_ITS_ROWS = (UNSTAGEABLE, UNMADE, NOT_UNIQUE, REFUSED, LIMITED)


class StageCopy:
    """The COPYs of a run of staged rows into a stage table: one per stretch of runs in one format (text, or
    binary where the compiled stager made them so), each opened by its first run."""

    SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # flags and header extension: none
    TRAILER = b"\xff\xff"

    def __init__(self, cur, sql: str):
        self.cur, self.sql = cur, sql
        self._open = contextlib.ExitStack()  # the COPY open now, if any
        self._copy: Any = None
        self._binary = False

    def write(self, data: bytes, binary: bool) -> None:
        if self._copy is not None and binary != self._binary:
            self._close()
        if self._copy is None:
            self._open = contextlib.ExitStack()
            sql = self.sql + (" (FORMAT binary)" if binary else "")
            self._copy, self._binary = self._open.enter_context(self.cur.copy(sql)), binary
            if binary:
                self._copy.write(self.SIGNATURE)
        self._copy.write(data)

    def _close(self) -> None:
        if self._binary:
            self._copy.write(self.TRAILER)
        self._copy = None
        self._open.close()

    def __enter__(self) -> StageCopy:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if self._copy is None:
            return
        if exc is None:
            self._close()
        else:  # the COPY fails with the exception (psycopg ends it so)
            self._copy = None
            self._open.__exit__(kind, exc, tb)


class BatchLifecycle:
    """The open batch of each topic, from BEGIN to END, on the sink's connection and transaction."""

    def __init__(self, conn, txn: TargetTransaction, pipeline: Pipeline, topics, retrier: Retrier, finished: dict):
        self.conn, self.txn, self.pipeline, self.retrier = conn, txn, pipeline, retrier
        self.schema = pipeline.target.state_schema
        self.finished = finished  # batch id -> final state once committed (the sink's, kept across recoveries)
        self._postgis: bool | None = None  # whether spatial columns land as geometry: asked when first needed
        self.open: dict[str, OpenBatch | None] = {topic: self.load_open(topic) for topic in topics}

    def stage(self, topic: str, batch: OpenBatch, runs: Iterator[Staged]) -> list[int] | None:
        """``copy`` in a savepoint: a row the target cannot hold (a NULL in a key column, a value out of its
        type's range) rejects its batch now, not the sink with every other table (None: rejected; the rest of
        its rows are then ignored as those of a batch never opened here, and its END too)."""
        try:
            with self.conn.transaction():
                return self.copy(batch, runs)
        except psycopg.Error as exc:
            if transient(exc):
                raise
            why = f"{UNSTAGEABLE}: {first_line(exc)}; the target cannot hold that value: correct it at the source"
            self.reject(topic, batch, why)
            return None

    def reject(self, topic: str, batch: OpenBatch, why: str) -> None:
        """The batch will not be made visible: its staging dropped, the ledger says why, the table stays."""
        begin = batch.begin
        self.drop_tables(batch)
        self.finish(begin.batch, "rejected", error=why)
        log.error("batch %s of %s.%s REJECTED, the previous table stays: %s", begin.batch, begin.db, begin.table, why)
        self.open[topic] = None

    def copy(self, batch: OpenBatch, runs: Iterator[Staged]) -> list[int]:
        """COPY staged runs into the batch's tables (each run as it arrives) and store the tallies; returns the
        indexes of the messages to hold."""
        cols = ", ".join(qi(n) for n in batch.schema.names)
        changes: list[bytes] = []
        held: list[int] = []
        with self.conn.cursor() as cur:
            copy = StageCopy(cur, f"COPY {batch.stage} ({cols}, _seam_part, _seam_attempt) FROM STDIN")
            with copy:
                for staged in runs:
                    if staged.stage:
                        copy.write(staged.stage, staged.binary)
                    changes.append(staged.changes)
                    held += staged.held
                    for kind, (rows, crc) in staged.sums.items():
                        batch.tallies.setdefault(kind, Tally()).add_many(rows, crc)
                    if staged.sums:  # its load is alive
                        batch.rows_at = time.monotonic()
            if any(changes):
                with cur.copy(f"COPY {batch.changes} ({cols}, _seam_seq, _seam_deleted) FROM STDIN") as cp:
                    for data in changes:
                        cp.write(data)
            ledger.store_tallies(cur, self.schema, batch.begin.batch, batch.tallies)
        return held

    def begin(self, topic: str, begin: Begin, offset: int) -> None:
        known = ledger.batch_state(self.conn, self.schema, begin.batch)
        current = self.open[topic]
        if known and current is not None and current.begin.batch == begin.batch:
            # the topic is being read again from before this batch (offsets reset by hand, or a replay):
            # start its staging afresh, or every row would be staged twice and the batch rejected
            log.warning("BEGIN of open batch %s seen again: staging it from the start", begin.batch)
            self.conn.execute(f"TRUNCATE {current.stage}, {current.changes}")
            ledger.restart_staging(self.conn, self.schema, begin.batch)
            current.tallies.clear()
            return
        if known:
            log.warning("BEGIN of batch %s seen again (state %s); ignored", begin.batch, known)
            return
        previous = self.open[topic]
        if previous is not None:
            self.supersede(previous.begin.batch, f"superseded by batch {begin.batch} before its END arrived")
        for other in ledger.open_on_other_topics(self.conn, self.schema, begin.db, begin.table, topic):
            # opened under another topic prefix or pipeline name: no sink of this topic would ever end it
            self.supersede(other, f"superseded by batch {begin.batch} of topic {topic} before its END arrived")
        try:  # in a savepoint: a table the target cannot make (a name too long) rejects this batch only
            with self.conn.transaction():
                batch = self.create_tables(begin)
        except (psycopg.Error, TargetError) as exc:
            if transient(exc):
                raise
            ledger.open_batch(self.conn, self.schema, begin, topic, offset)
            why = f"{UNMADE}: {first_line(exc)}"
            self.finish(begin.batch, "rejected", error=why)
            log.error("batch %s of %s.%s REJECTED: %s", begin.batch, begin.db, begin.table, why)
            self.open[topic] = None
            return
        ledger.open_batch(self.conn, self.schema, begin, topic, offset)
        self.open[topic] = batch
        log.info("batch %s of %s.%s opened (%s)", begin.batch, begin.db, begin.table, begin.mode)

    def create_tables(self, begin: Begin) -> OpenBatch:
        """The batch and its two staging tables: its rows, and the changes that arrive during it."""
        batch = self.open_batch(begin)
        schema, key, landing = batch.schema, tuple(begin.key), batch.staging.landing
        extra = "_seam_part integer NOT NULL, _seam_attempt bigint NOT NULL"
        self.conn.execute(create_table_sql(batch.stage, schema, key, landing=landing, extra=extra))
        # NOT NULL on the key alone: a delete needs no more, and a repair's delete carries the target's row, which
        # may hold NULL where the source never does (a column added NULL there, to be repaired: stream_ddl)
        anything = replace(schema, columns=tuple(replace(c, nullable=True) for c in schema.columns))
        extra = "_seam_seq bigint NOT NULL, _seam_deleted boolean NOT NULL"
        self.conn.execute(create_table_sql(batch.changes, anything, key, landing=landing, extra=extra))
        return batch

    def end(self, topic: str, end: End, offset: int) -> None:
        batch = self.open[topic]
        if batch is None or batch.begin.batch != end.batch:
            log.warning("END of batch %s ignored: it is not the open batch of %s.%s", end.batch, end.db, end.table)
            return
        ledger.batch_ended(self.conn, self.schema, end, offset)
        cancelled = (end.stats or {}).get("cancelled")  # given up by its job (``Publication.cancel``)
        if end.position is None and (cancelled is not None or end.mode == "repair"):
            self.drop_tables(batch)  # (a repair over its limit, a full load whose table changed shape)
            self.finish(end.batch, "cancelled", error=cancelled)
            log.warning("%s %s of %s.%s cancelled: %s", end.mode, end.batch, end.db, end.table, cancelled)
            self.open[topic] = None
            return
        try:  # in a savepoint: a rejected batch leaves nothing behind; a cancelled one is tried again
            final_rows = self.retrier.run(self.conn, lambda: self.publish(batch, end), f"batch {end.batch}")
        except (psycopg.Error, TargetError) as exc:
            if transient(exc):
                raise  # the connection is gone: the batch is not the reason
            error = first_line(exc)
            if target_limit(exc):
                error = f"{LIMITED}: {error}; have it raised (or lifted) for Seam's role, then run it again"
            elif target_addition(exc):  # something someone added to the target's table
                error = f"{REFUSED}: {refused(exc)}"
            elif isinstance(exc, psycopg.errors.UniqueViolation) and batch.begin.key:  # the key is the pipeline's
                error = (
                    f"{NOT_UNIQUE} ({', '.join(batch.begin.key)}) is not unique in the batch's rows ({error}): key the "
                    "table by columns that are unique at the source (tables[].key)"
                )
            self.reject(topic, batch, error)
        else:
            ledger.store_final_rows(self.conn, self.schema, end.batch, final_rows)
            self.finish(end.batch, "committed")
            if end.mode == "incremental":
                log.info("window %s of %s.%s merged: %s rows", end.window, end.db, end.table, final_rows)
                self.open[topic] = None
                return
            assert end.position is not None  # a full load's END carries its snapshot's position
            positions.store_loaded_position(
                self.conn,
                self.schema,
                end.db,
                end.table,
                end.batch,
                end.position,
                end.gtids,
                end.server,
                (end.stats or {}).get("snapshot_ms"),
            )
            log.info(
                "batch %s of %s.%s committed: %s rows at %s", end.batch, end.db, end.table, final_rows, end.position
            )
        self.open[topic] = None

    def stale(self) -> list[str]:
        """The topics whose open batch got no rows for ``load.abandon_after``: its load is gone."""
        limit = time.monotonic() - self.pipeline.load.abandon_after
        return [topic for topic, batch in self.open.items() if batch is not None and batch.rows_at < limit]

    def publish(self, batch: OpenBatch, end: End) -> int:
        """Verify the staged batch against END and make it visible (replace or merge); raises to reject."""
        check_end(self.conn, self.schema, batch, end)
        if batch.begin.mode == "incremental":
            return merge_window(self.conn, self.schema, batch, end)
        if batch.begin.mode == "repair":
            return patch_table(self.conn, batch)
        recorded = ledger.committed_columns(self.conn, self.schema, batch.begin.db, batch.begin.table)
        return replace_table(self.conn, batch, end, recorded)

    def open_batch(self, begin: Begin) -> OpenBatch:
        schema = schema_from_begin(begin)
        stage, changes = ledger.staging_tables(begin.batch)
        landing = self.landing(schema)
        if begin.mode != "full":  # rows merged into the table as it is
            landing = landing_in(self.conn, target_table(begin.db, begin.table), schema, landing)
        return OpenBatch(
            begin=begin,
            staging=Staging(begin.batch, schema, tuple(begin.key), landing),
            stage=f"{qi(self.schema)}.{qi(stage)}",
            changes=f"{qi(self.schema)}.{qi(changes)}",
        )

    def landing(self, schema: TableSchema) -> Landing:
        """How the table's values land: the pipeline's target settings, and PostGIS geometry for its spatial
        columns or bytea (``seam.apply.target.ensure_postgis``; asked of the target once, when the first table
        with spatial columns arrives)."""
        postgis = True
        if has_spatial(schema):
            if self._postgis is None:
                self._postgis = ensure_postgis(self.conn)
            postgis = self._postgis
        return Landing(postgis, self.pipeline.target.nul_replacement, self.pipeline.target.zero_dates)

    def load_open(self, topic: str) -> OpenBatch | None:
        with self.conn.transaction():
            found = ledger.open_batch_of(self.conn, self.schema, topic)
            if found is None:
                return None
            row, parts = found
            batch = self.open_batch(
                Begin(
                    batch=row[0],
                    db=row[1],
                    table=row[2],
                    mode=row[3],
                    columns=row[4],
                    key=row[5],
                    window=row[6],
                    soft_delete=row[7],
                )
            )
            for part, attempt, rows, checksum in parts:
                batch.tallies[(part, attempt)] = Tally(rows, int(checksum))
        return batch

    def drop_tables(self, batch: OpenBatch) -> None:
        self.conn.execute(f"DROP TABLE IF EXISTS {batch.stage}")
        self.conn.execute(f"DROP TABLE IF EXISTS {batch.changes}")

    def supersede(self, batch_id: str, why: str) -> None:
        """An open batch that will never end (a newer BEGIN of its table came): its staging dropped."""
        for name in ledger.staging_tables(batch_id):
            self.conn.execute(f"DROP TABLE IF EXISTS {qi(self.schema)}.{qi(name)}")
        self.finish(batch_id, "superseded", error=why)
        log.warning("batch %s %s (it never ended)", batch_id, why)

    def finish(self, batch_id: str, state: str, error: str | None = None) -> None:
        ledger.finish_batch(self.conn, self.schema, batch_id, state, error)
        self.txn.on_commit(lambda: self.finished.__setitem__(batch_id, state))
