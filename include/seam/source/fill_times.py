"""The time an added DATE, DATETIME, TIME or TIMESTAMP column's rows got: a literal as the server stores it
(``time_spelled``, ``stored_time``), or the time of the statement that added it, with an interval added or not
(``statement_time``: the statement's ``Instant``, stamped by ``seam.source.stream_ddl``); None where the stream
cannot tell (``seam.source.fills`` says why).

Delivery guarantee: none of its own (pure: the caller publishes what it decides).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re

from seam.core.schema import Column
from seam.source.declared import Now

_LOOSE_DATE = re.compile(r"(\d{4})-(\d\d?)-(\d\d?)(?: (\d\d):(\d\d)(:\d\d(?:\.\d{1,6})?)?)?")
_LOOSE_TIME = re.compile(r"-?\d{2,3}:\d\d")
_TIME_LITERALS = {
    "date": re.compile(r"(\d{4}-\d\d-\d\d)()"),
    "datetime": re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.(\d{1,6}))?"),
    "time": re.compile(r"(-?(?:[0-7]\d\d|8[0-2]\d|83[0-8]|\d\d):[0-5]\d:[0-5]\d)(?:\.(\d{1,6}))?"),
    "timestamp": re.compile(r"(\d{4}-\d\d-\d\d)(?: \d\d:\d\d:\d\d(?:\.(\d{1,6}))?)?"),  # read in UTC
}
_DIGITS = re.compile(r"(-?)(\d+)(?:\.(\d+))?")


def time_spelled(kind: str, value: str) -> str:
    """A DATE, DATETIME or TIME literal spelled as the server stores it, from the looser spellings it reads as
    the same value: a month or a day in one digit (2024-1-5), a DATETIME without its time or its seconds, a
    TIME without its seconds (12:00 is 12:00:00). Other spellings as they are (``seam.source.fills`` then gives
    up unless they are the stored one)."""
    digits = _DIGITS.fullmatch(value)
    if digits:
        return _digits_spelled(kind, *digits.groups()) or value
    if kind == "time":
        return value + ":00" if _LOOSE_TIME.fullmatch(value) else value
    m = _LOOSE_DATE.fullmatch(value)
    if m is None:
        return value
    year, month, day, hour, minute, rest = m.groups()
    date = f"{year}-{int(month):02d}-{int(day):02d}"
    if kind == "date":
        return value if hour else date  # a time in a DATE's default is cut off with a note: stays as it is
    return f"{date} {hour or '00'}:{minute or '00'}{rest or ':00'}"


def _digits_spelled(kind: str, sign: str, whole: str, fraction: str | None) -> str | None:
    """A time written as digits alone (``DEFAULT 20240101``, ``'240101103000'``, ``103000.5``), as the server
    reads it: YYYYMMDD or YYMMDD (a two-digit year 70 to 99 is 19YY, else 20YY) with hhmmss after it for a
    DATETIME, [h]hhmmss for a TIME, the missing digits on the left zeros; None for other lengths."""
    point = f".{fraction}" if fraction else ""
    if kind == "time" and len(whole) <= 7:
        hours, rest = whole.zfill(6)[:-4], whole.zfill(6)[-4:]
        return f"{sign}{hours}:{rest[:2]}:{rest[2:]}{point}"
    if kind not in ("date", "datetime") or sign or len(whole) not in (6, 8, 12, 14) or (fraction and len(whole) < 12):
        return None
    if len(whole) in (6, 12):
        whole = ("19" if whole[:2] >= "70" else "20") + whole
    date = f"{whole[:4]}-{whole[4:6]}-{whole[6:8]}"
    if kind == "date":
        return date if len(whole) == 8 else None  # a time in a DATE's default is cut off with a note: stops
    time = f"{whole[8:10]}:{whole[10:12]}:{whole[12:14]}" if len(whole) == 14 else "00:00:00"
    return f"{date} {time}{point}"


def statement_time(column: Column, now: Now) -> str | None:
    """The time of the statement that added the column, as the rows there got it, or None when the stream cannot
    tell: a DATETIME's on its session's wall clock, a TIMESTAMP's in UTC (as Seam records it), truncated to the
    function's and the column's digits (the server truncates), a DATE's from CURRENT_DATE."""
    if now.shift is not None:
        return _shifted_time(column, now)
    kind, at = column.data_type, now.at
    digits = time_digits(now, column)
    fits = kind == "date" if now.date_only else kind in ("datetime", "timestamp")
    if at is None or not fits or (digits and not at.exact_fraction):
        return None
    value = at.utc if kind == "timestamp" else at.local
    if now.date_only:
        return value.date().isoformat()
    unit = 10 ** (6 - digits)
    return value.replace(microsecond=value.microsecond // unit * unit).isoformat(sep=" ")


def _shifted_time(column: Column, now: Now) -> str | None:
    """``statement_time`` of a ``Now`` with an interval added (``(CURDATE() + INTERVAL 1 YEAR)``): on the
    session's wall clock (``shifted_wall``), with the function's digits, which a DATETIME or TIMESTAMP must keep
    (MySQL rounds more, MariaDB cuts them); a DATE gets the day. A TIMESTAMP's is that wall time read on the
    session's clock, as the source converted it for the statement (``Instant.in_utc``, which holds it only when
    it is one instant there and the type holds it): where the zone's offset changes in between it is not the
    statement's time shifted in UTC."""
    kind, at = column.data_type, now.at
    digits = 0 if now.date_only or now.precision is None else now.precision
    if (
        at is None
        or kind not in ("date", "datetime", "timestamp")
        or (kind != "date" and (digits > (column.datetime_precision or 0) or (digits and not at.exact_fraction)))
    ):
        return None
    value = shifted_wall(now, at.local)
    if value is None:  # beyond year 9999 or before 1: the server gives NULL
        return None
    if kind == "timestamp":
        utc = at.in_utc.get(value.isoformat(sep=" "))
        return utc.isoformat(sep=" ") if utc is not None else None
    return value.date().isoformat() if kind == "date" else value.isoformat(sep=" ")


def shifted_wall(now: Now, local: dt.datetime) -> dt.datetime | None:
    """The wall time a ``Now`` with a ``shift`` gives on the session's clock at ``local``, as the server adds the
    interval (a month past the end of a shorter one is its last day), with the function's digits (none unless it
    names them: ``NOW()`` is whole seconds in an expression; a date's is its midnight); None past year 9999."""
    amount, unit = now.shift or (0, "DAY")
    digits = 0 if now.date_only or now.precision is None else now.precision
    step = 10 ** (6 - digits)
    base = local.replace(microsecond=local.microsecond // step * step)
    if now.date_only:
        base = dt.datetime.combine(base.date(), dt.time())
    try:
        if unit in _MONTHS:
            total = base.month - 1 + amount * _MONTHS[unit]
            year, month = base.year + total // 12, total % 12 + 1
            return base.replace(year=year, month=month, day=min(base.day, calendar.monthrange(year, month)[1]))
        return base + dt.timedelta(seconds=amount * _SECONDS[unit])
    except (ValueError, OverflowError):
        return None


_MONTHS = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}
_SECONDS = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400, "WEEK": 7 * 86400}


def time_digits(now: Now, column: Column) -> int:
    """The fractional digits the rows got from a ``Now`` default: the function's, at most the column's."""
    return min(6 if now.precision is None else now.precision, column.datetime_precision or 0)


def stored_time(column: Column, value: str) -> bool:
    """Whether a DATE, DATETIME or TIME literal is spelled as the server stores it: a valid date (not a zero
    one), no more fractional digits than the column keeps (MariaDB truncates the rest, MySQL rounds)."""
    pattern = _TIME_LITERALS.get(column.data_type)
    m = pattern.fullmatch(value) if pattern and isinstance(value, str) else None
    if m is None or len(m.group(2) or "") > (column.datetime_precision or 0):
        return False
    try:
        return column.data_type == "time" or dt.datetime.fromisoformat(m.group(1)).year > 0
    except ValueError:  # 2024-02-30, 0000-00-00
        return False
