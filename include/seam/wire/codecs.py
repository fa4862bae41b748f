"""One codec per MySQL type family: the canonical value of a column, defined once, with every rendering of it
next to the others.

Its size: every type family's renderings (record value, PostgreSQL type, COPY value, canonical SQL) sit side
by side on purpose: a type is added or changed in one place.

- ``record(column, value)``: a value as the binlog decoder or a driver's SELECT hands it over -> the record's
  JSON value (the stream and reconciliation compute it in Python).
- ``snapshot_sql(column, x)``: MySQL SQL that computes the same JSON text in the source (a full load's columns
  whose plain text is not their record value; the others the task renders in C: ``seam.source.row_json``);
  ``read_mysql(column, x)``: the column in a plain SELECT, read exactly.
- ``check_mysql(column, x)`` / ``check_pg(column, x, state)``: the text validation hashes, computed inside each
  database (MariaDB's notation; ``pg_functions`` prints PostgreSQL values the same way).
- ``check_text(column, value)``: that text from a record value (validation's keys of differing rows).
- ``pg_type(column, postgis)``: the PostgreSQL column; ``to_copy(value)``: a record value as COPY takes it;
  ``from_target(column, value)``: a value psycopg read back, as a record value.

The families and their record values (the README's table of types shows the same):

=====================  ==================================================================================
Family (MySQL types)   Record value
=====================  ==================================================================================
Integer                JSON number; BIGINT UNSIGNED as a decimal string (JSON numbers lose precision
                       past 2^53). TINYINT(1) is a number, not a boolean.
Bit                    the integer value
Year                   the year as a number (0 for YEAR 0000)
Decimal                a string with exactly the declared scale ("-0.000001"), never a float
Float                  the stored single-precision value widened exactly to double (0.1 is stored as
                       0.10000000149011612): the same from a SELECT, the binlog and the source's SQL
Double                 JSON number (the shortest text that round-trips)
Date, DateTime         "YYYY-MM-DD"; "YYYY-MM-DDTHH:MM:SS.ffffff" (always 6 fraction digits);
                       TIMESTAMP the same in UTC with "Z". Zero and partial-zero dates, days past their
                       month's end (2024-02-31, ALLOW_INVALID_DATES), a zero TIMESTAMP: null (what zeroDateTimeBehavior=convertToNull and Debezium do)
Time                   "[-]HH:MM:SS.ffffff" (TIME spans -838..838 hours)
Text                   the string (any character set, as UTF-8)
Enum, Set              the member as defined (its case too); SET: members comma-joined in definition
                       order, "" for the empty set. An ENUM that arrives as an index is its member
Json                   canonical text: keys sorted, compact, UTF-8 kept, numbers exact and by value (an
                       integral number as an integer, others without trailing zeros: 12.50 is 12.5, 1e3
                       is 1000), never through a float (MySQL 8's JSON holds DECIMALs of 65 digits)
Binary                 base64
Uuid (MariaDB)         lower-case 8-4-4-4-12 text; PostgreSQL ``uuid``
Inet (MariaDB)         INET4/INET6 as MariaDB prints them (IPv4-mapped dotted); PostgreSQL ``inet``
Spatial                {"wkb": base64 of the OGC WKB, "srid": n}: MySQL's stored value (4-byte SRID,
                       then WKB), as Debezium records it. PostgreSQL: PostGIS ``geometry`` with its SRID,
                       or, without PostGIS, ``bytea`` holding MySQL's stored value
=====================  ==================================================================================

Delivery guarantee: none (conversions only).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import uuid
from decimal import Decimal
from typing import Any

import msgspec

from seam.core.errors import TargetError
from seam.core.schema import Column
from seam.wire.binary_forms import ewkb_hex, ewkb_to_record, inet6_text, stored_bytes

_EPOCH = dt.datetime(1970, 1, 1)


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def zero_date_sql(x: str) -> str:
    """True for a zero or partly zero date (0000-00-00, 2024-00-10) or one past its month's end (2024-02-31,
    stored under ALLOW_INVALID_DATES): what a record holds as null. Date arithmetic gives NULL for an invalid
    date on MySQL and MariaDB alike; the day is tested first so that valid dates skip it."""
    return f"(YEAR({x}) = 0 OR MONTH({x}) = 0 OR DAYOFMONTH({x}) = 0 OR DAYOFMONTH({x}) > 28 AND ({x} + INTERVAL 0 DAY) IS NULL)"


def _quoted(expr: str) -> str:
    return f"CONCAT('\"', {expr}, '\"')"  # only for values that never need escaping


def _small(column: Column, value, most: int) -> int:
    """A number from a column definition, which may have arrived in a Kafka message: checked before it is
    pasted into DDL."""
    text = str(value).strip()
    if not text.isdigit() or int(text) > most:
        raise TargetError(
            f"column {column.name!r}: {text!r} in its type {column.column_type!r} is not a number "
            f"from 0 to {most}; the message that carried it is not Seam's: check the topic"
        )
    return int(text)


def _unpadded(column: Column, x: str) -> str:
    """A ZEROFILL column's value without its zero padding (+ 0 keeps a DECIMAL's scale and a DOUBLE's value);
    other columns as they are."""
    return f"({x} + 0)" if column.zerofill else x


def _type_argument(column: Column, default: str) -> str:
    t = column.column_type
    return t.split("(")[1].split(",")[0].split(")")[0] if "(" in t else default


class Codec:
    """The defaults: a value that is its own JSON, checked as text."""

    types: tuple[str, ...] = ()

    def record(self, column: Column, value: Any) -> Any:
        return value

    def snapshot_sql(self, column: Column, x: str) -> str:
        return f"JSON_QUOTE({x})"

    def read_mysql(self, column: Column, x: str) -> str:
        """The column in a SELECT whose driver value ``record`` turns into the exact record value."""
        return x

    def check_mysql(self, column: Column, x: str) -> str:
        return f"CONVERT({x} USING utf8mb4)"

    def check_pg(self, column: Column, x: str, state: str) -> str:
        return f"({x})::text"

    def check_text(self, column: Column, value: Any) -> str:
        return str(value)

    def pg_type(self, column: Column, postgis: bool = True) -> str:
        return "text"

    def to_copy(self, postgis: bool):
        """A function from a record value to what COPY takes, or None when they are the same."""
        return None

    def from_target(self, column: Column, value: Any) -> Any:
        return self.record(column, value)


class Integer(Codec):
    types = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint")

    def record(self, column, value):
        number = int(value)
        if column.data_type == "bigint" and column.unsigned:
            return str(number if number >= 0 else number + 2**64)
        return number

    def snapshot_sql(self, column, x):
        x = _unpadded(column, x)  # "04294967295" is no JSON number
        return _quoted(f"CAST({x} AS CHAR)") if column.data_type == "bigint" and column.unsigned else x

    def check_mysql(self, column, x):
        return f"CAST({x} + 0 AS CHAR)"

    def pg_type(self, column, postgis=True):
        t, unsigned = column.data_type, column.unsigned
        if t == "tinyint":
            return "smallint"
        if t == "smallint":
            return "integer" if unsigned else "smallint"
        if t == "bigint":
            return "numeric(20,0)" if unsigned else "bigint"
        return "bigint" if unsigned and t != "mediumint" else "integer"


class Bit(Codec):
    types = ("bit",)

    def record(self, column, value):
        if isinstance(value, (bytes, bytearray)):
            return int.from_bytes(value, "big")
        if isinstance(value, str):  # python-mysql-replication renders BIT as a string of 0/1
            return int(value, 2) if value else 0
        return int(value)

    def snapshot_sql(self, column, x):
        return f"{x} + 0"

    def check_mysql(self, column, x):
        return f"CAST({x} + 0 AS CHAR)"

    def pg_type(self, column, postgis=True):
        return "numeric(20,0)" if _small(column, _type_argument(column, "1"), 64) > 63 else "bigint"


class Year(Codec):
    types = ("year",)

    def record(self, column, value):  # YEAR holds 1901-2155 or 0000; the binlog decoder turns a stored 0 into 1900
        number = int(value)
        return 0 if number == 1900 else number

    def snapshot_sql(self, column, x):
        return f"{x} + 0"  # a number (JDBC would make it a date)

    def check_mysql(self, column, x):
        return f"CAST({x} + 0 AS CHAR)"

    def pg_type(self, column, postgis=True):
        return "smallint"


class Decimal_(Codec):
    types = ("decimal",)

    def record(self, column, value):
        if value.__class__ is not Decimal:  # a driver's text or number; the binlog's are Decimals already
            value = Decimal(str(value))
        return f"{value:.{column.numeric_scale or 0}f}"

    def snapshot_sql(self, column, x):
        return _quoted(f"CAST({_unpadded(column, x)} AS CHAR)")

    def check_mysql(self, column, x):
        return f"CAST({_unpadded(column, x)} AS CHAR)"

    def pg_type(self, column, postgis=True):
        precision = _type_argument(column, "10")
        return f"numeric({_small(column, precision, 65)},{_small(column, column.numeric_scale or 0, 30)})"


class Float(Codec):
    types = ("float",)

    def record(self, column, value):
        import numpy  # a driver's text ("0.1") and the binlog's float32 both land on the stored value

        return float(numpy.float32(value))

    def snapshot_sql(self, column, x):
        return f"CAST(CAST({x} AS DOUBLE) AS CHAR)"  # widened exactly; MariaDB prints doubles that round-trip

    def read_mysql(self, column, x):
        return f"CAST({x} AS DOUBLE)"  # the text protocol prints FLOAT with 6 digits, not the stored value

    def check_mysql(self, column, x):
        return f"CAST(CAST({x} AS DOUBLE) AS CHAR)"

    def check_pg(self, column, x, state):
        return f"{state}.mariadb_double(({x})::float8)"

    def pg_type(self, column, postgis=True):
        return "real"


class Double(Codec):
    types = ("double", "real")

    def record(self, column, value):
        return float(value)

    def snapshot_sql(self, column, x):
        return f"CAST({_unpadded(column, x)} AS CHAR)"

    def check_mysql(self, column, x):
        return f"CAST({_unpadded(column, x)} AS CHAR)"

    def check_pg(self, column, x, state):
        return f"{state}.mariadb_double(({x})::float8)"

    def pg_type(self, column, postgis=True):
        return "double precision"


class Date(Codec):
    """DATE, DATETIME and TIMESTAMP (sessions run in UTC: TIMESTAMP values are UTC)."""

    types = ("date", "datetime", "timestamp")
    _JSON = {"date": "%Y-%m-%d", "datetime": "%Y-%m-%dT%H:%i:%s.%f", "timestamp": "%Y-%m-%dT%H:%i:%s.%fZ"}
    _CHECK = {"date": "%Y-%m-%d", "datetime": "%Y-%m-%d %H:%i:%s.%f", "timestamp": "%Y-%m-%d %H:%i:%s.%f"}

    def record(self, column, value):
        kind = column.data_type
        if isinstance(value, (str, bytes)):  # drivers hand back invalid (zero, 2024-02-31) dates as text
            try:
                value = (
                    dt.datetime.fromisoformat(_text(value)) if kind != "date" else dt.date.fromisoformat(_text(value))
                )
            except ValueError:
                return None
        if kind == "date":
            return (value.date() if isinstance(value, dt.datetime) else value).isoformat()
        if not isinstance(value, dt.datetime):
            value = dt.datetime.combine(value, dt.time())
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        if kind == "timestamp" and value == _EPOCH:
            return None  # the binlog's form of a zero TIMESTAMP (valid ones start at 00:00:01)
        text = value.isoformat(timespec="microseconds")  # strftime's %Y drops a year's leading zeros: 99, not 0099
        return text + "Z" if kind == "timestamp" else text

    def snapshot_sql(self, column, x):
        # a DATE's own text is YYYY-MM-DD (years below 1000 padded), a third cheaper to render than DATE_FORMAT
        formatted = x if column.data_type == "date" else f"DATE_FORMAT({x}, '{self._JSON[column.data_type]}')"
        return f"IF({zero_date_sql(x)}, NULL, {_quoted(formatted)})"

    def check_mysql(self, column, x):
        return f"IF({zero_date_sql(x)}, NULL, DATE_FORMAT({x}, '{self._CHECK[column.data_type]}'))"

    def check_pg(self, column, x, state):
        t = column.data_type
        if t == "date":
            return f"to_char({x}, 'YYYY-MM-DD')"
        utc = " AT TIME ZONE 'UTC'" if t == "timestamp" else ""
        return f"to_char({x}{utc}, 'YYYY-MM-DD HH24:MI:SS.US')"

    def check_text(self, column, value):
        return str(value).replace("T", " ").rstrip("Z")

    def pg_type(self, column, postgis=True):
        t = column.data_type
        if t == "date":
            return "date"
        precision = _small(column, column.datetime_precision or 0, 6)
        return f"timestamp({precision})" if t == "datetime" else f"timestamptz({precision})"


class Time(Codec):
    types = ("time",)

    def record(self, column, value):
        if isinstance(value, (str, bytes)):
            sign = "-" if _text(value).startswith("-") else ""
            hms, _, frac = _text(value).lstrip("-").partition(".")
            h, m, s = hms.split(":")
            return f"{sign}{int(h):02d}:{int(m):02d}:{int(s):02d}.{frac.ljust(6, '0')[:6]}"
        if isinstance(value, dt.time):
            value = dt.timedelta(
                hours=value.hour, minutes=value.minute, seconds=value.second, microseconds=value.microsecond
            )
        micros = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
        sign = "-" if micros < 0 else ""
        seconds, frac = divmod(abs(micros), 1_000_000)
        return f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}.{frac:06d}"

    def snapshot_sql(self, column, x):
        return _quoted(f"TIME_FORMAT({x}, '%H:%i:%s.%f')")

    def check_mysql(self, column, x):
        return f"TIME_FORMAT({x}, '%H:%i:%s.%f')"

    def check_pg(self, column, x, state):
        return f"{state}.mariadb_time({x})"

    def pg_type(self, column, postgis=True):
        return "interval"


class Text(Codec):
    types = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext")

    def record(self, column, value):
        return _text(value)

    def pg_type(self, column, postgis=True):
        """CHAR(n) and VARCHAR(n) keep their length (characters, as in MySQL); CHAR lands as varchar(n): its
        values as MySQL returns them, without PostgreSQL's blank padding. A NUL maps to at most one character
        (``target.text_nul``), so a value never outgrows its column."""
        if column.data_type in ("char", "varchar"):
            return f"varchar({max(1, int(_type_argument(column, '1')))})"
        return "text"


class Enum(Codec):
    types = ("enum",)

    def record(self, column, value):
        if isinstance(value, int):  # an index, when the binlog lacks metadata
            return column.members[value - 1] if value else ""
        return _text(value)


class Set(Codec):
    types = ("set",)

    def record(self, column, value):  # members exactly as defined (their case too), in definition order
        members = set(value.split(",")) if isinstance(value, str) else {_text(m) for m in value}
        members.discard("")
        return ",".join(m for m in column.members if m in members)


def _json_number(text: str) -> int | Decimal:
    value = Decimal(text)
    if value == value.to_integral_value():
        return int(value)
    return Decimal(format(value, "f").rstrip("0"))  # "f": exact, no context rounds it


_JSON_DOCUMENT = msgspec.json.Encoder(order="sorted", decimal_format="number")


def json_document(text: str | bytes) -> str:
    """A JSON document's text in its one record form: keys sorted, compact, numbers by value and exact
    (``_json_number``). MySQL and PostgreSQL print the same document apart (``12.50``/``1e300`` against
    ``12.5``/``1000...0``): both give this form, so a document read back from the target compares equal to the
    source's, digit for digit."""
    return _JSON_DOCUMENT.encode(json.loads(text, parse_float=_json_number)).decode()


