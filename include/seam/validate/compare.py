"""The comparison of one table's two sides at one point: per key bucket, counts, checksums and column
checks computed in both databases at once; buckets that differ narrowed by bisection (16 key ranges at a
time) down to row-by-row comparison of canonical texts; a key changed after P compared with its image at
P; a keyless table compared as a multiset of whole rows.

Delivery guarantee: read-only on both sides.
"""

from __future__ import annotations

import collections
import hashlib
import json
import math
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from seam.core.pipeline import TableConfig
from seam.core.schema import TableSchema
from seam.validate.at_position import cursor_value, images_at, in_scope, window_bounds
from seam.validate.report import BucketResult, Difference, MetricResult, Report
from seam.validate.side import INTEGER, Side

METRICS = ("sum", "null_count")
SPLIT = 16  # key ranges a differing range is split into (bisection)
PULL_RANGES = 256  # the most key ranges one pull of rows joins
REPORT_CELLS = 4096  # the most buckets a report shows: a finer first pass is shown in groups of neighbours


def column_checks(table: TableConfig) -> dict[str, dict[str, dict]]:
    return dict(table.checks.get("columns") or {})


@dataclass
class _Plan:
    mode: str  # range | hash
    lo: int = 0
    width: int = 1
    buckets: int = 1
    digest: bool = False  # buckets checksummed as one digest of their rows' texts (``Side.digest_fits``)
    seconds: float = 0.0  # the first pass's

    def label(self, b: int, count: int = 1) -> str:
        """Buckets ``b`` to ``b + count - 1``, as a person reads them."""
        if self.mode == "hash":
            return f"hash {b}/{self.buckets}" if count == 1 else f"hash {b}-{b + count - 1}/{self.buckets}"
        return f"[{self.lo + b * self.width}, {self.lo + (b + count) * self.width})"


