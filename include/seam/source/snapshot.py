"""Consistent, parallel snapshot of a MySQL/MariaDB table at one binlog
position, by one of two methods (``source.snapshot``: ``auto`` picks
``mariadb`` on MariaDB and ``portable`` elsewhere; tests force ``portable``
on MariaDB).

Its size: both snapshot methods, chunk planning and the reconciliation of chunks read at different positions
share the position arithmetic that makes them exact.

Method ``mariadb`` (exact, no lock):

1. Split the table into chunks on an integer key column (``plan_chunks``).
2. Read every chunk in its own transaction opened with ``START TRANSACTION
   WITH CONSISTENT SNAPSHOT``, on its own connection (one Spark task each,
   ``read_chunk``); in that transaction MariaDB's session status
   ``BINLOG_SNAPSHOT_FILE/POSITION`` is the exact binlog position Pi of the
   chunk's snapshot.
3. Let P = max(Pi). Replay the binlog events in (Pi, P] whose key falls in
   chunk i (``reconcile``): every chunk is then exactly the table at P, the
   position recorded with the batch and where streaming starts.

This is Flink CDC's low/high watermark reconciliation with exact watermarks.
Tables without an integer key (keyless tables, string keys) are read as ONE
chunk: one snapshot is consistent by itself, at the cost of parallelism.

Method ``portable`` (any MySQL-protocol server; MySQL 8.0/8.4 report no
snapshot position). Each chunk's task takes a low watermark L_i:

1. ``LOCK TABLES t READ``: granted only when no transaction that changed
   ``t`` is still open (a writer holds the table's metadata lock until its
   commit has finished, binlog and engine), and it holds new writers back.
2. L_i = the binlog head (``SHOW BINARY LOG STATUS``, or ``SHOW MASTER
   STATUS`` before 8.2). Every change to ``t`` logged at or before L_i is
   committed, so a snapshot opened after this sees it.
3. ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` (which also ends the table
   lock, a millisecond after it was taken), and the chunk is read.

The snapshot holds every change to ``t`` up to L_i and perhaps some after it.
The driver then reads the head P after all chunks, and reconciliation
replays (L_i, P] into chunk i, keyed: the sink deletes the staged rows of
every changed key and inserts each key's last image, so a change the
snapshot already holds is applied again harmlessly. The known race (a
transaction in the binlog before L_i whose engine commit the snapshot does
not see yet) cannot happen to ``t``: step 1 waited for it. It needs no
server setting (not ``binlog_order_commits``, not GTIDs), only the LOCK
TABLES privilege, and writers of ``t`` pause for the length of two
statements per chunk.

Keyless tables and children of cascading keys (whose cascaded rows are not
in the binlog) cannot be replayed idempotently: they need the exact
position. There the task also locks the parents whose cascades reach the
table, reads the head again (H) right after the snapshot opened, and keeps
the snapshot only if the binlog (L, H] has no change to any locked table:
then the snapshot is exactly the table at H. Otherwise it tries again; after
``EXACT_ATTEMPTS`` tries (a table written all the time) it takes the
position as mysqldump does: ``FLUSH TABLES WITH READ LOCK`` (every commit on
the server waits), the snapshot and the head, ``UNLOCK TABLES``, at most
``GLOBAL_LOCK_WAIT_S`` of waiting for the lock (a long query holds it up),
or it stops naming the cause.

Delivery guarantee: the rows plus the reconciliation changes equal the
source table at P exactly (no row missing, none doubled), provided the
binlog between min(Pi) and P is still on the server (checked).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

from seam.core.errors import SourceError
from seam.core.identifiers import quote
from seam.core.position import Position
from seam.core.schema import TableSchema
from seam.source.binlog import BinlogReader, LostTransaction, Statement, Transaction
from seam.source.ddl import reshapes
from seam.source.head import binlog_status
from seam.source.row_json import RowJson
from seam.source.schema import reachable, read_columns, read_foreign_keys
from seam.wire.records import Record, key_of, normalize_row

_INTEGER_KEY = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
_SNAPSHOT_FILE = (
    "(SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'BINLOG_SNAPSHOT_FILE')"
)
_SNAPSHOT_POS = (
    "(SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'BINLOG_SNAPSHOT_POSITION')"
)


EXACT_ATTEMPTS = 8
LOCK_WAIT_S = 30
GLOBAL_LOCK_WAIT_S = 10


class SnapshotError(SourceError):
    """The source cannot give a consistent snapshot as configured; the message says what to change."""


class ShapeChangeError(SnapshotError):
    """The table's columns changed under the load: its batch can never end (its chunks hold the old columns),
    so the load gives it up at once instead of leaving it open for a run that would resume it."""


@dataclass(frozen=True)
class Opening:
    """How a task opens its snapshot (a plain value, sent to Spark executors): ``method`` mariadb or
    portable; ``tables`` locked for the portable watermark (the table, and for an exact position the
    parents whose cascades reach it); ``exact``: the position must be the snapshot's own."""

    method: str
    tables: tuple[tuple[str, str], ...]
    exact: bool


