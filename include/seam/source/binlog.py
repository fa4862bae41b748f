"""The binlog as whole committed source transactions: the one binlog reader
that snapshot reconciliation, streaming and validation share.

Its size: it is the one binlog reader (events into whole transactions, XA, savepoints, DDL classified apart);
splitting it would make two.

It owns the transaction grammar of MySQL and MariaDB (what a CDC reader
must know; Debezium's ``handleQueryEvent`` treats the same cases apart):

- BEGIN (a query event, or MariaDB's GTID event), then row events, then
  XID or a ``COMMIT`` query: one committed ``Transaction`` at the commit.
- ``SAVEPOINT``, ``RELEASE SAVEPOINT``, ``ROLLBACK TO SAVEPOINT``: stay
  inside the transaction. Rows rolled back to a savepoint are not logged,
  unless the transaction also changed a non-transactional table: then they
  are, with the ROLLBACK TO after them, and are left out of the transaction
  (``RolledBack`` names their tables, as for a ROLLBACK).
- A ``ROLLBACK`` query (MySQL logs one when a rolled-back transaction also
  changed a non-transactional table): ``RolledBack`` with its rows; rows of
  transactional tables were undone, those of MyISAM-like tables were not,
  so the caller decides per table.
- XA: ``XA START`` (a query, or MariaDB's GTID event), rows, ``XA END``,
  then an XA_prepare event. A one-phase commit is a ``Transaction`` right
  there. A prepared transaction is held until ``XA COMMIT xid`` (then it is
  a ``Transaction`` at that commit, whichever session committed it and
  however many transactions came in between) or ``XA ROLLBACK xid``
  (dropped). When the COMMIT of a transaction prepared before the reading
  started arrives, the earlier binlog is searched for its prepared rows;
  if they are gone (purged), ``LostTransaction`` says so: never silence.
- GTID events (MySQL's and MariaDB's) give the transaction's GTID.
- Any other query event is a ``Statement`` (DDL, and anything the reader
  does not understand), yielded in binlog order with ``in_transaction``
  set when it came inside a transaction; the caller stops the tables it
  affects. Rows are never dropped because of one. An ALTER that MariaDB's
  ``binlog_alter_two_phase`` logs when it starts, and again when it commits
  or fails, is one ``Statement``, where it commits (a failed one none).

``Tick`` reports where the reader is: ``between`` means no transaction is
open there (prepared XA transactions aside, which the search above covers),
so a heartbeat or a restart position may be placed at it.

Delivery guarantee: every committed transaction in (start, end] whose rows
touch the watched tables, exactly once, in commit order, with its rows in
binlog order; nothing from rolled-back work.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    GtidEvent,
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    XAPrepareEvent,
    XidEvent,
)

from seam.core.position import Position
from seam.core.schema import TableSchema
from seam.source.declared import StatementClock
from seam.source.gtid import GtidError, GtidSet
from seam.source.head import binlog_files, binlog_status
from seam.source.replication import Stream
from seam.source.rows import Rows
from seam.source.spill import DEFAULT_BUDGET, ChangeBuffer


@dataclass
class Transaction:
    commit: Position  # where it commits: the XID / COMMIT / XA COMMIT event
    gtid: str | None
    timestamp: int  # seconds, the commit event's
    changes: ChangeBuffer = field(default_factory=ChangeBuffer)  # in memory up to a budget, then in a file
    errors: dict = field(default_factory=dict)  # (db, table) -> why its rows could not be decoded
    xid: str | None = None  # XA transactions
    # name -> its place in ``changes`` (ChangeBuffer.mark) and the tables changed since
    savepoints: dict[str, tuple[int, set]] = field(default_factory=dict)

    def add(self, event, log_file: str, schema) -> None:
        """A row event's changes (``ChangeBuffer.add``)."""
        self.changes.add(event, log_file, schema)
        for _, touched in self.savepoints.values():
            touched.add((event.schema, event.table))

    def savepoint(self, kind: str, name: str, at: Position) -> set[tuple[str, str]]:
        """SAVEPOINT, RELEASE SAVEPOINT or ROLLBACK TO SAVEPOINT ``name``; returns the tables whose changes the
        last undid (it also forgets the savepoints set after that one, as the server does)."""
        if kind == "savepoint":  # set again, it moves: after every other one
            self.savepoints.pop(name, None)
            self.savepoints[name] = (self.changes.mark(), set())
            return set()
        if kind == "savepoint_release":
            self.savepoints.pop(name, None)
            return set()
        if name not in self.savepoints:  # the server refuses an unknown savepoint: a binlog not understood here
            for key in self.changes.tables:
                self.errors.setdefault(key, f"ROLLBACK TO SAVEPOINT {name} at {at}, a savepoint it never saw set")
            return set()
        mark, touched = self.savepoints[name]
        self.changes.undo_since(mark)
        names = list(self.savepoints)
        self.savepoints = {n: self.savepoints[n] for n in names[: names.index(name)]}
        self.savepoints[name] = (mark, set())
        return touched


