"""Validation of MySQL 8's JSON columns (no MySQL server runs here): MySQL's checksum text of a document is
``CAST(j AS CHAR)``, PostgreSQL's ``jsonb::text`` of the record Seam wrote for it. The two agree on key order,
spacing and strings and print some numbers apart; the rows of a range whose checksums differed are compared by
``canonical.json_text``, which must find a streamed document equal to MySQL's print of it, on the real
PostgreSQL, and a changed one different. MySQL's prints below are written from its printer's rules: keys by
length then bytes, ``, `` and ``: ``, a DECIMAL with its scale, dates and times with six fractional digits."""

from __future__ import annotations

import psycopg
import pytest

from seam.apply.target import normalize_target, read_back_as_records
from seam.core.schema import Column
from seam.source.json_binary import json_value
from seam.validate import canonical
from seam.wire.codecs import codec, document_text
from tests.support.mysql_json import Opaque, binary_json, datetime_opaque, decimal_opaque, time_opaque

pytestmark = pytest.mark.stack

DOC = Column("doc", "json", "json", True)
CASES = [
    ({"b": 1, "a": "x"}, '{"a": "x", "b": 1}'),
    ({"price": decimal_opaque("12.50", 5, 2), "qty": 3}, '{"qty": 3, "price": 12.50}'),
    ({"big": 1e300, "tiny": 5e-324, "f": 0.1}, '{"f": 0.1, "big": 1e300, "tiny": 5e-324}'),
    (
        [datetime_opaque(12, 2026, 12, 3, 1, 2, 3, 4), time_opaque(1, 2, 3, negative=True)],
        '["2026-12-03 01:02:03.000004", "-01:02:03.000000"]',
    ),
    (
        {"bin": Opaque(15, b"\x00\xff"), "esc": 'quo"te\\ \n\t\u0001 é😀'},
        '{"bin": "base64:type15:AP8=", "esc": "quo\\"te\\\\ \\n\\t\\u0001 é😀"}',
    ),
    (
        {"wide": decimal_opaque("-98765432109876543210987654321098765.123456789012345678901234567890", 65, 30)},
        '{"wide": -98765432109876543210987654321098765.123456789012345678901234567890}',
    ),
    (
        {"n": [True, False, None, -(2**63), 2**64 - 1, decimal_opaque("-7", 3, 0)]},
        '{"n": [true, false, null, -9223372036854775808, 18446744073709551615, -7]}',
    ),
]


def test_a_streamed_document_checks_equal_to_mysqls_print_of_it(pipeline):
    """... and read back from the target, it is its record again, digit for digit: a repair that wrote it has
    nothing left to write."""
    records = []
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE docs (i int, doc jsonb)")
        for i, (document, _) in enumerate(CASES):
            records.append(codec(DOC).record(DOC, document_text(json_value(*_split(binary_json(document))))))
            conn.execute("INSERT INTO docs VALUES (%s, %s::jsonb)", (i, records[-1]))
        printed = conn.execute(f"SELECT {canonical.pg_text(DOC, 'seam', 'x')} FROM docs x ORDER BY i").fetchall()
        read_back_as_records(conn)
        stored = [normalize_target(DOC, v) for (v,) in conn.execute("SELECT doc FROM docs ORDER BY i")]
    assert stored == records
    for (pg,), (_, mysql) in zip(printed, CASES, strict=True):
        assert canonical.json_text(pg) == canonical.json_text(mysql), (pg, mysql)
    assert printed[0][0] == CASES[0][1]  # the common case is equal already in the checksum's text
    changed = CASES[1][1].replace("12.50", "12.51")
    assert canonical.json_text(printed[1][0]) != canonical.json_text(changed)


def _split(document: bytes) -> tuple[int, memoryview, int]:
    return document[0], memoryview(document), 1


def test_json_text_compares_numbers_by_value_and_nothing_else():
    same = canonical.json_text
    assert same('{"a": 12.50, "b": [1e300, -0.0]}') == same('{"b": [1' + "0" * 300 + ', 0], "a": 12.5}')
    assert same('{"a": 1}') != same('{"a": "1"}') != same('{"a": true}')
    assert same('{"a": 123456789012345678.123456789012}') != same('{"a": 123456789012345678.12345678901}')
    assert same("[1, 2]") != same("[2, 1]") and same(None) is None