def document_text(value: Any) -> bytes:
    """The text of a decoded document (MySQL 8's binary JSON, ``seam.source.json_binary``): its DECIMALs exact,
    a str a JSON string."""
    return _JSON_DOCUMENT.encode(value)


class Json(Codec):
    types = ("json",)

    def record(self, column, value):
        # text, from a load or the binlog (``seam.source.row_values`` prints MySQL 8's binary JSON as a document)
        return None if value in ("", b"") else json_document(value)

    def snapshot_sql(self, column, x):
        return f"JSON_QUOTE({x})"  # MySQL 8 keeps keys in its own order: sorted later (canonical_json_columns)

    # MySQL prints a document with its keys by length, then bytes, as PostgreSQL's jsonb does, and the same
    # spacing: the checksums agree but where numbers are printed apart (12.50, 12.5), and those rows are compared
    # by value (seam.validate.canonical.json_text). MariaDB's JSON is LONGTEXT: never this codec.
    def check_mysql(self, column, x):
        return f"CAST({x} AS CHAR)"

    def check_pg(self, column, x, state):
        return f"{x}::text"

    def pg_type(self, column, postgis=True):
        return "jsonb"

    def from_target(self, column, value):  # the text: the target's connections read jsonb unparsed
        return json_document(value)


class Binary(Codec):
    types = ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")

    def record(self, column, value):  # the binlog reader hands an empty binary value back as ''
        data = value.encode() if isinstance(value, str) else bytes(value)
        if column.data_type == "binary":  # the binlog drops BINARY(N)'s trailing zero bytes; the column has N
            data = data.ljust(_small(column, _type_argument(column, "1"), 255), b"\0")
        return base64.b64encode(data).decode()

    def snapshot_sql(self, column, x):
        # TO_BASE64 breaks its lines every 76 characters: the snapshot's reader drops those newlines
        # (``seam.source.snapshot.read_chunk``), REPLACE in SQL takes quadratic time (27 s for a 12 MB BLOB)
        return _quoted(f"TO_BASE64({x})")

    def check_mysql(self, column, x):
        return f"LOWER(HEX({x}))"

    def check_pg(self, column, x, state):
        return f"encode({x}, 'hex')"

    def check_text(self, column, value):
        return base64.b64decode(value).hex()

    def pg_type(self, column, postgis=True):
        return "bytea"

    def to_copy(self, postgis):
        return base64.b64decode

    def from_target(self, column, value):
        return self.record(column, value)


