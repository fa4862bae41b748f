"""Seam's row decoder (``seam.source.rows``) against python-mysql-replication, on the same binlog.

A seeded random workload writes every MySQL type family with awkward values (extremes, NULLs, zero dates, negative
times with fractions, mixed-case ENUM/SET members, empty sets, latin1 and 4-byte UTF-8 text, BIT widths, JSON,
spatial values) in multi-row INSERT, UPDATE and DELETE statements, to a keyed table, a keyless one and a table of
300 columns (a column count the binlog codes in three bytes). Every row image is decoded twice: by Seam's
``Stream`` and by the library alone (``binlog_values`` over its output). They must be equal, but for the library's
reading of negative times with fractions (checked to be exactly that). Last, the table replayed from Seam's decoding must equal a
SELECT of the source: an oracle that shares no code with either decoder.
"""

from __future__ import annotations

import datetime as dt
import os
import random
from collections import Counter

import msgspec
import pymysql
import pytest

from seam.core.position import Position
from seam.source import record_images
from seam.source.binlog import BinlogReader, Statement, Transaction
from seam.source.schema import read_schema
from seam.source.spill import DEFAULT_BUDGET
from seam.wire.codecs import codec
from seam.wire.records import normalize_row
from seam_dev import demo
from tests.support.library_binlog import library_rows
from tests.support.mysql_payload import PAYLOAD_KIND, compressed

pytestmark = pytest.mark.stack

DB = "decoder_test"
SEED = int(os.environ.get("SEAM_DECODER_SEED", "7"))


def _time(rng: random.Random) -> str:
    sign = rng.choice(("", "-"))
    return f"{sign}{rng.randrange(839):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}.{rng.randrange(10**6):06d}"


def _datetime(rng: random.Random, zero_ok: bool = True) -> str:
    if zero_ok and rng.random() < 0.1:
        return rng.choice(("0000-00-00 00:00:00", "2024-00-10 10:00:00", "2024-03-00 00:00:01"))
    t = dt.datetime(1000, 1, 1) + dt.timedelta(seconds=rng.randrange(9000 * 365 * 86400))
    return f"{t:%Y-%m-%d %H:%M:%S}.{rng.randrange(10**6):06d}"


def _text(rng: random.Random, alphabet: str, most: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(most + 1)))


LATIN1 = "abcXYZ 'é\\ñü%_"
UTF8 = LATIN1 + "中文😀€\u0000"
SET_MEMBERS = ("Red", "green", "BLUE", "a b", "Größe")
ENUM_MEMBERS = ("Happy", "sad", "MEH", "with space", "Ünrated")
GEOMETRIES = (
    "POINT(1.5 -2)",
    "LINESTRING(0 0,1 1,2 0)",
    "POLYGON((0 0,4 0,4 4,0 4,0 0),(1 1,2 1,2 2,1 1))",
    "MULTIPOINT(1 1,2 2)",
    "GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))",
)

