"""The compiled CRC-32 (``seam/wire/fast_crc32.h``, by carry-less multiplication, used by the tasks' framer and
the sink's stager for END's checksums) against zlib's: every length around its 16- and 64-byte steps, any
alignment, any starting value, and the bytes that break a careless fold (all zeros, all ones)."""

from __future__ import annotations

import random
import zlib

import pytest

from seam.wire import _frames


def test_every_short_length_and_alignment_matches_zlib():
    r = random.Random(7)
    data = r.randbytes(600)
    for length in range(300):
        for start in (0, 1, 7, 15):
            piece = data[start : start + length]
            for value in (0, 0xFFFFFFFF, r.getrandbits(32)):
                assert _frames.crc32(piece, value) == zlib.crc32(piece, value), (length, start, value)


@pytest.mark.parametrize("seed", range(5))
def test_long_pieces_match_zlib(seed):
    r = random.Random(seed)
    for _ in range(200):
        piece = r.randbytes(r.randrange(64, 20_000))
        value = r.getrandbits(32)
        assert _frames.crc32(piece, value) == zlib.crc32(piece, value)


@pytest.mark.parametrize("byte", [0x00, 0xFF, 0x80, 0x01])
def test_uniform_bytes_match_zlib(byte):
    for length in (63, 64, 65, 127, 128, 129, 4095, 4096, 4097, 1 << 20):
        piece = bytes([byte]) * length
        assert _frames.crc32(piece) == zlib.crc32(piece)


def test_a_crc_continued_over_pieces_is_the_crc_of_the_whole():
    r = random.Random(3)
    whole = r.randbytes(5_000)
    crc = 0
    for cut in range(0, 5_000, 333):
        crc = _frames.crc32(whole[cut : cut + 333], crc)
    assert crc == zlib.crc32(whole)
