"""One reader per column type for the values of a binlog row image (MySQL's binary layouts), chosen once per
table map by ``seam.source.rows.Decoder``. Values come out as python-mysql-replication returns them (the
reference ``tests/stack/test_row_decoder.py`` compares against), except a negative TIME with a fraction,
read here as MySQL lays it out.

Delivery guarantee: none (decoding only); a type it cannot read raises, it is never skipped.
"""

from __future__ import annotations

import codecs
import datetime
import struct
from collections.abc import Callable
from encodings import cp1252
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE

from seam.core.errors import SourceError
from seam.source.binary_decimal import decimal_reader
from seam.source.json_binary import json_value
from seam.wire.codecs import document_text

Reader = Callable[[bytes, int], tuple[Any, int]]


def _fixed(fmt: str) -> Reader:
    s = struct.Struct(fmt)
    unpack, size = s.unpack_from, s.size

    def read(data: bytes, pos: int):
        return unpack(data, pos)[0], pos + size

    return read


def _int24(signed: bool) -> Reader:
    def read(data: bytes, pos: int):
        return int.from_bytes(data[pos : pos + 3], "little", signed=signed), pos + 3

    return read


def _uint(data: bytes, pos: int, size: int) -> int:
    return int.from_bytes(data[pos : pos + size], "little")


def _be_signed(data: bytes, pos: int, size: int) -> int:
    """python-mysql-replication's ``read_int_be_by_size``: signed, except its 5-byte read."""
    if size == 5:
        return int.from_bytes(data[pos : pos + 5], "big")
    return int.from_bytes(data[pos : pos + size], "big", signed=True)


# The Python codec for each MySQL character set (by python-mysql-replication's name for it) whose every byte
# sequence it decodes as the server converts it (tests/stack/test_charsets.py compares them with the server).
# MySQL's UTF-16 and UTF-32 are big-endian (Python's "utf16" reads the machine's order); MySQL's latin1 is
# cp1252 with five more bytes. A character set not here stops its table: big5, cp1256, cp866, cp932, greek,
# hebrew, koi8u, sjis and ujis map some bytes otherwise (sjis 0x815F is "\\" to MariaDB, "＼" to Python), and
# Python has no codec for armscii8, dec8, eucjpms, geostd8, hp8, keybcs2 and swe7.
_CODECS = {
    "utf8": "utf8",
    "utf8mb3": "utf8",  # the server's own names, where they differ from the library's
    "utf8mb4": "utf8",
    "latin1": "mysql_latin1",
    "utf16": "utf-16-be",
    "ucs2": "utf-16-be",
    "utf32": "utf-32-be",
    "utf16le": "utf-16-le",
    "cp1252": "mysql_latin1",
    "ascii": "ascii",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "latin2": "iso8859_2",
    "latin5": "iso8859_9",
    "latin7": "iso8859_13",
    "koi8_r": "koi8_r",
    "macce": "mac_latin2",
    "macroman": "mac_roman",
    "tis620": "tis_620",
    "euckr": "euc_kr",
    "gb2312": "gb2312",
    "gbk": "gbk",
}


def _mysql_latin1(name: str) -> codecs.CodecInfo | None:
    """MySQL's latin1 is cp1252 whose five unassigned bytes (0x81, 0x8D, 0x8F, 0x90, 0x9D) are the C1
    controls of the same number; Python's cp1252 refuses them."""
    if name != "mysql_latin1":
        return None
    table = "".join(chr(i) if c == "\ufffe" else c for i, c in enumerate(cp1252.decoding_table))
    encoding_table = codecs.charmap_build(table)
    return codecs.CodecInfo(
        name="mysql_latin1",
        encode=lambda text, errors="strict": codecs.charmap_encode(text, errors, encoding_table),
        decode=lambda data, errors="strict": codecs.charmap_decode(data, errors, table),
    )


codecs.register(_mysql_latin1)


def exact_codec(charset: str) -> str | None:
    """The Python codec that decodes every byte sequence of MySQL's ``charset`` as the server does, if any."""
    return _CODECS.get(charset)


class UnknownCharset(SourceError, ValueError):
    """A text column in a character set Seam does not decode exactly: its table stops."""


def text_encoding(column) -> str:
    """The Python codec a text column's bytes are decoded with ("" for binary: the bytes are kept). Raises
    ``UnknownCharset`` for a character set without an exact one (``_CODECS``)."""
    name = column.character_set_name
    if name is None:
        return "utf8"
    if name == "binary":
        return ""
    if name not in _CODECS:
        raise UnknownCharset(
            f"column {column.name} is in character set {name}, which Seam does not decode exactly; convert it "
            "(ALTER TABLE ... CONVERT TO CHARACTER SET utf8mb4) or leave the table out of the pipeline"
        )
    return _CODECS[name]


