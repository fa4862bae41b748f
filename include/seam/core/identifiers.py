"""Identifiers quoted for each side's SQL: every name Seam writes into a statement goes through one of these
(values never do: they are parameters). Delivery guarantee: none (pure functions)."""

from __future__ import annotations

from seam.core.errors import TargetError


def qi(name: str) -> str:
    """A PostgreSQL identifier, quoted (double quotes doubled inside)."""
    if len(name.encode()) > 63:
        raise TargetError(f"name {name!r} is longer than PostgreSQL's 63-byte identifier limit")
    return '"' + name.replace('"', '""') + '"'


def quote(name: str) -> str:
    """A MySQL identifier, quoted (backticks doubled inside)."""
    return "`" + name.replace("`", "``") + "`"
