"""Zero dates in the target (``target.zero_dates``): a column NOT NULL at the source stays NOT NULL and holds a
zero date (null in records) as -infinity; with ``null`` its date columns are nullable and hold NULL. The stack
tests (``test_types_golden``) load and stream them and compare; these pin the DDL and the COPY values."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from seam.apply.target import Landing, column_ddl, row_converter
from seam.core.schema import Column, TableSchema

COLUMNS = (
    Column("d", "date", "date", False),
    Column("dt", "datetime", "datetime(3)", False, datetime_precision=3),
    Column("ts", "timestamp", "timestamp", False),
    Column("t", "time", "time", False),
    Column("od", "date", "date", True),
    Column("n", "int", "int", False),
)
SCHEMA = TableSchema("db", "t", COLUMNS, ())
Image = msgspec.defstruct("Image", [(c.name, Any) for c in COLUMNS])


@pytest.mark.parametrize(
    "zero_dates, not_null",
    [
        ("-infinity", {"d": True, "dt": True, "ts": True, "t": True, "od": False, "n": True}),
        ("null", {"d": False, "dt": False, "ts": False, "t": True, "od": False, "n": True}),
    ],
)
def test_not_null_stays_unless_zero_dates_are_null(zero_dates, not_null):
    landing = Landing(zero_dates=zero_dates)
    assert {c.name: column_ddl(c, (), landing).endswith(" NOT NULL") for c in COLUMNS} == not_null


@pytest.mark.parametrize("zero_dates, zero", [("-infinity", "-infinity"), ("null", None)])
def test_a_zero_date_is_copied_as_the_setting_says(zero_dates, zero):
    convert = row_converter(SCHEMA, Landing(zero_dates=zero_dates))
    assert convert(Image(None, None, None, "00:00:00.000000", None, 0)) == (
        zero,
        zero,
        zero,
        "00:00:00.000000",
        None,  # a nullable column's zero date (or NULL) is NULL either way
        0,
    )
    real = ("2024-01-02", "2024-01-02T03:04:05.678000", "2024-01-02T03:04:05.000000Z", "-01:00:00.000000", None, 1)
    assert convert(Image(*real)) == real
