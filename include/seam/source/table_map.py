"""The ENUM and SET member names of a binlog table map, as the bytes the source logged them in
(binlog_row_metadata=FULL logs them in the column's character set).

python-mysql-replication decodes them as UTF-8 and turns a name it cannot decode into "": the members of a
latin1 ENUM with an 'é', or of any utf16 ENUM, would reach the target as "". The change reader reads the
bytes here and decodes them with the column's character set (``seam.source.row_values``), or fails that
table's rows.

Delivery guarantee: none (parsing only).
"""

from __future__ import annotations

_SET_STR_VALUE, _ENUM_STR_VALUE = 5, 6  # optional metadata field types (MySQL's Table_map_log_event)
_WIDTHS = {252: 2, 253: 3, 254: 8}


def _packed(body: bytes, at: int) -> tuple[int, int]:
    """A packed integer (MySQL's net_field_length) at ``at``: (value, where the next field starts)."""
    first = body[at]
    if first < 251:
        return first, at + 1
    width = _WIDTHS.get(first)
    if width is None:
        raise ValueError(f"a table map field length coded as {first:#x}")
    return int.from_bytes(body[at + 1 : at + 1 + width], "little"), at + 1 + width


def _name_lists(body: bytes, at: int, end: int) -> list[list[bytes]]:
    lists = []
    while at < end:
        count, at = _packed(body, at)
        names = []
        for _ in range(count):
            size, at = _packed(body, at)
            names.append(bytes(body[at : at + size]))
            at += size
        lists.append(names)
    return lists


def member_names(body: bytes) -> tuple[list[list[bytes]], list[list[bytes]]]:
    """(the members of each ENUM column, of each SET column), in column order, from a TABLE_MAP event's body
    after its post-header (schema, table, column types, metadata, NULL bitmap, optional metadata), without
    its checksum."""
    at = 1 + body[0] + 1  # the schema's name, NUL-terminated
    at += 1 + body[at] + 1  # the table's
    columns, at = _packed(body, at)
    at += columns  # their types
    metadata, at = _packed(body, at)
    at += metadata + (columns + 7) // 8  # the types' metadata, then the NULL bitmap
    enums: list[list[bytes]] = []
    sets: list[list[bytes]] = []
    while at < len(body):
        kind = body[at]
        length, at = _packed(body, at + 1)
        if kind == _ENUM_STR_VALUE:
            enums = _name_lists(body, at, at + length)
        elif kind == _SET_STR_VALUE:
            sets = _name_lists(body, at, at + length)
        at += length
    return enums, sets