@dataclass(frozen=True)
class RolledBack:
    """A ROLLBACK, or a ROLLBACK TO SAVEPOINT, logged after rows of ``tables``."""

    position: Position
    tables: set
    errors: dict


@dataclass(frozen=True)
class Statement:
    position: Position
    query: str
    schema: str | None  # the session's default database
    in_transaction: bool
    sql_mode: int | None = None  # the session's, as logged with the statement (how its text reads)
    fold_names: bool = False  # the source's lower_case_table_names is not 0: `Orders` names `orders`
    clock: StatementClock | None = None  # when it ran (an added column's CURRENT_TIMESTAMP)
    explicit_timestamps: bool | None = None  # its session's explicit_defaults_for_timestamp (None: not logged)


@dataclass(frozen=True)
class LostTransaction:
    position: Position
    xid: str
    reason: str


@dataclass(frozen=True)
class Tick:
    position: Position
    between: bool  # no transaction open here
    idle: bool = False  # the binlog's end: the server had nothing more to send


_COMMENTS = re.compile(r"/\*.*?\*/", re.S)
_SAVEPOINT = re.compile(
    r"(SAVEPOINT|RELEASE\s+SAVEPOINT|ROLLBACK\s+(?:WORK\s+)?TO)\s+(?:SAVEPOINT\s+)?(`(?:[^`]|``)+`|\S+)$", re.I
)
_SAVEPOINT_KINDS = {"SAVEPOINT": "savepoint", "RELEASE": "savepoint_release", "ROLLBACK": "savepoint_rollback"}
_XA = re.compile(
    r"XA\s+(START|BEGIN|END|PREPARE|COMMIT|ROLLBACK)\b\s*(.*?)\s*(ONE\s+PHASE|SUSPEND.*|JOIN|RESUME)?$", re.I | re.S
)


def query_kind(query: str) -> tuple[str, str | None]:
    """A query event's part in the transaction grammar: (kind, xid) with kind one of begin, commit,
    rollback, savepoint, xa_start, xa_end, xa_prepare, xa_commit, xa_commit_one_phase, xa_rollback, other."""
    q = _COMMENTS.sub(" ", query).strip().rstrip(";").strip()
    upper = " ".join(q.upper().split())
    if upper in ("BEGIN", "START TRANSACTION", "BEGIN WORK"):
        return "begin", None
    if upper in ("COMMIT", "COMMIT WORK"):
        return "commit", None
    if upper in ("ROLLBACK", "ROLLBACK WORK"):
        return "rollback", None
    m = _SAVEPOINT.match(q)
    if m:  # the savepoint's name, as the server compares it
        name = m.group(2)[1:-1].replace("``", "`") if m.group(2).startswith("`") else m.group(2)
        return _SAVEPOINT_KINDS[m.group(1).split()[0].upper()], name.lower()
    m = _XA.match(q)
    if m:
        verb, xid, tail = m.group(1).upper(), xid_text(m.group(2)), (m.group(3) or "").upper()
        if verb == "COMMIT" and tail.startswith("ONE"):
            return "xa_commit_one_phase", xid
        return {
            "START": "xa_start",
            "BEGIN": "xa_start",
            "END": "xa_end",
            "PREPARE": "xa_prepare",
            "COMMIT": "xa_commit",
            "ROLLBACK": "xa_rollback",
        }[verb], xid
    return "other", None


