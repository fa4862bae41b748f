"""The binlog as a replica reads it: Seam's own replication connection, on pymysql.

``Stream`` connects as a MySQL or MariaDB replica does and reads the events from a binlog file and position on:

- connecting: ``@master_binlog_checksum`` (the source then sends events as each file logs them: with checksums
  or without, as ``binlog_checksum`` was when it was written; each file's format description says which), a heartbeat
  period, ``@mariadb_slave_capability = 4`` (MariaDB sends its GTID events as they are, not as dummies), the
  reader's registration (``COM_REGISTER_SLAVE``: its server id and host name in ``SHOW SLAVE HOSTS``), then
  ``COM_BINLOG_DUMP`` from the file and position, blocking or to the binlog's end;
- table maps and row events: decoded by ``seam.source.rows`` (a map of a table the reader does not watch is not
  parsed at all);
- the other events Seam asks for (GTID, query, XID, XA prepare, heartbeat; rotate and format description, which
  move the position and give the header lengths): parsed by python-mysql-replication's ``BinLogPacketWrapper``,
  with keyword arguments; but for XID and MariaDB's GTID, the two events of every transaction, whose few fields
  are read here into the library's classes (``tests/unit/test_binlog_library.py`` compares them), and query
  events, read here too (``query_event``: the library's parser stops at a status variable it does not know);
- a connection lost while reading (2006, 2013) is opened again at the end of the last event read, as
  python-mysql-replication's reader does.

MariaDB's compressed events (``log_bin_compress=ON``) are inflated into the plain events they stand for
(``seam.source.inflate``); MySQL's compressed transactions (``binlog_transaction_compression=ON``: one
TRANSACTION_PAYLOAD event holding a whole transaction's events) are read as the events they hold
(``seam.source.payload``).

``tests/unit/test_binlog_library.py`` pins what this relies on: python-mysql-replication's release, its wrapper's
parameters and what its event parsers ask of the object passed as their control connection; pymysql's release
and the private members of its connection that the packet reader and the commands use.

Delivery guarantee: none of its own (reading only); events come in binlog order, and none is skipped without an
error.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import pymysql
from pymysql.connections import MAX_PACKET_LEN, MysqlPacket
from pymysql.constants import CR
from pymysql.constants.COMMAND import COM_BINLOG_DUMP, COM_REGISTER_SLAVE
from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.event import FormatDescriptionEvent, MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import TableMapEvent

from seam.source.head import ACCESS_DENIED, GRANT, BinlogAccessError
from seam.source.inflate import COMPRESSED, inflated
from seam.source.payload import TRANSACTION_PAYLOAD, inner_events
from seam.source.rows import Decoder, Rows
from seam.source.sql_text import statement_text
from seam.source.table_map import member_names

TABLE_MAP = 0x13
ROTATE, FORMAT_DESCRIPTION = 0x04, 0x0F
QUERY = 0x02
_ROWS = {0x17: "c", 0x18: "u", 0x19: "d", 0x1E: "c", 0x1F: "u", 0x20: "d"}  # WRITE/UPDATE/DELETE_ROWS v1 and v2
_ROWS_V2 = {0x1E, 0x1F, 0x20}
PARTIAL_UPDATE_ROWS = 0x27
BINLOG_DUMP_NON_BLOCK = 0x01
_LOST = (CR.CR_SERVER_GONE_ERROR, CR.CR_SERVER_LOST)
_USER_DENIED = 1045
_MAX_HEARTBEAT_S = 4294967  # the largest period a source accepts
_ALWAYS = frozenset({FormatDescriptionEvent, RotateEvent})  # parsed whatever the reader asks for
_TABLE_MAPS = frozenset({TableMapEvent})

_HEADER = struct.Struct("<IBIIIH")  # after the OK byte: timestamp, type, server id, event size, log_pos, flags


@dataclass(frozen=True)
class Server:
    """How the source logs, read when connecting. It is also what python-mysql-replication's event parsers get
    as their control connection: they ask it for ``charset`` and ``_get_dbms()`` only, as long as column names
    come from the table map (the library's column-name cache, which would query, stays off)."""

    charset: str
    dbms: str  # "mariadb" or "mysql"
    checksum: bool  # events end in a 4-byte CRC32
    full_metadata: bool  # table maps carry column names (binlog_row_metadata=FULL)
    fold_names: bool = False  # lower_case_table_names 1 or 2: a statement's `Orders` is the table `orders`

    def _get_dbms(self) -> str:
        return self.dbms


def parsed(
    data: bytes, allowed: frozenset, server: Server, mysql_version: tuple, post_header_lengths: tuple | None
) -> BinLogPacketWrapper:
    """An event packet parsed by python-mysql-replication: ``.event`` is None unless its class is ``allowed``."""
    return BinLogPacketWrapper(
        from_packet=MysqlPacket(data, "utf8"),
        table_map={},
        ctl_connection=server,
        mysql_version=mysql_version,
        use_checksum=server.checksum,
        allowed_events=allowed,
        only_tables=None,
        ignored_tables=None,
        only_schemas=None,
        ignored_schemas=None,
        freeze_schema=False,
        ignore_decode_errors=False,
        verify_checksum=False,
        optional_meta_data=server.full_metadata,
        enable_logging=False,
        use_column_name_cache=False,
        post_header_lengths=post_header_lengths,
    )


class Stream:
    """The source's binlog from ``file``:``pos`` on, as events: ``Rows`` for row events of watched tables,
    python-mysql-replication's event objects for the kinds in ``events``. ``log_file``/``log_pos`` are where
    reading has got to; ``event_end`` is where the event returned last ends (its header's log_pos)."""

    def __init__(
        self,
        source,
        *,
        file: str,
        pos: int,
        server_id: int,
        blocking: bool,
        watched: Callable[[str, str], bool],
        events: Iterable[type],
        heartbeat_s: float | None = None,
        report_as: str | None = None,
    ):
        self.log_file, self.log_pos, self.event_end = file, pos, 0
        self._source, self._server_id, self._blocking = source, server_id, blocking
        self._watched, self._events = watched, frozenset(events)
        self._heartbeat_s, self._report_as = heartbeat_s, report_as
        self._connection: pymysql.Connection | None = None
        self._server = Server("utf8mb4", "mysql", False, False)
        self.mysql_version: tuple = (0, 0, 0)
        self._post_header_lengths: tuple | None = None
        self._maps: dict[bytes, Decoder | None] = {}  # a table map's bytes after its id -> its decoder
        self._decoders: dict[int, Decoder] = {}  # table id -> decoder, for the maps read in this stream
        self._held: Iterator[bytes] | None = None  # the events of a compressed transaction still to give

    # ------------------------------------------------------------ connection ----

    def _connect(self) -> pymysql.Connection:
        connection = pymysql.connect(**self._source.pymysql_kwargs())
        try:
            with connection.cursor() as cur:
                cur.execute(
                    "SHOW GLOBAL VARIABLES WHERE Variable_name IN "
                    "('binlog_checksum', 'binlog_row_metadata', 'lower_case_table_names')"
                )
                settings = {str(name).lower(): str(value).upper() for name, value in cur.fetchall()}
                checksum = settings.get("binlog_checksum", "NONE") != "NONE"
                # Always said, NONE too: a replica that does not say it reads checksums gets an error at the
                # first file logged with them. Events then come as each file logs them (``_library_event``).
                cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
                if self._heartbeat_s:
                    period_ns = int(min(self._heartbeat_s, _MAX_HEARTBEAT_S) * 1e9)
                    cur.execute("SET @master_heartbeat_period = %s", (period_ns,))
                cur.execute("SET @mariadb_slave_capability = 4")  # ignored by MySQL
            dbms = "mariadb" if "MariaDB" in connection.get_server_info() else "mysql"
            full_metadata = settings.get("binlog_row_metadata") == "FULL"
            fold = settings.get("lower_case_table_names", "0") != "0"
            self._server = Server(connection.charset, dbms, checksum, full_metadata, fold)
            if self._report_as:
                self._register(connection, self._report_as)
            flags = 0 if self._blocking else BINLOG_DUMP_NON_BLOCK
            request = struct.pack("<IHI", self.log_pos, flags, self._server_id) + self.log_file.encode()
            # the dump's packets come back to back: read them through a buffer of 256 KiB, not pymysql's 8 KiB
            # (a read from the socket per 8 KiB was a tenth of the reader's time). Nothing is buffered yet: every
            # answer above was read whole.
            small, connection._rfile = connection._rfile, connection._sock.makefile("rb", buffering=_READ_BUFFER)
            small.close()
            connection._execute_command(COM_BINLOG_DUMP, request)
        except BaseException:
            _close(connection)
            raise
        return connection

    @property
    def fold_names(self) -> bool:
        """Whether the source compares table and database names in any case (``lower_case_table_names``)."""
        return self._server.fold_names

    def _register(self, connection: pymysql.Connection, host: str) -> None:
        """COM_REGISTER_SLAVE: the server id, the host name SHOW SLAVE HOSTS lists, no user, password or port."""
        name = host.encode()[:255]
        body = struct.pack("<IB", self._server_id, len(name)) + name + b"\0\0" + struct.pack("<HII", 0, 0, 0)
        connection._execute_command(COM_REGISTER_SLAVE, body)
        try:
            connection._read_packet()  # the server's OK, or its error raised
        except pymysql.OperationalError as error:
            if error.args[0] in (ACCESS_DENIED, _USER_DENIED):  # MariaDB: 1045 without REPLICATION SLAVE
                raise BinlogAccessError(
                    f"the Seam user may not read the source's binlog ({error.args[-1]}): {GRANT}"
                ) from None
            raise

    def close(self) -> None:
        if self._connection is not None:
            _close(self._connection)
            self._connection = None

    # ---------------------------------------------------------------- events ----

    def __iter__(self):
        return iter(self.fetchone, None)

    def fetchone(self):
        """The next event this reader returns, or None at the binlog's end (a non-blocking dump)."""
        while True:
            data: bytes | None
            if self._held is not None:  # a compressed transaction's events come first, one per call
                data = next(self._held, None)
                if data is None:
                    self._held = None
                    continue
            else:
                data = self._packet()
                if data is None:
                    return None
            if data[0] != 0 or len(data) < 7:  # not an event
                continue
            timestamp, kind, _, size, log_pos, _ = _HEADER.unpack_from(data, 1)
            if kind in COMPRESSED:  # log_bin_compress=ON: read as the plain event it stands for
                data = inflated(data, self._server.checksum, self._post_header)
                timestamp, kind, _, size, log_pos, _ = _HEADER.unpack_from(data, 1)
            if kind in _ROWS or kind == TABLE_MAP or kind == PARTIAL_UPDATE_ROWS:
                if log_pos:
                    self.log_pos = log_pos
                self.event_end = log_pos
                end = 1 + size - (4 if self._server.checksum else 0)
                if kind == TABLE_MAP:
                    self._table_map(data, end)
                    continue
                rows = self._rows(kind, data, end, timestamp, log_pos)
                if rows is not None:
                    return rows
                continue
            if kind == TRANSACTION_PAYLOAD:  # binlog_transaction_compression=ON
                end = 1 + size - (4 if self._server.checksum else 0)
                where = f"{self.log_file}:{log_pos}"  # its fields follow the header: it has no post-header
                self._held = inner_events(data, 20, end, self._server.checksum, where)
                continue
            if kind in _QUICK and _QUICK[kind][0] in self._events:
                if log_pos:
                    self.log_pos = log_pos
                self.event_end = log_pos
                return _QUICK[kind][1](data, timestamp)
            if kind == QUERY and QueryEvent in self._events:  # read here: see ``query_event``
                if log_pos:
                    self.log_pos = log_pos
                self.event_end = log_pos
                end = 1 + size - (4 if self._server.checksum else 0)
                logs_flag = self._server.dbms == "mariadb" and self.mysql_version >= (10, 10)
                return query_event(data, timestamp, self._post_header(QUERY, 13), end, logs_flag)
            event = self._library_event(data, kind)
            if event is not None:
                return event

    def _packet(self) -> bytes | None:
        """The connection's next packet (opened again where the last event read ends when it was lost), or None
        at the binlog's end (a non-blocking dump)."""
        while True:
            if self._connection is None:
                self._connection = self._connect()
            connection = self._connection
            try:
                data = _packet(connection) or b"\x01"  # (an empty packet is not an event)
                if data[0] == 0xFF:  # an error packet: pymysql raises it
                    MysqlPacket(data, connection.encoding).raise_for_error()
            except pymysql.OperationalError as error:
                if error.args[0] in _LOST:  # opened again where the last event read ends
                    self.close()
                    continue
                if error.args[0] == ACCESS_DENIED:  # the dump's answer without REPLICATION SLAVE
                    raise BinlogAccessError(
                        f"the Seam user may not read the source's binlog ({error.args[-1]}): {GRANT}"
                    ) from None
                raise
            if data[0] == 0xFE and len(data) < 9:  # EOF: the server ends the stream (not blocking)
                self.close()
                return None
            return data

    def _wrap(self, data: bytes, allowed: frozenset) -> BinLogPacketWrapper:
        return parsed(data, allowed, self._server, self.mysql_version, self._post_header_lengths)

    def _library_event(self, data: bytes, kind: int):
        """Any other event, parsed by python-mysql-replication; it moves the position as its reader does."""
        wrapped = self._wrap(data, self._events | _ALWAYS)
        event = wrapped.event
        if kind == ROTATE and event is not None:
            self.log_pos, self.log_file = event.position, event.next_binlog
            if wrapped.timestamp != 0:  # table ids are per server run; a rotation may be a restart
                self._decoders = {}
        elif wrapped.log_pos:
            self.log_pos = wrapped.log_pos
        self.event_end = wrapped.log_pos
        if kind == FORMAT_DESCRIPTION and event is not None:
            self.mysql_version, self._post_header_lengths = event.mysql_version, event.post_header_len
            if event.checksum_algorithm is not None:  # this file's events (binlog_checksum when it was written)
                self._server = replace(self._server, checksum=event.checksum_algorithm != 0)
        if event is None or event.__class__ not in self._events:
            return None
        return event

    def _post_header(self, kind: int, known: int) -> int:
        lengths = self._post_header_lengths
        return lengths[kind - 1] if lengths and 0 < kind <= len(lengths) else known

    def _table_map(self, data: bytes, end: int) -> None:
        table_id = int.from_bytes(data[20:26], "little")
        key = bytes(data[26:end])
        if key not in self._maps:
            body = data[20 + self._post_header(TABLE_MAP, 8) : end]
            schema = body[1 : 1 + body[0]].decode()
            at = 2 + body[0]
            table = body[at + 1 : at + 1 + body[at]].decode()
            if not self._watched(schema, table):
                self._maps[key] = None
            else:  # parsed by the library once per distinct map
                table = self._wrap(data, _TABLE_MAPS).event.get_table()
                _log_members(table, body)
                self._maps[key] = Decoder(table)
        decoder = self._maps[key]
        if decoder is None:
            self._decoders.pop(table_id, None)
        else:
            self._decoders[table_id] = decoder

    def _rows(self, kind: int, data: bytes, end: int, timestamp: int, log_pos: int) -> Rows | None:
        decoder = self._decoders.get(int.from_bytes(data[20:26], "little"))
        if decoder is None:  # a table the reader does not watch
            return None
        if kind == PARTIAL_UPDATE_ROWS:
            refused = (
                "a row event with partial JSON updates carries no full values: set binlog_row_value_options='' "
                "on the source so row images are full"
            )
            return Rows("u", decoder.schema, decoder.table, timestamp, log_pos, None, b"", 0, 0, refused)
        start = 20 + self._post_header(kind, 10 if kind in _ROWS_V2 else 8)
        if kind in _ROWS_V2:  # v2: extra data follows the post-header; its length counts its own two bytes
            start += int.from_bytes(data[28:30], "little") - 2
        unchecked = bool(int.from_bytes(data[26:28], "little") & _NO_FOREIGN_KEY_CHECKS)  # flags, after the table id
        shared = self._held is not None  # a compressed transaction's events all end where it ends
        return Rows(
            _ROWS[kind],
            decoder.schema,
            decoder.table,
            timestamp,
            log_pos,
            decoder,
            data,
            start,
            end,
            None,
            unchecked,
            shared,
        )


def _log_members(table, body: bytes) -> None:
    """Each ENUM and SET column of a table map gets its member names as logged (``logged_members``):
    the library's are UTF-8 only."""
    kinds = [c.type for c in table.columns]
    if FIELD_TYPE.ENUM not in kinds and FIELD_TYPE.SET not in kinds:
        return
    enums, sets = member_names(body)
    for column in table.columns:
        names = enums if column.type == FIELD_TYPE.ENUM else sets if column.type == FIELD_TYPE.SET else None
        if names:
            column.logged_members = names.pop(0)


def _xid(data: bytes, timestamp: int) -> XidEvent:
    """XidEvent's fields as python-mysql-replication reads them, without its packet wrapper (a tenth of the
    reader's time went to wrapping the two events every transaction has)."""
    event = XidEvent.__new__(XidEvent)
    event.timestamp, event.xid = timestamp, int.from_bytes(data[20:28], "little")
    return event


def _mariadb_gtid(data: bytes, timestamp: int) -> MariadbGtidEvent:
    """MariadbGtidEvent's fields as python-mysql-replication reads them (see ``_xid``)."""
    event = MariadbGtidEvent.__new__(MariadbGtidEvent)
    event.timestamp, event.server_id = timestamp, int.from_bytes(data[6:10], "little")
    event.gtid_seq_no, event.domain_id, event.flags = _MARIADB_GTID.unpack_from(data, 20)
    event.gtid = f"{event.domain_id}-{event.server_id}-{event.gtid_seq_no}"
    return event


_MARIADB_GTID = struct.Struct("<QIB")
_QUICK = {0x10: (XidEvent, _xid), 0xA2: (MariadbGtidEvent, _mariadb_gtid)}


# a query event's status variables: the size of each fixed one, by its code (MySQL's and MariaDB's)
_STATUS_SIZES = {
    **{0x00: 4, 0x01: 8, 0x03: 4, 0x04: 6, 0x07: 2, 0x08: 2, 0x09: 8, 0x0A: 4, 0x0D: 3},
    **{0x10: 1, 0x11: 8, 0x12: 2, 0x13: 1, 0x14: 1, 0x80: 3, 0x81: 8},
}
_FLAGS2, _SQL_MODE, _CHARSET, _TIME_ZONE, _GTID_FLAGS3 = 0x00, 0x01, 0x04, 0x05, 0x82
# the session's explicit_defaults_for_timestamp: MySQL's Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP (logged for a CREATE or
# ALTER of a table with a TIMESTAMP column), a bit of MariaDB's flags2 (logged since 10.10)
_EXPLICIT_DEFAULTS, _MARIADB_EXPLICIT_DEFAULTS = 0x10, 1 << 24
_UPDATED_DB_NAMES = 0x0C
_NO_FOREIGN_KEY_CHECKS = 0x0002  # a row event's flag: its session ran with foreign_key_checks = 0
_MICROSECONDS = (0x0D, 0x80)  # MySQL's Q_MICROSECONDS, MariaDB's Q_HRNOW: logged when the statement used them
_ALTER_PHASES = ((2, "start"), (4, "commit"), (8, "rollback"))  # MariaDB's GTID flags_extra bits


def query_event(data: bytes, timestamp: int, post_header: int, end: int, logs_flag: bool = False) -> QueryEvent:
    """A query event, read here rather than by python-mysql-replication, whose parser raises on a status
    variable it does not know (MariaDB's ``Q_GTID_FLAGS3`` of every ALTER under ``binlog_alter_two_phase``),
    which would stop every table. What Seam reads: the statement in its client's character set
    (``seam.source.sql_text.statement_text``; the library reads every statement as UTF-8), the default
    database, ``sql_mode``, when it ran (``microseconds``, ``time_zone``: what its CURRENT_TIMESTAMP gave),
    ``explicit_timestamps`` (the session's explicit_defaults_for_timestamp; None when not logged: ``logs_flag``
    says whether the server logs MariaDB's bit; MySQL logs its own whenever a statement names TIMESTAMP), and
    ``alter_phase``: MariaDB's ``binlog_alter_two_phase`` logs an ALTER when it starts ("start") and again,
    whole, when it commits ("commit") or fails ("rollback")."""
    event = QueryEvent.__new__(QueryEvent)
    event.timestamp, event.server_id = timestamp, int.from_bytes(data[6:10], "little")
    body = 20
    event.slave_proxy_id, event.execution_time, schema_length, event.error_code, status_length = (
        _QUERY_HEADER.unpack_from(data, body)
    )
    event.schema_length, event.status_vars_length = schema_length, status_length
    event.sql_mode, event.character_set_client, event.alter_phase = None, None, None
    event.microseconds, event.time_zone, event.explicit_timestamps = None, None, None
    at, status_end = body + post_header, body + post_header + status_length
    while at < status_end:  # the codes Seam reads come before any a newer server may add
        code, at = data[at], at + 1
        if code == _FLAGS2 and logs_flag:
            event.explicit_timestamps = bool(int.from_bytes(data[at : at + 4], "little") & _MARIADB_EXPLICIT_DEFAULTS)
        elif code == _EXPLICIT_DEFAULTS:
            event.explicit_timestamps = bool(data[at])
        elif code == _SQL_MODE:
            event.sql_mode = int.from_bytes(data[at : at + 8], "little")
        elif code == _CHARSET:
            event.character_set_client = int.from_bytes(data[at : at + 2], "little")
        elif code == _TIME_ZONE:
            event.time_zone = data[at + 1 : at + 1 + data[at]].decode("ascii", "replace")
        elif code in _MICROSECONDS:
            event.microseconds = int.from_bytes(data[at : at + 3], "little")
        elif code == _GTID_FLAGS3:
            event.alter_phase = next((phase for bit, phase in _ALTER_PHASES if data[at] & bit), None)
        size = _status_size(code, data, at)
        if size is None:
            break
        at += size
    event.schema = data[status_end : status_end + schema_length]
    event.query = statement_text(data[status_end + schema_length + 1 : end], event.character_set_client)
    return event


def _status_size(code: int, data: bytes, at: int) -> int | None:
    """The size of the status variable at ``at`` (after its code), or None for a code not known here."""
    if code in _STATUS_SIZES:
        return _STATUS_SIZES[code]
    if code in (0x05, 0x06):  # time zone, catalog: a length, then the text
        return 1 + data[at]
    if code == 0x0B:  # invoker: user and host, each with its length
        return 2 + data[at] + data[at + 1 + data[at]]
    if code == _GTID_FLAGS3:  # flags; a commit or rollback of a begun ALTER adds the sequence number it began at
        return 1 + (8 if data[at] & (4 | 8) else 0)
    if code == _UPDATED_DB_NAMES:  # MySQL's, before its microseconds: a count (254: none), each name NUL-ended
        end = at + 1
        for _ in range(data[at] if data[at] != 254 else 0):
            end = data.find(b"\0", end) + 1
            if end == 0:
                return None
        return end - at
    return None


_QUERY_HEADER = struct.Struct("<IIBHH")


def _close(connection: pymysql.Connection) -> None:
    with contextlib.suppress(pymysql.err.Error):  # already closed
        connection.close()


_READ_BUFFER = 256 * 1024


def _packet(connection) -> bytes:
    """One packet of the replication connection: pymysql's ``_read_packet`` without a packet object and a
    socket timeout set for each of its two reads (a tenth of the reader's time). The timeout is pymysql's
    read timeout all the same: nothing else on this connection sets another once the stream runs."""
    read, body = connection._rfile.read, b""
    if connection._sock.gettimeout() != connection._read_timeout:
        connection._sock.settimeout(connection._read_timeout)
    while True:
        try:
            header = read(4)
            size = int.from_bytes(header, "little") & 0xFFFFFF
            in_order = len(header) == 4 and header[3] == connection._next_seq_id
            part = read(size) if in_order else b""
        except OSError as error:
            raise _lost(connection, f" ({error})") from None
        if not in_order or len(part) < size:
            raise _lost(connection)
        connection._next_seq_id = (connection._next_seq_id + 1) % 256
        if size < MAX_PACKET_LEN:
            return body + part if body else part
        body += part  # a packet of 16 MiB or more comes in parts


def _lost(connection, detail: str = "") -> pymysql.OperationalError:
    """The error pymysql raises for a connection that broke mid-packet, the connection closed."""
    connection._force_close()
    return pymysql.OperationalError(CR.CR_SERVER_LOST, f"Lost connection to MySQL server during query{detail}")
