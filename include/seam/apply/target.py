"""PostgreSQL side of a table: names, mapped column types, DDL, and the
conversion of normalised record values into COPY rows.

A source table ``db.t`` lands as ``"db"."t"`` (schema named after the source
database, names kept exactly, quoted). The PostgreSQL type of each MySQL type
is defined by its codec (``seam.wire.codecs``; the README's table of types lists
them all).

Temporal columns are nullable in the target even when NOT NULL in the source,
because zero dates become NULL (see ``seam.wire.records``).

Delivery guarantee: none (DDL and conversion only).
"""

from __future__ import annotations

import logging

import msgspec
import psycopg

from seam.core.identifiers import qi
from seam.core.schema import Column, TableSchema
from seam.wire.codecs import Spatial, codec

log = logging.getLogger("seam.target")

_TEMPORAL = {"date", "datetime", "timestamp", "time"}


def target_table(db: str, table: str) -> str:
    return f"{qi(db)}.{qi(table)}"


def pg_type(column: Column, postgis: bool = True) -> str:
    """The PostgreSQL type for a MySQL column (``seam.wire.codecs``). Column definitions arrive in Kafka messages:
    every number pasted into the DDL is checked to be a small integer first. ``postgis``: the target has
    PostGIS (spatial columns become ``geometry``; without it ``bytea``)."""
    return codec(column).pg_type(column, postgis)


def has_spatial(schema: TableSchema) -> bool:
    return any(isinstance(codec(c), Spatial) for c in schema.columns)


def ensure_postgis(conn) -> bool:
    """Whether the target can hold ``geometry`` columns: PostGIS is there, or is available and may be created
    (in a savepoint of the caller's transaction). Otherwise spatial columns land as ``bytea`` holding MySQL's
    stored value (SRID, then WKB); a table loaded that way keeps it until it is loaded again."""

    if conn.execute("SELECT to_regtype('geometry') IS NOT NULL").fetchone()[0]:
        return True
    why = "PostGIS is not installed on the target's server"
    if conn.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'postgis'").fetchone()[0]:
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS postgis")
            log.info("created the postgis extension in the target: spatial columns land as geometry")
            return True
        except psycopg.Error as exc:
            why = f"CREATE EXTENSION postgis failed ({str(exc).strip().splitlines()[0]})"
    log.warning(
        "%s: spatial columns land as bytea holding MySQL's stored value (4-byte SRID, then WKB); "
        "install PostGIS (or let a superuser CREATE EXTENSION postgis) and load them again for geometry",
        why,
    )
    return False


def column_ddl(column: Column, key: tuple[str, ...], postgis: bool = True) -> str:
    not_null = (not column.nullable or column.name in key) and column.data_type not in _TEMPORAL
    return f"{qi(column.name)} {pg_type(column, postgis)}" + (" NOT NULL" if not_null else "")


def create_table_sql(
    qualified: str,
    schema: TableSchema,
    key: tuple[str, ...],
    extra: str = "",
    unlogged: bool = False,
    postgis: bool = True,
) -> str:
    cols = [column_ddl(c, key, postgis) for c in schema.columns]
    if extra:
        cols.append(extra)
    return f"CREATE {'UNLOGGED ' if unlogged else ''}TABLE {qualified} ({', '.join(cols)})"


def row_converter(schema: TableSchema, postgis: bool = True):
    """A function from a decoded row image (``sink.record_decoder``) to a COPY tuple (BLOBs back to bytes,
    geometries to what their column takes)."""

    astuple = msgspec.structs.astuple
    converters = [(i, codec(c).to_copy(postgis)) for i, c in enumerate(schema.columns)]
    converters = [(i, f) for i, f in converters if f is not None]
    if not converters:
        return astuple

    def convert(image) -> tuple:
        values = list(astuple(image))
        for i, to_copy in converters:
            if values[i] is not None:
                values[i] = to_copy(values[i])
        return tuple(values)

    return convert


def normalize_target(column: Column, value):
    """A value read back from PostgreSQL (psycopg) in the record's canonical form."""
    return None if value is None else codec(column).from_target(column, value)
