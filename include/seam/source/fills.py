"""The value an added column's rows got, from what its ALTER declared and what the source's catalog shows: a
literal as the server stored it, the time of the statement that added it (``CURRENT_TIMESTAMP``), or why the
stream cannot reproduce it (``Unreproduced``: ``seam.source.ddl`` adds the column all the same, ``Unfilled``, and the
table is repaired).

Delivery guarantee: none of its own (pure: the caller publishes what it decides).
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from seam.core.schema import INTEGER_TYPES, Column
from seam.source.declared import (
    COMPUTED,
    BitLiteral,
    EmptyDocument,
    HexLiteral,
    Now,
    NumberLiteral,
    SessionTime,
    empty_document,
    hex_literal,
    is_number,
    now_default,
)
from seam.source.fill_times import statement_time, stored_time, time_digits, time_spelled
from seam.source.sql_text import UnreadableStatement, literal_value
from seam.wire.codecs import json_document

# added columns whose default the stream does not turn into a target value (``Unfilled``), but for a DATE,
# DATETIME, TIME or TIMESTAMP literal spelled as the server stores it (``fill_times.stored_time``, after
# ``time_spelled``; a TIMESTAMP's read on the session's clock, ``SessionTime``) and an ASCII binary one: another
# spelling, or more digits than the column keeps, is the server's to read
_NO_DEFAULT = {"date", "datetime", "timestamp", "time", "bit", "binary", "varbinary", "blob", "json"}
_BINARIES = {"varbinary", "tinyblob", "blob", "mediumblob", "longblob"}  # BINARY(n): padded (``_zero_padded``)
_EMPTY_BY_DEFAULT = {
    *("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "set"),
    *("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"),  # BINARY(n): n zero bytes
}
_GENERATED_STRING = re.compile(r"_\w+\\?'([^'\\]*)\\?'")  # MySQL 8's COLUMN_DEFAULT of DEFAULT ('text')
_FRACTIONLESS = re.compile(r"[-+]?\d+")


def literal_default(value):
    """MariaDB's COLUMN_DEFAULT: None for no default/NULL, the value of a literal, COMPUTED otherwise."""
    if value is None or value.upper() == "NULL":
        return None
    if value.startswith("'") and value.endswith("'"):
        try:  # MariaDB escapes \\, a newline and a NUL with backslashes, a quote doubled
            return literal_value(value)
        except UnreadableStatement:  # an expression between two strings ('a' = 'b')
            return COMPUTED
    if re.fullmatch(r"-?\d+(\.\d+)?", value):
        return value
    hexed = re.fullmatch(r"X'([0-9a-fA-F]*)'", value)  # a BLOB's
    if hexed:
        return hex_literal(hexed.group(1))
    return empty_document(value, whole=True) or COMPUTED  # json_array(), as both servers show it


def mysql_default(column: Column, value: str | None, extra: str) -> str | None:
    """MySQL 8's COLUMN_DEFAULT in MariaDB's spelling, which ``literal_default`` reads: MySQL shows a literal
    unquoted, an expression (``CURRENT_TIMESTAMP``, ``(uuid())``) with DEFAULT_GENERATED in EXTRA. A binary
    column's literal is left unquoted (MySQL shows its bytes, or in hex): read as an expression, the stream
    stops rather than guess. A string in parentheses (``DEFAULT ('')``) is shown as an expression,
    ``_utf8mb4\\'\\'``: read as its literal when it holds neither a quote nor a backslash."""
    if value is not None and "DEFAULT_GENERATED" in extra.upper():
        string = _GENERATED_STRING.fullmatch(value)
        # not a binary column's (its bytes), nor a TIMESTAMP's (on the ALTER's clock, not the catalog's UTC)
        readable = string is not None and column.data_type not in (*_BINARIES, "binary", "timestamp")
        return f"'{string.group(1)}'" if readable else value  # type: ignore[union-attr]
    if value is None or column.data_type in (*_BINARIES, "binary"):
        return value
    return "'" + value.replace("\\", "\\\\").replace("\n", "\\n").replace("\0", "\\0").replace("'", "''") + "'"