# name, definition, a value as SQL (None: NULL)
COLUMNS = [
    ("ti", "TINYINT", lambda r: r.choice((-128, 127, 0, r.randrange(-128, 128)))),
    ("uti", "TINYINT UNSIGNED", lambda r: r.choice((0, 255, r.randrange(256)))),
    ("si", "SMALLINT", lambda r: r.choice((-32768, 32767, r.randrange(-32768, 32768)))),
    ("usi", "SMALLINT UNSIGNED", lambda r: r.choice((65535, r.randrange(65536)))),
    ("mi", "MEDIUMINT", lambda r: r.choice((-8388608, 8388607, r.randrange(-8388608, 8388608)))),
    ("umi", "MEDIUMINT UNSIGNED", lambda r: r.choice((16777215, r.randrange(16777216)))),
    ("i", "INT", lambda r: r.choice((-(2**31), 2**31 - 1, r.randrange(-(2**31), 2**31)))),
    ("ui", "INT UNSIGNED", lambda r: r.choice((2**32 - 1, r.randrange(2**32)))),
    ("bi", "BIGINT", lambda r: r.choice((-(2**63), 2**63 - 1, r.randrange(-(2**63), 2**63)))),
    ("ubi", "BIGINT UNSIGNED", lambda r: r.choice((2**64 - 1, r.getrandbits(64)))),
    ("f", "FLOAT", lambda r: r.choice((0.1, -3.4e38, 1.17549435e-38, r.uniform(-1e6, 1e6)))),
    ("d", "DOUBLE", lambda r: r.choice((1e308, -2.2250738585072014e-308, 0.1, r.uniform(-1e12, 1e12)))),
    ("d0", "DECIMAL(10,0)", lambda r: r.choice((-9999999999, 9999999999, r.randrange(-(10**10) + 1, 10**10)))),
    ("d6", "DECIMAL(20,6)", lambda r: f"{r.choice(('-', ''))}{r.randrange(10**14)}.{r.randrange(10**6):06d}"),
    ("d30", "DECIMAL(65,30)", lambda r: f"{r.choice(('-', ''))}{r.randrange(10**35)}.{r.randrange(10**30):030d}"),
    ("d55", "DECIMAL(5,5)", lambda r: f"{r.choice(('-', ''))}0.{r.randrange(10**5):05d}"),
    ("d17", "DECIMAL(17,3)", lambda r: f"{r.choice(('-', ''))}{r.randrange(10**14)}.{r.randrange(1000):03d}"),
    ("dd", "DATE", lambda r: r.choice(("0000-00-00", "1000-01-01", "9999-12-31", _datetime(r, False)[:10]))),
    ("dt0", "DATETIME", lambda r: _datetime(r)[:19]),
    ("dt3", "DATETIME(3)", lambda r: _datetime(r)[:23]),
    ("dt6", "DATETIME(6)", lambda r: _datetime(r)),
    ("ts0", "TIMESTAMP NULL DEFAULT NULL", lambda r: r.choice(("0000-00-00 00:00:00", "1970-01-01 00:00:01"))),
    ("ts1", "TIMESTAMP(1) NULL DEFAULT NULL", lambda r: f"2038-01-19 03:14:07.{r.randrange(10)}"),
    ("ts5", "TIMESTAMP(5) NULL DEFAULT NULL", lambda r: f"2001-02-03 04:05:06.{r.randrange(10**5):05d}"),
    ("t0", "TIME", lambda r: _time(r)[:-7]),
    ("t2", "TIME(2)", lambda r: _time(r)[:-4]),
    ("t4", "TIME(4)", lambda r: _time(r)[:-2]),
    ("t6", "TIME(6)", _time),
    ("y", "YEAR", lambda r: r.choice((0, 1901, 2155, r.randrange(1901, 2156)))),
    ("c", "CHAR(10) CHARACTER SET latin1", lambda r: _text(r, LATIN1, 10).rstrip(" ")),
    ("vc", "VARCHAR(20) CHARACTER SET latin1", lambda r: _text(r, LATIN1, 20)),
    ("vcu", "VARCHAR(300) CHARACTER SET utf8mb4", lambda r: _text(r, UTF8, 300)),
    ("bin", "BINARY(4)", lambda r: r.randbytes(4)),
    ("vb", "VARBINARY(300)", lambda r: r.randbytes(r.randrange(300))),
    ("tt", "TINYTEXT CHARACTER SET utf8mb4", lambda r: _text(r, UTF8, 60)),
    ("mt", "MEDIUMTEXT CHARACTER SET utf8mb4", lambda r: _text(r, UTF8, 400)),
    ("lb", "LONGBLOB", lambda r: r.randbytes(r.randrange(700))),
    ("e", f"ENUM({', '.join(repr(m) for m in ENUM_MEMBERS)})", lambda r: r.choice(ENUM_MEMBERS)),
    (
        "s",
        f"SET({', '.join(repr(m) for m in SET_MEMBERS)})",
        lambda r: ",".join(m for m in SET_MEMBERS if r.random() < 0.4),  # "" often: the empty set
    ),
    ("b1", "BIT(1)", lambda r: r.randrange(2)),
    ("b12", "BIT(12)", lambda r: r.randrange(2**12)),
    ("b64", "BIT(64)", lambda r: r.choice((2**64 - 1, r.getrandbits(64)))),
    ("j", "JSON", lambda r: r.choice(('{"k": "é中", "n": 1.0e2, "a": [1, 2.5, -0], "z": null}', "[]", '"x"', "3"))),
    ("g", "GEOMETRY", lambda r: ("geometry", r.choice(GEOMETRIES), r.choice((0, 4326)))),
    ("pt", "POINT", lambda r: ("geometry", f"POINT({r.uniform(-90, 90)} {r.uniform(-90, 90)})", 0)),
]
NAMES = [name for name, _, _ in COLUMNS]


