"""``canonical.text_bound``: the longest canonical text of a column, which decides whether a table's buckets can
be checksummed as one digest each (``Side.digest_fits``). It must never be below a text the column can hold:
checked against the longest values MariaDB prints for each type."""

from __future__ import annotations

import pytest

from seam.core.schema import Column
from seam.validate.canonical import text_bound

LONGEST = [  # (data_type, column_type, the longest canonical text of a value)
    ("bigint", "bigint(20)", "-9223372036854775808"),
    ("bigint", "bigint(20) unsigned", "18446744073709551615"),
    ("bit", "bit(64)", "18446744073709551615"),
    ("double", "double", "-2.2250738585072014e-308"),
    ("float", "float", "-1.1754943508222875e-38"),
    ("decimal", "decimal(65,30)", "-" + "9" * 35 + "." + "9" * 30),
    ("date", "date", "9999-12-31"),
    ("datetime", "datetime(6)", "9999-12-31 23:59:59.999999"),
    ("time", "time(6)", "-838:59:59.000000"),
    ("year", "year(4)", "2155"),
    ("char", "char(3)", "😀😀😀"),
    ("varchar", "varchar(2)", "😀😀"),
    ("varbinary", "varbinary(4)", "ffffffff"),
    ("set", "set('a','b c','d')", "a,b c,d"),
    ("enum", "enum('x','yé')", "yé"),
    ("uuid", "uuid", "123e4567-e89b-12d3-a456-426614174000"),
    ("inet6", "inet6", "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"),
]


@pytest.mark.parametrize(("data_type", "column_type", "text"), LONGEST)
def test_the_bound_holds_the_longest_text(data_type, column_type, text):
    bound = text_bound(Column("c", data_type, column_type, True), "\ufffd")
    assert bound is not None and bound >= len(text.encode())


def test_a_long_nul_replacement_widens_text_columns():
    column = Column("c", "varchar", "varchar(10)", True)
    assert text_bound(column, "<NUL>" * 4) == 10 * 20  # ten NULs, each printed as 20 bytes


@pytest.mark.parametrize("data_type", ["text", "mediumtext", "longtext", "blob", "longblob", "json", "geometry"])
def test_unbounded_types_have_no_bound(data_type):
    assert text_bound(Column("c", data_type, data_type, True), "") is None
