"""An independent comparer: source table against target table, row by row, sharing no code with Seam.

It reads the source's column types from information_schema itself, reads both sides with the plain drivers
(PyMySQL and psycopg, no Seam normalisation, no Seam SQL) and turns each value into a Python value with its
own small rules, written from the databases' documentation rather than from Seam's record format:

- integers, YEAR, BIT: ``int``; DECIMAL: ``Decimal``; FLOAT: compared as 32-bit floats; DOUBLE: ``float``;
- DATE, DATETIME: ``date`` / naive ``datetime``; TIMESTAMP: naive UTC (the source session runs in UTC, the
  target's timestamptz is converted); zero dates: ``None`` (PostgreSQL cannot hold them; Seam's documented
  mapping: NULL, or ``-infinity`` in a column that is NOT NULL, read here as ``None``); TIME: ``timedelta``;
- SET: a frozenset of members; ENUM and text: ``str``; binary: ``bytes``; JSON: the parsed document;
- spatial: ``SRID:WKB`` (hex of the OGC WKB, little-endian) as each database's own ST_SRID and ST_AsBinary
  print them (PostGIS ``geometry``; a ``bytea`` holds MySQL's stored value: 4-byte SRID, then WKB);
- MariaDB's UUID: ``uuid.UUID``; INET4, INET6: ``ipaddress`` addresses (PostgreSQL ``uuid``, ``inet``);
- a NUL character in source text or JSON strings: U+FFFD (PostgreSQL cannot hold it; Seam's documented
  default mapping, ``target.text_nul: replace``).

A mismatch lists up to five rows missing in the target and five extra, as the comparer read them.
"""

from __future__ import annotations

import collections
import datetime as dt
import ipaddress
import json
import struct
import uuid
from decimal import Decimal

import psycopg
import pymysql

_INTS = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"}
_BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_SPATIAL = {
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
}


def _f32(value) -> float:
    return struct.unpack("<f", struct.pack("<f", float(value)))[0]


def _zero_date(value) -> bool:
    """A date PostgreSQL has no value for (0000-00-00, 2024-00-10, 2024-02-31): PyMySQL hands them back as text."""
    return isinstance(value, str)


def _no_nul(doc):
    """A parsed JSON document with U+FFFD for NUL in its strings (keys too)."""
    if isinstance(doc, str):
        return doc.replace("\x00", "\ufffd")
    if isinstance(doc, dict):
        return {_no_nul(k): _no_nul(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_no_nul(v) for v in doc]
    return doc


def _value(kind: str, value, side: str):
    if value is None:
        return None
    if kind in _INTS:
        return int(value)
    if kind == "bit":
        return int.from_bytes(value, "big") if isinstance(value, (bytes, bytearray)) else int(value)
    if kind == "decimal":
        return Decimal(value).normalize()
    if kind == "float":
        return _f32(value)
    if kind in ("double", "real"):
        return float(value)
    if kind in ("date", "datetime", "timestamp"):
        if _zero_date(value):
            return None
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value
    if kind == "time":
        return (
            value
            if isinstance(value, dt.timedelta)
            else dt.timedelta(
                hours=value.hour, minutes=value.minute, seconds=value.second, microseconds=value.microsecond
            )
        )
    if kind == "set":
        if isinstance(value, (set, frozenset)):
            return frozenset(_no_nul(m) for m in value)
        return frozenset(_no_nul(m) for m in str(value).split(",") if m)
    if kind == "uuid":
        return uuid.UUID(str(value))
    if kind in ("inet4", "inet6"):
        return ipaddress.ip_address(str(value))
    if kind == "json":
        return json.dumps(_no_nul(json.loads(value) if isinstance(value, (str, bytes)) else value), sort_keys=True)
    if kind in _BINARY:
        return bytes(value)
    if kind in _SPATIAL:
        if isinstance(value, (bytes, bytearray)):  # a bytea target: MySQL's stored value
            return f"{int.from_bytes(value[:4], 'little')}:{bytes(value[4:]).hex().upper()}"
        return value.upper()
    return _no_nul(value.decode() if isinstance(value, (bytes, bytearray)) else str(value))


def _canon(row: tuple) -> str:
    return repr(row)


def source_table(mysql_kwargs: dict, db: str, table: str, where: str = "1 = 1"):
    conn = pymysql.connect(**{**mysql_kwargs, "init_command": "SET time_zone = '+00:00'"})  # its own session
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                (db, table),
            )
            columns = [(r[0], r[1].lower()) for r in cur.fetchall()]
            # FLOAT as DOUBLE: the text protocol prints FLOAT with 6 digits, which is not the stored value
            names = ", ".join(_source_column(c.replace("`", "``"), k) for c, k in columns)
            cur.execute(f"SELECT {names} FROM `{db}`.`{table}` WHERE {where}")
            rows = collections.Counter(
                _canon(tuple(_value(k, v, "source") for (_, k), v in zip(columns, r))) for r in cur.fetchall()
            )
    finally:
        conn.close()
    return columns, rows


def _source_column(name: str, kind: str) -> str:
    if kind == "float":
        return f"CAST(`{name}` AS DOUBLE)"
    if kind in _SPATIAL:
        return f"CONCAT(ST_SRID(`{name}`), ':', HEX(ST_AsBinary(`{name}`)))"
    return f"`{name}`"


def target_table(conninfo: dict, db: str, table: str, columns):
    with psycopg.connect(**conninfo) as conn:
        udt = dict(
            conn.execute(
                "SELECT column_name, udt_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = %s",
                (db, table),
            ).fetchall()
        )
        names = ", ".join(_target_column('"' + c.replace('"', '""') + '"', udt.get(c)) for c, _ in columns)
        cur = conn.execute(f'SELECT {names} FROM "{db}"."{table}"')
        return collections.Counter(_canon(tuple(_value(k, v, "target") for (_, k), v in zip(columns, r))) for r in cur)


def _target_column(name: str, udt: str | None) -> str:
    if udt == "geometry":
        return f"ST_SRID({name}) || ':' || encode(ST_AsBinary({name}, 'NDR'), 'hex')"
    if udt in ("date", "timestamp", "timestamptz"):
        return f"NULLIF({name}, '-infinity')"
    return name


def compare(mysql_kwargs: dict, conninfo: dict, db: str, table: str, where: str = "1 = 1") -> str | None:
    """None when the target table holds exactly the source's rows (those matching ``where``); else why not."""
    columns, source = source_table(mysql_kwargs, db, table, where)
    target = target_table(conninfo, db, table, columns)
    if source == target:
        return None
    missing, extra = source - target, target - source
    return (
        f"{db}.{table}: {sum(missing.values())} row(s) missing in the target, {sum(extra.values())} extra; "
        f"missing e.g. {list(missing)[:5]}; extra e.g. {list(extra)[:5]}"
    )


def compare_pipeline(pipeline, db: str, table: str) -> str | None:
    """``compare`` on the connections of a pipeline (only its host, port and credentials are taken)."""
    return compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), db, table)
