"""The settlement calendar (seam.settlement): which business day a run settles, in the settlement time zone,
and that day's cursor window in the source's time zone; a bad section is one line naming the field."""

from __future__ import annotations

import datetime as dt

import pytest

from seam.config import ConfigError
from seam.settlement import parse

UTC = dt.UTC


def _section(**overrides):
    raw = {
        "schedule": "0 2 * * *",
        "timezone": "Asia/Shanghai",
        "source_timezone": "UTC",
        "tables": ["demo.payments"],
        "holidays": ["2026-10-01", "2026-10-02"],
        **overrides,
    }
    return parse(raw, "p.yaml")


def test_a_run_settles_the_previous_business_day_in_the_settlement_time_zone():
    s = _section()
    # Monday 02:00 in Shanghai is Sunday 18:00 UTC: the settlement day is still counted from Monday there
    assert s.settled_day(dt.datetime(2026, 11, 22, 18, 0, tzinfo=UTC)) == dt.date(2026, 11, 20)  # Friday
    assert s.settled_day(dt.datetime(2026, 11, 24, 18, 0, tzinfo=UTC)) == dt.date(2026, 11, 24)  # Wed 02:00 -> Tue
    # Saturday 3 October 02:00: Friday 2 and Thursday 1 are holidays, so Wednesday 30 September
    assert s.settled_day(dt.datetime(2026, 10, 2, 18, 0, tzinfo=UTC)) == dt.date(2026, 9, 30)


def test_the_window_is_the_day_in_the_settlement_zone_written_in_the_source_zone():
    s = _section()
    assert s.window(dt.date(2026, 11, 20)) == ("2026-11-19 16:00:00", "2026-11-20 16:00:00")
    assert s.day_end(dt.date(2026, 11, 20)).isoformat() == "2026-11-21T00:00:00+08:00"
    # a day across a daylight-saving change has 23 hours: midnight to midnight all the same
    ny = _section(timezone="America/New_York")
    assert ny.window(dt.date(2026, 3, 8)) == ("2026-03-08 05:00:00", "2026-03-09 04:00:00")
    consecutive = [s.window(dt.date(2026, 11, d)) for d in (19, 20)]
    assert consecutive[0][1] == consecutive[1][0]  # no gap, no overlap


def test_defaults_and_weekend_business_days():
    s = parse({"tables": ["a.b"], "business_days": ["Sun", "mon"]})
    assert (s.schedule, s.timezone, s.business_days) == ("0 2 * * *", "UTC", (0, 6))
    assert s.settled_day(dt.datetime(2026, 11, 25, 2, 0, tzinfo=UTC)) == dt.date(2026, 11, 23)  # Wed -> Monday


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"timezone": "Asia/Shanghia"}, "settlement.timezone"),
        ({"schedule": "daily"}, "settlement.schedule"),
        ({"business_days": ["funday"]}, "settlement.business_days"),
        ({"holidays": ["2026-13-01"]}, "settlement.holidays"),
        ({"tables": []}, "settlement.tables"),
        ({"when": "2"}, "settlement.when"),
    ],
)
def test_a_bad_section_names_the_field(overrides, field):
    with pytest.raises(ConfigError) as failed:
        _section(**overrides)
    assert str(failed.value).startswith(f"p.yaml: {field}:"), str(failed.value)
