"""A snapshot row's JSON, made by the task from a plain SELECT: the source prints most columns as they are and
the task makes the record's image and key of them (``seam.wire.codecs``, the canonical values).

Rendering the JSON in the source (``codecs.snapshot_sql`` for every column, then CONCAT) cost MariaDB 3.3
CPU-seconds for the 1.2M rows of TPC-H ``lineitem``, against 1.0 for the same columns as they are; the task's
compiled renderer (``_rowjson``, built by ``make setup``) makes the JSON in a fraction of the difference. A column
whose text is not its record value as it stands (FLOAT, TIME, YEAR, BIT, JSON, binary, spatial, ZEROFILL...)
is still rendered by the source (``JSON``): the one place that knows how stays the codec.

Text modes, per column (the same in C and in ``render_python``):

- ``NUMBER``: the text is the JSON number (integers);
- ``QUOTED``: the text quoted, never in need of escapes (DECIMAL, BIGINT UNSIGNED);
- ``STRING``: the text escaped as MariaDB's JSON_QUOTE escapes it (character columns, ENUM, SET; the session
  sends UTF-8);
- ``DATE``, ``DATETIME``, ``TIMESTAMP``: the record's form, null for a zero or impossible date;
- ``JSON``: the source's own JSON (``snapshot_sql``), without TO_BASE64's line breaks; never NULL.

Delivery guarantee: none (formatting only).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from seam.core.errors import SourceError
from seam.core.identifiers import quote
from seam.core.schema import Column, TableSchema
from seam.wire import codecs

try:
    from seam.source._rowjson import render as _render_compiled
except ImportError:  # not built (an executor without the compiled parts): the same in Python
    _render_compiled = None

JSON, NUMBER, QUOTED, STRING, DATE, DATETIME, TIMESTAMP = range(7)


class RowNotRendered(SourceError):
    """A row the source sent that cannot be the record's JSON: never published (as null or otherwise)."""


def text_mode(column: Column) -> int:
    """How the task makes this column's record value from its plain text (``JSON``: the source makes it)."""
    family = codecs.codec(column)
    t = column.data_type
    if column.zerofill:
        return JSON  # the text is zero-padded
    if isinstance(family, codecs.Integer):
        return QUOTED if t == "bigint" and column.unsigned else NUMBER
    if isinstance(family, codecs.Decimal_):
        return QUOTED
    if isinstance(family, (codecs.Text, codecs.Enum, codecs.Set)):
        return STRING if column.charset not in (None, "binary") else JSON
    if isinstance(family, codecs.Date):
        return {"date": DATE, "datetime": DATETIME, "timestamp": TIMESTAMP}[t]
    return JSON


@dataclass(frozen=True)
class RowJson:
    """The chunk's SELECT list and how its rows become (after, key): one mode and one label per column
    (``b'{"name":'``, then ``b',"name":'``), the key's columns by index and their labels."""

    names: tuple[str, ...]
    columns: tuple[str, ...]
    modes: bytes
    labels: tuple[bytes, ...]
    key_columns: tuple[int, ...]
    key_labels: tuple[bytes, ...]

    @classmethod
    def of(cls, schema: TableSchema, key: tuple[str, ...]) -> RowJson:
        names = tuple(schema.names)
        return cls(
            names=names,
            columns=tuple(_select(c) for c in schema.columns),
            modes=bytes(text_mode(c) for c in schema.columns),
            labels=_labels(names),
            key_columns=tuple(names.index(k) for k in key),
            key_labels=_labels(key),
        )

    def render(self, rows) -> list[tuple[bytes, bytes | None]]:
        try:
            if _render_compiled is not None:
                return _render_compiled(rows, self.modes, self.labels, self.key_columns, self.key_labels)
            return render_python(self, rows)
        except (TypeError, ValueError) as exc:  # "column 3: ...": named
            raise RowNotRendered(
                re.sub(r"^column (\d+)", lambda m: f"column {self.names[int(m[1])]}", str(exc))
            ) from None


