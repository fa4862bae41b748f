"""MySQL's binary JSON written here from MySQL's format (``json_binary.h``, ``decimal2bin``), for tests of the
reader (``seam.source.json_binary``) without a MySQL server: the two share no code."""

from __future__ import annotations

import decimal
import struct
from dataclasses import dataclass

_DIGIT_BYTES = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]


@dataclass(frozen=True)
class Opaque:
    """A value of another MySQL type inside a document: its field type and its binary form."""

    field: int
    raw: bytes


def decimal_opaque(text: str, precision: int, scale: int) -> Opaque:
    """A DECIMAL(precision, scale) as MySQL stores it in JSON: precision, scale, then ``decimal2bin``."""
    whole, _, fraction = text.lstrip("-").partition(".")
    fraction = fraction.ljust(scale, "0")
    assert len(fraction) == scale and len(whole.lstrip("0")) <= precision - scale, text
    negative = text.startswith("-") and decimal.Decimal(text) != 0
    integral = whole.lstrip("0").rjust(precision - scale, "0")
    out = b""
    lead = len(integral) % 9
    if lead:
        out += int(integral[:lead]).to_bytes(_DIGIT_BYTES[lead], "big")
    for i in range(lead, len(integral), 9):
        out += int(integral[i : i + 9]).to_bytes(4, "big")
    for i in range(0, scale - scale % 9, 9):
        out += int(fraction[i : i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(fraction[scale - scale % 9 :]).to_bytes(_DIGIT_BYTES[scale % 9], "big")
    raw = bytearray(out)
    if negative:
        raw = bytearray(b ^ 0xFF for b in raw)
    raw[0] ^= 0x80
    return Opaque(246, bytes([precision, scale]) + bytes(raw))


def datetime_opaque(field: int, year, month, day, hour=0, minute=0, second=0, micro=0, negative=False) -> Opaque:
    """A DATE, DATETIME, TIMESTAMP (``field``) as MySQL packs it: ymd << 17 | hms, then 24 bits of microseconds."""
    ymd = ((year * 13 + month) << 5) | day
    packed = (((ymd << 17) | (hour << 12) | (minute << 6) | second) << 24) + micro
    return Opaque(field, struct.pack("<q", -packed if negative else packed))


def time_opaque(hours: int, minute: int, second: int, micro: int = 0, negative: bool = False) -> Opaque:
    packed = (((hours << 12) | (minute << 6) | second) << 24) + micro
    return Opaque(11, struct.pack("<q", -packed if negative else packed))


def binary_json(value, large: bool = False) -> bytes:
    """The type byte and the value, as MySQL writes a JSON column (containers small unless ``large``)."""
    kind, body = _encode(value, large)
    return bytes([kind]) + body


def _length(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _encode(value, large: bool) -> tuple[int, bytes]:
    if value is None or isinstance(value, bool):
        return 0x4, bytes([{None: 0, True: 1, False: 2}[value]])
    if isinstance(value, int):
        for kind, fmt, lo, hi in (
            (0x5, "<h", -(2**15), 2**15),
            (0x7, "<i", -(2**31), 2**31),
            (0x9, "<q", -(2**63), 2**63),
        ):
            if lo <= value < hi:
                return kind, struct.pack(fmt, value)
        return 0xA, struct.pack("<Q", value)
    if isinstance(value, float):
        return 0xB, struct.pack("<d", value)
    if isinstance(value, str):
        data = value.encode()
        return 0xC, _length(len(data)) + data
    if isinstance(value, Opaque):
        return 0xF, bytes([value.field]) + _length(len(value.raw)) + value.raw
    return _container(value, large)


def _container(value, large: bool) -> tuple[int, bytes]:
    is_object = isinstance(value, dict)
    width = 4 if large else 2
    keys = [k.encode() for k in value] if is_object else []
    items = list(value.values()) if is_object else list(value)
    header = 2 * width + len(items) * (1 + width) + (len(items) * (width + 2) if is_object else 0)
    key_entries, tail = b"", b""
    for key in keys:
        key_entries += (header + len(tail)).to_bytes(width, "little") + len(key).to_bytes(2, "little")
        tail += key
    value_entries = b""
    for item in items:
        kind, body = _encode(item, large)
        inline = kind == 0x4 or kind in (0x5, 0x6) or (large and kind in (0x7, 0x8))
        if inline:
            value_entries += bytes([kind]) + body.ljust(width, b"\0")
        else:
            value_entries += bytes([kind]) + (header + len(tail)).to_bytes(width, "little")
            tail += body
    size = header + len(tail)
    body = len(items).to_bytes(width, "little") + size.to_bytes(width, "little") + key_entries + value_entries + tail
    return (0x1 if large else 0x0) if is_object else (0x3 if large else 0x2), body