def _literal(conn, value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, tuple):  # a geometry: its WKT and SRID
        return f"ST_GeomFromText({conn.escape(value[1])}, {value[2]})"
    return conn.escape(value)


def _row(conn, rng: random.Random, key: int | None) -> str:
    values = [None if rng.random() < 0.12 else make(rng) for _, _, make in COLUMNS]
    return "(" + ", ".join(([str(key)] if key is not None else []) + [_literal(conn, v) for v in values]) + ")"


def _assignments(conn, rng: random.Random) -> str:
    chosen = rng.sample(COLUMNS, rng.randint(1, 6))
    return ", ".join(f"`{n}` = {_literal(conn, None if rng.random() < 0.15 else make(rng))}" for n, _, make in chosen)


@pytest.fixture(scope="module")
def written(stack, pipeline):
    """The workload, and the binlog positions around it."""
    return _write(DB)


def _write(db: str) -> tuple[Position, Position]:
    """The seeded workload into database ``db`` (created anew); the binlog positions before and after it."""
    rng = random.Random(SEED)
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], autocommit=True)
    definition = ", ".join(f"`{n}` {d} NULL" if "NULL" not in d else f"`{n}` {d}" for n, d, _ in COLUMNS)
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"USE `{db}`")
        cur.execute("SET SESSION sql_mode = ''")  # zero dates, as legacy schemas have them
        cur.execute(f"CREATE TABLE keyed (id INT PRIMARY KEY, {definition}) DEFAULT CHARSET=utf8mb4")
        cur.execute(f"CREATE TABLE keyless ({definition}) DEFAULT CHARSET=utf8mb4")
        cur.execute(
            "CREATE TABLE wide (id INT PRIMARY KEY, "
            + ", ".join(f"c{i} {('INT', 'VARCHAR(8)', 'DATETIME(6)')[i % 3]} NULL" for i in range(299))
            + ")"
        )
        cur.execute("SHOW MASTER STATUS")
        start = Position.through(*cur.fetchone()[:2])
        key = 0
        for _ in range(12):
            rows = []
            for _ in range(rng.randint(1, 25)):
                key += 1
                rows.append(_row(conn, rng, key))
            cur.execute(f"INSERT INTO keyed (id, {', '.join(f'`{n}`' for n in NAMES)}) VALUES {', '.join(rows)}")
            cur.execute(
                f"INSERT INTO keyless ({', '.join(f'`{n}`' for n in NAMES)}) VALUES "
                + ", ".join(_row(conn, rng, None) for _ in range(rng.randint(1, 10)))
            )
            low = rng.randint(1, key)
            cur.execute(f"UPDATE keyed SET {_assignments(conn, rng)} WHERE id BETWEEN {low} AND {low + 8}")
            cur.execute(f"UPDATE keyless SET {_assignments(conn, rng)} WHERE `ti` < {rng.randrange(-128, 128)}")
            cur.execute(f"DELETE FROM keyed WHERE id % 13 = {rng.randrange(13)} LIMIT 3")
            cur.execute(f"DELETE FROM keyless WHERE `si` > {rng.randrange(-32768, 32768)} LIMIT 2")
        # one event: an empty set, a NULL set, a member
        cur.execute(f"INSERT INTO keyed (id, s) VALUES ({key + 1}, ''), ({key + 2}, NULL), ({key + 3}, 'Red')")
        wide = [
            "(" + ", ".join([str(k)] + [_literal(conn, _wide_value(rng, i)) for i in range(299)]) + ")"
            for k in range(1, 6)
        ]
        cur.execute(f"INSERT INTO wide VALUES {', '.join(wide)}")
        cur.execute("UPDATE wide SET c7 = NULL, c298 = 'x' WHERE id < 3")
        cur.execute(f"CREATE TABLE after_the_rows (id INT PRIMARY KEY, {definition}) DEFAULT CHARSET=utf8mb4")
        cur.execute("SHOW MASTER STATUS")
        end = Position.through(*cur.fetchone()[:2])
    conn.close()
    return start, end