def _select(column: Column) -> str:
    """The column in the chunk's SELECT: as it is, or as the record's JSON made by the source (cast to BINARY: the
    bytes as the source made them; NULL made ``null`` here, so that a NULL can only mean the source failed)."""
    x = "x." + quote(column.name)
    if text_mode(column) != JSON:
        return x
    expr = codecs.codec(column).snapshot_sql(column, x)
    if column.nullable:
        expr = f"IFNULL({expr}, 'null')"
    return f"CAST({expr} AS BINARY)"


def _labels(names) -> tuple[bytes, ...]:
    return tuple(
        (("{" if i == 0 else ",") + json.dumps(n, ensure_ascii=False) + ":").encode() for i, n in enumerate(names)
    )


_ESCAPES = {0x22: b'\\"', 0x5C: b"\\\\", 0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0C: b"\\f", 0x0D: b"\\r"}
_ESCAPE_TABLE = {c: _ESCAPES.get(c, b"\\u%04X" % c) for c in [*range(0x20), 0x22, 0x5C]}
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _escaped(text: bytes) -> bytes:
    if not any(c < 0x20 or c in (0x22, 0x5C) for c in text):
        return b'"' + text + b'"'
    return b'"' + b"".join(_ESCAPE_TABLE.get(c, bytes((c,))) for c in text) + b'"'


def _real_date(text: bytes, column: int) -> bool:
    if len(text) < 10 or text[4:5] != b"-" or text[7:8] != b"-" or not (text[:4] + text[5:7] + text[8:10]).isdigit():
        raise ValueError(f"column {column}: not a date's text")
    y, m, d = int(text[:4]), int(text[5:7]), int(text[8:10])
    if m > 12 or d > 31:
        raise ValueError(f"column {column}: not a date's text")
    if not (y and m and d):
        return False
    return d <= _DAYS[m - 1] + (m == 2 and y % 4 == 0 and (y % 100 != 0 or y % 400 == 0))


def _value(value: bytes | None, mode: int, column: int) -> bytes:
    if value is None:
        if mode == JSON:
            raise TypeError(f"column {column}: no JSON from the source")
        return b"null"
    if not isinstance(value, bytes):
        raise TypeError(f"column {column}: not bytes")
    if mode == JSON:
        return value.replace(b"\n", b"")
    if mode == NUMBER:
        if not value:
            raise ValueError(f"column {column}: an empty number")
        return value
    if mode == QUOTED:
        return b'"' + value + b'"'
    if mode == STRING:
        return _escaped(value)
    if mode == DATE:
        if len(value) != 10:
            raise ValueError(f"column {column}: not a DATE's text")
        return b'"' + value + b'"' if _real_date(value, column) else b"null"
    if not _real_date(value, column):
        return b"null"
    if len(value) < 19 or value[10:11] != b" " or len(value) > 26 or (len(value) > 19 and value[19:20] != b"."):
        raise ValueError(f"column {column}: not a DATETIME's text")
    fraction = value[20:].ljust(6, b"0")
    return b'"' + value[:10] + b"T" + value[11:19] + b"." + fraction + (b'Z"' if mode == TIMESTAMP else b'"')


def render_python(plan: RowJson, rows) -> list[tuple[bytes, bytes | None]]:
    """What the compiled renderer returns, in Python."""
    out = []
    for row in rows:
        if len(row) != len(plan.modes):
            raise ValueError("a row of another width")
        values = [_value(v, m, i) for i, (v, m) in enumerate(zip(row, plan.modes))]
        after = b"".join(label + v for label, v in zip(plan.labels, values)) + b"}"
        key = (
            b"".join(label + values[i] for label, i in zip(plan.key_labels, plan.key_columns)) + b"}"
            if plan.key_columns
            else None
        )
        out.append((after, key))
    return out
