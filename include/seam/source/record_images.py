"""A followed table's row images straight in record values (``seam.wire.codecs``' canonical forms).

The change reader used to decode each value into a Python object (``seam.source.row_values``) and turn it into
its record value a moment later (``seam.wire.records.normalize_row``): two thirds of its time. For the column
families whose layout and record value are simple (integers, FLOAT, DOUBLE, DECIMAL, DATE, DATETIME2,
TIMESTAMP2, UTF-8 text) the compiled ``seam.source._rowimages`` does both in one step; every other column is
read by its Python reader and codec, called from there. An event the compiled code is not sure of (``Unsure``:
an invalid date, bytes that are not UTF-8, an image past its event) is decoded the Python way, whole, which
gives the exact value or the exact error; so the result is always the Python path's.

A table map whose columns are not the schema's, by name and in order (rows read before a DDL the schema
already follows), is read the Python way too, and fails there as it did.

Without the compiled module (a checkout where ``make setup`` has not built it) everything goes the Python way,
slower, with the same records; the change reader says so when it starts.

Delivery guarantee: none (decoding only); nothing is dropped without an error.
"""

from __future__ import annotations

from pymysqlreplication.constants import FIELD_TYPE

from seam.core.schema import Column, TableSchema
from seam.source.declared import collation_charset
from seam.source.row_values import text_encoding
from seam.source.rows import Decoder, Rows
from seam.wire.codecs import codec
from seam.wire.records import normalize_row

try:
    from seam.source import _rowimages as native  # type: ignore[attr-defined]
except ImportError:  # not built: see the docstring
    native = None


# the binlog's integer types and the schema type each must come with to be read natively
_INTEGERS = {
    FIELD_TYPE.TINY: ("tinyint", 1),
    FIELD_TYPE.SHORT: ("smallint", 2),
    FIELD_TYPE.INT24: ("mediumint", 3),
    FIELD_TYPE.LONG: ("int", 4),
    FIELD_TYPE.LONGLONG: ("bigint", 8),
}
_TEXT = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext")


def _native_kind(mapped, column: Column) -> tuple[int, int, int] | None:
    """(kind, a, b) of ``_rowimages`` for a column whose binlog layout and schema type it reads exactly."""
    t, data_type = mapped.type, column.data_type
    if t in _INTEGERS:
        name, size = _INTEGERS[t]
        if data_type != name and not (name == "int" and data_type == "integer"):
            return None
        if size == 8 and column.unsigned:
            return native.U64_TEXT, 0, 0  # Integer.record: BIGINT UNSIGNED as text (a signed read wraps to it)
        kinds = {1: "8", 2: "16", 3: "24", 4: "32", 8: "64"}
        return getattr(native, ("U" if mapped.unsigned else "I") + kinds[size]), 0, 0
    if t == FIELD_TYPE.FLOAT and data_type == "float":
        return native.FLOAT, 0, 0
    if t == FIELD_TYPE.DOUBLE and data_type in ("double", "real"):
        return native.DOUBLE, 0, 0
    if t == FIELD_TYPE.NEWDECIMAL and data_type == "decimal" and mapped.decimals == (column.numeric_scale or 0):
        if 1 <= mapped.precision <= 65 and 0 <= mapped.decimals <= min(30, mapped.precision):
            return native.DECIMAL, mapped.precision, mapped.decimals
        return None
    if t == FIELD_TYPE.DATE and data_type == "date":
        return native.DATE, 0, 0
    if t == FIELD_TYPE.DATETIME2 and data_type == "datetime" and 0 <= mapped.fsp <= 6:
        return native.DATETIME2, mapped.fsp, 0
    if t == FIELD_TYPE.TIMESTAMP2 and data_type == "timestamp" and 0 <= mapped.fsp <= 6:
        return native.TIMESTAMP2, mapped.fsp, 0
    if data_type in _TEXT and text_encoding(mapped) == "utf8":
        if t in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING):
            return native.UTF8, 2 if mapped.max_length > 255 else 1, 0
        if t == FIELD_TYPE.BLOB:
            return native.UTF8, mapped.length_size, 0
    return None


