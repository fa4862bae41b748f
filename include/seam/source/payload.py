"""MySQL's compressed transactions (``binlog_transaction_compression=ON``, MySQL 8.0.20+) as the events they hold.

With that setting MySQL writes a whole transaction (its BEGIN, table maps, rows and XID; the GTID event stays
outside) as one TRANSACTION_PAYLOAD event. After the common header come a few fields, each a length-encoded
type, length and value (1: the payload's size; 2: its compression, 0 = zstd, 255 = none; 3: its size
uncompressed), a 0 that ends them, then the payload: the events one after another, each with its own header
and without a checksum (the outer event's covers them all). ``inner_events`` gives them back one at a time,
decompressed as they are read, so a transaction of any size takes the compressed event and one inner event of
memory. Each comes as a plain event packet of the same source: its log_pos is the payload event's end (where
the transaction ends in the binlog: its XID's position, as for a transaction not compressed), and a zeroed
checksum follows when the source logs checksums, as ``seam.source.inflate`` rebuilds MariaDB's compressed events.

The inner events share one end, so their rows are numbered across the transaction (``Rows.shared_end``): every
change keeps a position of its own.

Delivery guarantee: none of its own (decoding only); a payload that does not decode (an unknown compression,
a size that does not match, an event cut short) raises ``UnreadableBinlog``: it is never skipped.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterator

import zstandard

from seam.source.inflate import UnreadableBinlog, packed_int

TRANSACTION_PAYLOAD = 0x28
ZSTD, NONE = 0, 255
_END_MARK, _SIZE, _COMPRESSION, _UNCOMPRESSED = 0, 1, 2, 3
_HEADER = 19  # timestamp, type, server id, event size, log_pos, flags


def inner_events(data: bytes, body: int, end: int, checksum: bool, where: str) -> Iterator[bytes]:
    """The events of the TRANSACTION_PAYLOAD event packet ``data`` (an OK byte, then the event; its fields start
    at ``body``, its payload ends at ``end``, before any checksum), each as a plain event packet logged at the
    outer event's end. ``where`` names the event's place in errors."""
    log_pos = data[14:18]
    fields, at = _fields(data, body, end, where)
    if fields.get(_SIZE, end - at) != end - at:
        raise UnreadableBinlog(f"the compressed transaction at {where} says {fields[_SIZE]} bytes and holds {end - at}")
    read = _reader(fields.get(_COMPRESSION), memoryview(data)[at:end], where)
    total, trailer = 0, b"\0\0\0\0" if checksum else b""
    while header := _read(read, _HEADER, where):
        size = int.from_bytes(header[9:13], "little")
        rest = _read(read, size - _HEADER, where) if size >= _HEADER else b""
        if len(header) < _HEADER or size < _HEADER or len(rest) < size - _HEADER:
            raise UnreadableBinlog(f"the compressed transaction at {where} ends inside an event")
        total += size
        size_and_pos = struct.pack("<I", size + len(trailer)) + log_pos
        yield b"\0" + header[:9] + size_and_pos + header[17:] + rest + trailer
    if fields.get(_UNCOMPRESSED, total) != total:
        raise UnreadableBinlog(
            f"the compressed transaction at {where} says {fields[_UNCOMPRESSED]} bytes uncompressed and holds {total}"
        )


def _fields(data: bytes, at: int, end: int, where: str) -> tuple[dict[int, int], int]:
    """The header fields by type, and where the payload starts; a field of a type not known here is passed over,
    as MySQL's own reader does."""
    fields: dict[int, int] = {}
    what = f"a field of the compressed transaction at {where}"
    while at < end:
        kind, at = packed_int(data, at, what)
        if kind == _END_MARK:
            return fields, at
        length, at = packed_int(data, at, what)
        if kind in (_SIZE, _COMPRESSION, _UNCOMPRESSED):
            fields[kind], _ = packed_int(data, at, what)
        at += length
    raise UnreadableBinlog(f"the compressed transaction at {where} has no end to its header")


def _reader(compression: int | None, payload: memoryview, where: str) -> Callable[[int], bytes]:
    if compression == NONE:
        return io.BytesIO(payload).read
    if compression == ZSTD:
        return zstandard.ZstdDecompressor().stream_reader(payload, read_across_frames=True).read
    raise UnreadableBinlog(
        f"the compressed transaction at {where} uses compression {compression}, which Seam does not know (zstd is 0)"
    )


def _read(read: Callable[[int], bytes], size: int, where: str) -> bytes:
    """``size`` bytes, or fewer only at the payload's end (a decompressing reader may give fewer at a time)."""
    parts, left = [], size
    while left:
        try:
            part = read(left)
        except zstandard.ZstdError as error:
            raise UnreadableBinlog(f"the compressed transaction at {where} does not decompress: {error}") from None
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)
