"""The compiled row decoder (``seam.source._rowimages``) against the Python way it stands in for.

Seeded random row images, over every column family it reads natively plus two it leaves to Python, are decoded
both ways: the compiled decoder must give byte for byte what the Python readers and ``normalize_row`` give, or
raise ``Unsure`` (the caller then takes the Python way). Where the Python way raises (an image cut short, bytes
that are not UTF-8), the compiled one must not answer. Half of the images are well formed (values the test
encodes itself), half are random bytes. The stack test ``test_row_decoder`` checks it on a real binlog.
"""

from __future__ import annotations

import datetime as dt
import random
import struct
from types import SimpleNamespace

import msgspec
import pytest
from pymysqlreplication.constants import FIELD_TYPE

from seam.core.schema import Column, TableSchema
from seam.source import record_images
from seam.source.rows import Decoder
from seam.wire.records import normalize_row

native = record_images.native
encode = msgspec.json.Encoder().encode


def _mapped(name, type_, **meta):
    defaults = dict(unsigned=False, precision=0, decimals=0, fsp=0, max_length=0, length_size=0)
    return SimpleNamespace(name=name, type=type_, character_set_name="utf8mb4", **{**defaults, **meta})


# (binlog column, schema column, a well-formed value's bytes)
def _columns():
    def le(n, size, signed=True):
        return n.to_bytes(size, "little", signed=signed)

    def decimal(r, precision, scale):  # MySQL's decimal2bin, written here independently of the decoder
        dig2bytes = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]
        digits = "".join(r.choice("0123456789") for _ in range(precision))
        whole, frac = digits[: precision - scale], digits[precision - scale :]
        lead = len(whole) % 9  # the integral part's short group comes first, the fraction's last
        groups = [whole[:lead]] * bool(lead) + [whole[i : i + 9] for i in range(lead, len(whole), 9)]
        groups += [frac[i : i + 9] for i in range(0, len(frac), 9)]
        body = bytearray(b"".join(int(g).to_bytes(dig2bytes[len(g)], "big") for g in groups))
        body[0] ^= 0x80
        if r.random() < 0.5:  # negative: every byte inverted
            body = bytearray(b ^ 0xFF for b in body)
        return bytes(body)

    def decimal_column(name, precision, scale):
        return (
            _mapped(name, FIELD_TYPE.NEWDECIMAL, precision=precision, decimals=scale),
            col(name, "decimal", f"decimal({precision},{scale})", numeric_scale=scale),
            lambda r: decimal(r, precision, scale),
        )

    def datetime2(r, fsp):
        y, mo, d = r.randrange(0, 10000), r.randrange(0, 13), r.randrange(0, 32)
        h, mi, s = r.randrange(24), r.randrange(60), r.randrange(60)
        ym = y * 13 + mo
        v = (1 << 39) | (ym << 22) | (d << 17) | (h << 12) | (mi << 6) | s
        frac = r.randrange(10**fsp) if fsp else 0
        size = (fsp + 1) // 2
        frac_stored = frac * (10 if fsp % 2 else 1)
        return v.to_bytes(5, "big") + (frac_stored.to_bytes(size, "big") if size else b"")

    def timestamp2(r, fsp):
        secs = r.choice((0, 1, 2**31 - 1, r.randrange(2**31)))
        size = (fsp + 1) // 2
        frac = (r.randrange(10**fsp) * (10 if fsp % 2 else 1)) if fsp else 0
        return secs.to_bytes(4, "big") + (frac.to_bytes(size, "big") if size else b"")

    def date(r):  # a valid date, or a zero or partly zero one (an invalid one fails in Python: not well formed)
        day = dt.date.fromordinal(r.randrange(1, dt.date(9999, 12, 31).toordinal()))
        y, m, d = day.year * (r.random() > 0.05), day.month * (r.random() > 0.05), day.day * (r.random() > 0.05)
        return ((y << 9) | (m << 5) | d).to_bytes(3, "little")

    def text(r, size):
        raw = "".join(r.choice("aé中😀\u0000 '") for _ in range(r.randrange(40))).encode()
        return len(raw).to_bytes(size, "little") + raw

    def col(name, data_type, column_type, **kw):
        return Column(name, data_type, column_type, True, **kw)

    return [
        (_mapped("ti", FIELD_TYPE.TINY), col("ti", "tinyint", "tinyint(4)"), lambda r: le(r.randrange(-128, 128), 1)),
        (
            _mapped("usi", FIELD_TYPE.SHORT, unsigned=True),
            col("usi", "smallint", "smallint(5) unsigned"),
            lambda r: le(r.randrange(65536), 2, False),
        ),
        (
            _mapped("mi", FIELD_TYPE.INT24),
            col("mi", "mediumint", "mediumint(9)"),
            lambda r: le(r.randrange(-(2**23), 2**23), 3),
        ),
        (_mapped("i", FIELD_TYPE.LONG), col("i", "int", "int(11)"), lambda r: le(r.randrange(-(2**31), 2**31), 4)),
        (
            _mapped("bi", FIELD_TYPE.LONGLONG),
            col("bi", "bigint", "bigint(20)"),
            lambda r: le(r.randrange(-(2**63), 2**63), 8),
        ),
        (
            _mapped("ubi", FIELD_TYPE.LONGLONG, unsigned=True),
            col("ubi", "bigint", "bigint(20) unsigned"),
            lambda r: le(r.getrandbits(64), 8, False),
        ),
        (_mapped("f", FIELD_TYPE.FLOAT), col("f", "float", "float"), lambda r: struct.pack("<f", r.uniform(-1e6, 1e6))),
        (
            _mapped("d", FIELD_TYPE.DOUBLE),
            col("d", "double", "double"),
            lambda r: struct.pack("<d", r.uniform(-1e300, 1e300)),
        ),
        decimal_column("d6", 20, 6),
        decimal_column("d0", 10, 0),
        decimal_column("d55", 5, 5),
        decimal_column("d65", 65, 30),
        (_mapped("dd", FIELD_TYPE.DATE), col("dd", "date", "date"), date),
        (_mapped("dt0", FIELD_TYPE.DATETIME2, fsp=0), col("dt0", "datetime", "datetime"), lambda r: datetime2(r, 0)),
        (_mapped("dt3", FIELD_TYPE.DATETIME2, fsp=3), col("dt3", "datetime", "datetime(3)"), lambda r: datetime2(r, 3)),
        (_mapped("dt6", FIELD_TYPE.DATETIME2, fsp=6), col("dt6", "datetime", "datetime(6)"), lambda r: datetime2(r, 6)),
        (
            _mapped("ts0", FIELD_TYPE.TIMESTAMP2, fsp=0),
            col("ts0", "timestamp", "timestamp"),
            lambda r: timestamp2(r, 0),
        ),
        (
            _mapped("ts5", FIELD_TYPE.TIMESTAMP2, fsp=5),
            col("ts5", "timestamp", "timestamp(5)"),
            lambda r: timestamp2(r, 5),
        ),
        (_mapped("vc", FIELD_TYPE.VARCHAR, max_length=80), col("vc", "varchar", "varchar(20)"), lambda r: text(r, 1)),
        (
            _mapped("vl", FIELD_TYPE.VARCHAR, max_length=1200),
            col("vl", "varchar", "varchar(300)"),
            lambda r: text(r, 2),
        ),
        (_mapped("tx", FIELD_TYPE.BLOB, length_size=2), col("tx", "text", "text"), lambda r: text(r, 2)),
        (_mapped("y", FIELD_TYPE.YEAR), col("y", "year", "year(4)"), lambda r: bytes([r.randrange(256)])),  # Python's
        (
            _mapped("t3", FIELD_TYPE.TIME2, fsp=3),  # Python's
            col("t3", "time", "time(3)"),
            lambda r: (0x800000 + r.randrange(-(2**20), 2**20)).to_bytes(3, "big") + r.randbytes(2),
        ),
    ]


