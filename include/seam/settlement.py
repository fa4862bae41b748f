"""Nightly settlement: which business day a run settles and that day's window, from the pipeline file's
``settlement:`` section::

    settlement:
      schedule: "0 2 * * *"            # cron, in ``timezone``
      timezone: Asia/Shanghai          # the settlement time zone: where a business day begins and ends
      source_timezone: UTC             # how the source's cursor columns (DATETIME) are written
      business_days: [mon, tue, wed, thu, fri]
      holidays: ["2026-10-01"]         # not business days
      tables: [demo.payments, demo.accounts]

A run at time T settles the last business day before T's date (in ``timezone``): a run at 02:00 on a
Monday settles Friday. Its window is (day 00:00, next day 00:00] in ``timezone``, written in the source's
time zone for the cursor (the same half-open tiling as the incremental windows: consecutive days neither
overlap nor leave a gap). The section is read without the pipeline's secrets (``read``), so that the
``seam_settlement`` DAG can take its schedule from it at parse time.

Delivery guarantee: none of its own; the loads and validations a settlement runs keep theirs.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from seam.core.errors import ConfigError
from seam.core.pipeline import DAYS, Settlement

_KEYS = ("schedule", "timezone", "source_timezone", "business_days", "holidays", "tables")


def parse(raw, path: str = "<pipeline>") -> Settlement | None:
    """The ``settlement:`` section (None when there is none); a bad field is one ConfigError naming it."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError("settlement", "must be a mapping (schedule, timezone, tables, ...)", path)
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise ConfigError(f"settlement.{unknown[0]}", f"unknown field; known: {', '.join(_KEYS)}", path)
    schedule = str(raw.get("schedule", "0 2 * * *"))
    if len(schedule.split()) != 5:
        raise ConfigError("settlement.schedule", f"{schedule!r} is not a cron expression (e.g. '0 2 * * *')", path)
    zones = {}
    for key in ("timezone", "source_timezone"):
        name = str(raw.get(key, "UTC"))
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(
                f"settlement.{key}", f"{name!r} is not a time zone (e.g. Asia/Shanghai, UTC)", path
            ) from None
        zones[key] = name
    days = raw.get("business_days", list(DAYS[:5]))
    if not isinstance(days, list) or not days or any(str(d).lower()[:3] not in DAYS for d in days):
        raise ConfigError("settlement.business_days", f"{days!r}: list days as {', '.join(DAYS)}", path)
    holidays = set()
    for value in raw.get("holidays") or []:
        try:
            holidays.add(value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value)))
        except ValueError:
            raise ConfigError("settlement.holidays", f"{value!r} is not a date (YYYY-MM-DD)", path) from None
    tables = raw.get("tables")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, str) for t in tables):
        raise ConfigError("settlement.tables", "list the db.table names to settle", path)
    return Settlement(
        schedule=schedule,
        timezone=zones["timezone"],
        source_timezone=zones["source_timezone"],
        business_days=tuple(sorted({DAYS.index(str(d).lower()[:3]) for d in days})),
        holidays=frozenset(holidays),
        tables=tuple(tables),
    )


def read(path: str | Path) -> Settlement | None:
    """The settlement section of a pipeline file, read without its secrets (for a DAG at parse time)."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return None  # the file itself is checked, with a clear error, when a task loads the pipeline
    return parse((doc or {}).get("settlement"), str(path)) if isinstance(doc, dict) else None


def pipeline_name(path: str | Path) -> str:
    """A pipeline file's ``name`` (for Asset names at DAG parse time), without reading its secrets."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return "pipeline"
    return str(doc.get("name") or "pipeline") if isinstance(doc, dict) else "pipeline"
