"""A validation's report: the verdict, the counts, the differing rows (up to a limit, with exact totals), the
buckets checked and the column checks; as one line, as text, as a dict, and as an HTML page with a picture of
the buckets. Delivery guarantee: none (values and their renderings).
"""

from __future__ import annotations

import collections
import html
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from seam.config import state_dir
from seam.core.position import Position


def report_folder(report_dir: str | os.PathLike | None = None) -> Path:
    """Where HTML reports are written (and served from, ``seam_airflow.reports``): ``report_dir``, else
    ``SEAM_REPORT_DIR``, else ``reports`` in the state folder."""
    return Path(report_dir or os.environ.get("SEAM_REPORT_DIR") or state_dir() / "reports")


@dataclass(frozen=True)
class Difference:
    kind: str  # missing (in target) | extra (in target) | different
    key: dict[str, Any]
    columns: tuple[str, ...] = ()  # different: the columns that differ
    source: dict[str, Any] | None = None
    target: dict[str, Any] | None = None


@dataclass(frozen=True)
class BucketResult:
    label: str
    source_rows: int
    target_rows: int
    state: str  # equal | rechecked (compared row by row, equal) | differs


@dataclass(frozen=True)
class MetricResult:
    column: str
    metric: str
    source: str
    target: str
    expected: str | None
    ok: bool


@dataclass
class Report:
    pipeline: str
    table: str
    scope: str
    mode: str  # position | window
    target_position: str | None
    source_position: str | None
    source_rows: int = 0
    target_rows: int = 0
    missing: int = 0
    extra: int = 0
    different: int = 0
    changed_since: int = 0  # keys changed after P (compared at P), or moved past the watermark
    cascaded_since: int = 0  # of them, keys a foreign-key cascade changed (taken as the target has them)
    differences: list[Difference] = field(default_factory=list)
    buckets: list[BucketResult] = field(default_factory=list)
    metrics: list[MetricResult] = field(default_factory=list)
    checks: tuple[str, ...] = ("count", "checksum")
    seconds: float = 0.0
    started: str = ""
    limit: int = 50
    html: str | None = None
    stale: str | None = None  # why the target is behind its source (a stopped or lagging stream)
    unchecked: str | None = None  # "not loaded" or "error": the table could not be compared ...
    problem: str | None = None  # ... and why
    compared_at: Position | None = None  # the position both sides were compared at (position mode)

    @property
    def verdict(self) -> str:
        """equal | mismatch | stale (equal at P, but P is behind) | not loaded | error."""
        if self.unchecked:
            return self.unchecked
        bad = (
            ((self.missing or self.extra or self.different) if "checksum" in self.checks else 0)
            or ("count" in self.checks and self.source_rows != self.target_rows)
            or any(not m.ok for m in self.metrics)
        )
        return "mismatch" if bad else "stale" if self.stale else "equal"

    def summary(self) -> str:
        head = f"{self.table}: {self.verdict.upper()}"
        if self.unchecked:
            return f"{head}: {self.problem}"
        at = f"at {self.target_position}" if self.mode == "position" else "up to the watermark"
        text = (
            f"{head}: {at}, source {self.source_rows:,} rows, target {self.target_rows:,} rows; {self.missing:,} "
            f"missing in target, {self.extra:,} extra in target, {self.different:,} with different values"
        )
        failed = [f"{m.metric}({m.column}) source {m.source} target {m.target}" for m in self.metrics if not m.ok]
        return (
            text
            + ("; failed checks: " + ", ".join(failed) if failed else "")
            + (f"; STALE: {self.stale}" if self.stale and self.verdict == "stale" else "")
        )

    def cascaded_note(self) -> str:
        return (
            f"{self.cascaded_since:,} of them a foreign-key cascade changed, and the binlog holds no image of those: "
            "they count as the target has them (validate again once the target has applied the cascade to "
            "compare them)"
        )

    def to_text(self) -> str:
        if self.unchecked:
            return self.summary()
        rechecked = sum(b.state == "rechecked" for b in self.buckets)
        differing = sum(b.state == "differs" for b in self.buckets)
        # the counts are the source AT the compared point (changes after it rolled back), as the target is
        lines = [
            self.summary(),
            f"  scope: {self.scope}; source snapshot {self.source_position}; {len(self.buckets):,} buckets: "
            f"{len(self.buckets) - rechecked - differing:,} equal by checksum"
            + (
                f", {rechecked:,} equal after a row-by-row look (source changes since the compared point)"
                if rechecked
                else ""
            )
            + (f", {differing:,} holding the differences below" if differing else "")
            + f"; {self.seconds:.2f}s ({self.source_rows / max(self.seconds, 1e-9):,.0f} rows/s)",
        ]
        if self.changed_since:
            lines.append(
                f"  {self.changed_since:,} keys changed on the source after that point were compared as they were then"
            )
        if self.cascaded_since:
            lines.append(f"  {self.cascaded_note()}")
        for m in self.metrics:
            lines.append(
                f"  check {m.metric}({m.column}): source {m.source}, target {m.target}"
                + (f", expected {m.expected}" if m.expected is not None else "")
                + ("" if m.ok else "  FAILED")
            )
        for d in self.differences:
            key = ", ".join(f"{k}={v}" for k, v in d.key.items())
            if d.kind == "different":
                cols = "; ".join(
                    f"{c}: source {_short((d.source or {}).get(c))} target {_short((d.target or {}).get(c))}"
                    for c in d.columns
                )
                lines.append(f"  different  {key}: {cols}")
            else:
                lines.append(f"  {d.kind:10} {key}")
        shown = len(self.differences)
        total = self.missing + self.extra + self.different
        if total > shown:
            lines.append(f"  ... {total - shown:,} more not shown (limit {self.limit})")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        out = asdict(self)
        out["verdict"] = self.verdict
        out["summary"] = self.summary()
        return out

    def to_html(self) -> str:
        return _html(self)


