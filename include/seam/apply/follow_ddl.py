"""DDL the stream follows (``seam.source.ddl``: TRUNCATE, renamed, dropped, widened and added columns) made on
a streamed table's target, and its recorded columns with it.

Delivery guarantee: none of its own. It runs inside the sink's transaction that moves the table's position past
the DDL (``seam.apply.changes``), so the target's table and its position change together or not at all; a repair
(``seam.repair``) runs ``align_columns`` on a stopped table in the transaction that records its columns.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec
import psycopg
from psycopg import sql as pgsql

from seam.apply.stream_table import StreamTable
from seam.apply.target import Landing, pg_type, row_converter
from seam.core.identifiers import qi
from seam.core.schema import Column, TableSchema
from seam.state import positions
from seam.wire.boundary import SchemaChange


def alter_target(conn, state_schema: str, stream: StreamTable, schema: TableSchema, change: SchemaChange) -> None:
    """The target's table given ``schema`` (the columns after ``change``), and the columns recorded."""
    if change.truncate:
        _truncate(conn, stream.target)
    align_columns(
        conn, stream.target, stream.schema, schema, stream.key, stream.landing, change.renamed, change.defaults
    )
    positions.store_columns(conn, state_schema, schema.db, schema.table, change.columns)


def align_columns(
    conn,
    target: str,
    old: TableSchema,
    new: TableSchema,
    key: tuple[str, ...],
    landing: Landing,
    renamed: dict[str, str] | None = None,
    defaults: dict[str, Any] | None = None,
    afresh_if_uncastable: bool = False,
) -> list[str]:
    """The target table's columns made from ``old``'s into ``new``'s: ``renamed`` (old name to new), dropped,
    added (with the value the source gave existing rows, ``defaults``; else NULL), retyped (each value cast)
    and NULL allowed where ``new`` allows it. A cast the target cannot make raises; with
    ``afresh_if_uncastable`` such a column (not of the key) is dropped and added again, NULL in every row.
    Returns the columns added afresh."""
    renamed, defaults = renamed or {}, defaults or {}
    for old_name, new_name in renamed.items():
        conn.execute(f"ALTER TABLE {target} RENAME COLUMN {qi(old_name)} TO {qi(new_name)}")
    before = {renamed.get(c.name, c.name): c for c in old.columns}
    for name in set(before) - set(new.names):
        conn.execute(f"ALTER TABLE {target} DROP COLUMN {qi(name)}")
    afresh = []
    for column in new.columns:
        was = before.get(column.name)
        if was is None:
            _add_column(conn, target, landing, new, column, defaults.get(column.name))
            continue
        new_type = pg_type(column, landing.postgis)
        if pg_type(was, landing.postgis) != new_type:
            if not afresh_if_uncastable or column.name in key:
                _retype(conn, target, column.name, new_type)
            elif not _retyped_if_castable(conn, target, column.name, new_type):
                conn.execute(f"ALTER TABLE {target} DROP COLUMN {qi(column.name)}")
                _add_column(conn, target, landing, new, column, None)
                afresh.append(column.name)
                continue
        if column.nullable and not was.nullable and column.name not in key:
            conn.execute(f"ALTER TABLE {target} ALTER COLUMN {qi(column.name)} DROP NOT NULL")
    return afresh


def _retype(conn, target: str, name: str, new_type: str) -> None:
    conn.execute(f"ALTER TABLE {target} ALTER COLUMN {qi(name)} TYPE {new_type} USING {qi(name)}::{new_type}")


def _retyped_if_castable(conn, target: str, name: str, new_type: str) -> bool:
    """The column retyped, each value cast; False (nothing changed: a savepoint) where a value does not cast
    (``'n1'`` to an integer) or the types have no cast (a date to an integer)."""
    try:
        with conn.transaction():
            _retype(conn, target, name, new_type)
    except (psycopg.errors.DataError, psycopg.errors.CannotCoerce, psycopg.errors.DatatypeMismatch):
        return False
    return True


def _truncate(conn, target: str) -> None:
    """TRUNCATE when no other session holds the table; DELETE when one does (a report is not cut off)."""
    try:
        with conn.transaction():
            conn.execute(f"TRUNCATE {target}")
    except psycopg.errors.LockNotAvailable:
        conn.execute(f"DELETE FROM {target}")


def _add_column(conn, target: str, landing: Landing, schema: TableSchema, column: Column, default) -> None:
    ddl = f"ALTER TABLE {target} ADD COLUMN {qi(column.name)} {pg_type(column, landing.postgis)}"
    # (a NOT NULL date column's zero-date default, or none, is -infinity in the rows it is added to)
    one = msgspec.defstruct("One", [("v", Any)])(default)
    value = row_converter(replace(schema, columns=(column,)), landing)(one)[0]
    if value is None:
        conn.execute(ddl)
        return
    conn.execute(pgsql.SQL(ddl + " DEFAULT {}").format(pgsql.Literal(value)))
    conn.execute(f"ALTER TABLE {target} ALTER COLUMN {qi(column.name)} DROP DEFAULT")