def catalog_default(column: Column, value: str | None) -> Any:
    """``literal_default`` of the source's COLUMN_DEFAULT for ``column``; a TIMESTAMP's as a ``SessionTime``
    (the reader's catalog session is on UTC, which is what the rows store). A FLOAT's with a fraction is
    COMPUTED: MariaDB shows six digits (1.23456789 as 1.23457), not the value the rows hold; so is a binary
    column's with a ``?``, which MariaDB shows for each byte that is not UTF-8."""
    literal = literal_default(value)
    if column.data_type == "float" and isinstance(literal, str) and not _FRACTIONLESS.fullmatch(literal):
        return COMPUTED
    if column.data_type in (*_BINARIES, "binary") and isinstance(literal, str) and "?" in literal:
        return COMPUTED  # MariaDB shows each byte of a binary default that is not UTF-8 as ?
    if column.data_type != "timestamp" or not isinstance(literal, str):
        return literal
    try:
        return SessionTime(literal, dt.datetime.fromisoformat(literal))
    except ValueError:  # a zero timestamp
        return literal


class Unreproduced(str):
    """Why the stream cannot give an added column's rows the value the source gave them (a ``fill`` refused)."""


@dataclass(frozen=True)
class Unfilled:
    """An added column's value in the rows there, which the stream cannot reproduce (``why``): the target takes the
    column NULL there, and the table is compared with its source and repaired (``seam.source.stream_ddl``)."""

    why: str


def unreproduced(column: Column, said: Any) -> tuple[None, Unreproduced]:
    """``fill``'s answer for a default the stream does not reproduce (``said``: as the statement or catalog spells
    it)."""
    return None, Unreproduced(f"column {column.name} gets a default the stream cannot reproduce ({said!r})")


def fill(column: Column, value: Any, said: Any) -> tuple[Any, str | None]:
    """(an added column's value in the rows that were there, None), or (None, why the stream cannot)."""
    if isinstance(value, Now):
        time = statement_time(column, value)
        return (time, None) if time is not None else unreproduced(column, said)
    if value is not None and (column.data_type == "json" or isinstance(value, EmptyDocument)):
        return _document(column, value, said)
    if isinstance(value, HexLiteral):
        return _hexadecimal(column, value, said)
    implicit = implicit_default(column)  # NOT NULL and no DEFAULT (DEFAULT NULL would have been refused)
    if value is None and not column.nullable and implicit is not None:  # a BINARY(n)'s n zero bytes, in a BLOB too
        return (_zero_padded(column, implicit) if column.data_type == "binary" else implicit), None
    written = _stored_as_written(column, value)
    value = stored_spelling(column, value)
    if value is COMPUTED or (value is None and not column.nullable) or not written:
        return unreproduced(column, said)
    if column.data_type == "bit" and value is not None:
        value = bit_digits(value)  # as the binlog reader hands a BIT over: its digits
        if value is None:
            return unreproduced(column, said)
        return value, None
    if column.data_type in (*_BINARIES, "binary") and isinstance(value, str) and value.isascii():
        return value, None  # the same bytes in every client character set
    if value is not None and column.data_type in _NO_DEFAULT and not stored_time(column, value):
        return None, Unreproduced(
            f"column {column.name} has a {column.data_type} default the stream does not reproduce"
        )
    if column.data_type == "timestamp" and value is not None:
        if not isinstance(value, SessionTime):
            return None, Unreproduced(
                f"column {column.name} has a timestamp default the stream cannot read in UTC ({said!r})"
            )
        return value.utc.isoformat(sep=" "), None
    return value, None


def _document(column: Column, value: str, said: Any) -> tuple[Any, str | None]:
    """A JSON column's default (MySQL 8's: a string in parentheses, or ``JSON_ARRAY()``) as its rows hold it, the
    document in its record form; an ``EmptyDocument`` in a text column as that text (the server converts it
    to a string). Anything else stops: a number or a binary string, which MySQL does not read as a document,
    or an empty document given to a column of another type."""
    if column.data_type == "json":
        if isinstance(value, str) and not isinstance(value, (NumberLiteral, BitLiteral, HexLiteral)):
            try:
                return json_document(value), None
            except ValueError:  # the server refused it: never seen in a row
                pass
        return unreproduced(column, said)
    if column.data_type not in _EMPTY_BY_DEFAULT - {"set"}:
        return unreproduced(column, said)
    return fill(column, str(value), said)


