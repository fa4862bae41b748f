"""NUL characters on their way into PostgreSQL (``seam.apply.decode``): text and MySQL 8 JSON values get
``target.text_nul``'s replacement in every image; a JSON escaped backslash before "u0000" is not a NUL; other
records pass untouched."""

from __future__ import annotations

import json

from seam.apply.decode import record_decoder
from seam.core.schema import Column, TableSchema

SCHEMA = TableSchema(
    "db",
    "t",
    (
        Column("id", "int", "int(11)", False),
        Column("t", "varchar", "varchar(20)", True),
        Column("j", "json", "json", True),
        Column("b", "varbinary", "varbinary(8)", True),
    ),
    ("id",),
)


def _record(before: dict | None, after: dict | None) -> bytes:
    doc = {"op": "u", "before": before, "after": after, "source": {"batch": None}}
    return json.dumps(doc).encode()


def test_text_and_json_nul_become_the_replacement_in_both_images():
    decode = record_decoder(SCHEMA, "\ufffd").decode
    j = json.dumps({"k": "a\x00b", "literal": "\\u0000"}, ensure_ascii=False)  # a NUL, and backslash + "u0000"
    doc = decode(
        _record({"id": 1, "t": "x\x00", "j": j, "b": "AA=="}, {"id": 1, "t": "\x00y\x00", "j": '"\\u0000"', "b": None})
    )
    assert doc.before.f1 == "x\ufffd" and doc.after.f1 == "\ufffdy\ufffd"
    assert json.loads(doc.before.f2) == {"k": "a\ufffdb", "literal": "\\u0000"}
    assert json.loads(doc.after.f2) == "\ufffd"
    assert doc.before.f3 == "AA=="  # base64 of a binary value: never touched


def test_strip_removes_it_and_a_record_without_nul_is_as_sent():
    strip = record_decoder(SCHEMA, "").decode
    assert strip(_record(None, {"id": 2, "t": "a\x00b", "j": None, "b": None})).after.f1 == "ab"
    plain = _record(None, {"id": 3, "t": "a\\u0000b", "j": '{"a": "\\\\u0000"}', "b": None})  # escapes, no NUL
    doc = strip(plain)
    assert doc.after.f1 == "a\\u0000b" and doc.after.f2 == '{"a": "\\\\u0000"}'
