"""Names for the target: clipped as PostgreSQL clips them (by bytes, never inside a character), and the names
it cannot hold told apart before anything is loaded."""

from __future__ import annotations

import pytest

from seam.core.errors import TargetError
from seam.core.identifiers import clipped, qi, quote, unfit_names


def test_clipped_counts_bytes_and_keeps_characters_whole():
    assert clipped("abc", 58) == "abc"
    assert clipped("é" * 30, 58) == "é" * 29  # 60 bytes; 58 would end inside the 30th
    assert clipped("a" + "é" * 30, 58) == "a" + "é" * 28
    assert len((clipped("€" * 30, 58) + "_pkey").encode()) <= 63


def test_unfit_names_names_the_first_problem():
    assert unfit_names([("table", "t"), ("column", "x" * 63), ("column", "é" * 31)]) is None
    long = unfit_names([("table", "t"), ("column", "é" * 32)])
    assert long is not None and "is 64 bytes" in long and "rename it at the source" in long
    assert "begins with _seam_" in (unfit_names([("column", "_seam_part")]) or "")
    assert unfit_names([("table", "_seam_part"), ("column", "_Seam_x")]) is None  # only columns meet Seam's


def test_quoting_doubles_the_quote_character():
    assert qi('a"b') == '"a""b"' and quote("c`d") == "`c``d`"
    with pytest.raises(TargetError):
        qi("x" * 64)
