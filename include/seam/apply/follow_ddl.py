"""DDL the stream follows (``seam.source.ddl``: TRUNCATE, renamed, dropped, widened and added columns) made on
a streamed table's target, and its recorded columns with it.

Delivery guarantee: none of its own. It runs inside the sink's transaction that moves the table's position past
the DDL (``seam.apply.changes``), so the target's table and its position change together or not at all.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec
import psycopg
from psycopg import sql as pgsql

from seam.apply.stream_table import StreamTable
from seam.apply.target import pg_type, row_converter
from seam.core.identifiers import qi
from seam.core.schema import Column, TableSchema
from seam.state import positions
from seam.wire.boundary import SchemaChange


def alter_target(conn, state_schema: str, stream: StreamTable, schema: TableSchema, change: SchemaChange) -> None:
    """The target's table given ``schema`` (the columns after ``change``), and the columns recorded."""
    target, old = stream.target, stream.schema
    if change.truncate:
        _truncate(conn, target)
    for old_name, new_name in change.renamed.items():
        conn.execute(f"ALTER TABLE {target} RENAME COLUMN {qi(old_name)} TO {qi(new_name)}")
    before = {change.renamed.get(c.name, c.name): c for c in old.columns}
    for name in set(before) - set(schema.names):
        conn.execute(f"ALTER TABLE {target} DROP COLUMN {qi(name)}")
    for column in schema.columns:
        was = before.get(column.name)
        if was is None:
            _add_column(conn, stream, schema, column, change.defaults.get(column.name))
            continue
        new_type = pg_type(column, stream.postgis)
        if pg_type(was, stream.postgis) != new_type:
            conn.execute(f"ALTER TABLE {target} ALTER COLUMN {qi(column.name)} TYPE {new_type}")
        if column.nullable and not was.nullable and column.name not in stream.key:
            conn.execute(f"ALTER TABLE {target} ALTER COLUMN {qi(column.name)} DROP NOT NULL")
    positions.store_columns(conn, state_schema, old.db, old.table, change.columns)


def _truncate(conn, target: str) -> None:
    """TRUNCATE when no other session holds the table; DELETE when one does (a report is not cut off)."""
    try:
        with conn.transaction():
            conn.execute(f"TRUNCATE {target}")
    except psycopg.errors.LockNotAvailable:
        conn.execute(f"DELETE FROM {target}")


def _add_column(conn, stream: StreamTable, schema: TableSchema, column: Column, default) -> None:
    ddl = f"ALTER TABLE {stream.target} ADD COLUMN {qi(column.name)} {pg_type(column, stream.postgis)}"
    # (a NOT NULL date column's zero-date default, or none, is -infinity in the rows it is added to)
    value = row_converter(replace(schema, columns=(column,)), stream.landing)(
        msgspec.defstruct("One", [("v", Any)])(default)
    )[0]
    if value is None:
        conn.execute(ddl)
        return
    conn.execute(pgsql.SQL(ddl + " DEFAULT {}").format(pgsql.Literal(value)))
    conn.execute(f"ALTER TABLE {stream.target} ALTER COLUMN {qi(column.name)} DROP DEFAULT")
