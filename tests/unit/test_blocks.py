"""Blocks of snapshot rows (``seam.wire.boundary.blocks``): many records to a Kafka message, read back as the
same records in the same order, each block within its bounds."""

from __future__ import annotations

import random
import zlib

import pytest

from seam.wire import boundary
from seam.wire.boundary import BLOCK_BYTES, BLOCK_ROWS, FRAME_KEY, ROWS_KEY, block_records, blocks


@pytest.mark.parametrize("seed", range(20))
def test_blocks_carry_the_records_in_order_within_their_bounds(seed):
    r = random.Random(seed)
    sizes = [r.choice([1, 50, 700, 5_000, 300_000]) if r.random() < 0.1 else r.randrange(1, 900) for _ in range(5_000)]
    records = [bytes([65 + i % 26]) * n for i, n in enumerate(sizes)]
    messages = blocks(records)
    assert [rec for m in messages for rec in block_records(ROWS_KEY, m)] == records
    for m in messages:
        lines = m.split(b"\n")
        assert len(lines) <= BLOCK_ROWS
        assert len(m) <= BLOCK_BYTES or len(lines) == 1  # a record larger than a block goes alone


def test_a_block_is_full_before_the_next_begins():
    assert [len(m.split(b"\n")) for m in blocks([b"x"] * (2 * BLOCK_ROWS + 1))] == [BLOCK_ROWS, BLOCK_ROWS, 1]
    assert blocks([]) == []


def test_only_a_block_key_makes_a_block():
    assert block_records(ROWS_KEY, b"a\nb") == [b"a", b"b"]
    assert block_records(b"__seam_control__", b"a\nb") is None
    assert block_records(None, b"a\nb") is None
    assert block_records(ROWS_KEY, None) is None


@pytest.mark.parametrize("seed", range(20))
def test_the_compiled_framer_frames_what_python_frames(seed, monkeypatch):
    """``boundary.frame_blocks`` with ``seam.wire._frames`` and without: the same blocks and CRC sum, whose
    records are the rows' records."""
    assert boundary._frames is not None, "seam.wire._frames is not built: run `make setup` and read its warning"
    r = random.Random(seed)
    keyed = r.random() < 0.7
    head, middle, tail = b'{"v":1,"op":"r","key":', b',"before":null,"after":', b',"source":{"part":%d}}' % seed
    rows = []
    for i in range(r.randrange(0, 3_000)):
        after = b'{"id":%d,"t":"%s"}' % (i, b"x" * r.choice([0, 5, 300, 2_000, 300_000 if r.random() < 0.01 else 9]))
        rows.append((after, b'{"id":%d}' % i if keyed else None))
    compiled = boundary.frame_blocks(tuple(rows), keyed, head, middle, tail)  # the C client's fetchmany: a tuple
    assert boundary.frame_blocks(rows, keyed, head, middle, tail) == compiled
    monkeypatch.setattr(boundary, "_frames", None)
    assert boundary.frame_blocks(tuple(rows), keyed, head, middle, tail) == compiled
    records = [rec for m in compiled[0] for rec in block_records(FRAME_KEY, m)]
    assert records == [head + (k if keyed else a) + middle + a + tail for a, k in rows]
    assert compiled[1] == sum(map(zlib.crc32, records))
    assert all(len(m) <= BLOCK_BYTES or m.count(b"\n") == 1 for m in compiled[0])


def test_a_row_without_its_json_is_refused():
    with pytest.raises(TypeError):
        boundary.frame_blocks([(b"{}", None)], True, b"h", b"m", b"t")
    with pytest.raises(TypeError):
        boundary.frame_blocks([(None, b"{}")], False, b"h", b"m", b"t")