class Uuid(Codec):
    """MariaDB's UUID: lower-case 8-4-4-4-12 text, as MariaDB prints it; PostgreSQL ``uuid``. The binlog hands
    over its 16 bytes in text order, trailing zero bytes dropped (all of them: '')."""

    types = ("uuid",)

    def record(self, column, value):
        if isinstance(value, uuid.UUID):  # psycopg's, from the target
            return str(value)
        if isinstance(value, str) and len(value) == 36:  # a SELECT's text
            return value.lower()
        data = value.encode("latin-1") if isinstance(value, str) else bytes(value)
        return str(uuid.UUID(bytes=data.ljust(16, b"\0")))

    def pg_type(self, column, postgis=True):
        return "uuid"


class Inet(Codec):
    """MariaDB's INET4 and INET6: the address as MariaDB (and PostgreSQL's ``host()``) prints it, INET6 as
    RFC 5952 with IPv4-mapped and IPv4-compatible addresses dotted; PostgreSQL ``inet``. The binlog hands over
    4 or 16 bytes, trailing zero bytes dropped."""

    types = ("inet4", "inet6")

    def record(self, column, value):
        if isinstance(value, str) and value:  # a SELECT's text (the binlog hands over bytes, or '' for zeros)
            data = ipaddress.ip_address(value).packed
        else:
            data = value.encode("latin-1") if isinstance(value, str) else bytes(value)
        if column.data_type == "inet4":
            return str(ipaddress.IPv4Address(data.ljust(4, b"\0")))
        return inet6_text(data.ljust(16, b"\0"))

    def check_pg(self, column, x, state):
        return f"host({x})"

    def pg_type(self, column, postgis=True):
        return "inet"

    def from_target(self, column, value):
        return str(value) if column.data_type == "inet4" else inet6_text(value.packed)


