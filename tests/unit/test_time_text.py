"""Window bounds reach MySQL with four-digit years: strftime's %Y writes the year 99 as "99", which MySQL
reads as 1999, and orders "500-01-01" after "1970-01-01" as text."""

import datetime as dt

from seam.source.incremental import _parse_time, time_text


def test_a_window_bound_before_the_year_1000_keeps_its_four_digits():
    assert time_text(dt.datetime(99, 3, 4, 5, 6, 7, 8)) == "0099-03-04 05:06:07.000008"
    assert time_text(_parse_time("0500-01-01", "window start")) == "0500-01-01 00:00:00.000000"
    assert time_text(_parse_time("0500-01-01", "w")) < time_text(_parse_time("1970-01-01T00:00:00Z", "w"))
