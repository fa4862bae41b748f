"""How a comparison's fine first pass is pulled and shown: neighbouring ranges are pulled together while their
rows fit (a pull per 64-row range cost more than its rows), a keyless table's one by one; a report shows at
most ``REPORT_CELLS`` buckets, each group of neighbours as one cell that differs when one of its buckets does."""

from __future__ import annotations

from seam.validate.compare import REPORT_CELLS, _batches, _bucket_results, _Plan


def test_neighbouring_ranges_are_pulled_together_while_their_rows_fit():
    ranges = [(b, f"cond {b}", 40) for b in range(10)]
    batches = list(_batches(ranges, 100, keyed=True))
    assert [[b for b, _, _ in batch] for batch in batches] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    assert [len(batch) for batch in _batches([(0, "big", 900), (1, "small", 1)], 100, keyed=True)] == [1, 1]
    assert [len(batch) for batch in _batches(ranges, 10**9, keyed=False)] == [1] * 10


def test_a_report_shows_groups_of_neighbouring_buckets_and_a_group_differs_if_one_of_them_does():
    plan = _Plan("range", lo=1, width=64, buckets=REPORT_CELLS * 3)
    s_aggr = {b: (64, "x") for b in range(plan.buckets)}
    t_aggr = {**s_aggr, 7: (63, "y")}
    cells = _bucket_results(plan, s_aggr, t_aggr, flagged={7, 9000}, mismatched={7})
    assert len(cells) == REPORT_CELLS
    assert (cells[2].label, cells[2].source_rows, cells[2].target_rows, cells[2].state) == (
        "[385, 577)",
        192,
        191,
        "differs",
    )
    assert cells[3000].state == "rechecked" and {c.state for c in cells[:2] + cells[3:2999]} == {"equal"}
    assert sum(c.source_rows for c in cells) == 64 * plan.buckets


def test_a_plan_of_fewer_buckets_than_cells_shows_each():
    plan = _Plan("hash", buckets=10)
    cells = _bucket_results(plan, {b: (5, "x") for b in range(10)}, {b: (5, "x") for b in range(10)}, set(), set())
    assert [c.label for c in cells[:2]] == ["hash 0/10", "hash 1/10"] and len(cells) == 10
