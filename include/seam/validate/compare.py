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


def column_checks(table: TableConfig) -> dict[str, dict[str, dict]]:
    return dict(table.checks.get("columns") or {})


@dataclass
class _Plan:
    mode: str  # range | hash
    lo: int = 0
    width: int = 1
    buckets: int = 1
    digest: bool = False  # buckets checksummed as one digest of their rows' texts (``Side.digest_fits``)

    def label(self, b: int) -> str:
        if self.mode == "hash":
            return f"hash {b}/{self.buckets}"
        return f"[{self.lo + b * self.width}, {self.lo + (b + 1) * self.width})"


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
    ranged = bool(table.key) and schema.column(table.key[0]).data_type in INTEGER
    with ThreadPoolExecutor(2) as pool:
        if ranged:
            (slo, shi), (tlo, thi) = pool.map(lambda side: side.key_bounds(), (source, target))
            los = [v for v in (slo, tlo) if v is not None]
            his = [v for v in (shi, thi) if v is not None]
            lo, hi = (min(los), max(his)) if los else (0, 0)
            est = _estimated_rows(source)
            n = max(1, min(max_buckets, math.ceil(min(est, hi - lo + 1) / bucket_rows)))
            plan = _Plan("range", lo=lo, width=max(1, math.ceil((hi - lo + 1) / n)))
            plan.buckets = math.ceil((hi - lo + 1) / plan.width)
            plan.digest = source.digest_fits(plan.width)
            exprs = (source.bucket_of_range(lo, plan.width), target.bucket_of_range(lo, plan.width))
        else:
            plan = _Plan("hash", buckets=max(1, min(max_buckets, math.ceil(_estimated_rows(source) / bucket_rows))))
            exprs = (source.bucket_of_hash(plan.buckets), target.bucket_of_hash(plan.buckets))
        t0 = time.monotonic()
        s_aggr, t_aggr = pool.map(
            lambda pair: pair[0].aggregate(pair[1], metrics, digest=plan.digest), zip((source, target), exprs)
        )
    say(
        f"{table.name}: first pass in {time.monotonic() - t0:.1f}s: {plan.buckets:,} bucket "
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
    ranges: list[tuple[int, str]] = []  # (top-level bucket, SQL condition)
    for b in flagged:
        rows = max(s_aggr.get(b, (0,))[0], t_aggr.get(b, (0,))[0])
        if plan.mode == "range":
            lo = plan.lo + b * plan.width
            ranges += [
                (b, cond)
                for cond in _narrow(
                    source, target, lo, lo + plan.width, rows, pull_rows, b in changed_buckets, plan.digest
                )
            ]
        else:
            ranges.append((b, f"{source.bucket_of_hash(plan.buckets)} = {b}"))
    mismatched_buckets: set[int] = set()
    differences: list[Difference] = []
    q_rows: dict[tuple[str, ...], tuple] = {}
    bucket_of: dict[int, int] = {}  # id(difference) -> its bucket
    for b, cond in ranges:
        tcond = (
            cond.replace(source.col(table.key[0]), target.col(table.key[0]))
            if plan.mode == "range"
            else f"{target.bucket_of_hash(plan.buckets)} = {b}"
        )
        with ThreadPoolExecutor(2) as pool:
            s_rows, t_rows = pool.map(lambda pair: pair[0].texts(pair[1]), ((source, cond), (target, tcond)))
        found = _diff_rows(schema, table, s_rows, t_rows, at_p, q_rows)
        if found:
            mismatched_buckets.add(b)
            differences += found
            bucket_of.update((id(d), b) for d in found)
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
    report.buckets = [
        BucketResult(
            plan.label(b),
            s_aggr.get(b, (0,))[0],
            t_aggr.get(b, (0,))[0],
            "differs" if b in mismatched_buckets else "rechecked" if b in flagged else "equal",
        )
        for b in sorted(set(s_aggr) | set(t_aggr) | set(flagged))
    ]


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
    source: Side, target: Side, lo: int, hi: int, rows: int, pull_rows: int, keep_all: bool, digest: bool
) -> list[str]:
    """Key-range conditions covering the differences in [lo, hi): split by 16 while a range is too big to pull
    (its parts checksummed as the top-level buckets were: a narrower range fits a digest too)."""
    k_src = source.col(source.key_cols[0].name)
    if rows <= pull_rows or hi - lo <= SPLIT or keep_all:
        return [f"{k_src} >= {lo} AND {k_src} < {hi}"]
    width = math.ceil((hi - lo) / SPLIT)
    cond_s = f"{k_src} >= {lo} AND {k_src} < {hi}"
    cond_t = cond_s.replace(k_src, target.col(target.key_cols[0].name))
    with ThreadPoolExecutor(2) as pool:
        s, t = pool.map(
            lambda pair: pair[0].aggregate(pair[0].bucket_of_range(lo, width), [], pair[1], digest),
            ((source, cond_s), (target, cond_t)),
        )
    out = []
    for b in sorted(set(s) | set(t)):
        if s.get(b, (0, 0))[:2] != t.get(b, (0, 0))[:2]:
            sub_lo = lo + b * width
            out += _narrow(
                source,
                target,
                sub_lo,
                min(hi, sub_lo + width),
                max(s.get(b, (0,))[0], t.get(b, (0,))[0]),
                pull_rows,
                False,
                digest,
            )
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
    for key in sorted(set(s_map) | set(t_map), key=_sort_key):
        if key in at_p:
            continue
        s, t = s_map.get(key), t_map.get(key)
        key_dict = dict(zip(table.key, key))
        if t is None:
            out.append(Difference("missing", key_dict, source=dict(zip(names, s or ()))))
        elif s is None:
            out.append(Difference("extra", key_dict, target=dict(zip(names, t))))
        elif s != t:
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