def _wide_value(rng: random.Random, i: int):
    if rng.random() < 0.2:
        return None
    return (rng.randrange(-(2**31), 2**31), _text(rng, UTF8, 8), _datetime(rng, False))[i % 3]


def _seam_rows(pipeline, start: Position, end: Position, db: str = DB, statements: list | None = None) -> list:
    """Seam's decoding of ``db``'s changes between ``start`` and ``end``; its DDL texts go to ``statements``."""
    reader = BinlogReader(pipeline.source, start, {db}, end=end)
    out = []
    try:
        for item in reader:
            if isinstance(item, Transaction):
                assert not item.errors, item.errors
                out.extend((c.table, c.op, c.before, c.after, c.position) for c in item.changes)
            elif isinstance(item, Statement) and statements is not None:
                statements.append(item.query)
    finally:
        reader.close()
    return out


def test_seam_decodes_every_image_as_the_library_does(pipeline, written):
    start, end = written
    ours = _seam_rows(pipeline, start, end)
    theirs = library_rows(pipeline, start, end, DB)
    assert len(ours) == len(theirs) > 200
    faults = 0
    for (table, op, before, after, at), library in zip(ours, theirs):
        assert (table, op, at) == library[:2] + library[4:]
        for mine, its in ((before, library[2]), (after, library[3])):
            assert (mine is None) == (its is None)
            if mine is not None:
                assert mine.keys() == its.keys()
                for name, value in mine.items():
                    if value != its[name] and _library_time_fault(value, its[name]):
                        faults += 1
                        continue
                    assert value == its[name], (table, at, name, value, its[name])
    assert faults > 0  # the workload has negative times with fractions


def test_rows_read_as_record_values_equal_the_decoded_rows_normalised(pipeline, written, monkeypatch):
    """The change reader's way (``seam.source.record_images``: the compiled decoder straight to record values,
    the Python way for an event it is not sure of) gives, row for row and byte for byte, what decoding and then
    normalising gives; the compiled decoder read most of the events itself."""
    start, end = written
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs(utc=True))
    schemas = {t: read_schema(conn, DB, t) for t in ("keyed", "keyless", "wide")}
    conn.close()
    assert record_images.native is not None, "seam.source._rowimages is not built: run make setup"
    calls: Counter = Counter()

    def counted(*args):
        try:
            out = native_images(*args)
        except record_images.native.Unsure:
            calls["python"] += 1
            raise
        calls["native"] += 1
        return out

    native_images = record_images.native.images
    monkeypatch.setattr(record_images.native, "images", counted)
    reader = BinlogReader(pipeline.source, start, {DB}, end=end, record_schema=lambda db, t, decoder: schemas.get(t))
    as_records = []
    try:
        for item in reader:
            if isinstance(item, Transaction):
                assert not item.errors, item.errors
                as_records.extend(item.changes)
    finally:
        reader.close()
    plain = _seam_rows(pipeline, start, end)
    assert len(as_records) == len(plain) > 200
    encode = msgspec.json.Encoder().encode
    for change, (table, op, before, after, at) in zip(as_records, plain):
        assert change.records and (change.table, change.op, change.position) == (table, op, at)
        for mine, decoded in ((change.before, before), (change.after, after)):
            expected = None if decoded is None else normalize_row(schemas[table], decoded)
            assert encode(mine) == encode(expected), (table, at)
    assert calls["native"] > 9 * calls["python"], calls  # the Python way only where the compiled one is unsure