def compare(
    report: Report,
    source: Side,
    target: Side,
    schema: TableSchema,
    table: TableConfig,
    changes: Callable[[], list],
    cascaded: Callable[[list], set],
    window_mode: bool,
    *,
    limit: int,
    bucket_rows: int,
    max_buckets: int,
    pull_rows: int,
    say: Callable[[str], None],
) -> None:
    """Fill ``report`` with the comparison of ``source`` and ``target`` (steps 2 to 4 of
    ``seam.validate.validation``'s method). Its length: the steps in their order over the buckets they share
    (first pass, narrowing, rows, counts and metrics at P)."""
    metrics = [(c, m) for c, ms in column_checks(table).items() for m in ms if m in METRICS]
    # one pool per comparison: started for each range, its threads cost more than the range's rows (CPU time
    # of thread starts waiting for the GIL was 10 of 60 s comparing 60,000 rows scattered over 2,000,000)
    with ThreadPoolExecutor(2) as pool:

        def both(work: Callable[[Side, Any], Any], s_arg: Any = None, t_arg: Any = None) -> tuple[Any, Any]:
            s, t = pool.map(lambda pair: work(*pair), ((source, s_arg), (target, t_arg)))
            return s, t

        plan, s_aggr, t_aggr = _first_pass(both, source, target, schema, table, metrics, bucket_rows, max_buckets)
        say(
            f"{table.name}: first pass in {plan.seconds:.1f}s: {plan.buckets:,} bucket "
            f"{'digests' if plan.digest else 'checksums'} on each side "
            f"(the source as it is now; rows changed since the compared point are looked at next)"
        )
        differing = {b for b in set(s_aggr) | set(t_aggr) if s_aggr.get(b, (0, 0))[:2] != t_aggr.get(b, (0, 0))[:2]}
        at_p: dict[tuple[str, ...], dict | None] = {}
        if differing:
            # 3. keys changed after P, with their images at P
            since = changes()
            if since and not table.key:
                say(
                    f"{table.name}: keyless and changed {len(since):,} times since the target's position; "
                    "comparing whole rows, rolled back to that position"
                )
                return _compare_keyless(report, source, target, schema, since, limit)
            at_p = images_at(schema, table, since)
            # keys a foreign-key cascade changed after P: the binlog has no image of them, so the target's row
            # stands for the row at P (a delete or re-key above P would otherwise read as a difference)
            reached = sorted(cascaded(since) - at_p.keys())
            held = target.values_by_key(reached, in_scope=True)
            at_p.update((key, held.get(key)) for key in reached)
            report.changed_since, report.cascaded_since = len(at_p), len(reached)
        changed_buckets = collections.Counter(_bucket_of(plan, k) for k in at_p)
        flagged = sorted(differing | set(changed_buckets))
        # narrow flagged buckets down to ranges small enough to compare row by row (range mode: bisection)
        ranges: list[tuple[int, str, int]] = []  # (top-level bucket, SQL condition, rows)
        for b in flagged:
            rows = max(s_aggr.get(b, (0,))[0], t_aggr.get(b, (0,))[0])
            if plan.mode == "range":
                lo = plan.lo + b * plan.width
                ranges += [
                    (b, cond, n)
                    for cond, n in _narrow(
                        both, source, target, lo, lo + plan.width, rows, pull_rows, b in changed_buckets, plan.digest
                    )
                ]
            else:  # (pulled by bucket number: ``_pull_and_diff``)
                ranges.append((b, "", rows))
        q_rows: dict[tuple[str, ...], tuple] = {}
        differences, bucket_of = _pull_and_diff(
            both, source, target, schema, table, plan, ranges, pull_rows, at_p, q_rows
        )
    mismatched_buckets = set(bucket_of.values())
    # keys changed after P: compare the target's row with the key's image at P (normalised values)
    soft = bool(table.soft_delete)  # flagged rows are kept out of the target in every mode
    if at_p:
        keys = list(at_p)
        t_vals = target.values_by_key(keys, in_scope=True)
        for key in keys:
            expected = at_p[key] if in_scope(schema, table, source.scope, at_p[key], soft) else None
            actual = t_vals.get(key)
            d = _difference(schema, table, key, expected, actual)
            if d is not None:
                differences.append(d)
                mismatched_buckets.add(_bucket_of(plan, key))
                bucket_of[id(d)] = _bucket_of(plan, key)
    moved: list[Difference] = []
    if window_mode:
        moved = _moved_on(source, schema, table, differences)
        report.changed_since += len(moved)
        differences = [d for d in differences if d not in moved]
        mismatched_buckets = {bucket_of[id(d)] for d in differences}  # the rest are rechecked, not differing
    # totals and the (limited) list
    report.missing = sum(d.kind == "missing" for d in differences)
    report.extra = sum(d.kind == "extra" for d in differences)
    report.different = sum(d.kind == "different" for d in differences)
    report.differences = differences[:limit]
    s_count = sum(v[0] for v in s_aggr.values())
    # the source's count and metrics at P: take the changed keys' rows at Q out, put their images at P in
    q_changed = {k: v for k, v in q_rows.items() if k in at_p}
    p_present = {k: v for k, v in at_p.items() if in_scope(schema, table, source.scope, v, soft)}
    report.source_rows = s_count - len(q_changed) + len(p_present)
    # a row that moved past the window is in the target's window still, with its old values: not counted
    report.target_rows = sum(v[0] for v in t_aggr.values()) - len(moved)
    report.metrics = _metrics(schema, table, metrics, s_aggr, t_aggr, q_changed, p_present, [d.target for d in moved])
    report.buckets = _bucket_results(plan, s_aggr, t_aggr, set(flagged), mismatched_buckets)


def _first_pass(both, source: Side, target: Side, schema, table, metrics, bucket_rows: int, max_buckets: int):
    """Step 2: the plan of buckets, and each side's (rows, checksum, *metrics) per bucket."""
    if table.key and schema.column(table.key[0]).data_type in INTEGER:
        (slo, shi), (tlo, thi) = both(lambda side, _: side.key_bounds())
        los = [v for v in (slo, tlo) if v is not None]
        his = [v for v in (shi, thi) if v is not None]
        lo, hi = (min(los), max(his)) if los else (0, 0)
        # as many buckets as the key's range holds runs of ``bucket_rows`` values, not the rows: a few keys far
        # from the rest (ids + 10,000,000) made every bucket five times wider, and each difference that much dearer
        n = max(1, min(max_buckets, math.ceil((hi - lo + 1) / bucket_rows)))
        plan = _Plan("range", lo=lo, width=max(1, math.ceil((hi - lo + 1) / n)))
        plan.buckets = math.ceil((hi - lo + 1) / plan.width)
        plan.digest = source.digest_fits(plan.width)
        exprs = (source.bucket_of_range(lo, plan.width), target.bucket_of_range(lo, plan.width))
    else:
        plan = _Plan("hash", buckets=max(1, min(max_buckets, math.ceil(_estimated_rows(source) / bucket_rows))))
        exprs = (source.bucket_of_hash(plan.buckets), target.bucket_of_hash(plan.buckets))
    t0 = time.monotonic()
    s_aggr, t_aggr = both(lambda side, expr: side.aggregate(expr, metrics, digest=plan.digest), *exprs)
    plan.seconds = time.monotonic() - t0
    return plan, s_aggr, t_aggr


