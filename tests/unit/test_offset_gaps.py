"""The sink's offset-gap tracker (``seam.wire.offset_gaps``) on plain offsets: contiguous answers pass, a gap
is reported once, a gap met again at the same place is let through, and a read from an earlier offset forgets
nothing above it."""

from __future__ import annotations

from seam.wire.offset_gaps import OffsetGaps


class _M:
    def __init__(self, offset: int):
        self._offset = offset

    def offset(self) -> int:
        return self._offset


def _ms(*offsets: int) -> list:
    return [_M(o) for o in offsets]


def test_contiguous_answers_have_no_gap_from_where_reading_started():
    gaps = OffsetGaps()
    gaps.reading_from({"t": 10})
    assert gaps.new_gap("t", _ms(10, 11, 12)) is None
    assert gaps.new_gap("t", _ms(13)) is None
    assert gaps.new_gap("t", _ms(15, 16)) == (14, 14)  # between two answers


def test_a_gap_is_reported_once_then_let_through_when_read_again():
    gaps = OffsetGaps()
    gaps.reading_from({"t": 0})
    assert gaps.new_gap("t", _ms(0, 1, 5, 6, 9)) == (2, 4)
    gaps.reading_from({"t": 0})  # the sink reads again from the target's offset
    assert gaps.new_gap("t", _ms(0, 1, 5, 6, 9)) == (7, 8)  # the first is let through, the next is new
    gaps.reading_from({"t": 0})
    assert gaps.new_gap("t", _ms(0, 1, 5, 6, 9)) is None
    assert gaps.new_gap("t", _ms(10, 11)) is None


def test_a_topic_read_from_its_beginning_starts_at_its_first_message():
    gaps = OffsetGaps()
    gaps.reading_from({"t": -2, "u": 3})  # OFFSET_BEGINNING: the log's start is not known
    assert gaps.new_gap("t", _ms(7, 8)) is None
    assert gaps.new_gap("u", _ms(4)) == (3, 3)


def test_gaps_below_the_offset_read_from_are_forgotten():
    gaps = OffsetGaps()
    gaps.reading_from({"t": 0})
    assert gaps.new_gap("t", _ms(0, 2)) == (1, 1)
    gaps.reading_from({"t": 3})  # the target committed past it
    assert gaps._met["t"] == set()
