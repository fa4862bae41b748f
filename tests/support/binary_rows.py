"""Seeded snapshot rows for the compiled stager's COPY binary rows (``tests/unit/test_snapshot_binary.py``,
``tests/stack/test_binary_staging.py``): integers at and near their types' limits, decimals (zeros, signs, long,
integer tokens), dates over the whole range MySQL has (leap days, the first and last day, a zero date) and text
with escapes, quotes, backslashes, control characters and text outside the BMP, as Seam's full load writes
records of them."""

from __future__ import annotations

import datetime
import json
import random

from seam.core.schema import Column, TableSchema

BATCH = "20261202T000000-0b1a0b1a"
COLUMNS = (
    Column("id", "bigint", "bigint", False),
    Column("small", "tinyint", "tinyint", True),
    Column("i", "int", "int", True),
    Column("amount", "decimal", "decimal(65,30)", True, 30),
    Column("price", "decimal", "decimal(15,2)", True, 2),
    Column("day", "date", "date", False),
    Column("maybe_day", "date", "date", True),
    Column("note", "varchar", "varchar(200)", True),
    Column("body", "text", "text", True),
)
SCHEMA = TableSchema("d", "t", COLUMNS, ("id",))
TEXT = ["a", "tab\there", "new\nline", "back\\slash", 'quo"te', "\r\b\f\v", "é", "日本", "😀", "\x7f", "/",
        "\u2028", "\\u0041", "\\N", ""]  # fmt: skip


def decimal_text(r: random.Random, precision: int, scale: int) -> str:
    """A DECIMAL(precision, scale) value as MySQL prints it."""
    digits = precision - scale
    whole = r.choice(["0", "1", "9999", "10000", "12345678", "9" * r.randrange(1, digits + 1), str(r.randrange(10**9))])
    whole = whole[:digits]
    fraction = "".join(r.choice("0123456789") for _ in range(scale))
    if r.random() < 0.2:
        fraction = "0" * scale
    sign = "-" if r.random() < 0.3 else ""
    return f"{sign}{whole}.{fraction}" if scale else f"{sign}{whole}"


def date_text(r: random.Random) -> str:
    special = ["0001-01-01", "9999-12-31", "2000-02-29", "1900-02-28", "2024-02-29", "1999-12-31", "2000-01-01",
               "1582-10-10", "0999-03-01"]  # fmt: skip
    if r.random() < 0.3:
        return r.choice(special)
    day = datetime.date(1, 1, 1) + datetime.timedelta(days=r.randrange(3_652_059))
    return day.isoformat()


def random_row(r: random.Random, n: int) -> dict:
    def maybe(value):
        return None if r.random() < 0.15 else value

    return {
        "id": n,
        "small": maybe(r.choice([0, 1, -1, 127, -128, 255, 32767, -32768])),
        "i": maybe(r.choice([0, -1, 2**31 - 1, -(2**31), r.randrange(-(2**31), 2**31)])),
        "amount": maybe(decimal_text(r, 65, 30)),
        "price": maybe(r.choice([decimal_text(r, 15, 2), r.randrange(-1000, 1000)])),  # an integer token too
        "day": r.choice([date_text(r), None]),  # None: a zero date, -infinity in a NOT NULL column
        "maybe_day": maybe(date_text(r)),
        "note": maybe("".join(r.choice(TEXT) for _ in range(r.randrange(5)))),
        "body": maybe(r.choice([str(r.randrange(10**6)), "".join(r.choice(TEXT) for _ in range(r.randrange(8)))])),
    }


def record_of(row: dict, part: int, attempt: int, ensure_ascii: bool) -> bytes:
    doc = {"op": "r", "before": None, "after": row, "source": {"batch": BATCH, "part": part, "attempt": attempt}}
    return json.dumps(doc, ensure_ascii=ensure_ascii, separators=(",", ":")).encode()
