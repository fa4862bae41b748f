"""Identifiers quoted for each side's SQL: every name Seam writes into a statement goes through one of these
(values never do: they are parameters). Delivery guarantee: none (pure functions)."""

from __future__ import annotations

from seam.core.errors import TargetError

NAME_BYTES = 63  # PostgreSQL's identifier limit (NAMEDATALEN - 1): a longer name is cut


def unfit_names(kinds_and_names) -> str | None:
    """Why one of these (kind, name) pairs (``("column", "amount")``) cannot be a name in the target: longer
    than PostgreSQL's 63 bytes (it would cut it, and two names could become one), or a column beginning with
    ``_seam_`` (the prefix of the columns Seam adds to its staging tables); None when all fit."""
    for kind, name in kinds_and_names:
        if len(name.encode()) > NAME_BYTES:
            return (
                f"the {kind} name {name!r} is {len(name.encode())} bytes, longer than PostgreSQL's 63-byte "
                "identifier limit: rename it at the source, or leave the table out of the pipeline"
            )
        if kind == "column" and name.startswith("_seam_"):
            return (
                f"the column name {name!r} begins with _seam_, the prefix of the columns Seam adds to its staging "
                "tables: rename it at the source, or leave the table out of the pipeline"
            )
    return None


def qi(name: str) -> str:
    """A PostgreSQL identifier, quoted (double quotes doubled inside)."""
    if len(name.encode()) > NAME_BYTES:
        raise TargetError(f"name {name!r} is longer than PostgreSQL's 63-byte identifier limit")
    return '"' + name.replace('"', '""') + '"'


def clipped(name: str, size: int) -> str:
    """The longest start of ``name`` that fits in ``size`` bytes of UTF-8 (a character is never cut), as
    PostgreSQL clips the names it makes up (``<table>_pkey``)."""
    return name.encode()[:size].decode(errors="ignore")


def quote(name: str) -> str:
    """A MySQL identifier, quoted (backticks doubled inside)."""
    return "`" + name.replace("`", "``") + "`"