def xid_text(text: str) -> str:
    """An XA xid in one spelling: gtrid, bqual and formatID as the server logs them (X'..',X'..',1)."""
    parts = [p.strip() for p in re.findall(r"(X'[0-9A-Fa-f]*'|'(?:[^']|'')*'|\d+)", text)]
    out = []
    for p in parts[:2]:
        if p.upper().startswith("X'"):
            out.append(p[2:-1].lower())
        else:
            out.append(p[1:-1].replace("''", "'").encode().hex())
    while len(out) < 2:
        out.append("")
    fmt = parts[2] if len(parts) > 2 and parts[2].isdigit() else "1"
    return f"X'{out[0]}',X'{out[1]}',{fmt}"


def prepared_xid(event) -> str:
    """The xid of an XA_prepare event in ``xid_text`` spelling."""
    return f"X'{event.xid_gtrid.hex()}',X'{event.xid_bqual.hex()}',{event.xid_format_id}"


_MARIADB_FL_STANDALONE = 1
_MARIADB_FL_COMPLETED_XA = 128


class BinlogReader:
    """Reads (start, end] of the binlog (``end`` None: to the current end, or forever when ``blocking``)
    for the tables in ``schemas`` (and ``tables``, if given) and yields Transaction, RolledBack, Statement,
    LostTransaction and Tick items. ``server_id`` must be unique among the source's replicas."""

    def __init__(
        self,
        source,
        start: Position,
        schemas,
        tables=None,
        end: Position | None = None,
        blocking: bool = False,
        server_id: int | None = None,
        heartbeat_s: float | None = None,
        report_as: str | None = None,
        gtids: GtidSet | None = None,
        transaction_memory: int = DEFAULT_BUDGET,
        record_schema: Callable[[str, str, Any], TableSchema | None] | None = None,
    ):
        self.source, self.start, self.end = source, start, end
        self.transaction_memory = transaction_memory  # of a transaction's changes; the rest spills to a file
        self.gtids = gtids  # the set executed through the start: kept up to the last event read
        self.schemas = sorted(set(schemas))
        self.tables = None if tables is None else set(tables)
        self.blocking, self.heartbeat_s = blocking, heartbeat_s
        self.server_id = server_id or _private_server_id()
        self.report_as = report_as  # the host name SHOW SLAVE HOSTS lists for this reader (see replica_clash)
        # (db, table) -> the schema whose record values a table's rows are read as (spill.RowChange.records), or None
        self.record_schema = record_schema or (lambda db, table, decoder: None)
        self._stream: Stream | None = None

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()

    @property
    def here(self) -> Position | None:
        s = self._stream
        return Position.through(s.log_file, s.log_pos) if s is not None and s.log_file else None

    def _transaction(self, at: Position, gtid: str | None, timestamp: int) -> Transaction:
        return Transaction(at, gtid, timestamp, ChangeBuffer(self.transaction_memory))

    def _watched(self, db: str, table: str) -> bool:
        return db in self.schemas and (self.tables is None or (db, table) in self.tables)

    def _open(self, file: str, pos: int, blocking: bool, server_id: int | None = None) -> Stream:
        return Stream(
            self.source,
            file=file,
            pos=pos,
            server_id=server_id or self.server_id,
            blocking=blocking,
            watched=self._watched,
            events=(XidEvent, QueryEvent, MariadbGtidEvent, GtidEvent, XAPrepareEvent, HeartbeatLogEvent),
            heartbeat_s=self.heartbeat_s,
            report_as=self.report_as,
        )

    def __iter__(self) -> Iterator:
        self._stream = self._open(self.start.file, self.start.pos, self.blocking)
        prepared: dict[str, Transaction] = {}
        for item in self._grammar(self._stream, prepared, self.end, self.gtids):
            if isinstance(item, _Resolve):
                found = prepared.pop(item.xid, None)
                if found is None and item.commit:
                    found = self._prepared_before(item.xid)
                    if found is None:
                        yield LostTransaction(
                            item.position,
                            item.xid,
                            f"XA COMMIT {item.xid} at {item.position} commits a transaction "
                            f"prepared before {self.start}, and the binlog holding its rows "
                            "is gone (purged)",
                        )
                        continue
                if found is not None and item.commit:
                    found.commit, found.timestamp, found.gtid = item.position, item.timestamp, item.gtid or found.gtid
                    if found.changes or found.errors:
                        yield found
            else:
                yield item

    def _prepared_before(self, xid: str) -> Transaction | None:
        """The rows of ``xid``, prepared before ``start`` and not resolved before it: searched file by file
        backwards from the start's file."""

        conn = pymysql.connect(**self.source.pymysql_kwargs())
        try:
            files = binlog_files(conn)
        finally:
            conn.close()
        if self.start.file not in files:
            return None
        for first in reversed(files[: files.index(self.start.file) + 1]):
            # a server_id of its own: the source would drop the open stream for a second reader with its id
            stream = self._open(first, 4, blocking=False, server_id=_private_server_id())
            held: dict[str, Transaction] = {}
            try:
                for item in self._grammar(stream, held, Position.through(self.start.file, self.start.pos)):
                    if isinstance(item, _Resolve):
                        held.pop(item.xid, None)
            finally:
                stream.close()
            if xid in held:
                return held[xid]
        return None

    def _grammar(
        self, stream, prepared: dict[str, Transaction], end: Position | None, executed: GtidSet | None = None
    ) -> Iterator:
        """Whole transactions, statements, rollbacks and ticks from the events of ``stream``. Its length: one
        state machine over the event kinds (GTID, BEGIN, rows, XID/COMMIT, XA, SAVEPOINT, ROLLBACK, DDL), each
        case a few lines, as Debezium's ``handleQueryEvent`` treats them apart in one place."""
        open_: Transaction | None = None
        gtid = None
        rows_seen = 0
        for event in stream:
            if event.__class__ is Rows:  # a row event of a watched table, most events: a position only if needed
                if end is not None and Position.through(stream.log_file, stream.event_end).after(end):
                    return
                if open_ is None:  # rows outside BEGIN: a non-transactional table's autocommitted statement
                    open_ = self._transaction(
                        Position.through(stream.log_file, stream.event_end), gtid, event.timestamp
                    )
                self._add_rows(open_, event, stream.log_file)
                rows_seen += 1
                if rows_seen % 2000 == 0:
                    yield Tick(Position.through(stream.log_file, stream.event_end), False)
                continue
            at = Position.through(stream.log_file, stream.event_end)
            if end is not None and at.after(end):
                return
            if isinstance(event, (MariadbGtidEvent, GtidEvent)):
                gtid = event.gtid
                if executed is not None:  # a transaction is in the set from its GTID event on, as on the server
                    if gtid in executed:  # e.g. the library reconnected after a failover, to another server
                        raise GtidError(
                            f"transaction {gtid} at {at} was read already (the GTID set through here "
                            f"is {executed}): the binlog is another server's now; reading again"
                        )
                    executed.add(gtid)
                # MariaDB's GTID event is the BEGIN (or XA START) unless it flags a standalone statement or the
                # completion of a prepared XA; MySQL's is followed by a BEGIN (or XA START) query
                if isinstance(event, MariadbGtidEvent) and not event.flags & (
                    _MARIADB_FL_STANDALONE | _MARIADB_FL_COMPLETED_XA
                ):
                    open_ = self._transaction(at, gtid, event.timestamp)
                continue
            if isinstance(event, QueryEvent):
                kind, qxid = query_kind(event.query)
                if kind in ("begin", "xa_start"):
                    if open_ is None or open_.changes:
                        open_ = self._transaction(at, gtid, event.timestamp)
                elif kind.startswith("savepoint"):  # stays inside the transaction
                    assert qxid is not None  # query_kind gives the name of every savepoint
                    undone = open_.savepoint(kind, qxid, at) if open_ is not None else set()
                    if undone:
                        yield RolledBack(at, undone, {})
                elif kind == "commit":
                    if open_ is not None:
                        open_.commit, open_.timestamp = at, event.timestamp
                        yield open_
                    open_, gtid = None, None
                    yield Tick(at, True)
                elif kind == "rollback":
                    if open_ is not None and (open_.changes or open_.errors):
                        yield RolledBack(at, set(open_.changes.tables), open_.errors)
                    open_, gtid = None, None
                    yield Tick(at, True)
                elif kind in ("xa_end", "xa_prepare"):
                    pass  # the XA_prepare event that follows ends the transaction's rows
                elif kind in ("xa_commit", "xa_rollback"):
                    assert qxid is not None  # query_kind gives the xid of every XA statement
                    yield _Resolve(qxid, kind == "xa_commit", at, gtid, event.timestamp)
                    open_, gtid = None, None
                    yield Tick(at, True)
                elif kind == "xa_commit_one_phase":
                    if open_ is not None:
                        open_.commit, open_.timestamp, open_.xid = at, event.timestamp, qxid
                        yield open_
                    open_, gtid = None, None
                    yield Tick(at, True)
                elif event.alter_phase in ("start", "rollback"):  # followed where it commits: see replication
                    if open_ is None:
                        gtid = None
                        yield Tick(at, True)
                else:
                    yield Statement(
                        at,
                        event.query,
                        _text(event.schema),
                        open_ is not None,
                        event.sql_mode,  # query events are read by seam.source.replication.query_event
                        stream.fold_names,
                        StatementClock(event.timestamp, event.microseconds, event.time_zone),
                        event.explicit_timestamps,
                    )
                    if open_ is None:
                        gtid = None
                        yield Tick(at, True)
                continue
            if isinstance(event, XidEvent):
                if open_ is not None:
                    open_.commit, open_.timestamp = at, event.timestamp
                    yield open_
                open_, gtid = None, None
                yield Tick(at, True)
                continue
            if isinstance(event, XAPrepareEvent):
                name = prepared_xid(event)
                if open_ is not None:
                    open_.xid = name
                    if event.one_phase:
                        open_.commit, open_.timestamp = at, event.timestamp
                        yield open_
                    else:
                        prepared[name] = open_
                open_, gtid = None, None
                yield Tick(at, True)
                continue
            if isinstance(event, HeartbeatLogEvent):
                if stream.log_file:
                    yield Tick(Position.through(stream.log_file, stream.log_pos), open_ is None, idle=True)
                continue
            raise TypeError(f"an event the transaction grammar does not know at {at}: {event!r}")  # Stream gives none

    def _add_rows(self, open_: Transaction, event: Rows, log_file: str) -> None:
        """A row event's changes into the open transaction; rows that cannot be decoded are noted against their
        table, which stops only if its rows are needed."""
        try:
            schema = self.record_schema(event.schema, event.table, event.decoder)
            open_.add(event, log_file, schema)
        except pymysql.err.OperationalError:
            raise  # the catalog read of ``record_schema`` lost the source: the reader retries, no table stops
        except Exception as exc:  # noqa: BLE001 - kept: only fatal if the table's rows are needed
            open_.errors.setdefault((event.schema, event.table), f"{type(exc).__name__}: {exc}")