def _hexadecimal(column: Column, value: HexLiteral, said: Any) -> tuple[Any, str | None]:
    """A hexadecimal literal's bytes in a binary column that holds them all (a BINARY(n)'s padded with zero bytes
    when the record is made), or its unsigned integer in an integer column that holds it; anything else stops (a
    text column reads the bytes in its character set)."""
    data, kind = value.data, column.data_type
    if kind in ("binary", "varbinary"):
        fits = len(data) <= (column.size or 1)
    else:
        fits = kind in _BINARIES and len(data) <= _BYTES.get(kind, len(data))  # a MEDIUMBLOB holds any default
    if fits:
        return data, None
    number = str(int.from_bytes(data, "big"))
    if kind in INTEGER_TYPES and len(data) <= 8 and _fits(column, number):
        return number, None
    return unreproduced(column, said)


def stored_spelling(column: Column, value: Any) -> Any:
    """A literal default as the column stores it: an ENUM's member as defined (the server took 'y' for 'Y'), a
    SET's members in their defined order, a CHAR without its trailing spaces, a FLOAT's number in single
    precision (``_single_precision``), a DATE, DATETIME or TIME in full (``time_spelled``), an ASCII BINARY(n)'s
    padded with zero bytes to n; COMPUTED when no one member matches (then the stream does not guess).
    Other values as they are."""
    kind = column.data_type
    if kind == "float" and is_number(value):
        return _single_precision(column, value)
    if kind == "double" and is_number(value):
        return _rounded_to_digits(column, value)
    if kind in ("date", "datetime", "time") and isinstance(value, str):
        return time_spelled(kind, value)
    if kind == "binary" and isinstance(value, str) and value.isascii():
        return _zero_padded(column, value)
    if not isinstance(value, str) or kind not in ("enum", "set", "char"):
        return value
    if kind == "char":
        return value.rstrip(" ")
    members = tuple(m.rstrip(" ") for m in column.members)  # as the server keeps them
    said = value.split(",") if kind == "set" else [value]
    found = [_member(members, v) for v in said if v or kind == "enum"]
    if None in found:
        return COMPUTED
    return found[0] if kind == "enum" else ",".join(m for m in members if m in found)


def _single_precision(column: Column, number: str) -> Any:
    """A number as a FLOAT column stores it: read as a double (in a FLOAT(M,D) rounded to D digits first,
    ``_rounded_to_digits``), then rounded to single precision, as the server does (1.1 is 1.100000023841858), in
    digits that read back as that value. Zero is 0 (the server shows -0 as 0); COMPUTED beyond FLOAT's range,
    or below zero in an UNSIGNED column (the server refuses both as a default)."""
    rounded = _rounded_to_digits(column, number)
    if rounded is COMPUTED:
        return COMPUTED
    try:
        stored = struct.unpack("<f", struct.pack("<f", float(rounded)))[0]
    except OverflowError:
        return COMPUTED
    if stored == 0:
        return "0"
    return COMPUTED if column.unsigned and stored < 0 else repr(stored)


_FIXED_DIGITS = re.compile(r"(?:float|double)\((\d+),(\d+)\)")


def _rounded_to_digits(column: Column, number: str) -> Any:
    """A number as a FLOAT(M,D) or DOUBLE(M,D) keeps it, in digits that read back as that double: the server's
    ``truncate_double`` in doubles (the whole part, plus the fraction times 10^D rounded half to even, over
    10^D: 1.505 is 1.5, the double just below 1.505), COMPUTED beyond M digits or below zero when UNSIGNED (it
    refuses such a default). A column without (M,D): the number as it is."""
    fixed = _FIXED_DIGITS.match(column.column_type)
    if fixed is None:
        return number
    digits, scale = int(fixed.group(1)), int(fixed.group(2))
    value = float(number)
    if math.isinf(value) or (column.unsigned and value < 0):
        return COMPUTED
    whole = float(math.floor(value))
    power = float(f"1e{scale}")  # the server's table of powers of ten: each the double nearest it
    value = whole + float(round((value - whole) * power)) / power  # round(): half to even, as rint()
    highest = float(f"1e{digits - scale}") - 1.0 / power
    if column.data_type == "float":
        highest = min(highest, 3.4028234663852886e38)  # FLT_MAX
    if abs(value) > highest:
        return COMPUTED
    return repr(value + 0.0)  # -0.0 is 0.0