@pytest.mark.parametrize("records", [False, True], ids=["decoded", "record-values"])
def test_transactions_spilled_to_a_file_read_back_as_held_in_memory(pipeline, written, records):
    """A transaction over ``stream.max_transaction_memory`` goes to the reader's spill file as its row events'
    bytes and is decoded again from them when it is published: with a budget of one byte every transaction
    spills, and each reads back change for change as the same transaction held in memory."""
    start, end = written
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs(utc=True))
    schemas = {t: read_schema(conn, DB, t) for t in ("keyed", "keyless", "wide")} if records else {}
    conn.close()

    def read(memory: int) -> tuple[list, int]:
        reader = BinlogReader(
            pipeline.source,
            start,
            {DB},
            end=end,
            transaction_memory=memory,
            record_schema=lambda db, t, decoder: schemas.get(t),
        )
        changes, spilled = [], 0
        try:
            for item in reader:
                if isinstance(item, Transaction):
                    assert not item.errors, item.errors
                    changes.extend(item.changes)
                    spilled += item.changes.spilled
                    item.changes.close()
        finally:
            reader.close()
        return changes, spilled

    held, none = read(DEFAULT_BUDGET)
    read_back, spilled = read(1)
    assert none == 0 and spilled == len(read_back) == len(held) > 200
    assert all(change.records == records for change in read_back)
    for mine, theirs in zip(read_back, held):
        assert mine == theirs, (mine.table, mine.position)


def _library_time_fault(mine, its) -> bool:
    """The library reads a negative TIME's fraction as stored: its complement (-1.25 s as -1.75 s). Seam reads
    it as MySQL does; the replay test below checks Seam's against the source."""
    negative = dt.timedelta(0)
    return (
        isinstance(mine, dt.timedelta)
        and isinstance(its, dt.timedelta)
        and mine < negative
        and its < negative
        and mine.microseconds != 0
        and abs(mine) // dt.timedelta(seconds=1) == abs(its) // dt.timedelta(seconds=1)
        and (abs(mine).microseconds + abs(its).microseconds) == 10**6
    )


def test_the_decoded_binlog_replays_to_the_source(pipeline, written):
    """Independent of both decoders' agreement: the keyed and keyless tables rebuilt from Seam's decoded
    images equal a SELECT of each, value for value (through the same record normalisation)."""
    _replays_to_the_source(pipeline, DB, _seam_rows(pipeline, *written))


