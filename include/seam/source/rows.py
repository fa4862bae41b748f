"""Row events decoded by a decoder built once per table map, on python-mysql-replication's connection.

The binlog reader spends most of its time in python-mysql-replication's TABLE_MAP parsing (an OLTP binlog has a
TABLE_MAP before nearly every row event) and in its per-value decoding, which looks the column up and branches
on its type for every value. ``Stream`` keeps the library's connection, handshake, heartbeats, checksums and
events other than rows; it takes over two kinds of events:

- TABLE_MAP: the library parses a table map the first time its bytes are seen; a map seen before (the same
  table, the same definition) is looked up by its bytes. A table the reader does not watch is not parsed.
- WRITE/UPDATE/DELETE_ROWS (v1 and v2): ``Rows``, whose ``images()`` decodes with per-column readers chosen
  once per table map (``Decoder``; the readers are ``seam.source.row_values``). Values are the library's (an
  empty SET as "", not its None), except a negative TIME with a fraction, which the library misreads and
  MySQL's own layout reads right.
  ``tests/stack/test_row_decoder.py`` compares the two on every type family, and both with the source.

A row event Seam cannot decode exactly raises in ``images()``; the binlog reader then stops that table
(never a skipped row). Binlog compression (MySQL's TRANSACTION_PAYLOAD, MariaDB's compressed events) hides
rows from any reader that does not inflate it: ``UnreadableBinlog``, never silence.

``Stream`` reads some of ``BinLogStreamReader``'s private attributes and passes ``BinLogPacketWrapper``'s
parameters by position: ``tests/unit/test_binlog_library.py`` pins the release and every such name.

Delivery guarantee: none of its own (decoding only); nothing is dropped without an error.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pymysql
from pymysql.connections import MAX_PACKET_LEN, MysqlPacket
from pymysql.constants import CR
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.binlogstream import MYSQL_EXPECTED_ERROR_CODES
from pymysqlreplication.packet import BinLogPacketWrapper

from seam.core.errors import SourceError
from seam.source.row_values import Reader, value_reader

TABLE_MAP = 0x13
ROTATE, FORMAT_DESCRIPTION = 0x04, 0x0F
_ROWS = {0x17: "c", 0x18: "u", 0x19: "d", 0x1E: "c", 0x1F: "u", 0x20: "d"}  # v1 and v2
_ROWS_V2 = {0x1E, 0x1F, 0x20}
PARTIAL_UPDATE_ROWS = 0x27
TRANSACTION_PAYLOAD = 0x28  # MySQL 8.0.20+ with binlog_transaction_compression=ON
_MARIADB_COMPRESSED = {
    0xA5: "a query",
    0xA6: "rows",
    0xA7: "rows",
    0xA8: "rows",
    0xA9: "rows",
    0xAA: "rows",
    0xAB: "rows",
}

_HEADER = struct.Struct("<IBIIIH")  # after the OK byte: timestamp, type, server id, event size, log_pos, flags


class PartialRowImage(SourceError, ValueError):
    """A row event lacks columns (binlog_row_image is not FULL): the values that were not logged are unknown."""


class UnreadableBinlog(SourceError):
    """The binlog holds events no reader here can decode: the reader stops (it never skips them)."""


# ------------------------------------------------------------------ rows ----


class Decoder:
    """A table map's row images: its column names and one reader per column."""

    def __init__(self, table):
        self.schema, self.table = table.schema, table.table
        self.names = [c.name or f"UNKNOWN_COL{i}" for i, c in enumerate(table.columns)]
        self._readers: list[Reader] | None = None
        self._columns = table.columns
        self._unnamed = any(not c.name for c in table.columns)

    @property
    def readers(self) -> list[Reader]:
        if self._readers is None:  # on first use: an unknown type fails that table's rows, not the map
            self._readers = [value_reader(c) for c in self._columns]
        return self._readers

    @functools.cached_property
    def _plan(self) -> list[tuple[str, Reader, int, int]]:
        """Per column of a full image: its name, reader, and its bit in the NULL bitmap."""
        return [(name, read, i >> 3, 1 << (i & 7)) for i, (name, read) in enumerate(zip(self.names, self.readers))]

    @functools.cached_property
    def _all(self) -> bytes:
        width = len(self.names)
        return bytes([0xFF] * (width // 8) + ([(1 << (width % 8)) - 1] if width % 8 else []))

    @functools.cached_property
    def _null_bytes(self) -> int:
        return (len(self.names) + 7) // 8

    def image(self, data: bytes, pos: int, present: bytes) -> tuple[dict, int]:
        if self._unnamed:  # matched to today's columns by position, a row could land in the wrong columns
            raise PartialRowImage(
                "the binlog's table map carries no column names: the source logs binlog_row_metadata MINIMAL "
                "(since this table was loaded), and Seam needs FULL. SET GLOBAL binlog_row_metadata = 'FULL' "
                "(and in my.cnf), then re-run `seam load full`"
            )
        if present == self._all:  # every column in the image (binlog_row_image FULL): the short way
            nulls = data[pos : pos + self._null_bytes]
            pos += self._null_bytes
            row: dict[str, Any] = {}
            for name, read, byte, bit in self._plan:
                if nulls[byte] & bit:
                    row[name] = None
                else:
                    row[name], pos = read(data, pos)
            return row, pos
        return self._partial_image(present)

    def _partial_image(self, present: bytes) -> tuple[dict, int]:
        """A row image without some columns (binlog_row_image MINIMAL or NOBLOB): their values are not in the
        binlog, and a NULL in their place would be silently wrong. The table stops, naming the setting."""
        missing = [n for i, n in enumerate(self.names) if not present[i >> 3] & (1 << (i & 7))]
        raise PartialRowImage(
            f"a row image without column(s) {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}: the "
            "source logs binlog_row_image MINIMAL or NOBLOB (for this session or globally), and Seam needs FULL. "
            "Set binlog_row_image = FULL (globally and for the sessions that write), then re-run `seam load full`"
        )


@dataclass
class Rows:
    """A row event of a watched table; ``images()`` gives its rows as (before, after) pairs."""

    op: str  # c, u or d
    schema: str
    table: str
    timestamp: int
    log_pos: int
    _decoder: Decoder | None
    _data: bytes
    _start: int  # where the body (the column count) starts
    _end: int
    _refused: str | None = None

    def images(self) -> list[tuple[dict | None, dict | None]]:
        if self._refused:
            raise ValueError(self._refused)
        assert self._decoder is not None
        data, pos, end, image = self._data, self._start, self._end, self._decoder.image
        width = data[pos]
        if width == 0xFC:  # a length-encoded count: 251 columns or more
            width, pos = int.from_bytes(data[pos + 1 : pos + 3], "little"), pos + 3
        elif width < 0xFB:
            pos += 1
        else:
            raise ValueError(f"a row event with a column count coded as {width:#x} is not one Seam reads")
        bitmap = (width + 7) // 8
        present = data[pos : pos + bitmap]
        pos += bitmap
        out: list[tuple[dict | None, dict | None]] = []
        if self.op == "u":
            present_after = data[pos : pos + bitmap]
            pos += bitmap
            while pos < end:
                before, pos = image(data, pos, present)
                after, pos = image(data, pos, present_after)
                out.append((before, after))
        elif self.op == "c":
            while pos < end:
                after, pos = image(data, pos, present)
                out.append((None, after))
        else:
            while pos < end:
                before, pos = image(data, pos, present)
                out.append((before, None))
        if pos != end:
            raise ValueError(f"a row event of {self.schema}.{self.table} ends {pos - end} bytes past its size")
        return out


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
            size = int.from_bytes(header[:3], "little")
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


class Stream(BinLogStreamReader):
    """python-mysql-replication's ``BinLogStreamReader``, with table maps and row events read by ``Decoder``.
    ``event_end`` is where the event returned last ends (its header's log_pos)."""

    # the library's own attributes this class reads and moves as its ``fetchone`` does
    log_file: str | None
    log_pos: int
    end_log_pos: int | None
    is_past_end_log_pos: bool
    table_map: dict
    mysql_version: tuple
    _BinLogStreamReader__connected_stream: bool
    _BinLogStreamReader__connected_ctl: bool
    _BinLogStreamReader__use_checksum: bool
    _BinLogStreamReader__post_header_lengths: list | None

    def __init__(self, *args, watched: Callable[[str, str], bool], **kwargs):
        super().__init__(*args, **kwargs)
        self._watched = watched
        self._maps: dict[bytes, Decoder | None] = {}  # a table map's bytes after its id -> its decoder
        self._decoders: dict[int, Decoder] = {}  # table id -> decoder, for the maps read in this stream
        self.event_end = 0

    def _private(self, name: str):
        return getattr(self, f"_BinLogStreamReader__{name}")

    def fetchone(self):
        while True:
            if self.end_log_pos and self.is_past_end_log_pos:
                return None
            if not self._BinLogStreamReader__connected_stream:
                self._BinLogStreamReader__connect_to_stream()
            if not self._BinLogStreamReader__connected_ctl:
                self._BinLogStreamReader__connect_to_ctl()
            connection = self._stream_connection
            try:
                data = _packet(connection) or b"\x01"  # (an empty packet is not an event)
                if data[0] == 0xFF:  # an error packet: pymysql raises it
                    MysqlPacket(data, connection.encoding).raise_for_error()
            except pymysql.OperationalError as error:
                if error.args[0] in MYSQL_EXPECTED_ERROR_CODES:  # the library's own reconnect
                    self._stream_connection.close()
                    self._BinLogStreamReader__connected_stream = False
                    continue
                raise
            if data[0] == 0xFE and len(data) < 9:  # EOF: the server ends the stream (not blocking)
                self.close()
                return None
            if data[0] != 0 or len(data) < 7:  # not an event
                continue
            timestamp, kind, _, size, log_pos, _ = _HEADER.unpack_from(data, 1)
            if kind in _ROWS or kind == TABLE_MAP or kind == PARTIAL_UPDATE_ROWS:
                if log_pos:
                    self.log_pos = log_pos
                if self.end_log_pos and self.log_pos >= self.end_log_pos:
                    self.is_past_end_log_pos = True
                self.event_end = log_pos
                end = 1 + size - (4 if self._BinLogStreamReader__use_checksum else 0)
                if kind == TABLE_MAP:
                    self._table_map(data, end)
                    continue
                rows = self._rows(kind, data, end, timestamp, log_pos)
                if rows is not None:
                    return rows
                continue
            if kind == TRANSACTION_PAYLOAD:
                raise UnreadableBinlog(
                    f"the binlog at {self.log_file}:{log_pos} holds a compressed transaction: set "
                    "binlog_transaction_compression=OFF on the source, then start the stream from a load"
                )
            if kind in _MARIADB_COMPRESSED:
                raise UnreadableBinlog(
                    f"the binlog at {self.log_file}:{log_pos} holds a compressed event ({_MARIADB_COMPRESSED[kind]}): "
                    "set log_bin_compress=OFF on the source, then start the stream from a load"
                )
            event = self._library_event(MysqlPacket(data, connection.encoding), kind)
            if event is not None:
                return event

    def _library_event(self, pkt, kind: int):
        """Any other event, as python-mysql-replication's ``fetchone`` handles it."""
        p = self._private
        wrapped = BinLogPacketWrapper(
            pkt,
            self.table_map,
            self._ctl_connection,
            self.mysql_version,
            p("use_checksum"),
            p("allowed_events_in_packet"),
            p("only_tables"),
            p("ignored_tables"),
            p("only_schemas"),
            p("ignored_schemas"),
            p("freeze_schema"),
            p("ignore_decode_errors"),
            p("verify_checksum"),
            p("optional_meta_data"),
            p("enable_logging"),
            p("use_column_name_cache"),
            p("post_header_lengths"),
        )
        if kind == ROTATE:
            self.log_pos, self.log_file = wrapped.event.position, wrapped.event.next_binlog
            if wrapped.timestamp != 0:  # table ids are per server run; a rotation may be a restart
                self.table_map, self._decoders = {}, {}
        elif wrapped.log_pos:
            self.log_pos = wrapped.log_pos
        self.event_end = wrapped.log_pos
        if self.end_log_pos and self.log_pos >= self.end_log_pos:
            self.is_past_end_log_pos = True
        if kind == FORMAT_DESCRIPTION and wrapped.event is not None:
            self.mysql_version = wrapped.event.mysql_version
            self._BinLogStreamReader__post_header_lengths = wrapped.event.post_header_len
        if wrapped.event is None or wrapped.event.__class__ not in p("allowed_events"):
            return None
        return wrapped.event

    def _post_header(self, kind: int, known: int) -> int:
        lengths = self._BinLogStreamReader__post_header_lengths
        return lengths[kind - 1] if lengths and 0 < kind <= len(lengths) else known

    def _table_map(self, data: bytes, end: int) -> None:
        table_id = int.from_bytes(data[20:26], "little")
        body = data[20 + self._post_header(TABLE_MAP, 8) : end]
        key = bytes(data[26:end])
        if key not in self._maps:
            schema = body[1 : 1 + body[0]].decode()
            at = 2 + body[0]
            table = body[at + 1 : at + 1 + body[at]].decode()
            if not self._watched(schema, table):
                self._maps[key] = None
            else:  # parsed by the library once per distinct map
                wrapped = BinLogPacketWrapper(
                    MysqlPacket(data, self._stream_connection.encoding),
                    {},
                    self._ctl_connection,
                    self.mysql_version,
                    self._private("use_checksum"),
                    self._private("allowed_events_in_packet"),
                    None,
                    None,
                    None,
                    None,
                    False,
                    self._private("ignore_decode_errors"),
                    False,
                    self._private("optional_meta_data"),
                    False,
                    self._private("use_column_name_cache"),
                    self._private("post_header_lengths"),
                )
                self._maps[key] = Decoder(wrapped.event.get_table())
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
            return Rows(
                "u",
                decoder.schema,
                decoder.table,
                timestamp,
                log_pos,
                None,
                b"",
                0,
                0,
                "a row event with partial JSON updates carries no full values: set binlog_row_value_options='' "
                "on the source so row images are full",
            )
        start = 20 + self._post_header(kind, 10 if kind in _ROWS_V2 else 8)
        if kind in _ROWS_V2:  # v2: extra data follows the post-header; its length counts its own two bytes
            start += int.from_bytes(data[28:30], "little") - 2
        return Rows(_ROWS[kind], decoder.schema, decoder.table, timestamp, log_pos, decoder, data, start, end)
