"""PostgreSQL side of a table: names, mapped column types, DDL, and the
conversion of normalised record values into COPY rows.

A source table ``db.t`` lands as ``"db"."t"`` (schema named after the source
database, names kept exactly, quoted). The PostgreSQL type of each MySQL type
is defined by its codec (``seam.wire.codecs``; the README's table of types lists
them all).

Zero dates (0000-00-00, 2024-00-10, 2024-02-31, a zero TIMESTAMP), which PostgreSQL has no value for, are null in
records (``seam.wire.codecs``). A column NOT NULL at the source stays NOT NULL in the target: with
``target.zero_dates: -infinity`` (the default) its zero dates land as ``-infinity`` (in such a column a null
record value can only be a zero date); with ``null`` its DATE/DATETIME/TIMESTAMP columns are nullable and hold
them as NULL. Reading the target back for comparison (``read_back_as_records``) turns ``-infinity`` into
the record's null again.

Delivery guarantee: none (DDL and conversion only).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace

import msgspec
import psycopg
from psycopg._copy_base import format_row_text  # psycopg's C formatter (pinned <3.4 for it)
from psycopg.types.datetime import DateLoader, TimestampLoader, TimestamptzLoader
from psycopg.types.string import TextLoader

from seam.core.identifiers import qi
from seam.core.schema import Column, TableSchema
from seam.wire.codecs import Spatial, codec

log = logging.getLogger("seam.target")

_ZERO_DATED = {"date", "datetime", "timestamp"}
INFINITY = "-infinity"
COPY_BUFFER = 1 << 20  # bytes of COPY text handed to the connection at a time


@dataclass(frozen=True)
class Landing:
    """How record values land in a table's target columns (a plain value: it is sent to staging workers)."""

    postgis: bool = True  # spatial columns are PostGIS geometry (else bytea holding MySQL's stored value)
    nul: str = "\ufffd"  # what a NUL in text or JSON becomes (target.text_nul; seam.apply.decode)
    zero_dates: str = INFINITY  # target.zero_dates


def landing_in(conn, qualified: str, schema: TableSchema, landing: Landing) -> Landing:
    """The landing for rows written into a table already in the target: one loaded while zero dates landed as
    NULL (its NOT NULL date columns all nullable there) keeps NULL for them until its next full load, so that
    its rows stay alike (a keyless table's delete finds its row by every value)."""
    dated = [c.name for c in schema.columns if zero_dates_as_infinity(c, landing.zero_dates)]
    if not dated or conn.execute("SELECT to_regclass(%s) IS NULL", (qualified,)).fetchone()[0]:
        return landing  # (a table not there yet is created with this landing)
    not_null = {
        name
        for (name,) in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 AND attnotnull",
            (qualified,),
        ).fetchall()
    }
    return landing if not_null.intersection(dated) else replace(landing, zero_dates="null")


def target_table(db: str, table: str) -> str:
    return f"{qi(db)}.{qi(table)}"


def column_names(conn, db: str, table: str) -> list[str] | None:
    """The target table's column names, or None when it does not exist."""
    rows = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped "
        "ORDER BY attnum",
        (target_table(db, table),),
    ).fetchall()
    return [r[0] for r in rows] or None


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


def copy_rows(copy, rows: Iterable[tuple]) -> None:
    """Rows into a COPY in text format, through psycopg's C formatter at once: ``Copy.write_row``'s Python
    wrappers cost more than the formatting (a staged transaction of a million rows: about 1 s)."""
    buffer, tx = bytearray(), copy.formatter.transformer
    for row in rows:
        format_row_text(row, tx, buffer)
        if len(buffer) > COPY_BUFFER:
            copy.write(buffer)
            buffer = bytearray()
    if buffer:
        copy.write(buffer)


def zero_dates_as_infinity(column: Column, zero_dates: str) -> bool:
    """A NOT NULL DATE/DATETIME/TIMESTAMP column whose zero dates land as -infinity (``target.zero_dates``)."""
    return zero_dates == INFINITY and not column.nullable and column.data_type in _ZERO_DATED


def column_ddl(column: Column, key: tuple[str, ...], landing: Landing) -> str:
    not_null = not column.nullable or column.name in key
    if column.data_type in _ZERO_DATED and not zero_dates_as_infinity(column, landing.zero_dates):
        not_null = False  # it holds zero dates as NULL
    return f"{qi(column.name)} {pg_type(column, landing.postgis)}" + (" NOT NULL" if not_null else "")


def create_table_sql(
    qualified: str,
    schema: TableSchema,
    key: tuple[str, ...],
    extra: str = "",
    unlogged: bool = False,
    landing: Landing = Landing(),
) -> str:
    cols = [column_ddl(c, key, landing) for c in schema.columns]
    if extra:
        cols.append(extra)
    return f"CREATE {'UNLOGGED ' if unlogged else ''}TABLE {qualified} ({', '.join(cols)})"


def row_converter(schema: TableSchema, landing: Landing):
    """A function from a decoded row image (``sink.record_decoder``) to a COPY tuple (BLOBs back to bytes,
    geometries to what their column takes, a NOT NULL column's zero date to -infinity)."""

    astuple = msgspec.structs.astuple
    converters = [(i, codec(c).to_copy(landing.postgis)) for i, c in enumerate(schema.columns)]
    converters = [(i, f) for i, f in converters if f is not None]
    infinite = [i for i, c in enumerate(schema.columns) if zero_dates_as_infinity(c, landing.zero_dates)]
    if not converters and not infinite:
        return astuple

    def convert(image) -> tuple:
        values = list(astuple(image))
        for i, to_copy in converters:
            if values[i] is not None:
                values[i] = to_copy(values[i])
        for i in infinite:
            if values[i] is None:
                values[i] = INFINITY
        return tuple(values)

    return convert


class _ZeroDate:
    """psycopg's loader of a date or timestamp type, with -infinity (a zero date) read as None."""

    def load(self, data):
        return None if bytes(data) == b"-infinity" else super().load(data)  # type: ignore[misc]


def read_back_as_records(conn: psycopg.Connection) -> psycopg.Connection:
    """``conn`` reads -infinity in date and timestamp columns as None: the record's form of a zero date (psycopg
    cannot hold -infinity in a Python date and raises); and jsonb as its text, whose numbers psycopg would read
    as floats (``Json.from_target`` reads them exactly)."""
    for name, loader in (("date", DateLoader), ("timestamp", TimestampLoader), ("timestamptz", TimestamptzLoader)):
        conn.adapters.register_loader(name, type(f"ZeroDate{loader.__name__}", (_ZeroDate, loader), {}))
    for name in ("json", "jsonb"):
        conn.adapters.register_loader(name, TextLoader)
    return conn


def normalize_target(column: Column, value):
    """A value read back from PostgreSQL (psycopg) in the record's canonical form."""
    return None if value is None else codec(column).from_target(column, value)