def _gtid_stream(source, **where):
    return BinLogStreamReader(
        connection_settings={
            "host": source.host,
            "port": source.port,
            "user": source.user,
            "passwd": source.password.for_driver(),
        },
        server_id=_private_server_id(),
        blocking=False,
        only_events=[GtidEvent, MariadbGtidEvent, RotateEvent],
        **where,
    )


def gtids_between(source, start: Position, end: Position) -> list[str]:
    """The GTIDs of the transactions logged in (start, end], in binlog order."""

    stream = _gtid_stream(source, log_file=start.file, log_pos=start.pos, resume_stream=True)
    found = []
    try:
        for event in stream:
            if isinstance(event, RotateEvent):
                continue
            if Position.through(stream.log_file, event.packet.log_pos).after(end):
                break
            found.append(event.gtid)
    finally:
        stream.close()
    return found


def locate(source, executed: GtidSet, mariadb: bool) -> Position:
    """Where ``executed`` ends in this server's binlog: the end of the last event before the first
    transaction it does not hold (the binlog's end when it holds them all). The server finds it (GTID
    auto-positioning, as a replica would); one that lacks some of the set's transactions, or purged the
    binlog after them, refuses with its own message, raised as GtidError. Then every transaction logged
    after that position must be new to the set, else one position cannot stand for it (GtidError)."""

    if not executed.flavour:
        raise GtidError("an empty GTID set has no position")
    stream = _gtid_stream(source, auto_position=str(executed), is_mariadb=mariadb)
    found = None
    try:
        for event in stream:
            if not isinstance(event, RotateEvent):
                found = Position.through(stream.log_file, event.packet.log_pos - event.packet.event_size)
                break
        else:  # it holds every transaction logged: where the server stopped sending
            found = Position.through(stream.log_file, stream.log_pos) if stream.log_file else None
    except pymysql.MySQLError as exc:
        raise GtidError(f"the server cannot start from GTID set {executed}: {exc.args[-1]}") from None
    finally:
        stream.close()
    conn = pymysql.connect(**source.pymysql_kwargs())
    try:
        row = binlog_status(conn)
    finally:
        conn.close()
    if found is None or row is None:
        raise GtidError(f"the server sent no position for GTID set {executed}")
    head = Position.through(row[0], int(row[1]))
    doubled = [g for g in gtids_between(source, found, head) if g in executed]
    if doubled:
        raise GtidError(
            f"transaction {doubled[0]}, logged after {found}, is already in the set {executed}: this "
            "server committed them in another order (MySQL: set replica_preserve_commit_order=ON)"
        )
    return found