def snapshot_method(conn, configured: str) -> str:
    """``auto``: MariaDB reports each snapshot's position; any other server gets the portable method."""
    if configured != "auto":
        return configured
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        return "mariadb" if "mariadb" in str(cur.fetchone()[0]).lower() else "portable"


def snapshot_opening(conn, pipeline, table) -> Opening:
    """How a snapshot of ``table`` (a TableConfig) opens: the pipeline's method, and for the portable one the
    tables it locks and whether the position must be exact (a keyless table; a table that cascades reach,
    whose cascaded rows are not in the binlog: it locks every table whose cascades reach it)."""
    keys = [fk for fk in read_foreign_keys(conn, {t.db for t in pipeline.tables} | {table.db}) if fk.follows()]
    me = (table.db, table.table)
    # every table whose cascades reach this one, however many levels up
    above = reachable(me, lambda t: [fk.parent for fk in keys if fk.child == t]) - {me}
    cascaded = bool(above) or any(fk.child == me for fk in keys)  # a table's keys into itself count
    exact = not table.key or cascaded
    return Opening(snapshot_method(conn, pipeline.source.snapshot), (me, *sorted(above)) if exact else (me,), exact)


def source_head(conn) -> Position:
    """The binlog position after the last event written."""
    status = binlog_status(conn)
    if status is None:
        raise SnapshotError("the source's binary log is off (SHOW MASTER STATUS is empty): start it with --log-bin")
    return Position.through(status[0], int(status[1]))


def open_snapshot(conn, source, opening: Opening, what: str) -> Position:
    """Start a consistent-snapshot transaction on ``conn`` (PyMySQL or MySQLdb); returns its position: exact
    (method mariadb, or ``opening.exact``), else the low watermark (see the module docstring)."""
    cur = conn.cursor()
    if opening.method == "mariadb":
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        cur.execute(f"SELECT {_SNAPSHOT_FILE}, {_SNAPSHOT_POS}")
        file, pos = cur.fetchone()
        if not file or pos is None:
            raise SnapshotError(
                f"{what}: the source reports no snapshot binlog position (MySQL, not MariaDB?): "
                "set source.snapshot: portable (or auto)"
            )
        return Position.through(file, int(pos))
    locks = ", ".join(f"{quote(db)}.{quote(t)} READ" for db, t in opening.tables)
    # autocommit on: LOCK TABLES then takes the metadata lock only; with autocommit off InnoDB adds a table
    # lock, which also waits for the row locks of a prepared XA transaction (not what the method needs)
    cur.execute(f"SET SESSION lock_wait_timeout = {LOCK_WAIT_S}, autocommit = 1")
    for attempt in range(EXACT_ATTEMPTS):
        try:
            cur.execute(f"LOCK TABLES {locks}")
        except Exception as exc:
            code = exc.args[0] if exc.args else None
            if code == 1205:
                raise SnapshotError(
                    f"{what}: a transaction kept {', '.join('.'.join(t) for t in opening.tables)} "
                    f"locked for {LOCK_WAIT_S}s (an open transaction that wrote it, or a prepared "
                    f"XA transaction): end it, then run the load again{_open_transactions(conn)}"
                ) from None
            if code in (1044, 1142):
                raise SnapshotError(
                    f"{what}: the portable snapshot needs the LOCK TABLES privilege: GRANT LOCK "
                    "TABLES ON the table's database TO the Seam user"
                ) from None
            raise
        low = source_head(conn)
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")  # ends the table locks
        if not opening.exact:
            return low
        high = source_head(conn)
        if high == low or not _touched(source, low, high, opening.tables):
            return high
        conn.rollback()
        time.sleep(0.01 * (attempt + 1))
    return _open_under_global_lock(conn, what)