class Spatial(Codec):
    """MySQL stores a geometry as its SRID (4 bytes, little-endian) followed by the OGC WKB (little-endian);
    the binlog and a SELECT hand over those bytes. Validation hashes them as lower-case hex."""

    types = (
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
    )

    def record(self, column, value):
        stored = value.encode("latin-1") if isinstance(value, str) else bytes(value)
        return {"wkb": base64.b64encode(stored[4:]).decode(), "srid": int.from_bytes(stored[:4], "little")}

    def snapshot_sql(self, column, x):
        stored = f"CAST({x} AS BINARY)"
        return (
            f'CONCAT(\'{{"wkb":"\', TO_BASE64(SUBSTRING({stored}, 5)), \'","srid":\', '
            f"CAST(CONV(HEX(REVERSE(LEFT({stored}, 4))), 16, 10) AS CHAR), '}}')"
        )

    def check_mysql(self, column, x):
        return f"LOWER(HEX(CAST({x} AS BINARY)))"

    def check_pg(self, column, x, state):
        return f"{state}.mysql_geometry({x})"  # overloaded: PostGIS geometry, or the fallback's bytea

    def check_text(self, column, value):
        return (value["srid"].to_bytes(4, "little") + base64.b64decode(value["wkb"])).hex()

    def pg_type(self, column, postgis=True):
        return "geometry" if postgis else "bytea"

    def to_copy(self, postgis):
        return ewkb_hex if postgis else stored_bytes

    def from_target(self, column, value):
        if isinstance(value, str):  # PostGIS geometry as psycopg reads it: hex EWKB
            return ewkb_to_record(bytes.fromhex(value))
        return self.record(column, value)


_BY_TYPE: dict[str, Codec] = {
    t: codec
    for codec in (
        Integer(),
        Bit(),
        Year(),
        Decimal_(),
        Float(),
        Double(),
        Date(),
        Time(),
        Text(),
        Enum(),
        Set(),
        Json(),
        Binary(),
        Uuid(),
        Inet(),
        Spatial(),
    )
    for t in codec.types
}
SUPPORTED = tuple(sorted(_BY_TYPE))


def codec(column: Column) -> Codec:
    found = _BY_TYPE.get(column.data_type)
    if found is None:
        raise TargetError(f"column {column.name!r} has MySQL type {column.column_type}, which Seam does not map")
    return found


def record_value(column: Column, value: Any) -> Any:
    """A source value (from a SELECT or from a binlog event) as the record holds it."""
    return None if value is None else codec(column).record(column, value)
