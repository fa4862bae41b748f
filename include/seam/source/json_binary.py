"""MySQL's binary JSON (a JSON column's value in a MySQL 8 row image) as the value MySQL's own text of that document
parses to: what a full load reads (MySQL renders the document as text, and numbers are read from it exactly),
so a row loaded and the same row streamed give the same record (``seam.wire.codecs.json_document``). MariaDB's
JSON is text and never comes here.

The layout (MySQL's ``json_binary.h``): a type byte, then an object or array (an element count and a byte size,
2 bytes each when small and 4 when large; key entries, value entries, then keys and values at offsets from the
container's start; literals and small integers inline in their entry), a literal, a number, a string (its
length in 7-bit groups, then UTF-8) or an opaque value of another MySQL type (its field type, a length, its
binary form). How MySQL writes the opaque ones in text, and so what they are read as here:

- DECIMAL: its digits with its scale (``12.50``): a Decimal, never a float (a DECIMAL(65,30) has 65 digits);
- DATE, DATETIME, TIMESTAMP, TIME: quoted, with six fractional digits (``"2015-01-15 23:24:25.000000"``);
- any other type: ``"base64:type<field type>:<its bytes in base64>"``.

The library's parser gave bytes keys and strings, Decimal and datetime objects that the record's JSON cannot
hold (the table stopped), and the bytes of any other opaque value decoded as UTF-8 with errors dropped.

Delivery guarantee: none (decoding only); a document it cannot read raises ``ValueError`` and its table stops:
it is never read as something else.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from seam.source.binary_decimal import decimal_reader

SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY, LITERAL = 0x0, 0x1, 0x2, 0x3, 0x4
INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING, OPAQUE = 0x5, 0x6, 0x7, 0x8, 0x9, 0xA, 0xB, 0xC, 0xF
_NUMBERS = {
    INT16: struct.Struct("<h"),
    UINT16: struct.Struct("<H"),
    INT32: struct.Struct("<i"),
    UINT32: struct.Struct("<I"),
    INT64: struct.Struct("<q"),
    UINT64: struct.Struct("<Q"),
    DOUBLE: struct.Struct("<d"),
}
_LITERALS = {0x0: None, 0x1: True, 0x2: False}
_CONTAINERS = {SMALL_OBJECT: (2, True), LARGE_OBJECT: (4, True), SMALL_ARRAY: (2, False), LARGE_ARRAY: (4, False)}
# field types (enum_field_types) of opaque values MySQL writes as text of their own
_DECIMALS = {0, 246}  # DECIMAL, NEWDECIMAL
_DATES = {10, 14}  # DATE, NEWDATE
_DATETIMES = {7, 12, 17, 18}  # TIMESTAMP, DATETIME, TIMESTAMP2, DATETIME2
_TIMES = {11, 19}  # TIME, TIME2


def json_value(kind: int, data: bytes | memoryview, at: int = 0) -> Any:
    """The value of binary JSON type ``kind`` whose bytes start at ``at`` in ``data``."""
    if kind in _CONTAINERS:
        return _container(kind, data, at)
    if kind in _NUMBERS:
        return _NUMBERS[kind].unpack_from(data, at)[0]
    if kind == LITERAL:
        if data[at] not in _LITERALS:
            raise ValueError(f"a JSON literal coded {data[at]:#x}, which MySQL does not write")
        return _LITERALS[data[at]]
    if kind == STRING:
        length, at = _length(data, at)
        return _utf8(data, at, length)
    if kind == OPAQUE:
        field = data[at]
        length, at = _length(data, at + 1)
        return _opaque(field, bytes(_within(data, at, length)))
    raise ValueError(f"a JSON value of binary type {kind:#x}, which MySQL does not write")


def _container(kind: int, data: bytes | memoryview, start: int) -> dict | list:
    width, is_object = _CONTAINERS[kind]
    count, size = _uint(data, start, width), _uint(data, start + width, width)
    _within(data, start, size)
    entry = start + 2 * width
    keys = []
    if is_object:  # each key: its offset and a 2-byte length
        for _ in range(count):
            keys.append(_utf8(data, start + _uint(data, entry, width), _uint(data, entry + width, 2)))
            entry += width + 2
    values = []
    for _ in range(count):
        kind = data[entry]
        inline = kind in (LITERAL, INT16, UINT16) or (width == 4 and kind in (INT32, UINT32))
        values.append(json_value(kind, data, entry + 1 if inline else start + _uint(data, entry + 1, width)))
        entry += 1 + width
    return dict(zip(keys, values)) if is_object else values


def _opaque(field: int, raw: bytes) -> Any:
    if field in _DECIMALS:
        precision, scale = raw[0], raw[1]
        value, _ = decimal_reader(precision, scale)(raw, 2)
        return value
    if field in _DATES:
        return _datetime(raw)[:10]
    if field in _DATETIMES:
        return _datetime(raw)
    if field in _TIMES:
        return _time(raw)
    return f"base64:type{field}:{base64.b64encode(raw).decode()}"


def _datetime(raw: bytes) -> str:
    """MySQL's packed DATETIME (the date's 17 bits, the time's 17, then 24 of microseconds) as MySQL prints it."""
    packed = abs(int.from_bytes(raw[:8], "little", signed=True))
    whole, micro = packed >> 24, packed & 0xFFFFFF
    year_month, day, hms = whole >> 22, (whole >> 17) & 0x1F, whole & 0x1FFFF
    year, month = divmod(year_month, 13)
    return f"{year:04d}-{month:02d}-{day:02d} {hms >> 12:02d}:{(hms >> 6) & 0x3F:02d}:{hms & 0x3F:02d}.{micro:06d}"


def _time(raw: bytes) -> str:
    """MySQL's packed TIME (hours, minutes, seconds, microseconds; negated when negative) as MySQL prints it."""
    packed = int.from_bytes(raw[:8], "little", signed=True)
    sign, packed = ("-" if packed < 0 else ""), abs(packed)
    whole, micro = packed >> 24, packed & 0xFFFFFF
    return f"{sign}{(whole >> 12) & 0x3FF:02d}:{(whole >> 6) & 0x3F:02d}:{whole & 0x3F:02d}.{micro:06d}"


def _length(data: bytes | memoryview, at: int) -> tuple[int, int]:
    """A length in 7-bit groups, low first (the high bit: another byte follows), and where its bytes end."""
    length = shift = 0
    while True:
        byte = _within(data, at, 1)[0]
        length |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return length, at
        if shift > 28:
            raise ValueError("a JSON length of more than five bytes")


def _uint(data: bytes | memoryview, at: int, width: int) -> int:
    return int.from_bytes(_within(data, at, width), "little")


def _utf8(data: bytes | memoryview, at: int, length: int) -> str:
    return bytes(_within(data, at, length)).decode("utf-8")


def _within(data: bytes | memoryview, at: int, length: int) -> bytes | memoryview:
    if at + length > len(data):
        raise ValueError("a binary JSON document cut short")
    return data[at : at + length]