def _open_transactions(conn) -> str:
    """The oldest open transactions on the source, to name a blocker (needs the PROCESS privilege)."""
    try:
        cur = conn.cursor()
        cur.execute(
            "SELECT t.trx_mysql_thread_id, p.USER, t.trx_state, t.trx_started, LEFT(p.INFO, 120) FROM "
            "information_schema.INNODB_TRX t LEFT JOIN information_schema.PROCESSLIST p ON "
            "p.ID = t.trx_mysql_thread_id ORDER BY t.trx_started LIMIT 3"
        )
        rows = cur.fetchall()
    except Exception:  # noqa: BLE001 - without PROCESS the list is just not shown
        return ""
    return (
        "; open transactions: " + "; ".join(f"connection {r[0]} ({r[1]}, {r[2]} since {r[3]}: {r[4]})" for r in rows)
        if rows
        else ""
    )


def _open_under_global_lock(conn, what: str) -> Position:
    """mysqldump's way to an exact position: no commit anywhere between the snapshot and the head read."""
    cur = conn.cursor()
    cur.execute(f"SET SESSION lock_wait_timeout = {GLOBAL_LOCK_WAIT_S}")
    try:
        cur.execute("FLUSH TABLES WITH READ LOCK")
    except Exception as exc:
        code = exc.args[0] if exc.args else None
        if code == 1205:
            raise SnapshotError(
                f"{what}: a keyless table, or a child of a cascading key, changes all the time, and "
                f"the brief global read lock that gives its exact position waited {GLOBAL_LOCK_WAIT_S}s "
                "for a long-running query: load it when that query is done, or give the table a "
                "primary key (tables[].key)"
            ) from None
        if code in (1044, 1045, 1227):
            raise SnapshotError(
                f"{what}: the exact position of a busy keyless table (or a child of a cascading key) "
                "needs the RELOAD privilege: GRANT RELOAD ON *.* TO the Seam user"
            ) from None
        raise
    try:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")  # keeps the global lock (not LOCK TABLES)
        return source_head(conn)
    finally:
        cur.execute("UNLOCK TABLES")  # ends the global lock; the transaction goes on


def _touched(source, low: Position, high: Position, tables) -> bool:
    """Whether the binlog (low, high] changes any of ``tables`` (rows, DDL, or something unreadable)."""

    wanted = set(tables)
    reader = BinlogReader(source, low, {db for db, _ in wanted}, tables=wanted, end=high, server_id=None)
    try:
        for item in reader:
            if isinstance(item, LostTransaction):
                return True
            if isinstance(item, Transaction) and (item.errors or any((c.db, c.table) in wanted for c in item.changes)):
                return True
            if isinstance(item, Statement) and any(reshapes(item, db, t) for db, t in wanted):
                return True
    finally:
        reader.close()
    return False


@dataclass(frozen=True)
class Chunk:
    """Rows whose chunk column is in [lo, hi); ``None`` leaves that side open."""

    index: int
    lo: int | None
    hi: int | None

    def condition(self, column_sql: str) -> str:
        terms = [
            f"{column_sql} >= {self.lo}" if self.lo is not None else "",
            f"{column_sql} < {self.hi}" if self.hi is not None else "",
        ]
        return " AND ".join(t for t in terms if t) or "1 = 1"


@dataclass(frozen=True)
class ChunkPlan:
    column: str | None  # None: one chunk, no reconciliation needed
    chunks: tuple[Chunk, ...]

    def chunk_of(self, value: Any) -> int:
        if self.column is None:
            return 0
        bounds = [cast(int, c.lo) for c in self.chunks[1:]]  # only the first chunk is open below
        return bisect.bisect_right(bounds, int(value))


CHUNK_ROWS = 250_000  # at most about this many rows a chunk: what a load started again reads twice at most
MAX_CHUNKS = 256


