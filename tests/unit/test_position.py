"""Binlog positions order by file number, then event end, then row; ``after`` compares events only. The fast
paths for positions in one file must agree with the ordering by (file number, pos, row) everywhere."""

from __future__ import annotations

import random

from seam.core.position import THROUGH, Position


def test_files_order_by_number_not_by_name():
    assert Position("mysql-bin.000009", 900) < Position("mysql-bin.000010", 4)
    assert Position("mysql-bin.999999", 4) < Position("mysql-bin.1000000", 4)  # the name sorts the other way
    assert Position("mysql-bin.000010", 4).after(Position("mysql-bin.000009", 900))


def test_after_compares_events_and_a_snapshot_covers_its_event():
    snapshot = Position.through("b.000002", 500)
    assert not Position("b.000002", 500, 3).after(snapshot)  # a row of the snapshot's last event
    assert Position("b.000002", 501).after(snapshot)
    assert Position("b.000002", 500, 2) < snapshot  # rows of that event sort before THROUGH


def test_ordering_agrees_with_the_reference_on_random_positions():
    rng = random.Random(7)
    files = ["b.000001", "b.000002", "b.000010", "b.000100"]
    points = [Position(rng.choice(files), rng.randint(4, 40), rng.choice([0, 1, 2, THROUGH])) for _ in range(400)]

    def key(p: Position) -> tuple[int, int, int]:
        return (int(p.file.rsplit(".", 1)[1]), p.pos, p.row)

    for a, b in zip(points, points[1:] + points[:1]):
        assert (a < b) == (key(a) < key(b)), (a, b)
        assert (a <= b) == (key(a) <= key(b)), (a, b)
        assert a.after(b) == (key(a)[:2] > key(b)[:2]), (a, b)
    assert sorted(points, key=key) == sorted(points)