def _short(value: Any, width: int = 60) -> str:
    text = "NULL" if value is None else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _html(report: Report) -> str:
    colors = {"equal": "#3a9d5d", "rechecked": "#e0a526", "differs": "#d64545"}
    cells, per_row, size = report.buckets, 64, 9
    rows_n = max(1, math.ceil(len(cells) / per_row))
    rects = "".join(
        f'<rect x="{(i % per_row) * (size + 1)}" y="{(i // per_row) * (size + 1)}" width="{size}" height="{size}" '
        f'fill="{colors[b.state]}"><title>{html.escape(b.label)}: source {b.source_rows}, target {b.target_rows}, '
        f"{b.state}</title></rect>"
        for i, b in enumerate(cells)
    )
    counts = collections.Counter(b.state for b in cells)
    legend = " ".join(
        f'<span style="color:{colors[s]}">&#9632;</span> {s} {counts.get(s, 0):,}'
        for s in ("equal", "rechecked", "differs")
    )
    diff_rows = "".join(
        f"<tr><td>{d.kind}</td><td>{html.escape(json.dumps(d.key, default=str, ensure_ascii=False))}</td>"
        f"<td>{html.escape(', '.join(d.columns))}</td>"
        f"<td>{html.escape(json.dumps(d.source, default=str, ensure_ascii=False) if d.source else '')}</td>"
        f"<td>{html.escape(json.dumps(d.target, default=str, ensure_ascii=False) if d.target else '')}</td></tr>"
        for d in report.differences
    )
    metric_rows = "".join(
        f"<tr><td>{m.metric}({html.escape(m.column)})</td><td>{m.source}</td><td>{m.target}</td>"
        f"<td>{m.expected or ''}</td><td>{'ok' if m.ok else 'FAILED'}</td></tr>"
        for m in report.metrics
    )
    cascaded = html.escape(report.cascaded_note()) if report.cascaded_since else ""
    verdict_color = {"equal": "#3a9d5d", "mismatch": "#d64545", "stale": "#e0a526"}[report.verdict]
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Seam validation {html.escape(report.table)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 6px;font-size:13px;text-align:left}}</style></head><body>
<h1>{html.escape(report.table)}: <span style="color:{verdict_color}">{report.verdict.upper()}</span></h1>
<p>{html.escape(report.summary())}</p>
<p>Scope: {html.escape(report.scope)}. Compared at {html.escape(report.target_position or "the watermark")} (source snapshot
{html.escape(report.source_position or "?")}); {report.changed_since:,} keys changed since were compared as they were then. {cascaded}
Pipeline {html.escape(report.pipeline)}, started {report.started}, {report.seconds:.2f}s.</p>
<h2>Buckets checked ({len(cells):,})</h2><p>{legend}</p>
<svg width="{per_row * (size + 1)}" height="{rows_n * (size + 1)}">{rects}</svg>
<h2>Column checks</h2><table><tr><th>check</th><th>source</th><th>target</th><th>expected</th><th></th></tr>{metric_rows}</table>
<h2>Differences ({report.missing + report.extra + report.different:,}; {len(report.differences)} shown)</h2>
<table><tr><th>kind</th><th>key</th><th>columns</th><th>source</th><th>target</th></tr>{diff_rows}</table>
</body></html>"""