COLUMNS = _columns()
SCHEMA = TableSchema("db", "t", tuple(c for _, c, _ in COLUMNS), ())
DECODER = Decoder(SimpleNamespace(schema="db", table="t", columns=[m for m, _, _ in COLUMNS]))


def _image(r: random.Random) -> bytes:
    nulls = bytearray((len(COLUMNS) + 7) // 8)
    values = b""
    for i, (_, _, make) in enumerate(COLUMNS):
        if r.random() < 0.1:
            nulls[i >> 3] |= 1 << (i & 7)
        else:
            values += make(r)
    return bytes(nulls) + values


def _python_way(data: bytes, op: str):
    pos, out, image = 0, [], DECODER.image
    while pos < len(data):
        before = after = None
        if op != "c":
            before, pos = image(data, pos, DECODER.full)
        if op != "d":
            after, pos = image(data, pos, DECODER.full)
        out.append(tuple(None if x is None else normalize_row(SCHEMA, x) for x in (before, after)))
    if pos != len(data):
        raise ValueError("past the event's end")
    return out


def test_the_plan_reads_natively_what_it_can_and_the_rest_in_python():
    plan = record_images.plan(DECODER, SCHEMA)
    assert plan is not None
    kinds = {name: kind for name, kind, *_ in plan}
    assert kinds["y"] == kinds["t3"] == native.PY
    assert all(kind != native.PY for name, kind in kinds.items() if name not in ("y", "t3"))
    assert kinds["ubi"] == native.U64_TEXT and kinds["usi"] == native.U16 and kinds["vl"] == native.UTF8
    other = TableSchema("db", "t", SCHEMA.columns[1:] + SCHEMA.columns[:1], ())
    assert record_images.plan(Decoder(SimpleNamespace(schema="db", table="t", columns=DECODER.columns)), other) is None


@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_decoder_gives_the_python_way_or_steps_aside(seed):
    r = random.Random(seed)
    plan = record_images.plan(DECODER, SCHEMA)
    answered = stepped_aside = 0
    for n in range(400):
        op = r.choice("cud")
        rows = r.randint(1, 4) * (2 if op == "u" else 1)
        data = b"".join(_image(r) for _ in range(rows))
        if n % 2:  # random damage: bytes changed, or the event cut short
            data = bytearray(data)
            for _ in range(r.randint(1, 8)):
                data[r.randrange(len(data))] = r.randrange(256)
            data = bytes(data[: r.randint(1, len(data))] if r.random() < 0.3 else data)
        try:
            expected = _python_way(data, op)
        except Exception:  # noqa: BLE001 - the Python way's own error: the compiled one must not answer
            expected = None
        try:
            got = native.images(data, 0, len(data), op, plan)
        except native.Unsure:
            stepped_aside += 1
            continue
        assert expected is not None, (seed, n, "the compiled decoder answered where Python fails")
        assert encode(got) == encode(expected), (seed, n)
        answered += 1
    assert answered > 150 and stepped_aside > 20, (answered, stepped_aside)


def test_zero_and_invalid_dates_are_null_as_in_python():
    plan = record_images.plan(DECODER, SCHEMA)
    only = tuple(p for p in plan if p[0] in ("dd", "dt6", "ts0"))
    zero = bytes([0]) + bytes(3) + ((1 << 39) | (13 << 22)).to_bytes(5, "big") + bytes(3) + bytes(4)
    assert native.images(zero, 0, len(zero), "c", only) == [(None, {"dd": None, "dt6": None, "ts0": None})]
    good = (
        bytes([0])
        + ((2024 << 9) | (2 << 5) | 29).to_bytes(3, "little")
        + ((1 << 39) | ((1999 * 13 + 12) << 22) | (31 << 17) | (23 << 12) | (59 << 6) | 59).to_bytes(5, "big")
        + (999999).to_bytes(3, "big")
        + (951782400).to_bytes(4, "big")
    )
    assert native.images(good, 0, len(good), "c", only) == [
        (None, {"dd": "2024-02-29", "dt6": "1999-12-31T23:59:59.999999", "ts0": "2000-02-29T00:00:00.000000Z"})
    ]
