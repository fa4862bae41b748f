"""A snapshot row's JSON made by the task (``seam.source.row_json``): the compiled renderer and the Python one
give the same bytes for the same rows, awkward values included, and both refuse what is not the text they
expect instead of publishing it. (tests/stack/test_snapshot_json.py holds them against the source's own rendering.)"""

from __future__ import annotations

import json
import random

import pytest

from seam.core.schema import Column, TableSchema
from seam.source import _rowjson, row_json
from seam.source.row_json import DATE, DATETIME, JSON, NUMBER, QUOTED, STRING, TIMESTAMP, RowJson

SCHEMA = TableSchema(
    "db",
    "t",
    (
        Column("id", "bigint", "bigint(20)", False),
        Column("price", "decimal", "decimal(12,2)", True, numeric_scale=2),
        Column("name", "varchar", "varchar(20)", True, charset="utf8mb4"),
        Column("day", "date", "date", True),
        Column("at", "datetime", "datetime(3)", True, datetime_precision=3),
        Column("ts", "timestamp", "timestamp", True),
        Column("f", "float", "float", True),
        Column("raw", "varbinary", "varbinary(4)", True, charset=None),
        Column("z", "int", "int(5) unsigned zerofill", True),
        Column("u", "bigint", "bigint(20) unsigned", True),
    ),
    ("id",),
)
PLAN = RowJson.of(SCHEMA, ("name", "id"))


def test_each_column_is_rendered_by_the_task_where_its_text_is_the_record_value():
    assert PLAN.modes == bytes([NUMBER, QUOTED, STRING, DATE, DATETIME, TIMESTAMP, JSON, JSON, JSON, QUOTED])
    assert PLAN.columns[:2] == ("x.`id`", "x.`price`")
    assert PLAN.columns[6].startswith("CAST(IFNULL(") and PLAN.columns[6].endswith(", 'null') AS BINARY)")
    assert PLAN.key_columns == (2, 0) and PLAN.key_labels == (b'{"name":', b',"id":')


def _row(r: random.Random) -> tuple:
    text = bytes(r.choice([*range(0, 0x80), 0xC3, 0xA9]) for _ in range(r.randrange(0, 12)))
    text = text.decode("utf-8", "replace").encode()
    day = r.choice([b"2024-02-29", b"2023-02-29", b"0000-00-00", b"2024-00-10", b"2024-04-31", b"0099-01-31", None])
    at = r.choice([b"2024-01-02 03:04:05", b"2024-01-02 03:04:05.1", b"9999-12-31 23:59:59.999999", None])
    return (
        str(r.randrange(-(2**63), 2**63)).encode(),
        r.choice([b"-0.01", b"12.50", None]),
        r.choice([text, None]),
        day,
        at,
        r.choice([b"0000-00-00 00:00:00", b"1970-01-01 00:00:01", None]),
        r.choice([b"0.10000000149011612", b"1e-7"]),
        r.choice([b'"AAEC\nAw=="', b'"AA=="']),
        b"5",
        r.choice([b"18446744073709551615", None]),
    )


@pytest.mark.parametrize("seed", range(10))
def test_compiled_and_python_give_the_same_bytes_and_valid_json(seed):
    r = random.Random(seed)
    rows = tuple(_row(r) for _ in range(300))
    pairs = _rowjson.render(rows, PLAN.modes, PLAN.labels, PLAN.key_columns, PLAN.key_labels)
    assert pairs == row_json.render_python(PLAN, rows)
    for (after, key), row in zip(pairs, rows):
        image = json.loads(after)
        assert list(image) == list(SCHEMA.names)
        assert image["id"] == int(row[0]) and image["name"] == (None if row[2] is None else row[2].decode())
        assert json.loads(key) == {"name": image["name"], "id": image["id"]}
        assert image["raw"] in ("AAECAw==", "AA==")  # TO_BASE64's line break dropped


def test_dates_as_the_record_holds_them():
    def image(day, at, ts):
        return json.loads(PLAN.render([(b"1", None, None, day, at, ts, b"1", b"null", b"1", None)])[0][0])

    valid = image(b"2024-02-29", b"2024-01-02 03:04:05", b"1970-01-01 00:00:01")
    assert (valid["day"], valid["at"], valid["ts"]) == (
        "2024-02-29",
        "2024-01-02T03:04:05.000000",
        "1970-01-01T00:00:01.000000Z",
    )
    for impossible in (b"2023-02-29", b"1900-02-29", b"2024-04-31", b"0000-00-00", b"2024-00-01", b"2024-01-00"):
        assert image(impossible, None, None)["day"] is None
    assert image(b"2000-02-29", b"2024-01-02 03:04:05.123", None)["at"] == "2024-01-02T03:04:05.123000"
    assert image(b"2000-02-29", b"0000-00-00 00:00:00", b"0000-00-00 00:00:00")["ts"] is None


def test_strings_are_escaped_as_json_quote_escapes_them():
    plan = RowJson.of(SCHEMA, ())
    text = bytes(range(1, 0x80)) + "é€😀".encode() + b"\x00"
    row = (b"1", None, text, None, None, None, b"1", b"null", b"1", None)
    after, key = plan.render([row])[0]
    assert key is None and (after, key) == row_json.render_python(plan, [row])[0]
    assert b'"\\u0001\\u0002' in after and b"\\b\\t\\n\\u000B\\f\\r\\u000E" in after and b'\\u0000"' in after
    assert b'!\\"#' in after and b"[\\\\]" in after and b"/" in after and "é€😀".encode() in after
    assert json.loads(after)["name"] == text.decode()


@pytest.mark.parametrize(
    "column, value, error",
    [
        (6, None, TypeError),  # the source's JSON is never NULL: a row too large or a value it cannot print
        (3, b"2024-1-2", ValueError),
        (4, b"2024-01-02T03:04:05", ValueError),
        (0, b"", ValueError),
        (2, "text", TypeError),
    ],
)
def test_what_is_not_the_expected_text_is_refused(column, value, error):
    row = [b"1", None, None, None, None, None, b"1", b"null", b"1", None]
    row[column] = value
    with pytest.raises(error):
        _rowjson.render([tuple(row)], PLAN.modes, PLAN.labels, PLAN.key_columns, PLAN.key_labels)
    with pytest.raises(error):
        row_json.render_python(PLAN, [tuple(row)])
    with pytest.raises(row_json.RowNotRendered):
        PLAN.render([tuple(row)])


def test_a_row_not_rendered_names_its_column():
    row = (b"1", None, None, b"2024-1-2", None, None, b"1", b"null", b"1", None)
    with pytest.raises(row_json.RowNotRendered, match="^column day: not a DATE's text"):
        PLAN.render([row])
    with pytest.raises(row_json.RowNotRendered, match="^column f: no JSON from the source"):
        PLAN.render([(b"1", None, None, None, None, None, None, b"null", b"1", None)])