def _pull_and_diff(both, source, target, schema, table, plan, ranges, pull_rows, at_p, q_rows):
    """Step 3's rows: the narrowed ranges' rows pulled from both sides, neighbouring ranges joined in one pull
    while their rows fit ``pull_rows`` (a pull per range of 64 rows cost more than its rows), and compared;
    the differences, and the top-level bucket of each (by ``id``)."""
    differences: list[Difference] = []
    bucket_of: dict[int, int] = {}
    # a hash bucket's rows are found by a scan of the whole table: fewer, larger pulls
    per_pull = pull_rows if plan.mode == "range" else pull_rows * 16
    for batch in _batches(ranges, per_pull, keyed=bool(table.key)):
        if plan.mode == "range":
            scond = " OR ".join(f"({cond})" for _, cond, _ in batch)
            tcond = scond.replace(source.col(table.key[0]), target.col(table.key[0]))
        else:
            ids = ", ".join(str(b) for b, _, _ in batch)
            scond = f"{source.bucket_of_hash(plan.buckets)} IN ({ids})"
            tcond = f"{target.bucket_of_hash(plan.buckets)} IN ({ids})"
        if plan.mode == "range" and len(table.key) == 1 and not source.documents:
            s_rows, t_rows = _rows_not_alike(both, source, target, scond, tcond, at_p)
        else:  # a key of more columns may hold any text; documents the servers print apart are compared by value
            s_rows, t_rows = both(lambda side, cond: side.texts(cond), scond, tcond)
        for d in _diff_rows(schema, table, s_rows, t_rows, at_p, q_rows):
            differences.append(d)
            bucket_of[id(d)] = batch[0][0] if len(batch) == 1 else _bucket_of(plan, tuple(d.key.values()))
    return differences, bucket_of


def _rows_not_alike(both, source: Side, target: Side, scond: str, tcond: str, at_p: dict):
    """Both sides' texts of the rows whose digest differs (or is on one side only) among those matching the
    conditions, and of the keys changed after P (their rows at Q count): one key-and-digest pair per row comes
    packed from each server, then the texts of those few rows."""
    s_dig, t_dig = both(lambda side, cond: side.row_digests(cond), scond, tcond)
    keys = [int(k) for k in s_dig.keys() | t_dig.keys() if s_dig.get(k) != t_dig.get(k) or (k,) in at_p]
    s_rows: list = []
    t_rows: list = []
    for i in range(0, len(keys), 1000):
        listed = ", ".join(map(str, keys[i : i + 1000]))
        s, t = both(lambda side, ids: side.texts(f"{side.col(side.key_cols[0].name)} IN ({ids})"), listed, listed)
        s_rows += s
        t_rows += t
    return s_rows, t_rows


def _batches(ranges: list[tuple[int, str, int]], pull_rows: int, keyed: bool):
    """``ranges`` in runs whose rows fit ``pull_rows`` (at most ``PULL_RANGES`` ranges each); a keyless table's
    one by one (its differences have no key that tells their bucket)."""
    batch: list[tuple[int, str, int]] = []
    rows = 0
    for r in ranges:
        if batch and (not keyed or rows + r[2] > pull_rows or len(batch) >= PULL_RANGES):
            yield batch
            batch, rows = [], 0
        batch.append(r)
        rows += r[2]
    if batch:
        yield batch


