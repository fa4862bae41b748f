"""A source table's shape as Seam works with it: its columns (MySQL's own type names, unsigned, scale,
precision, ENUM/SET members) and its primary key. Read from the source by ``seam.source.schema``; every room
builds on these values. Delivery guarantee: none (values only).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

from seam.core.errors import SourceError

INTEGER_TYPES = ("tinyint", "smallint", "mediumint", "int", "bigint")  # narrowest first


class SchemaError(SourceError, LookupError):
    """A table is missing, unreadable, or unusable as configured."""


@dataclass(frozen=True)
class Column:
    name: str
    data_type: str  # lower-case MySQL DATA_TYPE: int, decimal, datetime, set, ...
    column_type: str  # COLUMN_TYPE as the server spells it: "bigint(20) unsigned", "set('Trailers','b')"
    nullable: bool
    numeric_scale: int | None = None
    datetime_precision: int | None = None
    charset: str | None = None  # a text column's CHARACTER_SET_NAME (None: not text, or not known)

    @cached_property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower()

    @cached_property
    def zerofill(self) -> bool:
        """MySQL pads the column's text with zeros ("04294967295"): every rendering in SQL adds 0 first."""
        return "zerofill" in self.column_type.lower()

    @cached_property
    def size(self) -> int | None:
        """The first number in the type's parentheses: a string's length, a DECIMAL's precision (None: none)."""
        m = re.match(r"[^(]*\((\d+)", self.column_type)
        return int(m.group(1)) if m else None

    @property
    def declared(self) -> str:
        """Its type and nullability as a person reads them: ``varchar(10) NOT NULL``."""
        return self.column_type + ("" if self.nullable else " NOT NULL")

    @cached_property
    def members(self) -> tuple[str, ...]:
        """ENUM/SET members in definition order."""
        body = self.column_type[self.column_type.index("(") + 1 : self.column_type.rindex(")")]
        return tuple(m.replace("''", "'") for m in re.findall(r"'((?:[^']|'')*)'", body))


@dataclass(frozen=True)
class TableSchema:
    db: str
    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise SchemaError(f"{self.db}.{self.table} has no column {name!r}")


def added_by_users(in_target: Iterable[str], recorded: list[dict] | None, source: Iterable[str]) -> list[str]:
    """The columns of a target table that users added: neither the source has them nor Seam gave them
    (``recorded``: the columns, as dicts, its last load or DDL the stream followed gave the table; None when
    it has none, so that no column is known as the users'). Loads keep them, windows and validation leave
    them be."""
    if recorded is None:
        return []
    seams = {c["name"] for c in recorded} | set(source)
    return [name for name in in_target if name not in seams]


def redefined(
    recorded: Iterable[dict], now: TableSchema, same: Callable[[Column, Column], bool] | None = None
) -> list[str]:
    """Each column of ``now`` whose definition is not the one ``recorded`` for it (the columns, as dicts, Seam
    last gave the target's table), as ``name old -> new``. ``same``: when two definitions are one (by default,
    the type as spelled and the nullability)."""
    then = {c["name"]: Column(**c) for c in recorded}
    alike = same or (lambda a, b: (a.column_type, a.nullable) == (b.column_type, b.nullable))
    return [
        f"{c.name} {then[c.name].declared} -> {c.declared}"
        for c in now.columns
        if c.name in then and not alike(then[c.name], c)
    ]
