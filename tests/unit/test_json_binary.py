"""MySQL 8's binary JSON (``seam.source.json_binary``) against documents written after MySQL's format
(``tests.support.mysql_json``; no MySQL server runs here): every value reads as MySQL's own text of the document
parses (what a full load reads), and the record a streamed row gets equals the one the same row loaded gets."""

from __future__ import annotations

import decimal
import json
import random
from types import SimpleNamespace

import pytest
from pymysqlreplication.constants import FIELD_TYPE

from seam.core.schema import Column
from seam.source.binary_decimal import decimal_reader
from seam.source.json_binary import json_value
from seam.source.row_values import value_reader
from seam.wire.codecs import codec, document_text, json_document
from tests.support.mysql_json import Opaque, binary_json, datetime_opaque, decimal_opaque, time_opaque


def _read(document: bytes):
    return json_value(document[0], memoryview(document), 1)


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
def test_objects_arrays_and_scalars_read_as_their_text_parses(large):
    value = {
        "name": "Zoë 😀",
        "": "empty key",
        "n": [0, -1, 32767, -32768, 32768, 2**31 - 1, -(2**31), 2**31, 2**63 - 1, -(2**63), 2**64 - 1],
        "f": [1.5, -0.0, 1e300, 5e-324, 0.1],
        "lit": [True, False, None],
        "nested": {"a": [[], {}, [{"deep": ["x" * 200]}]]},
    }
    assert _read(binary_json(value, large)) == json.loads(json.dumps(value))
    for scalar in ("text", 7, -70000, 2.25, True, None):
        assert _read(binary_json(scalar)) == scalar


def test_a_document_over_64_kib_is_a_large_object():
    value = {"big": "é" * 40_000, "after": [1, "two", 3.0]}
    assert _read(binary_json(value, large=True)) == value


@pytest.mark.parametrize(
    "opaque, text",
    [
        (decimal_opaque("12.50", 5, 2), "12.50"),
        (decimal_opaque("-0.05", 4, 2), "-0.05"),
        (decimal_opaque("42", 10, 0), "42"),
        (decimal_opaque("-123456789012345678.123456789012", 30, 12), "-123456789012345678.123456789012"),
        (datetime_opaque(10, 2015, 1, 15), '"2015-01-15"'),
        (datetime_opaque(12, 2015, 1, 15, 23, 24, 25, 123), '"2015-01-15 23:24:25.000123"'),
        (datetime_opaque(7, 2038, 1, 19, 3, 14, 7), '"2038-01-19 03:14:07.000000"'),
        (datetime_opaque(12, 0, 0, 0), '"0000-00-00 00:00:00.000000"'),
        (time_opaque(838, 59, 59, negative=True), '"-838:59:59.000000"'),
        (time_opaque(10, 0, 0, 500_000), '"10:00:00.500000"'),
        (Opaque(15, b"\x00\xffab"), '"base64:type15:AP9hYg=="'),
        (Opaque(252, b""), '"base64:type252:"'),
    ],
)
def test_values_of_other_mysql_types_read_as_mysql_prints_them(opaque, text):
    exact = json.loads(f'{{"v": {text}, "in": [{text}]}}', parse_float=decimal.Decimal)
    assert _read(binary_json({"v": opaque, "in": [opaque]})) == exact


def test_the_decimal_writer_and_reader_agree():
    rng = random.Random(22)
    for _ in range(500):
        precision = rng.randint(1, 65)
        scale = rng.randint(0, min(precision, 30))
        digits = "".join(rng.choice("0123456789") for _ in range(precision))
        text = f"{rng.choice(['', '-'])}{digits[: precision - scale] or '0'}.{digits[precision - scale :]}"
        raw = decimal_opaque(text, precision, scale).raw
        value, end = decimal_reader(precision, scale)(raw, 2)
        assert value == decimal.Decimal(text)
        assert end == len(raw)


def test_a_streamed_document_gets_the_record_a_loaded_one_gets():
    """A full load reads MySQL's text of the document; the stream its binary form: one record, every digit of
    a DECIMAL(65,30) kept (a float keeps 17)."""
    column = Column("doc", "json", "json", True)
    wide = "12345678901234567890123456789012345.123456789012345678901234567890"
    document = {
        "amount": decimal_opaque("12.50", 5, 2),
        "at": datetime_opaque(12, 2026, 12, 3, 1, 2, 3),
        "k": [1],
        "wide": decimal_opaque(wide, 65, 30),
    }
    mysql_text = f'{{"k": [1], "at": "2026-12-03 01:02:03.000000", "wide": {wide}, "amount": 12.50}}'
    streamed = codec(column).record(column, document_text(_read(binary_json(document))))
    assert streamed == json_document(mysql_text)
    assert json.loads(streamed, parse_float=decimal.Decimal)["wide"] == decimal.Decimal(wide)


@pytest.mark.parametrize(
    "document, said",
    [
        (binary_json({"a": "x" * 10})[:-3], "cut short"),
        (bytes([0x0D, 0, 0]), "binary type 0xd"),
        (bytes([0x04, 0x07]), "literal coded 0x7"),
        (bytes([0x0C]) + b"\xff\xff\xff\xff\xff\x01", "more than five bytes"),
    ],
)
def test_a_document_that_does_not_read_raises_never_guesses(document, said):
    with pytest.raises(ValueError, match=said):
        _read(document)


@pytest.mark.parametrize(
    "mysql, postgres",
    [
        ('{"b": 12.50, "a": [1e300, 100.0]}', '{"a": [1' + "0" * 300 + ', 100.0], "b": 12.5}'),
        ('{"n": 98765432109876543210.000000000000000000001}', '{"n": 98765432109876543210.000000000000000000001}'),
        ('{"s": "12.50", "z": -0.0, "e": 2.5E-7}', '{"e": 0.00000025, "s": "12.50", "z": 0}'),
        ('[{"k": "é\\u0001"}, true, null]', '[{"k": "é\\u0001"}, true, null]'),
    ],
)
def test_a_document_has_one_form_whichever_server_printed_it(mysql, postgres):
    """MySQL's print of a document and PostgreSQL's jsonb print of it give one record form, digit for digit."""
    assert json_document(mysql) == json_document(postgres)
    document = json.loads(json_document(mysql), parse_float=decimal.Decimal)
    assert document == json.loads(mysql, parse_float=decimal.Decimal)  # the numbers' values, exactly


def test_documents_that_differ_in_a_last_digit_keep_their_difference():
    assert json_document('{"n": 98765432109876543210.1}') != json_document('{"n": 98765432109876543210.2}')
    assert json_document('{"n": 12345678901234567890}') != json_document('{"n": 12345678901234567891}')


@pytest.mark.parametrize(
    "document, mysql_text",
    [
        ("123", '"123"'),
        ("true", '"true"'),
        ("null", '"null"'),
        ("abc", '"abc"'),
        (7, "7"),
        ([1, "2"], '[1, "2"]'),
        (decimal_opaque("1.50", 3, 2), "1.50"),
    ],
)
def test_a_json_column_read_from_a_row_image_gets_the_record_of_its_text(document, mysql_text):
    """The column's reader gives the document as text: a document that is one string ("123") stays a string,
    never what its characters parse to."""
    body = binary_json(document)
    read = value_reader(SimpleNamespace(type=FIELD_TYPE.JSON, length_size=4, unsigned=False))
    value, end = read(len(body).to_bytes(4, "little") + body, 0)
    assert end == 4 + len(body)
    column = Column("doc", "json", "json", True)
    assert codec(column).record(column, value) == json_document(mysql_text)