def _text(column, length_size: int) -> Reader:
    encoding = text_encoding(column)

    def read(data: bytes, pos: int):
        length = _uint(data, pos, length_size)
        pos += length_size
        raw = data[pos : pos + length]
        # an empty value of a charset Python lacks (binary) is '', as the library's decode gives it
        return (raw.decode(encoding) if encoding else raw or ""), pos + length

    return read


def _bytes(length_size: int) -> Reader:
    def read(data: bytes, pos: int):
        length = _uint(data, pos, length_size)
        pos += length_size
        return data[pos : pos + length], pos + length

    return read


def _fsp_size(fsp: int) -> int:
    return (fsp + 1) // 2


def _micro(data: bytes, pos: int, fsp: int) -> int:
    size = _fsp_size(fsp)
    if not size:
        return 0
    value = _be_signed(data, pos, size)
    if fsp % 2:
        value = int(value / 10)
    return value * 10 ** (6 - fsp)


def _datetime2(column) -> Reader:
    fsp = column.fsp
    size = 5 + _fsp_size(fsp)

    def read(data: bytes, pos: int):
        v = int.from_bytes(data[pos : pos + 5], "big")
        year_month = (v >> 22) & 0x1FFFF
        try:
            t = datetime.datetime(
                year_month // 13, year_month % 13, (v >> 17) & 0x1F, (v >> 12) & 0x1F, (v >> 6) & 0x3F, v & 0x3F
            )
        except ValueError:  # a zero or partly zero date
            return None, pos + size
        micro = _micro(data, pos + 5, fsp)
        return (t.replace(microsecond=micro) if micro > 0 else t), pos + size

    return read


def _time2(column) -> Reader:
    """MySQL's TIME2 (``my_time_packed_from_binary``): a negative time with a fraction stores the fraction's
    complement and borrows a second. python-mysql-replication reads it as stored (-00:00:01.25 as -00:00:01.75)."""
    fsp = column.fsp
    frac_size = _fsp_size(fsp)

    def read(data: bytes, pos: int):
        whole = int.from_bytes(data[pos : pos + 3], "big") - 0x800000
        if frac_size == 3:
            packed = int.from_bytes(data[pos : pos + 6], "big") - 0x800000000000
        else:
            frac = int.from_bytes(data[pos + 3 : pos + 3 + frac_size], "big")
            if whole < 0 and frac:
                whole, frac = whole + 1, frac - (1 << (8 * frac_size))
            packed = (whole << 24) + frac * (10000 if frac_size == 1 else 100)
        magnitude = abs(packed)
        hms = magnitude >> 24
        t = datetime.timedelta(
            hours=(hms >> 12) % 1024, minutes=(hms >> 6) % 64, seconds=hms % 64, microseconds=magnitude % (1 << 24)
        )
        return (-t if packed < 0 else t), pos + 3 + frac_size

    return read


def _timestamp2(column) -> Reader:
    fsp = column.fsp
    size = 4 + _fsp_size(fsp)

    def read(data: bytes, pos: int):
        t = datetime.datetime.utcfromtimestamp(int.from_bytes(data[pos : pos + 4], "big", signed=True))
        micro = _micro(data, pos + 4, fsp)
        return (t.replace(microsecond=micro) if micro > 0 else t), pos + size

    return read


def _date(data: bytes, pos: int):
    v = _uint(data, pos, 3)
    year, month, day = (v >> 9) & 0x7FFF, (v >> 5) & 0xF, v & 0x1F
    try:
        return datetime.date(year, month, day), pos + 3
    except ValueError:  # a zero, partly zero or invalid (2024-02-31) date
        return None, pos + 3


def _datetime(data: bytes, pos: int):
    value = _uint(data, pos, 8)
    if value == 0:
        return None, pos + 8
    date, time = value / 1000000, int(value % 1000000)
    year, month, day = int(date / 10000), int((date % 10000) / 100), int(date % 100)
    try:
        t = datetime.datetime(year, month, day, int(time / 10000), int((time % 10000) / 100), int(time % 100))
    except ValueError:  # a zero, partly zero or invalid (2024-02-31) date
        return None, pos + 8
    return t, pos + 8


