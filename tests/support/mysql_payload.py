"""MySQL 8's compressed transactions (``binlog_transaction_compression=ON``), built here from plain events as MySQL
writes them: no MySQL server runs on our machines, so tests take a MariaDB transaction's events and wrap them as
MySQL's ``Transaction_payload_event`` does (MySQL's ``binlog/event/codecs``: each header field a length-encoded
type, length and value, a 0 that ends them, then the events without their checksums, zstd-compressed). Written
from MySQL's format, not from Seam's reader (``seam.source.payload``), so the two meet only on the wire."""

from __future__ import annotations

import struct

import zstandard

PAYLOAD_KIND = 0x28
ZSTD, NONE = 0, 255
_MARIADB_GTID, _XID = 0xA2, 0x10
_STANDALONE = 0x01  # a MariaDB GTID event's flag: a statement outside a transaction


def length_encoded(value: int) -> bytes:
    if value < 251:
        return bytes([value])
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + value.to_bytes(8, "little")


def field(kind: int, value: int) -> bytes:
    encoded = length_encoded(value)
    return length_encoded(kind) + length_encoded(len(encoded)) + encoded


def payload_packet(
    events: list[bytes], log_pos: int, timestamp: int, server_id: int, checksum: bool, compression: int = ZSTD
) -> bytes:
    """The packet (an OK byte, then the event) of a TRANSACTION_PAYLOAD event holding ``events`` (each a header
    and body, without checksum), ending at ``log_pos``."""
    raw = b"".join(events)
    payload = zstandard.ZstdCompressor().compress(raw) if compression == ZSTD else raw
    body = (
        field(2, compression) + field(1, len(payload)) + field(3, len(raw)) + length_encoded(0) + payload
    )  # MySQL's order: compression type, payload size, uncompressed size
    size = 19 + len(body) + (4 if checksum else 0)
    header = struct.pack("<IBIIIH", timestamp, PAYLOAD_KIND, server_id, size, log_pos, 0)
    return b"\0" + header + body + (b"\0\0\0\0" if checksum else b"")


def compressed(packets: list[bytes], checksum: bool, plain_every: int = 0) -> tuple[list[bytes], int]:
    """``packets`` of a MariaDB source with every transaction (from a GTID event that opens one through its XID)
    written as MySQL writes it compressed: the GTID event, then one payload event ending where the XID ended;
    the inner events' own log_pos zeroed (MySQL's are not positions in the file). Every ``plain_every``-th
    transaction uses compression NONE; a transaction the packets end inside stays as it is. Returns the packets
    and the number of transactions wrapped."""
    out: list[bytes] = []
    held: list[bytes] | None = None  # the packets of the open transaction after its GTID event
    wrapped = 0
    for packet in packets:
        kind = packet[5] if len(packet) > 19 and packet[0] == 0 else None
        if held is None:
            out.append(packet)
            if kind == _MARIADB_GTID and not packet[32] & _STANDALONE:
                held = []
            continue
        held.append(packet)
        if kind == _XID:
            timestamp, _, server_id, _, log_pos, _ = struct.unpack_from("<IBIIIH", packet, 1)
            wrapped += 1
            kind_used = NONE if plain_every and wrapped % plain_every == 0 else ZSTD
            out.append(
                payload_packet([_inner(p, checksum) for p in held], log_pos, timestamp, server_id, checksum, kind_used)
            )
            held = None
    return out + (held or []), wrapped


def _inner(packet: bytes, checksum: bool) -> bytes:
    """An event as MySQL holds it in a payload: no OK byte, no checksum, log_pos 0."""
    event = packet[1 : len(packet) - (4 if checksum else 0)]
    return event[:9] + struct.pack("<II", len(event), 0) + event[17:]