@pytest.mark.alone  # log_bin_compress is server-wide: no other test's binlog reader may meet it
def test_a_compressed_binlog_is_read_as_the_plain_one(pipeline, written):
    """MariaDB's ``log_bin_compress`` (a DBA's setting that saves disk): the same workload written again with
    every query and row event over 10 bytes compressed decodes to the same images as the plain binlog, its
    DDL text is read whole, and it replays to the source."""
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SELECT @@global.log_bin_compress, @@global.log_bin_compress_min_len")
        was = cur.fetchone()
        try:
            cur.execute("SET GLOBAL log_bin_compress = ON, GLOBAL log_bin_compress_min_len = 10")
            start, end = _write(f"{DB}_z")
        finally:
            cur.execute("SET GLOBAL log_bin_compress = %s, GLOBAL log_bin_compress_min_len = %s", was)
    conn.close()
    kinds: Counter = Counter()
    raw = pymysql.connect(**pipeline.source.pymysql_kwargs(), use_unicode=False)  # queries hold random bytes
    with raw.cursor() as cur:
        for file in {start.file, end.file}:
            cur.execute(f"SHOW BINLOG EVENTS IN '{file}'")
            kinds.update(row[2].decode() for row in cur.fetchall() if (file, row[1]) >= (start.file, start.pos))
    raw.close()
    assert kinds["Write_rows_compressed_v1"] and kinds["Update_rows_compressed_v1"], kinds
    assert kinds["Delete_rows_compressed_v1"] and kinds["Query_compressed"], kinds
    statements: list[str] = []
    compressed = _seam_rows(pipeline, start, end, f"{DB}_z", statements)
    plain = _seam_rows(pipeline, *written)
    assert [c[:4] for c in compressed] == [c[:4] for c in plain] and len(plain) > 200
    assert [q for q in statements if "after_the_rows" in q] == [
        "CREATE TABLE after_the_rows (id INT PRIMARY KEY, "
        + ", ".join(f"`{n}` {d} NULL" if "NULL" not in d else f"`{n}` {d}" for n, d, _ in COLUMNS)
        + ") DEFAULT CHARSET=utf8mb4"
    ]
    _replays_to_the_source(pipeline, f"{DB}_z", compressed)


def _replays_to_the_source(pipeline, db: str, decoded: list) -> None:
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs(utc=True))
    for table in ("keyed", "keyless", "wide"):
        schema = read_schema(conn, db, table)
        replayed: Counter = Counter()
        for t, _, before, after, _ in decoded:
            if t != table:
                continue
            if before is not None:
                key = _frozen(normalize_row(schema, before))
                assert replayed[key] > 0, f"{table}: the binlog removes a row never written: {key}"
                replayed[key] -= 1
            if after is not None:
                replayed[_frozen(normalize_row(schema, after))] += 1
        with conn.cursor(pymysql.cursors.DictCursor) as cur:  # FLOAT read exactly, as validation reads it
            exact = ", ".join(f"{codec(c).read_mysql(c, f'`{c.name}`')} AS `{c.name}`" for c in schema.columns)
            cur.execute(f"SELECT {exact} FROM `{db}`.`{table}`")
            selected = Counter(_frozen(normalize_row(schema, r)) for r in cur.fetchall())
        assert +replayed == selected, table
    conn.close()


def test_an_empty_set_and_a_null_set_stay_apart(pipeline, written):
    start, end = written
    images = [after for t, op, _, after, _ in _seam_rows(pipeline, start, end) if t == "keyed" and op == "c"]
    staged = {row["id"]: row["s"] for row in images[-3:]}
    assert list(staged.values()) == ["", None, {"Red"}]


def _frozen(row: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in row.items()))


def _transactions(pipeline, start: Position, end: Position, db: str, memory: int = DEFAULT_BUDGET) -> list:
    """(commit, [(table, op, before, after, position)]) of each transaction of ``db`` in (start, end]."""
    reader = BinlogReader(pipeline.source, start, {db}, end=end, transaction_memory=memory)
    out = []
    try:
        for item in reader:
            if isinstance(item, Transaction):
                assert not item.errors, item.errors
                out.append((item.commit, [(c.table, c.op, c.before, c.after, c.position) for c in item.changes]))
                item.changes.close()
    finally:
        reader.close()
    return out


_EOF = b"\xfe\0\0\0\0"  # the packet that ends a non-blocking dump


class _Replayed:
    """What a ``Stream`` reads instead of the source's connection: the packets recorded from it, then EOF."""

    def __init__(self, packets: list[bytes]):
        self.packets = iter(packets)

    def close(self) -> None:
        pass