def _zero_padded(column: Column, value: str) -> Any:
    """An ASCII literal as a BINARY(n) keeps it, n bytes (``'ab'`` is ``'ab\\0\\0'`` in a BINARY(4), as the
    catalog shows it); COMPUTED when longer (the server refuses it)."""
    size = 1 if column.size is None else column.size
    return value.ljust(size, "\0") if len(value) <= size else COMPUTED


def _member(members: tuple[str, ...], value: str) -> str | None:
    """The member ``value`` names: itself, or the one member alike but for case and trailing spaces."""
    if value in members:
        return value
    alike = [m for m in members if m.lower() == value.rstrip(" ").lower()]
    return alike[0] if len(alike) == 1 else None


def bit_digits(value: Any) -> str | None:
    """A BIT default's binary digits: from ``b'101'`` (a statement's or the catalog's spelling) or a number."""
    if not isinstance(value, str):
        return None
    quoted = re.fullmatch(r"b'([01]+)'", value)
    if quoted:
        return quoted.group(1).lstrip("0") or "0"  # the catalog shows b'011' as b'11'
    return format(int(value), "b") if re.fullmatch(r"\d+", value) else None


def implicit_default(column: Column) -> str | None:
    """What MySQL and MariaDB give the rows there in a NOT NULL column added without a DEFAULT: zero, an empty
    string, an ENUM's first member; None where Seam does not reproduce it (a zero date, JSON's and a spatial
    column's empty value, which are not values of their types)."""
    kind = column.data_type
    if kind in INTEGER_TYPES or kind in ("decimal", "float", "double", "bit", "year"):
        return "0"
    if kind == "enum":
        return column.members[0] if column.members else None
    if kind == "time":
        return "00:00:00"
    if kind in _EMPTY_BY_DEFAULT:
        return ""
    return None


def _stored_as_written(column: Column, value: Any) -> bool:
    """Whether the server stores a literal default as written (it rounds 1.545 into DECIMAL(6,2) half up, a
    number into an ENUM is a member's index, a FLOAT keeps a single-precision value), and the column holds it
    whole: MySQL 8 checks a default in parentheses (an expression) only as each row gets it, and a session that
    is not strict clips it there (1000 in a TINYINT is 127, 'abc' in a VARCHAR(2) 'ab')."""
    if isinstance(value, BitLiteral):  # a binary string, but to a BIT
        return column.data_type == "bit"
    if isinstance(value, str) and not _fits(column, value):
        return False
    if column.data_type == "year" and isinstance(value, str):  # 5 is 2005, '70' 1970, 0 0000 and '0' 2000
        return re.fullmatch(r"\d{4}", value) is not None
    if isinstance(value, NumberLiteral) and column.data_type in _EMPTY_BY_DEFAULT - {"set"}:  # 1e3 is '1000'
        return re.fullmatch(r"(?!-0(?:\.0+)?$)-?(?:0|[1-9]\d*)(?:\.\d+)?", value) is not None  # -0 is '0'
    if value is None or not is_number(value):
        return True
    if column.data_type in ("enum", "set"):
        return False
    mantissa, _, exponent = value.lower().partition("e")
    fraction = mantissa.partition(".")[2].rstrip("0")
    if column.data_type in INTEGER_TYPES:
        return not fraction and not exponent
    if column.data_type == "decimal":
        return not exponent and len(fraction) <= (column.numeric_scale or 0)
    return True


_INTEGER_BITS = dict(zip(INTEGER_TYPES, (8, 16, 24, 32, 64)))
_BYTES = {"tinytext": 255, "text": 65_535, "tinyblob": 255, "blob": 65_535}  # the larger ones hold any default


