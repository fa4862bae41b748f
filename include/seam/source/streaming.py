"""Binlog streaming: the change reader that follows tables from the binlog
position of their last committed full load.

By role: this module is the position and reconnect loop (passes, rewinds, polls of the target,
back-pressure, another server); each table's chain and the messages that extend it are
``seam.source.chains``; cascades ``seam.source.stream_cascades``; DDL and rollbacks
``seam.source.stream_ddl``; the lag ``seam.source.lag``.

Positions and chains. The reader starts each table at the position the
target has applied (``seam.positions``, written by the sink in the same
transaction as the data), always a source transaction boundary. It reads
whole committed transactions from ``seam.source.binlog`` (which owns BEGIN/COMMIT,
savepoints, ROLLBACK, XA and GTIDs) and publishes each at its commit; each record carries the commit position
(``source.txn``), ``source.last`` on the table's last change of the
transaction, and ``source.prev``: the table's previously published position.
Between transactions HEARTBEAT messages (with their own ``prev``) tell the
sink that an idle table is current up to the reader's position. The sink
applies a transaction only if it has applied ``prev``; otherwise something
was lost between them (the embedded broker loses topics on restart,
retention can expire) and the sink records a gap instead of applying.

Republishing. The reader keeps no state of its own. It rewinds, re-reading
the target's positions and republishing from there, when the sink reports a
gap, when a table topic was recreated (its topic id changed), when a newly
loaded table's position lies behind it, and after any error (``serve``
retries). Republished changes the sink already has are skipped by position.

Another server. A table's last change in a transaction and each heartbeat
also carry the GTID set executed through their position and the server
they were read on, which the sink stores with the position. When the source
is another server at the start of a pass (a failover, or a replica), the
reader finds each moved table's set in the new server's binlog and publishes
REBASE first (``seam.source.gtid``); what it cannot find stops the stream with the
remedy, before anything is published. A transaction read twice (the binlog
library reconnected to another server behind the reader's back) restarts
the pass, which then moves the positions.

Back-pressure. Per table it counts the events and bytes published but not
yet applied (from the target's positions, not from Kafka). Past 3/4 of the
bound (``kafka.max_unapplied_events`` / ``_bytes``) it slows down; at the
bound it stops reading the binlog until the sink has caught up to half the
bound. One reader serves all its tables, so a stalled table pauses them all.

DDL (``seam.source.stream_ddl``). DDL the target can follow on a followed table (TRUNCATE, widening
MODIFY/CHANGE, ADD/DROP/RENAME COLUMN, defaults, an online schema change's cut-over) publishes a SCHEMA
message that the sink applies at its position, and the stream goes on. Any other DDL that changes a
followed table's rows or shape (a narrowing or retyping MODIFY, DROP or RENAME of the table, DROP DATABASE,
CREATE OR REPLACE), a change to it logged as a statement rather than as rows, rows that cannot be decoded
with its columns, and an XA commit whose prepared rows were purged publish STOP: that table's stream stops
with an error naming the cause and the remedy; other tables go on. Index and table-option changes are
ignored.

Delivery guarantee: at-least-once into Kafka, whole source transactions in
binlog order per table (one partition per table topic, one producer);
exactly-once in the target through the sink's position and chain checks.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable

import psycopg
import pymysql

from seam.core.errors import StreamError
from seam.core.pipeline import Pipeline, TableConfig
from seam.core.position import Position
from seam.core.schema import SchemaError, TableSchema
from seam.source import record_images
from seam.source.binlog import (
    SAME_SERVER_ID,
    BinlogReader,
    LostTransaction,
    RolledBack,
    Statement,
    Tick,
    Transaction,
    replica_clash,
)
from seam.source.chains import Chains, Followed, Rewind, check_logged_columns, target_states
from seam.source.ghosts import Ghosts
from seam.source.gtid import server_identity
from seam.source.schema import read_schema
from seam.source.stream_cascades import Cascades
from seam.source.stream_ddl import follow_declared, follow_rollback, follow_statement, settle_alters
from seam.source.stream_servers import (
    clash,
    gtids_at_start,
    lose_position,
    rebase,
    stop_misnamed,
    stop_purged,
    stop_unlogged,
)
from seam.state.connection import connect_state, connect_target, scalar
from seam.state.ghost_tables import save_ghosts, saved_ghosts
from seam.state.parts import part_beat, part_failed, part_started, part_stopped, retry_delay, wait_unless
from seam.wire.topics import Publisher, ensure_topics, table_topic, topic_ids

log = logging.getLogger("seam.streaming")

HEARTBEAT_EVERY_S = 0.5
POLL_EVERY_S = 1.0


class ChangeReader:
    """Publishes the changes of a pipeline's streamed tables from the positions the target has applied:
    ``serve`` until stopped, resuming after any failure; ``run`` for one pass (``until_idle``: to the
    binlog's current end)."""

    def __init__(self, pipeline: Pipeline, tables: list[TableConfig] | None = None):
        self.pipeline = pipeline
        # sync: windows tables are kept current by windows, never by the stream (see seam.source.incremental: modes)
        self.tables = {(t.db, t.table): t for t in (tables or pipeline.tables) if t.sync == "stream"}
        for t in tables or ():
            if t.sync != "stream":
                log.warning("%s is kept current by windows (sync: windows): the stream does not follow it", t.name)
        self.chains = Chains(pipeline, self.tables, catalog=self._source)
        self.cascades = Cascades(set(self.tables))  # read at the first pass and after DDL
        self.ghosts = Ghosts()  # the copies online schema changes build (restored from the target at each read)
        self.rewinds = 0
        self._source_conn = None
        self._clash_checked = False  # another replica with our server_id, looked for before the first read
        self._publisher: Publisher | None = None  # the pass's, while it reads
        self._target = connect_state(pipeline)
        self._rewound_at = scalar(self._target, "SELECT now()")
        self.chains.here = server_identity(self._source())  # the source server (seam.source.gtid), read at each pass
        self._follow_from_target(reset=True)
        self._stop_purged()

    @property
    def followed(self) -> dict[tuple[str, str], Followed]:
        return self.chains.followed

    @property
    def stopped(self) -> dict[str, str]:
        return self.chains.stopped

    def close(self) -> None:
        self._target.close()
        if self._source_conn is not None:
            self._source_conn.close()

    def _source(self):
        """The reader's one source connection for catalog reads (foreign keys, engines, added columns; on UTC,
        as a TIMESTAMP's default is stored)."""
        if self._source_conn is None:
            self._source_conn = pymysql.connect(**self.pipeline.source.pymysql_kwargs(utc=True), autocommit=True)
        else:
            self._source_conn.ping(reconnect=True)
        return self._source_conn

    # ------------------------------------------------------------ target state

    def _follow_from_target(self, reset: bool, states: dict | None = None) -> list[Followed]:
        """Follow the tables the target has positions for; ``reset`` re-anchors every chain at the target."""
        if states is None:
            states = target_states(self._target, self.pipeline.target.state_schema)
        return self.chains.follow(states, reset)

    def _stop_purged(self) -> None:
        """Tables whose changes this source's binlog no longer has (purged), will not have (filtered), or names
        otherwise (a case-folding source)."""
        stop_purged(self.chains, self._source(), self._position_lost)
        stop_unlogged(self.chains, self._source(), self._position_lost)
        stop_misnamed(self.chains, self._source(), self._position_lost)

    def _position_lost(self, f: Followed, why: str, advice: str, way_out: str | None = None) -> None:
        lose_position(self.chains, self._target, f, why, advice, way_out)

    def _poll(self, here: Position | None, ids: dict[str, str]) -> None:
        """Update what the sink has applied; raise Rewind when the binlog must be read again."""
        self._part(part_beat, batches=1)
        try:
            states = target_states(self._target, self.pipeline.target.state_schema)
            now = scalar(self._target, "SELECT now()")
        except psycopg.errors.QueryCanceled:
            # a DBA's cancel (or statement_timeout) of a read on an autocommit session: the next poll reads
            # again, nothing here needs a resume of the pass
            log.info("a poll of the target's positions was cancelled; polling again")
            return
        for key, f in list(self.followed.items()):
            st = states.get(key)
            if st is None:
                continue
            if st.stopped:
                self.followed.pop(key)
                self.stopped[f.table.name] = st.stopped
                continue
            f.applied_to(st.applied)
            if st.gap_at is not None and st.gap_at > self._rewound_at:
                self._rewound_at = now
                raise Rewind(f"the sink reports changes of {f.table.name} missing after {st.applied}", reset=True)
        if ids:
            current = topic_ids(self.pipeline, sorted(ids))
            changed = [t for t, i in current.items() if ids.get(t) != i]
            if changed:
                self._rewound_at = now
                raise Rewind(f"topic(s) {', '.join(changed)} were recreated on the broker (messages lost)", reset=True)
        added = self._follow_from_target(reset=False, states=states)
        behind = [f for f in added if here is not None and here.after(f.published)]
        if behind:
            raise Rewind(f"{', '.join(f.table.name for f in behind)} newly loaded at an earlier position", reset=False)

    # ------------------------------------------------------------ running

    def serve(
        self, should_stop: Callable[[], bool] = lambda: False, restarting: Callable[[], bool] = lambda: False
    ) -> None:
        """Run until stopped, resuming from the target's positions after any failure (broker restart, lost
        source connection). A purged binlog is not retried: it needs a new full load. Heartbeats, restarts
        and the last error go to the target (``seam.state``) for ``seam stream status``; ``restarting``: the
        process starts again at once (not recorded as stopped)."""
        self._part(part_started, fresh=True)
        if record_images.native is None:
            log.warning(
                "the compiled row decoder (seam.source._rowimages) is not built: rows are read in Python, with the "
                "same records, more slowly; run `make setup` (it needs gcc and Python's headers)"
            )
        error = None
        try:
            self._serve(should_stop)
        except StreamError as exc:
            error = str(exc)
            self._part(part_failed, error=error)
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            if not restarting():
                self._part(part_stopped, error=error)

    def _part(self, record, **kwargs) -> None:
        try:
            record(self._target, self.pipeline.target.state_schema, self.pipeline.name, "reader", **kwargs)
        except Exception as exc:  # noqa: BLE001 - a heartbeat must never stop the stream
            log.warning("could not record the reader's state in the target (%s)", str(exc).splitlines()[0])

    def _serve(self, should_stop: Callable[[], bool]) -> None:
        delay = None
        while not should_stop():
            began = time.monotonic()
            try:
                self.run(should_stop)
            except StreamError:
                raise
            except Exception as exc:  # noqa: BLE001 - every other failure is resumed from the target
                problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                delay = retry_delay(delay, time.monotonic() - began)
                log.warning(
                    "change reader interrupted (%s); resuming from the target's positions in %.0f s", problem, delay
                )
                self._part(part_failed, error=problem)
                wait_unless(should_stop, delay, beat=lambda: self._part(part_beat))
                try:
                    self._target.close()
                    self._target = connect_target(self.pipeline)
                    self._target.autocommit = True
                    self._follow_from_target(reset=True)
                except Exception as again:  # noqa: BLE001
                    log.warning("target not reachable yet (%s)", again)

    def run(self, should_stop: Callable[[], bool] = lambda: False, until_idle: bool = False) -> dict[str, int]:
        """Publish changes until stopped (or, with ``until_idle``, until the binlog's current end)."""
        stats = {"transactions": 0, "changes": 0, "rewinds": 0, "spilled": 0}
        topics = [table_topic(self.pipeline, t) for t in self.tables.values()]
        ensure_topics(self.pipeline, topics)
        # A broker that lost its producer state (a restart of an in-memory broker) rejects every retry until
        # the message times out; giving up after 30 s resumes from the target's positions sooner, exactly.
        publisher = Publisher(self.pipeline, give_up_after_s=30)
        try:
            while not should_stop():
                if not self.followed:
                    if until_idle:
                        break
                    time.sleep(POLL_EVERY_S)
                    self._follow_from_target(reset=False)
                    self._part(part_beat, batches=1)
                    continue
                self.chains.here = server_identity(self._source())
                rebase(self.chains, self._source(), publisher, self._position_lost)
                self._stop_purged()
                if not self.followed:
                    continue
                start = min(f.published for f in self.followed.values())
                try:
                    self._read(publisher, start, stats, should_stop, until_idle)
                    break
                except Rewind as rewind:
                    publisher.flush()
                    stats["rewinds"] += 1
                    self.rewinds += 1
                    log.warning("rewinding: %s; republishing from the target's positions", rewind)
                    if rewind.reset:
                        ensure_topics(self.pipeline, topics)
                        self._follow_from_target(reset=True)
        finally:
            publisher.flush()
        return stats

    def _read(self, publisher: Publisher, start: Position, stats: dict, should_stop, until_idle: bool) -> None:
        src = self.pipeline.source
        if self.cascades.rules is None:
            self.cascades.load(self._source())
        me = f"seam:{self.pipeline.name}"[:60]
        if not self._clash_checked:  # once: a clash that appears later knocks a reader off (SAME_SERVER_ID)
            other = replica_clash(self._source(), src.server_id, me)
            if other is not None:
                raise StreamError(clash(src.server_id, f"a replica that reports itself as {other}"))
            self._clash_checked = True
        state = self.pipeline.target.state_schema
        self.ghosts = Ghosts.restored(saved_ghosts(self._target, state, self.pipeline.name), start)
        reader = BinlogReader(
            src,
            start,
            {db for db, _ in self.tables} | {p[0] for p in self.cascades.parents},
            tables=set(self.tables) | self.cascades.parents,
            blocking=not until_idle,
            server_id=src.server_id,
            heartbeat_s=1.0,
            report_as=me,
            gtids=gtids_at_start(self.chains, self._source(), start),
            transaction_memory=self.pipeline.stream.max_transaction_memory,
            record_schema=self._record_schema,
        )
        self.chains.reading, self._publisher = reader, publisher
        ids = topic_ids(self.pipeline, sorted({f.topic for f in self.followed.values()}))
        log.info(
            "reading the binlog from %s for %s", start, ", ".join(sorted(f.table.name for f in self.followed.values()))
        )
        last_beat = last_poll = time.monotonic()
        between = True
        try:
            for item in reader:
                between = True
                if isinstance(item, Transaction):
                    self._publish(publisher, item, stats)
                elif isinstance(item, Statement):
                    follow_statement(self.chains, self.cascades, self.ghosts, self._source, publisher, item)
                    if self.ghosts.changed:
                        save_ghosts(self._target, state, self.pipeline.name, self.ghosts.rows())
                    between = not item.in_transaction
                elif isinstance(item, RolledBack):
                    follow_rollback(self.chains, self._source, publisher, item)
                elif isinstance(item, LostTransaction):
                    for followed in list(self.followed.values()):
                        self.chains.stop(publisher, followed, item.position, item.reason)
                elif isinstance(item, Tick):
                    between = item.between
                    if item.idle and between:
                        settle_alters(self.chains, self._source, publisher)
                now = time.monotonic()
                here = reader.here
                if between and here and now - last_beat > HEARTBEAT_EVERY_S:
                    # not flushed: linger.ms sends it soon, its chain (prev) guards it, the poll's check sees it refused
                    self.chains.heartbeats(publisher, here)
                    last_beat = now
                if now - last_poll > POLL_EVERY_S or self.chains.over_bound:
                    publisher.check()  # a refused message stops the pass (as a flush would); no wait for the rest
                    self._poll(here, ids)
                    self.chains.hold_back(functools.partial(self._poll, here, ids), should_stop)
                    last_poll = time.monotonic()
                if should_stop():
                    break
            else:  # the binlog's end (until_idle): every table is current up to here, say so
                if between:
                    settle_alters(self.chains, self._source, publisher)
                if between and reader.here:
                    self.chains.heartbeats(publisher, reader.here, every_table=True)
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] == SAME_SERVER_ID:
                raise StreamError(
                    clash(src.server_id, "another binlog reader (it took over this one's connection)")
                ) from None
            raise
        finally:
            reader.close()
            self.chains.reading, self._publisher = None, None
        publisher.flush()

    def _record_schema(self, db: str, table: str, decoder) -> TableSchema | None:
        """A followed table's rows are read straight as record values (seam.source.record_images), except a
        cascade's parent's: a cascade needs the parent's values as decoded. ALTERs of the table that wait for
        the ones after them are followed as they were declared first, if that gives the row's columns
        (``decoder``: its table map); other columns than the followed ones stop the table (``check_logged_columns``)."""
        followed = self.followed.get((db, table))
        if followed is not None and followed.pending and decoder is not None and self._publisher is not None:
            follow_declared(
                self.chains, self._publisher, followed, list(decoder.names), record_images.logged_charsets(decoder)
            )
        if followed is not None and decoder is not None and not decoder.unnamed:
            check_logged_columns(followed, decoder, self._catalog_columns)
        return None if followed is None or (db, table) in self.cascades.parents else followed.schema

    def _catalog_columns(self, db: str, table: str) -> list[str]:
        """The table's columns as the source's catalog shows them now; none when it is gone."""
        try:
            return list(read_schema(self._source(), db, table).names)
        except SchemaError:
            return []

    def _publish(self, publisher: Publisher, txn: Transaction, stats: dict) -> None:
        """One committed transaction: its changes published; tables whose rows cannot be read stopped."""
        sent, failed = self.chains.publish_transaction(publisher, txn, self.cascades)
        if txn.changes.spilled:
            stats["spilled"] += txn.changes.spilled
            log.info(
                "the transaction at %s: %s changes, %s of them spilled to a temporary file (more than "
                "stream.max_transaction_memory)",
                txn.commit,
                f"{len(txn.changes):,}",
                f"{txn.changes.spilled:,}",
            )
        txn.changes.close()
        stats["changes"] += sent
        stats["transactions"] += 1
        for followed, error in failed.values():
            self.chains.stop(
                publisher,
                followed,
                txn.commit,
                f"a change at {txn.commit} cannot be read with the table's columns ({error})",
            )

    def paused_for(self) -> float:
        """Seconds spent paused by back-pressure, including a pause going on now."""
        return self.chains.paused_for()

    def unapplied(self) -> dict[str, tuple[int, int]]:
        return self.chains.unapplied()