def plan_chunks(conn, schema: TableSchema, key: tuple[str, ...], partitions: int, min_chunk_rows: int = 1) -> ChunkPlan:
    """Even ranges of the first key column when it is an integer (``partitions`` of them, more for a table
    of more than ``partitions * CHUNK_ROWS`` rows, fewer for a table of fewer than ``partitions *
    min_chunk_rows``: a chunk costs a snapshot and a Spark task, which a few thousand rows do not pay
    for); otherwise one chunk."""
    column = key[0] if key and schema.column(key[0]).data_type in _INTEGER_KEY else None
    if column is None or partitions <= 1:
        return ChunkPlan(None, (Chunk(0, None, None),))
    table = f"{quote(schema.db)}.{quote(schema.table)}"
    with conn.cursor() as cur:
        cur.execute(f"SELECT MIN({quote(column)}), MAX({quote(column)}) FROM {table}")
        lo, hi = cur.fetchone()
        cur.execute(
            "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (schema.db, schema.table),
        )
        estimate = int((cur.fetchone() or (0,))[0] or 0)  # InnoDB's estimate: enough to size chunks
        small = partitions * min_chunk_rows
        if min_chunk_rows > 1 and estimate < small:  # the estimate lags a table just filled: count, up to small
            cur.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} LIMIT {small}) x")
            estimate = int(cur.fetchone()[0])
    partitions = max(partitions, min(MAX_CHUNKS, -(-estimate // CHUNK_ROWS)))
    partitions = max(1, min(partitions, -(-estimate // max(1, min_chunk_rows))))
    if lo is None or hi - lo < partitions * 2:
        return ChunkPlan(None, (Chunk(0, None, None),))
    step = (int(hi) - int(lo) + 1) / partitions
    bounds = [int(lo) + round(step * i) for i in range(1, partitions)]
    edges = [None, *bounds, None]  # open ends: rows inserted beyond today's min/max land in the edge chunks
    return ChunkPlan(column, tuple(Chunk(i, edges[i], edges[i + 1]) for i in range(partitions)))


def canonical_json_columns(schema: TableSchema) -> list[str]:
    return [c.name for c in schema.columns if c.data_type == "json"]


@dataclass(frozen=True)
class ChunkRead:
    """One Spark task's work: a chunk's SELECT (``chunk_sql``), how its rows become JSON (``row_json``), and how
    to open its snapshot (None: a plain consistent snapshot without a position, for an incremental window)."""

    index: int
    sql: str
    rows: RowJson
    opening: Opening | None
    schema: TableSchema  # as the load planned it: the table must still have these columns where it is read

    @property
    def snapshot(self) -> bool:
        return self.opening is not None


def chunk_sql(schema: TableSchema, plan: ChunkPlan, chunk: Chunk, rows: RowJson, window: str | None = None) -> str:
    """The chunk's SELECT of the columns ``rows`` renders. ``window`` restricts the rows (incremental loads, over
    ``x``)."""
    where = chunk.condition("x." + quote(plan.column)) if plan.column else "1 = 1"
    if window:
        where = f"({where}) AND ({window})"
    return f"SELECT {', '.join(rows.columns)} FROM {quote(schema.db)}.{quote(schema.table)} x WHERE {where}"


def read_chunk(source, read: ChunkRead, fetch: int = 10_000) -> Iterator[tuple[str | None, int | None, list]]:
    """The chunk's rows in its own consistent snapshot: yields (file, pos, rows) per ``fetch`` rows (and once
    for an empty chunk), where (file, pos) is the exact binlog position of the snapshot (None without
    ``read.snapshot``) and rows are (after, key) JSON bytes (``row_json``). The C client streams the rows
    (unbuffered), so memory stays flat whatever the chunk's size.
    """
    import MySQLdb
    import MySQLdb.cursors

    try:
        conn = MySQLdb.connect(**source.pymysql_kwargs(), connect_timeout=10)  # the same keywords
    except MySQLdb.OperationalError as exc:
        raise SnapshotError(f"source MySQL at {source.host}:{source.port}: {exc.args[-1]}") from None
    try:
        cur = conn.cursor()
        # TIMESTAMPs as UTC text; a slow consumer (Kafka back-pressure) must not time the stream out
        cur.execute("SET SESSION time_zone = '+00:00', net_write_timeout = 3600")
        file = pos = None
        if read.opening is None:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        else:
            at = open_snapshot(conn, source, read.opening, f"chunk {read.index}")
            file, pos = at.file, at.pos
        _same_columns(cur, read.schema)
        conn.converter = {}  # from here on every value as the server's text, in bytes: what row_json renders
        rows = conn.cursor(MySQLdb.cursors.SSCursor)
        rows.execute(read.sql)
        batch = rows.fetchmany(fetch)
        yield file, pos, read.rows.render(batch)  # even when empty: it carries the position
        while batch := rows.fetchmany(fetch):
            yield file, pos, read.rows.render(batch)
        rows.close()
        conn.rollback()
    finally:
        conn.close()


def _same_columns(cur, schema: TableSchema) -> None:
    """The table has the planned columns in this snapshot. Its first read takes the table's metadata lock,
    which no DDL passes until the transaction ends; a DDL between the plan and the snapshot (the snapshot
    after it, so nothing in the binlog between the chunks shows it) would otherwise load rows of the old
    columns at a position after the change."""
    table = f"{quote(schema.db)}.{quote(schema.table)}"
    cur.execute(f"SELECT 1 FROM {table} LIMIT 0")
    now = read_columns(cur, schema.db, schema.table)
    if now != schema.columns:
        changed = sorted({c.name for c in set(now) ^ set(schema.columns)})
        raise ShapeChangeError(
            f"{schema.db}.{schema.table} changed shape before it was read (columns {', '.join(changed)} are not "
            "as the load planned them): run the full load again"
        )


def snapshot_position(file: str | None, pos: Any, schema: TableSchema) -> Position:
    if not file or pos is None:
        raise SnapshotError(f"{schema.db}.{schema.table}: a chunk reported no snapshot binlog position")
    return Position.through(file, int(pos))


def reconcile(
    source,
    schema: TableSchema,
    key: tuple[str, ...],
    plan: ChunkPlan,
    positions: dict[int, Position],
    target: Position,
    batch: str,
) -> Iterator[Record]:
    """Binlog changes that bring each chunk from its own snapshot Pi to ``target`` = max(Pi). A child of a
    cascading foreign key is never reconciled: ``full_load.prepare`` reads it in one chunk.

    A change is emitted for chunk i when its transaction commits after Pi and at
    or before the target (whole committed transactions from ``seam.source.binlog``: an
    XA transaction prepared before Pi and committed after it counts, rolled-back
    work never does; the snapshot is InnoDB's, so a ROLLBACK undid its rows). An update that moves a row between chunks is split into a delete
    (old chunk) and an insert (new chunk), each subject to its own chunk's Pi.
    """
    start = min(positions.values())
    if not target.after(start):
        return

    def needed(image: dict, commit: Position) -> bool:  # chunk i's snapshot holds what committed up to Pi
        return commit.after(positions[plan.chunk_of(image[plan.column])] if plan.column else start)

    def record(op: str, before: dict | None, after: dict | None, at: Position) -> Record:
        return Record(
            op=op,
            db=schema.db,
            table=schema.table,
            key=key_of(schema, key, after or before),
            before=before,
            after=after,
            position=at,
            snapshot=False,
            batch=batch,
        )

    reader = BinlogReader(source, start, [schema.db], tables={(schema.db, schema.table)}, end=target)
    try:
        for item in reader:
            if isinstance(item, Statement) and reshapes(item, schema.db, schema.table):
                raise ShapeChangeError(
                    f"{schema.db}.{schema.table} changed shape while it was read ({item.query[:200]!r} "
                    f"at {item.position}): run the full load again"
                )
            if isinstance(item, LostTransaction):
                raise SnapshotError(
                    f"{schema.db}.{schema.table}: the binlog between the chunks' snapshots cannot be "
                    f"replayed exactly ({item.reason}); run the full load again"
                )
            if not isinstance(item, Transaction):
                continue
            if item.errors:
                raise SnapshotError(
                    f"{schema.db}.{schema.table}: binlog rows at {item.commit} cannot be decoded "
                    f"({next(iter(item.errors.values()))}); run the full load again"
                )
            for change in item.changes:
                at = change.position
                if change.op == "u":
                    before, after = normalize_row(schema, change.before), normalize_row(schema, change.after)
                    old, new = needed(before, item.commit), needed(after, item.commit)
                    if old and new:
                        yield record("u", before, after, at)
                    elif old:
                        yield record("d", before, None, at)
                    elif new:
                        yield record("c", None, after, at)
                else:
                    image = normalize_row(schema, change.after if change.op == "c" else change.before)
                    if needed(image, item.commit):
                        yield (record("c", None, image, at) if change.op == "c" else record("d", image, None, at))
    finally:
        reader.close()
