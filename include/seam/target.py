"""PostgreSQL side of a table: names, mapped column types, DDL, and the
conversion of normalised record values into COPY rows.

A source table ``db.t`` lands as ``"db"."t"`` (schema named after the source
database, names kept exactly, quoted). Type mapping keeps every value exact:

=====================  ===========================================
MySQL                  PostgreSQL
=====================  ===========================================
TINYINT, SMALLINT      smallint (integer when SMALLINT UNSIGNED)
MEDIUMINT, INT         integer (bigint when INT UNSIGNED)
BIGINT                 bigint (numeric(20,0) when UNSIGNED)
DECIMAL(p,s)           numeric(p,s)
FLOAT / DOUBLE         real / double precision
BIT(n)                 bigint (numeric(20,0) for n = 64)
YEAR                   smallint
DATE / DATETIME(p)     date / timestamp(p)
TIMESTAMP(p)           timestamptz(p) (values in UTC)
TIME(p)                interval (MySQL TIME spans -838..838 hours)
CHAR, VARCHAR, TEXT    text (character semantics as in MySQL)
ENUM, SET              text (SET members comma-joined, definition order)
JSON                   jsonb
BINARY, BLOB           bytea
=====================  ===========================================

Temporal columns are nullable in the target even when NOT NULL in the source,
because zero dates become NULL (see ``seam.records``).

Delivery guarantee: none (DDL and conversion only).
"""
from __future__ import annotations

import base64

from seam.schema import Column, TableSchema

_TEMPORAL = {"date", "datetime", "timestamp", "time"}
_BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}


class TargetError(RuntimeError):
    """The target cannot hold a table as configured."""


def qi(name: str) -> str:
    """A PostgreSQL identifier, quoted (double quotes doubled inside)."""
    if len(name.encode()) > 63:
        raise TargetError(f"name {name!r} is longer than PostgreSQL's 63-byte identifier limit")
    return '"' + name.replace('"', '""') + '"'


def target_table(db: str, table: str) -> str:
    return f"{qi(db)}.{qi(table)}"


def pg_type(column: Column) -> str:
    """The PostgreSQL type for a MySQL column. Column definitions arrive in Kafka messages, so every number
    pasted into the DDL is checked to be a small integer first (``_small``)."""
    t, unsigned = column.data_type, column.unsigned
    if t == "tinyint":
        return "smallint"
    if t == "smallint":
        return "integer" if unsigned else "smallint"
    if t in ("mediumint", "int", "integer"):
        return "bigint" if (unsigned and t != "mediumint") else "integer"
    if t == "bigint":
        return "numeric(20,0)" if unsigned else "bigint"
    if t == "decimal":
        precision = column.column_type.split("(")[1].split(",")[0].rstrip(")") if "(" in column.column_type else "10"
        return f"numeric({_small(column, precision, 65)},{_small(column, column.numeric_scale or 0, 30)})"
    if t == "float":
        return "real"
    if t in ("double", "real"):
        return "double precision"
    if t == "bit":
        bits = _small(column, column.column_type.split("(")[1].rstrip(")") if "(" in column.column_type else 1, 64)
        return "numeric(20,0)" if bits > 63 else "bigint"
    if t == "year":
        return "smallint"
    if t == "date":
        return "date"
    if t == "datetime":
        return f"timestamp({_small(column, column.datetime_precision or 0, 6)})"
    if t == "timestamp":
        return f"timestamptz({_small(column, column.datetime_precision or 0, 6)})"
    if t == "time":
        return "interval"
    if t == "json":
        return "jsonb"
    if t in _BINARY:
        return "bytea"
    if t in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"):
        return "text"
    raise TargetError(f"column {column.name!r} has MySQL type {column.column_type}, which Seam does not map")


def _small(column: Column, value, most: int) -> int:
    text = str(value).strip()
    if not text.isdigit() or int(text) > most:
        raise TargetError(f"column {column.name!r}: {text!r} in its type {column.column_type!r} is not a number "
                          f"from 0 to {most}; the message that carried it is not Seam's: check the topic")
    return int(text)


def column_ddl(column: Column, key: tuple[str, ...]) -> str:
    not_null = (not column.nullable or column.name in key) and column.data_type not in _TEMPORAL
    return f"{qi(column.name)} {pg_type(column)}" + (" NOT NULL" if not_null else "")


def create_table_sql(qualified: str, schema: TableSchema, key: tuple[str, ...], extra: str = "",
                     unlogged: bool = False) -> str:
    cols = [column_ddl(c, key) for c in schema.columns]
    if extra:
        cols.append(extra)
    return f"CREATE {'UNLOGGED ' if unlogged else ''}TABLE {qualified} ({', '.join(cols)})"


def row_converter(schema: TableSchema):
    """A function from a decoded row image (``sink.record_decoder``) to a COPY tuple (BLOBs back to bytes)."""
    import msgspec

    astuple = msgspec.structs.astuple
    binary = [i for i, c in enumerate(schema.columns) if c.data_type in _BINARY]
    if not binary:
        return astuple

    def convert(image) -> tuple:
        values = list(astuple(image))
        for i in binary:
            if values[i] is not None:
                values[i] = base64.b64decode(values[i])
        return tuple(values)
    return convert


def normalize_target(column: Column, value):
    """A value read back from PostgreSQL (psycopg) in the record shape's canonical form."""
    from seam.records import normalize

    if column.data_type == "json" and value is not None:
        import json
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return normalize(column, value)