def _time(data: bytes, pos: int):
    v = _uint(data, pos, 3)
    return datetime.timedelta(hours=int(v / 10000), minutes=int((v % 10000) / 100), seconds=int(v % 100)), pos + 3


def _timestamp(data: bytes, pos: int):
    return datetime.datetime.utcfromtimestamp(_uint(data, pos, 4)), pos + 4


def _year(data: bytes, pos: int):
    return data[pos] + 1900, pos + 1


def _members(column, logged: list[bytes] | None, parsed: list[str] | None) -> list[str] | None:
    """An ENUM's or SET's member names: as the table map logged them (``seam.source.table_map``), decoded in
    the column's character set; else the library's (which turns a name that is not UTF-8 into "")."""
    if logged is None:
        return parsed
    encoding = text_encoding(column)
    if not encoding:
        raise ValueError(
            f"ENUM/SET member names in character set {column.character_set_name}, which Seam cannot decode"
        )
    return [name.decode(encoding) for name in logged]


def _enum(column) -> Reader:
    logged = getattr(column, "logged_members", None)
    size, members = column.size, _members(column, None if logged is None else [b"", *logged], column.enum_values)

    def read(data: bytes, pos: int):
        return (members[_uint(data, pos, size)] if members else None), pos + size

    return read


def _set(column) -> Reader:
    size, members = column.size, _members(column, getattr(column, "logged_members", None), column.set_values) or []

    def read(data: bytes, pos: int):
        mask = _uint(data, pos, size)
        chosen = {m for i, m in enumerate(members) if mask & (1 << i)}
        return (chosen or ""), pos + size  # the empty set is "", apart from NULL

    return read


def _bit(column) -> Reader:
    nbytes, bits = column.bytes, column.bits

    def read(data: bytes, pos: int):
        out = []
        for i in range(nbytes):
            byte = data[pos + i]
            if i == 0:
                end = bits if nbytes == 1 else (bits % 8 or 8)
            else:
                end = 8
            out.append("".join("1" if byte & (1 << b) else "0" for b in range(end))[::-1])
        return "".join(out), pos + nbytes

    return read


def _json(length_size: int) -> Reader:
    def read(data: bytes, pos: int):
        length = _uint(data, pos, length_size)
        pos += length_size
        if length == 0:
            return None, pos
        # as text: a document that is one string ("123") would read as what its characters parse to (123)
        return document_text(json_value(data[pos], memoryview(data)[pos + 1 : pos + length])), pos + length

    return read


def value_reader(column) -> Reader:
    """How one column's values are read from a row image: chosen once per table map."""
    t, unsigned = column.type, column.unsigned
    if t == FIELD_TYPE.TINY:
        return _fixed("<B" if unsigned else "<b")
    if t == FIELD_TYPE.SHORT:
        return _fixed("<H" if unsigned else "<h")
    if t == FIELD_TYPE.LONG:
        return _fixed("<I" if unsigned else "<i")
    if t == FIELD_TYPE.INT24:
        return _int24(not unsigned)
    if t == FIELD_TYPE.LONGLONG:
        return _fixed("<Q" if unsigned else "<q")
    if t == FIELD_TYPE.FLOAT:
        return _fixed("<f")
    if t == FIELD_TYPE.DOUBLE:
        return _fixed("<d")
    if t in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING):
        return _text(column, 2 if column.max_length > 255 else 1)
    if t == FIELD_TYPE.BLOB:
        return _text(column, column.length_size)
    if t == FIELD_TYPE.NEWDECIMAL:
        return decimal_reader(column.precision, column.decimals)
    if t == FIELD_TYPE.DATETIME2:
        return _datetime2(column)
    if t == FIELD_TYPE.TIME2:
        return _time2(column)
    if t == FIELD_TYPE.TIMESTAMP2:
        return _timestamp2(column)
    if t == FIELD_TYPE.DATE:
        return _date
    if t == FIELD_TYPE.DATETIME:
        return _datetime
    if t == FIELD_TYPE.TIME:
        return _time
    if t == FIELD_TYPE.TIMESTAMP:
        return _timestamp
    if t == FIELD_TYPE.YEAR:
        return _year
    if t == FIELD_TYPE.ENUM:
        return _enum(column)
    if t == FIELD_TYPE.SET:
        return _set(column)
    if t == FIELD_TYPE.BIT:
        return _bit(column)
    if t == FIELD_TYPE.GEOMETRY:
        return _bytes(column.length_size)
    if t == FIELD_TYPE.JSON:
        return _json(column.length_size)
    raise NotImplementedError(f"Unknown MySQL column type: {t}")