def _fits(column: Column, value: str) -> bool:
    """Whether ``column`` holds a default's value whole: a string's characters (or bytes), an integer's range, a
    DECIMAL's digits before the point. Other types: as the caller checks them."""
    kind = column.data_type
    if kind in ("char", "varchar", "binary", "varbinary"):
        return len(value) <= (1 if column.size is None else column.size)
    if kind in _BYTES:
        return len(value.encode()) <= _BYTES[kind]
    if not is_number(value) or kind not in (*INTEGER_TYPES, "decimal"):
        return True
    number = Decimal(value)
    if kind == "decimal":
        digits = len(str(int(abs(number)))) if int(abs(number)) else 0
        precision = 10 if column.size is None else column.size
        return digits <= precision - (column.numeric_scale or 0) and not (column.unsigned and number < 0)
    bits = _INTEGER_BITS[kind]
    low, high = (0, 2**bits - 1) if column.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return low <= number <= high


def same_default(declared: Any, catalog: str | None, column: Column) -> bool:
    """Whether a declared default is the source's COLUMN_DEFAULT (quoted by MariaDB, plain text in MySQL 8), of
    ``column`` (the catalog shows an ENUM's or SET's default as the column stores it)."""
    if catalog is None or catalog.upper() == "NULL" or declared is None:
        return declared is None and (catalog is None or catalog.upper() == "NULL")
    if isinstance(declared, HexLiteral):
        return _same_bytes(declared, catalog, column)
    if isinstance(declared, Now):  # MariaDB shows NOW() of a DATETIME(2) as current_timestamp(2)
        shown = now_default(catalog)
        return (
            shown is not None
            and shown.date_only == declared.date_only
            and shown.shift == declared.shift
            and time_digits(shown, column) == time_digits(declared, column)
        )
    if column.data_type == "timestamp" and isinstance(declared, str):  # the same instant (a session's spelling)
        theirs = catalog_default(column, catalog)
        if not isinstance(declared, SessionTime) or not isinstance(theirs, SessionTime):  # a zero timestamp
            return not isinstance(theirs, SessionTime) and _fraction_padded(declared) == _fraction_padded(theirs)
        unit = 10 ** (6 - (column.datetime_precision or 0))  # MariaDB truncated more digits (then ``fill`` stops)
        return declared.utc.replace(microsecond=declared.utc.microsecond // unit * unit) == theirs.utc
    if declared is COMPUTED:
        return literal_default(catalog) is COMPUTED
    declared = stored_spelling(column, declared)
    for theirs in (stored_spelling(column, literal_default(catalog)), catalog):
        if theirs == declared or (is_number(theirs) and is_number(declared) and Decimal(theirs) == Decimal(declared)):
            return True
        if column.data_type == "float" and is_number(theirs) and is_number(declared):
            if Decimal(theirs) == Decimal(format(float(declared), ".6g")):
                return True  # MariaDB shows a FLOAT's default in six digits (1.23456789 as 1.23457)
        if bit_digits(theirs) is not None and bit_digits(theirs) == bit_digits(declared):
            return True  # a BIT's default is shown as b'101', whether declared so or as 5
        if isinstance(theirs, str) and _fraction_padded(theirs) == _fraction_padded(declared):
            return True  # '10:00:00.5' is shown as the column keeps it: '10:00:00.500'
    return False


def _same_bytes(declared: HexLiteral, catalog: str, column: Column) -> bool:
    """Whether the catalog shows a hexadecimal default: in hex (MariaDB's BLOB's, MySQL 8's binary column's), as
    its number (an integer column's), or as MariaDB shows a binary string, in text (a BINARY(n)'s with its zero
    bytes), each byte that is not UTF-8 a ``?``, a ``?`` that matches such a byte or itself."""
    theirs, data = literal_default(catalog), declared.data
    if isinstance(theirs, HexLiteral):
        return theirs.data == data
    if catalog.lower() == "0x" + declared:  # MySQL 8's, unquoted (which may be the bytes themselves: only compared)
        return True
    if column.data_type in INTEGER_TYPES:
        return theirs == str(int.from_bytes(data, "big"))
    if column.data_type == "binary":
        data = data.ljust(column.size or 1, b"\0")
    return isinstance(theirs, str) and theirs == data.decode("utf-8", errors="replace").replace("\ufffd", "?")


def _fraction_padded(text: Any) -> Any:
    m = re.fullmatch(r"(-?[\d: -]+)\.(\d+)", text) if isinstance(text, str) else None
    if m is None:
        return text
    fraction = m.group(2).rstrip("0")
    return f"{m.group(1)}.{fraction}" if fraction else m.group(1)
