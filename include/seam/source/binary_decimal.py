"""MySQL's binary DECIMAL: nine digits in four big-endian bytes, the rest in fewer, the sign in the first bit and
negative values' bytes inverted. A DECIMAL column's value in a row image, and a DECIMAL inside a binary JSON
document (``seam.source.json_binary``).

Delivery guarantee: none (decoding only).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable

_DIGITS = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]


def decimal_reader(precision: int, scale: int) -> Callable[[bytes, int], tuple[decimal.Decimal, int]]:
    """The reader of a DECIMAL(precision, scale) value at a position: its value, and where the next one starts."""
    integral = precision - scale
    whole_int, whole_frac = integral // 9, scale // 9
    part_int, part_frac = integral - whole_int * 9, scale - whole_frac * 9
    head, tail = _DIGITS[part_int], _DIGITS[part_frac]
    size = head + whole_int * 4 + whole_frac * 4 + tail

    def read(data: bytes, pos: int):
        raw = bytearray(data[pos : pos + size])
        if raw[0] & 0x80:
            text, mask = "", 0
        else:
            text, mask = "-", -1
        raw[0] ^= 0x80
        at = 0
        if head:
            text += str(int.from_bytes(raw[:head], "big", signed=True) ^ mask)
            at = head
        for _ in range(whole_int):
            text += f"{int.from_bytes(raw[at : at + 4], 'big', signed=True) ^ mask:09d}"
            at += 4
        text += "."
        for _ in range(whole_frac):
            text += f"{int.from_bytes(raw[at : at + 4], 'big', signed=True) ^ mask:09d}"
            at += 4
        if tail:
            text += f"{int.from_bytes(raw[at : at + tail], 'big', signed=True) ^ mask:0{part_frac}d}"
        return decimal.Decimal(text), pos + size

    return read
