"""MariaDB's compressed binlog events (``log_bin_compress=ON``) as the plain events they stand for.

With ``log_bin_compress`` a MariaDB source writes a query or a row event whose payload is longer than
``log_bin_compress_min_len`` as a compressed event (types 165-171). The event keeps its header, its position
and everything before its payload; the payload (a query's text, a row event's rows after the column count and
the column bitmaps) becomes one block: a byte ``1 AAA 0 LLL`` (algorithm ``AAA``, 0 = zlib; ``LLL`` bytes of
length follow), the inflated length big-endian, then the zlib stream. ``inflated`` rebuilds the plain event
(query 2, rows v1 23-25, rows v2 30-32) with the same position, so the rest of the reader reads it as if the
source had not compressed it.

Delivery guarantee: none of its own (decoding only); a block that does not inflate to its stated length, or
an algorithm other than zlib, raises ``UnreadableBinlog``: the event is never skipped.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

from seam.core.errors import SourceError

QUERY_COMPRESSED = 0xA5
# compressed type -> the plain type it stands for
COMPRESSED = {0xA5: 0x02, 0xA6: 0x17, 0xA7: 0x18, 0xA8: 0x19, 0xA9: 0x1E, 0xAA: 0x1F, 0xAB: 0x20}
_UPDATES, _ROWS_V2 = {0xA7, 0xAA}, {0xA9, 0xAA, 0xAB}
_QUERY_POST_HEADER = 13  # thread id, seconds, database name length, error code, status variables length
_SIZE = struct.Struct("<I")


class UnreadableBinlog(SourceError):
    """The binlog holds events no reader here can decode: the reader stops (it never skips them)."""


def inflated(data: bytes, checksum: bool, post_header: Callable[[int, int], int]) -> bytes:
    """The plain event packet (OK byte, header, body, a zeroed checksum if the source logs checksums) for the
    compressed event packet ``data``; ``post_header(kind, default)`` is the format description's length."""
    kind, log_pos = data[5], _SIZE.unpack_from(data, 14)[0]
    end = 1 + _SIZE.unpack_from(data, 10)[0] - (4 if checksum else 0)
    body = 20 + post_header(kind, _QUERY_POST_HEADER if kind == QUERY_COMPRESSED else 10 if kind in _ROWS_V2 else 8)
    if kind == QUERY_COMPRESSED:  # the text follows the status variables and the database name (and its NUL)
        block = body + int.from_bytes(data[31:33], "little") + data[28] + 1
    else:
        if kind in _ROWS_V2:  # v2: extra data follows the post-header; its length counts its own two bytes
            body += int.from_bytes(data[body - 2 : body], "little") - 2
        columns, block = packed_int(data, body, "a compressed row event's column count")
        block += ((columns + 7) // 8) * (2 if kind in _UPDATES else 1)  # the bitmaps: before (and after) images
    payload = _inflate(data[block:end], log_pos)
    plain = bytearray(data[:block])
    plain[5] = COMPRESSED[kind]
    plain += payload
    plain += b"\0\0\0\0" if checksum else b""
    _SIZE.pack_into(plain, 10, len(plain) - 1)
    return bytes(plain)


def _inflate(block: bytes, log_pos: int) -> bytes:
    head = block[0] if block else 0
    algorithm, length_bytes = (head & 0x70) >> 4, head & 0x07
    if head & 0x80 == 0 or algorithm != 0 or not 1 <= length_bytes <= 4:
        raise UnreadableBinlog(
            f"the compressed binlog event ending at {log_pos} uses a compression Seam cannot read (header byte "
            f"{head:#04x}; only zlib is known): set log_bin_compress=OFF on the source, then load the tables again"
        )
    length = int.from_bytes(block[1 : 1 + length_bytes], "big")
    try:
        payload = zlib.decompress(block[1 + length_bytes :])
    except zlib.error as exc:
        raise UnreadableBinlog(f"the compressed binlog event ending at {log_pos} does not inflate ({exc})") from None
    if len(payload) != length:
        raise UnreadableBinlog(
            f"the compressed binlog event ending at {log_pos} inflates to {len(payload)} bytes, not the {length} "
            "it states"
        )
    return payload


def packed_int(data: bytes, at: int, what: str) -> tuple[int, int]:
    """A length-encoded integer at ``at`` (``what`` it is, for the error): its value and where what follows it
    starts."""
    first = data[at]
    if first < 0xFB:
        return first, at + 1
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if size is None:
        raise UnreadableBinlog(f"{what} coded as {first:#x}")
    return int.from_bytes(data[at + 1 : at + 1 + size], "little"), at + 1 + size