# the schema types a binlog type of exact value comes with; a text, binary or other type is not checked (its
# value is kept whole, and one the target cannot hold stops the table there)
_EXACT_TYPES = {
    **{t: (name, "integer") if name == "int" else (name,) for t, (name, _) in _INTEGERS.items()},
    FIELD_TYPE.NEWDECIMAL: ("decimal",),
    FIELD_TYPE.FLOAT: ("float",),
    FIELD_TYPE.DOUBLE: ("double", "real"),
    FIELD_TYPE.DATE: ("date",),
    FIELD_TYPE.DATETIME: ("datetime",),
    FIELD_TYPE.DATETIME2: ("datetime",),
    FIELD_TYPE.TIMESTAMP: ("timestamp",),
    FIELD_TYPE.TIMESTAMP2: ("timestamp",),
    FIELD_TYPE.TIME: ("time",),
    FIELD_TYPE.TIME2: ("time",),
    FIELD_TYPE.YEAR: ("year",),
}
_EXACT_NAMES = {name for names in _EXACT_TYPES.values() for name in names}


def unlike_type(mapped, column: Column) -> bool:
    """Whether a table map's column (``mapped``) holds another exact type than the followed ``column``: another
    integer width or signedness, DECIMAL precision or scale, fractional seconds, or a number or time where a
    text is followed (or the other way). Read with the followed type, its values would be cut or rounded."""
    followed = _EXACT_TYPES.get(mapped.type)
    if followed is None:
        return column.data_type in _EXACT_NAMES
    if column.data_type not in followed:
        return True
    if mapped.type in _INTEGERS:
        return bool(mapped.unsigned) != column.unsigned
    if mapped.type == FIELD_TYPE.NEWDECIMAL:
        return f"({mapped.precision},{mapped.decimals})" not in column.column_type.replace(" ", "")
    if mapped.type in (FIELD_TYPE.DATETIME2, FIELD_TYPE.TIMESTAMP2, FIELD_TYPE.TIME2):
        return mapped.fsp != (column.datetime_precision or 0)
    return False


def logged_charsets(decoder: Decoder) -> dict[str, str | None]:
    """Each column's character set as the table map logs it (its collation's; None: not a text column, or not
    logged)."""
    found = {}
    for name, column in zip(decoder.names, decoder.columns):
        collation = getattr(column, "collation_name", None)
        found[name] = collation_charset(collation) if collation and collation != "binary" else None
    return found


def plan(decoder: Decoder, schema: TableSchema) -> tuple | None:
    """Per column of the map: (name, kind, a, b, reader, record, column), or None when the map's columns are
    not the schema's. Made once per (table map, schema) and kept on the decoder."""
    held = decoder.__dict__.get("_record_plan")
    if held is not None and held[0] is schema:
        return held[1]
    made: tuple | None = None
    if native is not None and tuple(decoder.names) == schema.names and not decoder.unnamed:
        columns: list[tuple] = []
        for mapped, column, read in zip(decoder.columns, schema.columns, decoder.readers):
            kind = _native_kind(mapped, column)
            if kind is None:
                columns.append((column.name, native.PY, 0, 0, read, codec(column).record, column))
            else:
                columns.append((column.name, *kind, None, None, None))
        made = tuple(columns)
    decoder.__dict__["_record_plan"] = (schema, made)
    return made


def record_images(event: Rows, schema: TableSchema) -> list[tuple[dict | None, dict | None]]:
    """The event's rows as (before, after) in record values, as ``normalize_row`` would give them."""
    decoder = event.decoder
    if native is not None and decoder is not None:
        body = event.body()
        made = plan(decoder, schema) if body is not None else None
        if made is not None:
            try:
                return native.images(event.data, body, event.end, event.op, made)
            except native.Unsure:
                pass  # the Python way below: the exact value, or the exact error
    return [
        (
            None if before is None else normalize_row(schema, before),
            None if after is None else normalize_row(schema, after),
        )
        for before, after in event.images()
    ]
