"""Blocks of snapshot rows (``seam.wire.boundary.blocks``): many records to a Kafka message, read back as the
same records in the same order, each block within its bounds."""

from __future__ import annotations

import random

import pytest

from seam.wire.boundary import BLOCK_BYTES, BLOCK_ROWS, ROWS_KEY, block_records, blocks


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
