"""The rows as they were at the target's position P: the binlog's changes of a table in (P, Q] and each
changed key's image at P (the before image of its first change), and whether an image is in the
validation's scope. Validation compares a key changed after P with that image, so a table under writes, or
a streamed one, is compared exactly at P without pausing anything.

Delivery guarantee: none (reads the binlog only).
"""

from __future__ import annotations

import struct
from typing import Any, cast

from seam.core.errors import ValidationError
from seam.core.pipeline import Pipeline, TableConfig
from seam.core.position import Position
from seam.core.schema import Column, TableSchema
from seam.source.binlog import BinlogReader, LostTransaction, Transaction
from seam.source.head import binlog_files
from seam.source.incremental import Window
from seam.validate.side import INTEGER, Scope
from seam.wire.codecs import codec
from seam.wire.records import normalize_row


def changes_since(
    pipeline: Pipeline, conn, schema: TableSchema, table: TableConfig, start: Position, end: Position
) -> list[tuple[dict | None, dict | None]]:
    """(before, after) images of the table's row changes in (start, end], in binlog order."""
    if not end.after(start):
        return []
    files = binlog_files(conn)
    if start.file not in files:
        raise ValidationError(
            f"{table.name}: the binlog at the target's position {start} has been purged (oldest "
            f"is {files[0] if files else 'none'}), so the table cannot be compared at that "
            "position; run `seam load full` and validate soon after, or stream the table"
        )

    reader = BinlogReader(pipeline.source, start, [schema.db], tables={(schema.db, schema.table)}, end=end)
    out: list[tuple[dict | None, dict | None]] = []
    try:
        for item in _decoded(reader, table, start):
            if isinstance(item, LostTransaction):
                raise ValidationError(
                    f"{table.name}: {item.reason}; compare it with the source as it is now (`seam repair "
                    f"{table.name} --full`), or run `seam load full {table.name}`"
                )
            if not isinstance(item, Transaction):
                continue
            if item.errors:
                raise _undecodable(table, start, next(iter(item.errors.values())))
            for change in item.changes:
                out.append(
                    (
                        None if change.before is None else normalize_row(schema, change.before),
                        None if change.after is None else normalize_row(schema, change.after),
                    )
                )
    finally:
        reader.close()
    return out


def _undecodable(table: TableConfig, start: Position, problem: str) -> ValidationError:
    return ValidationError(
        f"{table.name}: the binlog after the target's position {start} cannot be decoded with "
        f"the table's current definition ({problem}); compare it with the source as it is now instead "
        f"(`seam repair {table.name} --full`: it copies again only the rows that differ), or, when the table was "
        f"recreated or altered since its load, run `seam load full {table.name}`"
    )


def _decoded(stream, table: TableConfig, start: Position):
    try:
        yield from stream
    except (UnicodeDecodeError, KeyError, IndexError, struct.error) as exc:
        raise _undecodable(table, start, f"{type(exc).__name__}: {exc}") from None


def images_at(schema: TableSchema, table: TableConfig, changes) -> dict[tuple[str, ...], dict | None]:
    """Each changed key's row at the start of ``changes``: the before image of its first change."""
    at: dict[tuple[str, ...], dict | None] = {}
    for before, after in changes:
        if before is not None:
            at.setdefault(key_texts(schema, table, before), before)
        if after is not None:
            at.setdefault(key_texts(schema, table, after), None)
    return at


def key_texts(schema: TableSchema, table: TableConfig, image: dict) -> tuple[str, ...]:
    """A normalised row's key in canonical text (``seam.validate.canonical``) form."""
    return cast(tuple[str, ...], value_texts(schema, table.key, image))  # key columns are NOT NULL


def value_texts(schema: TableSchema, columns, image: dict) -> tuple[str | None, ...]:
    """A normalised row's values of ``columns`` in canonical text form (None for NULL)."""
    return tuple(_value_text(schema.column(c), image[c]) for c in columns)


def _value_text(column: Column, value: Any) -> str | None:
    return None if value is None else codec(column).check_text(column, value)


def in_scope(schema: TableSchema, table: TableConfig, scope: Scope, image: dict | None, soft: bool) -> bool:
    if image is None:
        return False
    if scope.key_range is not None:
        k = int(image[table.key[0]])
        if not scope.key_range[0] <= k <= scope.key_range[1]:
            return False
    w = scope.resolved
    if w is not None:
        column = schema.column(w.cursor)
        lo, hi = window_bounds(column, w)
        if image[w.cursor] is None or not lo < cursor_value(column, image[w.cursor]) <= hi:
            return False
    if soft and str(image.get(table.soft_delete) or 0) not in ("0", "False", "false"):
        return False
    return True


def window_bounds(column: Column, w: Window) -> tuple:
    return (int(w.start), int(w.end)) if column.data_type in INTEGER else (w.start, w.end)


def cursor_value(column: Column, value: Any) -> int | str:
    """A normalised cursor value, comparable with ``_window_bounds``."""
    if column.data_type in INTEGER:
        return int(value)
    text = _value_text(column, value)
    assert text is not None  # callers leave rows without a cursor value out of every window
    return text + " 00:00:00.000000" if len(text) == 10 else text
