"""What Seam's replication connection (``seam.source.replication``) relies on in python-mysql-replication and
pymysql, pinned: the releases in requirements.txt; ``BinLogPacketWrapper``'s parameters, which ``Stream``
passes by keyword; what the library's event parsers ask of the control connection they are given (Seam hands
them ``Server``, a plain record, so anything more fails here); and the private members of pymysql's connection that
the packet reader and the replica commands use (found in the module's source, so a new use is checked too).
A release that changes any of them fails here, not in a stream. ``tests/stack/test_row_decoder.py`` reads a
real binlog through the same code."""

from __future__ import annotations

import inspect
import random
import re
import struct
from importlib.metadata import version
from pathlib import Path

import pymysql
import pytest
from pymysqlreplication.event import MariadbGtidEvent, QueryEvent, XidEvent
from pymysqlreplication.exceptions import StatusVariableMismatch
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import TableMapEvent

from seam.source import replication
from seam.source.replication import Server, parsed
from seam.source.sql_text import plain_statement

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(replication.__file__).read_text()


@pytest.mark.parametrize("package, pin", [("mysql-replication", "mysql-replication"), ("PyMySQL", "pymysql")])
def test_the_pinned_releases_are_installed(package, pin):
    pinned = re.search(rf"^{pin}==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M)
    assert pinned and version(package) == pinned.group(1)


def test_the_module_uses_no_private_member_of_the_replication_library():
    assert "BinLogStreamReader" not in SOURCE and "_BinLogStreamReader__" not in SOURCE


def test_stream_passes_every_parameter_the_packet_wrapper_has_by_its_name():
    wrapper = inspect.signature(BinLogPacketWrapper.__init__).parameters
    passed = set(re.findall(r"^\s+(\w+)=", SOURCE[SOURCE.index("BinLogPacketWrapper(") :], re.M)[:17])
    assert passed == set(wrapper) - {"self"}


def test_every_private_member_of_pymysqls_connection_used_exists():
    used = set(re.findall(r"\bconnection\.(_\w+)", SOURCE))
    assert {"_execute_command", "_read_packet", "_next_seq_id", "_rfile", "_sock", "_read_timeout"} <= used
    code = inspect.getsource(pymysql.connections.Connection)
    missing = sorted(name for name in used if f"def {name}(" not in code and f"self.{name} =" not in code)
    assert not missing, missing


def _event(kind: int, body: bytes) -> bytes:
    """A binlog event as the dump sends it: the OK byte, the 19-byte header, the body, a CRC32 (not checked)."""
    header = struct.pack("<IBIIIH", 1_700_000_000, kind, 1, 19 + len(body) + 4, 4242, 0)
    return b"\x00" + header + body + b"\0\0\0\0"


def _parsed(data: bytes, allowed, full_metadata: bool) -> BinLogPacketWrapper:
    return parsed(data, frozenset(allowed), Server("utf8mb4", "mariadb", True, full_metadata), (10, 11, 0), None)


def test_a_query_event_is_parsed_with_seams_server_object():
    query, schema = b"ALTER TABLE t ADD c INT", b"shop"
    body = struct.pack("<IIBHH", 7, 0, len(schema), 0, 0) + schema + b"\0" + query
    event = _parsed(_event(0x02, body), {QueryEvent}, False).event
    assert isinstance(event, QueryEvent)
    assert (event.schema, event.query, event.packet.log_pos) == (schema, query.decode(), 4242)


@pytest.mark.parametrize(
    "client, text, raw",
    [
        (8, "TRUNCATE TABLE café", "TRUNCATE TABLE café".encode("latin1")),  # latin1_swedish_ci
        (51, "TRUNCATE TABLE `заказы`", "TRUNCATE TABLE `заказы`".encode("cp1251")),
        # gbk: 乗 is 0x81 0x5C, a backslash to a reader in UTF-8, which then never saw the string end
        (28, "ALTER TABLE t COMMENT '乗', DROP COLUMN x", "ALTER TABLE t COMMENT '乗', DROP COLUMN x".encode("gbk")),
        (45, "TRUNCATE TABLE ölfässer", "TRUNCATE TABLE ölfässer".encode()),
        (2304, "TRUNCATE TABLE ölfässer", "TRUNCATE TABLE ölfässer".encode()),  # MariaDB's own number: Unicode
        (None, "TRUNCATE TABLE ölfässer", "TRUNCATE TABLE ölfässer".encode()),  # none logged
        (45, "TRUNCATE TABLE caf\\xe9", b"TRUNCATE TABLE caf\xe9"),  # not UTF-8 after all: the byte shown
    ],
)
def test_a_statement_is_read_in_its_clients_character_set(client, text, raw):
    status = b"" if client is None else b"\x04" + struct.pack("<HHH", client, client, 8)
    event = _query_event(status, raw)
    assert event.query == text and event.character_set_client == client
    assert plain_statement(text).endswith(text.split()[-1])


def _query_event(status: bytes, query: bytes, schema: bytes = b"shop", logs_flag: bool = False) -> QueryEvent:
    body = struct.pack("<IIBHH", 7, 3, len(schema), 0, len(status)) + status + schema + b"\0" + query
    data = _event(0x02, body)
    return replication.query_event(data, 1_700_000_000, 13, len(data) - 4, logs_flag)


# status variables as MariaDB 10.11 logs them with an ALTER (flags2, sql_mode, catalog, auto-increment, charset)
_STATUS = bytes.fromhex("00 00000001 01 0000205400000000 06 03737464 04 2d002d00e000".replace(" ", ""))


@pytest.mark.parametrize(
    "status, phase",
    [
        (b"", None),
        (_STATUS, None),
        (_STATUS + bytes.fromhex("8202"), "start"),  # MariaDB's binlog_alter_two_phase: the ALTER begins
        (_STATUS + bytes.fromhex("8146000000000000008204") + (27).to_bytes(8, "little"), "commit"),
        (_STATUS + bytes.fromhex("8208") + (32).to_bytes(8, "little"), "rollback"),
        # a code not known here, after those Seam reads: the rest of the block is skipped
        (_STATUS + bytes.fromhex("83020102"), None),
        (bytes.fromhex("0b04726f6f74096c6f63616c686f7374") + _STATUS, None),  # invoker root@localhost first
    ],
)
def test_a_query_event_is_read_with_any_status_variables(status, phase):
    event = _query_event(status, b"ALTER TABLE t ADD COLUMN n INT")
    assert (event.query, event.schema, event.alter_phase) == ("ALTER TABLE t ADD COLUMN n INT", b"shop", phase)
    assert event.execution_time == 3 and event.status_vars_length == len(status)
    if _STATUS in status:
        assert (event.sql_mode, event.character_set_client) == (0x54200000, 45)
    library_body = struct.pack("<IIBHH", 7, 3, 4, 0, len(status)) + status + b"shop\0ALTER TABLE t ADD COLUMN n INT"
    if phase is None and b"\x83" not in status:
        library = _parsed(_event(0x02, library_body), {QueryEvent}, False).event
        assert (library.query, library.schema) == (event.query, event.schema)
        assert getattr(library, "sql_mode", None) == event.sql_mode
    else:  # the library's parser refuses what it does not know: every table would stop
        with pytest.raises(StatusVariableMismatch):
            _parsed(_event(0x02, library_body), {QueryEvent}, False)


@pytest.mark.parametrize(
    "status, clock",
    [
        (_STATUS, (None, None)),
        # MariaDB: time_zone '+05:30', then Q_HRNOW (its microseconds)
        (_STATUS + b"\x05\x06+05:30" + b"\x80" + (630316).to_bytes(3, "little"), (630316, "+05:30")),
        # MySQL 8: the databases the statement updated (two, then none), then Q_MICROSECONDS
        (_STATUS + b"\x0c\x02shop\x00other\x00" + b"\x0d" + (17).to_bytes(3, "little"), (17, None)),
        (_STATUS + b"\x0c\xfe" + b"\x0d" + (17).to_bytes(3, "little"), (17, None)),
    ],
)
def test_a_query_event_carries_the_time_it_ran(status, clock):
    event = _query_event(status, b"ALTER TABLE t ADD COLUMN at DATETIME(6) DEFAULT NOW(6)")
    assert (event.microseconds, event.time_zone) == clock and event.sql_mode == 0x54200000


@pytest.mark.parametrize(
    "status, logs_flag, explicit",
    [
        (_STATUS, True, True),  # MariaDB 10.10 and later: bit 24 of flags2 (set in _STATUS)
        (bytes.fromhex("0000000000") + _STATUS[5:], True, False),
        (_STATUS, False, None),  # MariaDB before 10.10 does not log it: the bit says nothing
        (_STATUS + b"\x10\x00", False, False),  # MySQL 8's Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP
        (_STATUS + b"\x10\x01", False, True),
    ],
)
def test_a_query_event_carries_explicit_defaults_for_timestamp(status, logs_flag, explicit):
    event = _query_event(status, b"ALTER TABLE t ADD COLUMN ts TIMESTAMP", logs_flag=logs_flag)
    assert event.explicit_timestamps is explicit and event.sql_mode == 0x54200000


@pytest.mark.parametrize("full_metadata", [True, False])
def test_a_table_map_is_parsed_with_seams_server_object(full_metadata):
    names = [b"id", b"note"]
    column_names = b"".join(bytes([len(n)]) + n for n in names)
    body = (
        (77).to_bytes(6, "little")
        + b"\x01\x00"  # flags
        + b"\x04shop\x00\x06orders\x00"
        + b"\x02"  # two columns
        + bytes([3, 15])  # LONG, VARCHAR
        + b"\x02"
        + struct.pack("<H", 40)  # VARCHAR(10) in utf8mb4: 40 bytes
        + b"\x02"  # NULL bitmap: the second column may be NULL
        + b"\x03\x01\x2d"  # optional metadata: COLUMN_CHARSET, utf8mb4_general_ci for the one text column
        + b"\x04"  # COLUMN_NAME
        + bytes([len(column_names)])
        + column_names
    )
    event = _parsed(_event(0x13, body), {TableMapEvent}, full_metadata).event
    table = event.get_table()
    assert (table.schema, table.table, event.table_id) == ("shop", "orders", 77)
    assert [c.type for c in table.columns] == [3, 15]
    expected = ["id", "note"] if full_metadata else [None, None]  # names only from FULL metadata, never queried
    assert [c.name for c in table.columns] == expected


@pytest.mark.parametrize("seed", range(5))
def test_xid_and_mariadb_gtid_events_read_quickly_equal_the_librarys(seed):
    """The two events of every transaction are read by ``Stream`` itself (``replication._QUICK``); their fields
    must be the library's, on random values (the checksum's four bytes included)."""
    rng = random.Random(seed)
    xid = rng.getrandbits(64)
    seq, domain, flags = rng.getrandbits(64), rng.getrandbits(32), rng.randrange(256)
    cases = [
        (0x10, struct.pack("<Q", xid), XidEvent, ("timestamp", "xid")),
        (
            0xA2,
            struct.pack("<QIB", seq, domain, flags) + bytes(6),
            MariadbGtidEvent,
            ("timestamp", "server_id", "gtid_seq_no", "domain_id", "flags", "gtid"),
        ),
    ]
    for kind, body, cls, fields in cases:
        data = bytearray(_event(kind, body))
        data[6:10] = rng.getrandbits(32).to_bytes(4, "little")  # the server id
        data = bytes(data)
        library = _parsed(data, {cls}, False).event
        quick = replication._QUICK[kind][1](data, struct.unpack_from("<I", data, 1)[0])
        assert type(quick) is type(library) is cls
        assert [getattr(quick, f) for f in fields] == [getattr(library, f) for f in fields]