def _write_transactions(db: str) -> tuple[Position, Position]:
    """Transactions of many statements over two tables (one keyless), with savepoints and row events of
    thousands of rows, as applications write them."""
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v VARCHAR(40))")
        cur.execute(f"CREATE TABLE `{db}`.b (n INT, note TEXT)")
        cur.execute("SHOW MASTER STATUS")
        start = Position.through(*cur.fetchone()[:2])
        for t in range(6):
            cur.execute("BEGIN")
            base = t * 10_000
            cur.execute(f"INSERT INTO `{db}`.a VALUES " + ", ".join(f"({base + i}, 'v{i}')" for i in range(2_000)))
            cur.execute(f"INSERT INTO `{db}`.b VALUES ({t}, 'before the savepoint')")
            cur.execute("SAVEPOINT s1")
            cur.execute(f"UPDATE `{db}`.a SET v = CONCAT(v, '-u') WHERE id % 7 = {t} AND id >= {base}")
            if t % 2:
                cur.execute("ROLLBACK TO SAVEPOINT s1")
            cur.execute(f"DELETE FROM `{db}`.a WHERE id BETWEEN {base} AND {base + 99}")
            cur.execute(f"UPDATE `{db}`.b SET note = REPEAT('x', 500) WHERE n = {t}")
            cur.execute("COMMIT")
        cur.execute("SHOW MASTER STATUS")
        end = Position.through(*cur.fetchone()[:2])
    conn.close()
    return start, end


def test_mysql_compressed_transactions_read_as_the_plain_ones(pipeline, written, monkeypatch):
    """MySQL 8's ``binlog_transaction_compression=ON`` (no MySQL server runs here): the source's packets of the
    type workload and of many-statement transactions are recorded, each transaction wrapped as MySQL writes it
    compressed (``tests.support.mysql_payload``: one payload event ending at its XID, zstd or none), and both
    replayed to the reader. The compressed binlog gives the same transactions, commits and images as the plain
    one, spilled to a file or held, and every change a position of its own, rising through its transaction."""
    from seam.source import replication

    ranges = [(written, DB), (_write_transactions(f"{DB}_t"), f"{DB}_t")]
    replays: list[list[bytes]] = []  # the packets of each connection
    servers: list = []
    real_packet, real_connect = replication._packet, replication.Stream._connect

    def recording(connection):
        replays[-1].append(real_packet(connection))
        return replays[-1][-1]

    def connecting(stream):
        connection = real_connect(stream)
        servers.append(stream._server)
        replays.append([])
        return connection

    with monkeypatch.context() as patched:
        patched.setattr(replication, "_packet", recording)
        patched.setattr(replication.Stream, "_connect", connecting)
        plain = [_transactions(pipeline, *span, db) for span, db in ranges]
    assert len(replays) == 2 and servers[0] == servers[1]  # one connection per reading
    server = servers[0]

    def replay(packets: list[bytes], memory: int, db: str, span) -> list:
        def connect(stream):
            stream._server = server
            return _Replayed(packets)

        monkeypatch.setattr(replication.Stream, "_connect", connect)
        monkeypatch.setattr(replication, "_packet", lambda connection: next(connection.packets, _EOF))
        return _transactions(pipeline, *span, db, memory)

    for (span, db), packets, read in zip(ranges, replays, plain):
        assert replay(packets, DEFAULT_BUDGET, db, span) == read  # the replay is the source, packet for packet
        wrapped, count = compressed(packets, server.checksum, plain_every=3)
        # every XID-ended transaction is wrapped; other lanes' DDL and non-transactional commits in the span
        # are read too, and stay as they are (CI: 138 wrapped of 144 read)
        assert 5 < count <= len(read)
        assert sum(p[5] == PAYLOAD_KIND for p in wrapped if len(p) > 19) == count
        for memory in (DEFAULT_BUDGET, 1):
            mine = replay(wrapped, memory, db, span)
            assert [commit for commit, _ in mine] == [commit for commit, _ in read]
            for (_, changes), (_, theirs) in zip(mine, read):
                assert [c[:4] for c in changes] == [c[:4] for c in theirs]
                positions = [c[4] for c in changes]
                assert positions == sorted(set(positions))  # each its own, in binlog order
        assert max(len(changes) for _, changes in mine) > 1_000 or db == DB
