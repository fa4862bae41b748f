"""The copies an online schema change builds beside a followed table, and what was done to their columns, so
that the cut-over which swaps one in follows a renamed column as a rename (the target keeps its values) rather
than as one column dropped and another added (every row's value copied again by the repair after it).

gh-ost creates its copy ``LIKE`` the table (``_t_gho``), pt-online-schema-change with the table's own definition
under another name (``_t_new``); both then run the user's ALTER on the copy, fill it, and swap it in with
``RENAME TABLE t TO _t_old, _t_new TO t`` (``seam.source.ddl``: a "cutover"), or with gh-ost's two-step cut-over,
``RENAME TABLE t TO _t_del`` then ``RENAME TABLE _t_gho TO t`` (``seam.source.stream_ddl``). A copy is tracked
from its CREATE when its columns are those of a followed table in its database, through its ALTERs, until it is
dropped or renamed; one the reader did not see created (it started later) or could not read is not known.

Delivery guarantee: none of its own. What it says only spares work: the repair that follows every cut-over
compares every row either way, so a rename it missed or read wrongly costs a copy of that column, never a
wrong row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from seam.core.position import Position
from seam.source.binlog import Statement
from seam.source.ddl import composed_clauses, ddl_effect
from seam.source.sql_text import (
    NAME,
    UnreadableStatement,
    closing_parenthesis,
    plain_statement,
    split_clauses,
    table_name_at,
    unquote,
)

Key = tuple[str, str]
MAX_TRACKED = 100  # copies in flight at once; the oldest is forgotten first
_NAMES_CREATE = re.compile("create", re.I)
# what can change a copy's columns or take it away (its rows, even logged as a statement, do neither)
RESHAPES = re.compile(r"\s*(ALTER|DROP|RENAME|CREATE)\b", re.I)


@dataclass
class Ghost:
    columns: tuple[str, ...]  # as created: those of the followed table it copies
    alters: list[tuple[Position, list[tuple]]] | None  # the column clauses run on it since, in order; None: not known
    created: Position
    # where it was renamed (the cut-over took it) or dropped: kept, for a reader that reads that again
    gone: Position | None = None


class Ghosts:
    """Kept by the change reader; ``see`` each statement after the followed tables took it."""

    def __init__(self) -> None:
        self.tracked: dict[Key, Ghost] = {}
        self.changed = False  # since ``rows`` was last asked for

    @classmethod
    def restored(cls, rows: list[dict], start: Position) -> Ghosts:
        """The copies ``rows`` saved (``seam.state.ghost_tables``) for a reader that reads the binlog after
        ``start``: what it will read again is left for it to see again. (A copy whose cut-over the sink had not
        applied when the reader stopped is there again: gh-ost's two-step cut-over read again stopped the table.)"""
        ghosts = cls()
        for row in rows:
            created = Position(*row["created"])
            if created.after(start) or (row.get("gone") and not Position(*row["gone"]).after(start)):
                continue
            alters = row["alters"]
            if alters is not None:
                alters = [
                    (Position(*at), [_tuples(c) for c in clauses])
                    for at, clauses in alters
                    if not Position(*at).after(start)
                ]
            ghosts.tracked[(row["db"], row["name"])] = Ghost(tuple(row["columns"]), alters, created)
        return ghosts

    def rows(self) -> list[dict]:
        """The copies as plain data, to save (``restored`` reads them back)."""
        self.changed = False
        return [
            {
                "db": db,
                "name": name,
                "columns": list(ghost.columns),
                "alters": None if ghost.alters is None else [[_at(at), clauses] for at, clauses in ghost.alters],
                "created": _at(ghost.created),
                "gone": None if ghost.gone is None else _at(ghost.gone),
            }
            for (db, name), ghost in self.tracked.items()
        ]

    def see(
        self, statement: Statement, followed_columns: Callable[[], Mapping[tuple[str, str], tuple[str, ...]]]
    ) -> None:
        """``followed_columns``: each followed table's columns now, by (db, table), asked for at a CREATE only."""
        fold = statement.fold_names
        created = created_table(statement.query, statement.schema, statement.sql_mode, fold)
        if created is not None:
            followed = {(db.lower(), t.lower()) if fold else (db, t): c for (db, t), c in followed_columns().items()}
            (db, table), (kind, what) = created
            if db is None:  # (no database named, none in use: no ALTER could name it either)
                return
            name = (db, table)
            self.changed |= self.tracked.pop(name, None) is not None
            if kind == "like":
                columns = followed.get(what)
            else:  # pt-online-schema-change: the followed table's definition under another name
                columns = tuple(what)
                columns = columns if any(k[0] == name[0] and c == columns for k, c in followed.items()) else None
            if columns is not None and name not in followed:
                self.tracked[name] = Ghost(columns, [], statement.position)
                self.changed = True
                while len(self.tracked) > MAX_TRACKED:  # the gone first
                    del self.tracked[next((k for k, g in self.tracked.items() if g.gone), next(iter(self.tracked)))]
            return
        present = self._present()
        if not present or not _reshapes(statement):
            return
        for name, copy in present:
            effect = ddl_effect(statement.query, statement.schema, name[0], name[1], statement.sql_mode, fold)
            if effect is None or effect[0] == "truncate":
                continue
            self.changed = True
            if effect[0] in ("alter", "default") and copy.alters is not None and not statement.in_transaction:
                copy.alters.append((statement.position, effect[1]))
            elif effect[0] in ("alter", "default"):
                copy.alters = None
            else:  # dropped, renamed (the cut-over has taken it by then), or something it cannot follow
                copy.gone = statement.position

    def _present(self) -> list[tuple[Key, Ghost]]:
        return [(key, ghost) for key, ghost in self.tracked.items() if ghost.gone is None]

    def copies_of(self, db: str, columns: tuple[str, ...]) -> list[Key]:
        """The copies in ``db`` made of a table with ``columns``."""
        return [key for key, ghost in self._present() if key[0].lower() == db.lower() and ghost.columns == columns]

    def renames(self, copy: Key, columns: tuple[str, ...]) -> dict[str, str]:
        """The columns the ALTERs on ``copy`` renamed (old name -> new), when it was created with ``columns``
        (the followed table's before the cut-over); nothing when it is not known."""
        tracked = self.tracked.get(copy)
        if tracked is None or tracked.gone is not None or tracked.alters is None or tracked.columns != columns:
            return {}
        clauses = composed_clauses(list(columns), [c for _, c in tracked.alters])
        if isinstance(clauses, str):
            return {}
        return {c[1]: c[2] for c in clauses if c[0] in ("rename", "change")}


def _at(position: Position) -> list:
    return [position.file, position.pos, position.row]


def _tuples(value: Any) -> Any:
    """A clause read back from JSON: its lists as the tuples ``seam.source.ddl`` made."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _reshapes(statement: Statement) -> bool:
    try:
        return RESHAPES.match(plain_statement(statement.query, statement.sql_mode)) is not None
    except UnreadableStatement:
        return True


# what a CREATE TABLE's parenthesised list holds besides columns
_NOT_A_COLUMN_DEFINITION = re.compile(
    r"(PRIMARY|KEY|INDEX|UNIQUE|FULLTEXT|SPATIAL|CONSTRAINT|FOREIGN|CHECK|PERIOD)\b", re.I
)


def created_table(
    query: str, default_db: str | None, sql_mode: int | None = None, fold_names: bool = False
) -> tuple[tuple[str | None, str], tuple[str, Any]] | None:
    """A ``CREATE TABLE`` of a table that stays (not ``TEMPORARY``, not ``... SELECT``): its name, folded as
    ``ddl_effect`` folds it, and ``("like", name)`` or ``("columns", [name, ...])`` (its columns in order);
    None for any other statement: how an online schema change builds its copy."""
    if not _NAMES_CREATE.search(query):  # (C speed: most statements here are no CREATE, some are long)
        return None
    try:
        q = plain_statement(query, sql_mode).strip().rstrip(";").strip()
    except UnreadableStatement:
        return None
    m = re.match(r"CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?", q, re.I)
    if not m:
        return None
    name, end = table_name_at(q, m.end(), default_db, fold_names)
    if name is None:
        return None
    rest = q[end:].lstrip()
    like = re.match(r"\(?\s*LIKE\s+", rest, re.I)
    if like:
        source, _ = table_name_at(rest, like.end(), default_db, fold_names)
        return (name, ("like", source)) if source else None
    close = closing_parenthesis(rest)
    if close is None or re.search(r"\bSELECT\b", rest[close:], re.I):
        return None
    columns = []
    for clause in split_clauses(rest[1:close]):
        if _NOT_A_COLUMN_DEFINITION.match(clause):
            continue
        column = re.match(NAME, clause)
        if not column:
            return None
        columns.append(unquote(column.group(0)))
    return name, ("columns", columns)