def _private_server_id() -> int:
    """A server_id for a short-lived reader, above the range people give replicas."""
    return random.randint(1 << 20, (1 << 31) - 1)


SAME_SERVER_ID = 4052  # MariaDB's ER_SLAVE_SAME_ID: another reader connected with this reader's server_id


def replica_clash(conn, server_id: int, report_as: str) -> str | None:
    """The host another registered replica or reader with ``server_id`` reports, when it is not ``report_as``
    (this pipeline's own name: an earlier run of it, or its ghost after a kill, is replaced, not a clash).
    None when there is none, or when the account may not list replicas (the server then sorts it out)."""

    for statement in ("SHOW REPLICAS", "SHOW SLAVE HOSTS"):
        try:
            with conn.cursor(pymysql.cursors.DictCursor) as cur:
                cur.execute(statement)
                rows = cur.fetchall()
            break
        except pymysql.MySQLError:
            continue
    else:
        return None
    for row in rows:
        if int(row.get("Server_id") or row.get("Server_Id") or 0) == server_id and row.get("Host") != report_as:
            return row.get("Host") or "(a replica that reports no host)"
    return None


@dataclass(frozen=True)
class _Resolve:
    xid: str
    commit: bool
    position: Position
    gtid: str | None
    timestamp: int


def _text(value) -> str | None:
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", "replace")
    return value or None
