"""The differing rows validation lists, in key order: integer keys numerically, any other text after them,
whatever it looks like (a text key '--1' or '²' crashed the listing: int() of it)."""

from __future__ import annotations

from seam.core.pipeline import TableConfig
from seam.core.schema import Column, TableSchema
from seam.validate.compare import _diff_rows


def test_differing_rows_are_listed_in_key_order_whatever_the_keys_text():
    schema = TableSchema(
        "shop", "t", (Column("k", "varchar", "varchar(9)", False), Column("v", "int", "int", True)), ("k",)
    )
    table = TableConfig("shop", "t", ("k",))
    keys = ["10", "--1", "²", "-3", "2", "a", "-", "٣", " 7"]
    source = [((k,), (k, "1")) for k in keys]
    target = [((k,), (k, "2")) for k in keys[1:]]
    found = _diff_rows(schema, table, source, target, {}, {})
    assert [(d.kind, d.key["k"]) for d in found] == [
        ("different", "-3"),
        ("different", "2"),
        ("missing", "10"),
        ("different", " 7"),
        ("different", "-"),
        ("different", "--1"),
        ("different", "a"),
        ("different", "²"),
        ("different", "٣"),
    ]