def _bucket_results(plan: _Plan, s_aggr, t_aggr, flagged: set[int], mismatched: set[int]) -> list[BucketResult]:
    """The report's buckets: one per bucket, or per group of neighbours when there are more than
    ``REPORT_CELLS`` (a group differs if one of its buckets does)."""
    group = max(1, math.ceil(plan.buckets / REPORT_CELLS))
    rank = {"equal": 0, "rechecked": 1, "differs": 2}
    cells: dict[int, list] = {}
    for b in sorted(set(s_aggr) | set(t_aggr) | flagged):
        state = "differs" if b in mismatched else "rechecked" if b in flagged else "equal"
        cell = cells.setdefault(b // group, [0, 0, "equal"])
        cell[0] += s_aggr.get(b, (0,))[0]
        cell[1] += t_aggr.get(b, (0,))[0]
        cell[2] = max(cell[2], state, key=rank.__getitem__)
    return [BucketResult(plan.label(c * group, group), s, t, state) for c, (s, t, state) in cells.items()]


def _compare_keyless(report: Report, source: Side, target: Side, schema: TableSchema, changes, limit: int) -> None:
    def canon(image: dict) -> str:
        return json.dumps(image, sort_keys=True, default=str)

    with ThreadPoolExecutor(2) as pool:
        s_rows, t_rows = pool.map(lambda side: side.all_values(), (source, target))
    at_p = collections.Counter(canon(r) for r in s_rows)
    for before, after in reversed(changes):  # undo, newest first
        if after is not None:
            at_p[canon(after)] -= 1
        if before is not None:
            at_p[canon(before)] += 1
    at_p = +at_p
    now = collections.Counter(canon(r) for r in t_rows)
    differences = [Difference("missing", json.loads(r)) for r, n in (at_p - now).items() for _ in range(n)]
    differences += [Difference("extra", json.loads(r)) for r, n in (now - at_p).items() for _ in range(n)]
    report.source_rows, report.target_rows = sum(at_p.values()), len(t_rows)
    report.changed_since = len(changes)
    report.missing = sum(d.kind == "missing" for d in differences)
    report.extra = len(differences) - report.missing
    report.differences = differences[:limit]
    report.buckets = [
        BucketResult("whole table", report.source_rows, report.target_rows, "differs" if differences else "rechecked")
    ]


def _estimated_rows(side: Side) -> int:
    rows = side.run(
        "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
        (side.schema.db, side.schema.table),
    )
    return max(1, int(rows[0][0] or 1)) if rows else 1


def _bucket_of(plan: _Plan, key: tuple[str, ...]) -> int:
    if plan.mode == "range":
        return (int(key[0]) - plan.lo) // plan.width
    text = "\x1f".join("\x1e" if k is None else k for k in key)
    return int(hashlib.md5(text.encode()).hexdigest()[16:23], 16) % plan.buckets


def _narrow(
    both, source: Side, target: Side, lo: int, hi: int, rows: int, pull_rows: int, keep_all: bool, digest: bool
) -> list[tuple[str, int]]:
    """Key-range conditions covering the differences in [lo, hi), with their rows: split by 16 while a range is
    too big to pull (its parts checksummed as the top-level buckets were: a narrower range fits a digest too)."""
    k_src = source.col(source.key_cols[0].name)
    cond_s = f"{k_src} >= {lo} AND {k_src} < {hi}"
    if rows <= pull_rows or hi - lo <= SPLIT or keep_all:
        return [(cond_s, rows)]
    width = math.ceil((hi - lo) / SPLIT)
    cond_t = cond_s.replace(k_src, target.col(target.key_cols[0].name))
    s, t = both(lambda side, cond: side.aggregate(side.bucket_of_range(lo, width), [], cond, digest), cond_s, cond_t)
    out = []
    for b in sorted(set(s) | set(t)):
        if s.get(b, (0, 0))[:2] != t.get(b, (0, 0))[:2]:
            sub_lo = lo + b * width
            sub_rows = max(s.get(b, (0,))[0], t.get(b, (0,))[0])
            out += _narrow(both, source, target, sub_lo, min(hi, sub_lo + width), sub_rows, pull_rows, False, digest)
    return out


def _diff_rows(schema: TableSchema, table: TableConfig, s_rows, t_rows, at_p: dict, q_rows: dict) -> list[Difference]:
    """Row-by-row comparison of canonical texts; keys changed after P are left to the caller."""
    names = schema.names
    if not table.key:  # keyless: multisets of whole rows
        s_count = collections.Counter(r for _, r in s_rows)
        t_count = collections.Counter(r for _, r in t_rows)
        out = [Difference("missing", dict(zip(names, r))) for r, n in (s_count - t_count).items() for _ in range(n)]
        return out + [
            Difference("extra", dict(zip(names, r))) for r, n in (t_count - s_count).items() for _ in range(n)
        ]
    s_map = dict(s_rows)
    t_map = dict(t_rows)
    for key, row in s_map.items():
        if key in at_p:
            q_rows[key] = row
    out = []
    differing = [k for k in s_map.keys() | t_map.keys() if k not in at_p and s_map.get(k) != t_map.get(k)]
    for key in sorted(differing, key=_sort_key):  # (sorting every pulled key was a fifth of a dense comparison)
        s, t = s_map.get(key), t_map.get(key)
        key_dict = dict(zip(table.key, key))
        if t is None:
            out.append(Difference("missing", key_dict, source=dict(zip(names, s or ()))))
        elif s is None:
            out.append(Difference("extra", key_dict, target=dict(zip(names, t))))
        else:
            cols = tuple(n for n, a, b in zip(names, s, t) if a != b)
            out.append(
                Difference(
                    "different",
                    key_dict,
                    cols,
                    {c: s[names.index(c)] for c in cols},
                    {c: t[names.index(c)] for c in cols},
                )
            )
    return out


_INTEGER = re.compile(r"-?[0-9]+")


def _sort_key(key: tuple) -> tuple:
    """Integers in numeric order, any other text after them (a key such as '--1' or '²' is text)."""
    return tuple((0, int(k), "") if k is not None and _INTEGER.fullmatch(k) else (1, 0, k or "") for k in key)


def _difference(
    schema: TableSchema, table: TableConfig, key: tuple, expected: dict | None, actual: dict | None
) -> Difference | None:
    key_dict = dict(zip(table.key, key))
    if expected is None and actual is None:
        return None
    if actual is None:
        return Difference("missing", key_dict, source=expected)
    if expected is None:
        return Difference("extra", key_dict, target=actual)
    cols = tuple(c for c in schema.names if expected[c] != actual[c])
    if not cols:
        return None
    return Difference("different", key_dict, cols, {c: expected[c] for c in cols}, {c: actual[c] for c in cols})


def _moved_on(source: Side, schema: TableSchema, table: TableConfig, differences: list[Difference]) -> list[Difference]:
    """Window mode: target rows whose source row now has a cursor past the compared window changed after
    its window was loaded; the next window brings them. Those are counted, not reported."""
    suspects = [d for d in differences if d.kind == "extra"]
    if not suspects:
        return []
    keys = [tuple(d.key[k] for k in table.key) for d in suspects]
    now = source.values_by_key(keys, in_scope=False)
    column = schema.column(table.cursor_column)
    window = source.scope.resolved
    assert window is not None  # only a window can leave rows its cursor says were loaded later
    end = window_bounds(column, window)[1]
    return [
        d
        for d, key in zip(suspects, keys)
        if now.get(key) is not None
        and now[key][table.cursor_column] is not None  # a NULL cursor is in no window: a real difference
        and cursor_value(column, now[key][table.cursor_column]) > end
    ]


def _metrics(schema, table, metrics, s_aggr, t_aggr, q_changed, p_present, t_moved) -> list[MetricResult]:
    out = []
    names = schema.names
    for i, (column, metric) in enumerate(metrics):

        def total(aggr, i=i):
            return sum((Decimal(str(v[2 + i])) for v in aggr.values() if v[2 + i] is not None), Decimal(0))

        s, t = total(s_aggr), total(t_aggr)
        idx = names.index(column)
        s -= sum(_measure(metric, row[idx]) for row in q_changed.values())  # texts at Q out
        t -= sum(_measure(metric, row[column]) for row in t_moved)  # target rows that moved past the window out
        s += sum(_measure(metric, image[column]) for image in p_present.values())  # images at P in
        expected = column_checks(table)[column][metric].get("equal_to")
        ok = s == t and (expected is None or t == Decimal(str(expected)))
        out.append(MetricResult(column, metric, _num(s), _num(t), None if expected is None else str(expected), ok))
    return out


def _measure(metric: str, value: Any) -> Decimal:
    """One row's contribution to a column check."""
    if metric == "sum":
        return Decimal(str(value)) if value is not None else Decimal(0)
    return Decimal(value is None)


def _num(value: Decimal) -> str:
    return format(value.normalize(), "f") if value == value.to_integral() else str(value)
