"""MySQL's compressed transactions (``seam.source.payload``) against payload events built after MySQL's format
(``tests.support.mysql_payload``): the events come back whole, in order, at the payload's end, and a payload
that does not decode stops the reader with one line, never a skip. The stack test
``test_row_decoder.py::test_mysql_compressed_transactions_read_as_the_plain_ones`` reads real transactions."""

from __future__ import annotations

import random
import struct

import pytest

from seam.source.inflate import UnreadableBinlog
from seam.source.payload import inner_events
from tests.support.mysql_payload import NONE, ZSTD, field, length_encoded, payload_packet


def _event(kind: int, body: bytes, log_pos: int = 0) -> bytes:
    return struct.pack("<IBIIIH", 1_700_000_000, kind, 7, 19 + len(body), log_pos, 0) + body


def _read(packet: bytes, checksum: bool) -> list[bytes]:
    end = struct.unpack_from("<I", packet, 10)[0] + 1 - (4 if checksum else 0)
    return list(inner_events(packet, 20, end, checksum, "binlog.000001:4"))


@pytest.mark.parametrize("compression", [ZSTD, NONE])
@pytest.mark.parametrize("checksum", [True, False])
def test_inner_events_come_back_as_plain_packets_at_the_payload_end(compression, checksum):
    rng = random.Random(34)
    events = [
        _event(rng.choice([0x02, 0x13, 0x1E, 0x1F, 0x20, 0x10]), rng.randbytes(rng.randrange(0, 3000)))
        for _ in range(400)
    ]
    packet = payload_packet(events, 987_654, 1_700_000_001, 7, checksum, compression)
    got = _read(packet, checksum)
    assert len(got) == len(events)
    trailer = b"\0\0\0\0" if checksum else b""
    for mine, event in zip(got, events):
        size, log_pos = struct.unpack_from("<II", mine, 10)
        assert mine[0] == 0 and log_pos == 987_654 and size == len(event) + len(trailer) == len(mine) - 1
        assert mine[1:10] == event[:9] and mine[18:] == event[17:] + trailer


def test_header_fields_in_any_order_and_unknown_ones_are_passed_over():
    events = [_event(0x10, b"\x01" * 8), _event(0x02, b"q" * 300)]
    raw = b"".join(events)
    body = field(3, len(raw)) + field(9, 12345) + field(1, len(raw)) + field(2, NONE) + length_encoded(0) + raw
    packet = b"\0" + struct.pack("<IBIIIH", 0, 0x28, 7, 19 + len(body), 500, 0) + body
    assert [p[18:] for p in _read(packet, False)] == [e[17:] for e in events]


def test_a_large_payload_size_is_length_encoded():
    assert length_encoded(300) == b"\xfc\x2c\x01" and length_encoded(70_000)[0] == 0xFD
    events = [_event(0x1E, bytes(70_000))]
    assert len(_read(payload_packet(events, 4, 0, 7, False, NONE), False)) == 1


def _broken(body: bytes) -> bytes:
    return b"\0" + struct.pack("<IBIIIH", 0, 0x28, 7, 19 + len(body), 500, 0) + body


@pytest.mark.parametrize(
    "body, said",
    [
        (field(2, 1) + field(1, 3) + length_encoded(0) + b"abc", "uses compression 1, which Seam does not know"),
        (field(2, NONE) + field(1, 99) + length_encoded(0) + b"abc", "says 99 bytes and holds 3"),
        (field(2, NONE) + field(1, 30) + length_encoded(0) + _event(0x10, b"x" * 20)[:30], "ends inside an event"),
        (field(2, ZSTD) + field(1, 5) + length_encoded(0) + b"hello", "does not decompress"),
        (field(2, NONE) + field(1, 3), "has no end to its header"),
        (
            field(2, NONE) + field(3, 5) + length_encoded(0) + _event(0x10, b""),
            "says 5 bytes uncompressed and holds 19",
        ),
    ],
)
def test_a_payload_that_does_not_decode_stops_the_reader_naming_where(body, said):
    with pytest.raises(UnreadableBinlog, match=said) as raised:
        _read(_broken(body), False)
    assert "binlog.000001:4" in str(raised.value)
