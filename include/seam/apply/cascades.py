"""Foreign-key cascades applied in the target, level by level.

InnoDB applies ON DELETE / ON UPDATE CASCADE and SET NULL inside the storage
engine: the binlog has the parent's row and nothing for the rows the rule
changed. The change reader publishes one ``x`` record per level (see
seam.wire.records): the first level names the parent's old and new values, so
the sink changes the child's rows that reference them. Which child rows went
is known only in the target, so a level below names the level above
(``via``): when the sink applies a level whose table other streamed tables
reference (``keep``), it records the changed rows' referenced values in
``seam.cascade_rows`` in the same transaction; the level below waits until
its parent table has applied that position and then changes its own rows
that referenced them. A table's keys into itself (a tree of comments, an org
chart) are repeated here until no row changes: InnoDB stops at 15 levels,
so a deeper one never commits at the source.

Exact when the level above applied the change from the stream. A level
above that was loaded at a later position than the level below never saw
it: the level below stops with a remedy (load both again, parents first,
as one ``seam load full`` orders them); it is never skipped.

Delivery guarantee: none of its own; every statement and record runs in the
sink's transaction with the data and the positions.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import psycopg

from seam.apply.target import pg_type
from seam.core.errors import SourceError, first_line
from seam.core.identifiers import clipped, qi
from seam.core.position import Position
from seam.state.positions import record_cascade, recorded_cascade, table_state

log = logging.getLogger("seam.sink")

INNODB_MAX_DEPTH = 15
INDEX_COMMENT = "seam: the rows cascades change are found by these columns"  # (a swap does not keep it: swap.py)
_ACTIONS = {"delete", "set_null", "update"}


class CascadeError(SourceError):
    """A cascade message the sink cannot apply exactly (the table stops)."""


@dataclass(frozen=True)
class Rule:
    """One foreign key's rule as a level below the first applies it."""

    columns: tuple[str, ...]  # the child's columns
    referenced: tuple[str, ...]  # the parent's columns they reference
    on_delete: str | None
    on_update: str | None


@dataclass(frozen=True)
class Cascade:
    """A checked ``x`` record: every column it names is one of the table's (they end up in SQL)."""

    columns: tuple[str, ...]
    action: str | None = None  # first level: what the parent's change does
    old: tuple = ()
    new: tuple = ()
    via: tuple[str, str] | None = None  # a level below: the table above and its rule into this one
    rule: Rule | None = None
    keep: tuple[str, ...] = ()
    selves: tuple[Rule, ...] = ()

    @property
    def returning(self) -> tuple[str, ...]:
        """The columns whose values the levels below need."""
        return tuple(sorted(set(self.keep) | {c for r in self.selves for c in r.referenced}))


def parse(doc: dict, names: Sequence[str], target: str) -> Cascade:
    """The cascade of an ``x`` record for a table with columns ``names``, or CascadeError."""

    def columns(value) -> tuple[str, ...]:
        if not isinstance(value, list) or not value or not all(isinstance(c, str) and c in names for c in value):
            raise CascadeError(f"a cascade message for {target} is not Seam's: {str(doc)[:200]}")
        return tuple(value)

    def rule(value) -> Rule:
        if (
            not isinstance(value, dict)
            or value.get("on_delete") not in (None, "delete", "set_null")
            or value.get("on_update") not in (None, "update", "set_null")
        ):
            raise CascadeError(f"a cascade message for {target} is not Seam's: {str(doc)[:200]}")
        cols, referenced = columns(value.get("columns")), value.get("referenced")
        if (
            not isinstance(referenced, list)
            or len(referenced) != len(cols)
            or not all(isinstance(c, str) for c in referenced)
        ):
            raise CascadeError(f"a cascade message for {target} is not Seam's: {str(doc)[:200]}")
        return Rule(cols, tuple(referenced), value.get("on_delete"), value.get("on_update"))

    if not isinstance(doc, dict):
        raise CascadeError(f"a cascade message for {target} is not Seam's: {str(doc)[:200]}")
    keep = columns(doc["keep"]) if "keep" in doc else ()
    selves = tuple(rule(r) for r in doc.get("self") or ())
    if any(not set(r.referenced) <= set(names) for r in selves):
        raise CascadeError(f"a cascade message for {target} is not Seam's: {str(doc)[:200]}")
    if "via" in doc:
        via = doc["via"]
        if not (isinstance(via, list) and len(via) == 2 and all(isinstance(v, str) for v in via)):
            raise CascadeError(f"a cascade message for {target} is not Seam's: {str(doc)[:200]}")
        one = rule(doc)
        return Cascade(one.columns, via=(via[0], via[1]), rule=one, keep=keep, selves=selves)
    cols, old, new = columns(doc.get("columns")), doc.get("old"), doc.get("new")
    if (
        doc.get("action") not in _ACTIONS
        or not isinstance(old, list)
        or len(old) != len(cols)
        or (doc["action"] == "update" and (not isinstance(new, list) or len(new) != len(cols)))
    ):
        raise CascadeError(f"a cascade message for {target} is not Seam's: {str(doc)[:200]}")
    return Cascade(cols, action=doc["action"], old=tuple(old), new=tuple(new or ()), keep=keep, selves=selves)


def waits_for(conn, state_schema: str, docs: Iterable, commit: Position) -> tuple[str, str] | None:
    """Whether a transaction's cascades can be applied now: None, ``("wait", table)`` while the level above
    has not applied the change, or ``("stop", reason)`` when it never will in a way this level can use."""
    for doc in docs:
        via = doc.cascade.get("via") if doc.op == "x" and isinstance(doc.cascade, dict) else None
        if not (isinstance(via, list) and len(via) == 2):
            continue
        db, table = via
        at = Position(doc.source.file, doc.source.pos, doc.source.row)
        state = table_state(conn, state_schema, db, table)
        if state is None or (state[1] is None and commit.after(state[0])):
            return "wait", f"{db}.{table}"
        if commit.after(state[0]):
            return "stop", (
                f"a cascade through {db}.{table} at {at} cannot be followed: that table's stream "
                f"stopped ({str(state[1])[:200]})"
            )
        if recorded_cascade(conn, state_schema, db, table, at) is None:
            return "stop", (
                f"a cascade through {db}.{table} at {at} is not known here: {db}.{table} was loaded at "
                "a later position and never applied it; load both again, in one `seam load full`, "
                "which loads parents first"
            )
    return None


def apply(cur, state_schema: str, stream, cascade: Cascade, at: Position) -> int:
    """Do what the source's rules did to ``stream``'s table at ``at``; records the changed rows when levels
    below need them. Returns the number of rows changed."""
    returning = cascade.returning
    if cascade.via is None:
        assert cascade.action is not None  # the first level carries the parent's action
        changed = _step(
            cur, stream, cascade.action, cascade.columns, [(list(cascade.old), list(cascade.new))], returning
        )
    else:
        above = recorded_cascade(cur.connection, state_schema, *cascade.via, at)
        if above is None:
            raise CascadeError(f"the cascade through {'.'.join(cascade.via)} at {at} was not recorded")
        assert cascade.rule is not None  # a level below carries its rule
        changed = _below(cur, stream, cascade.rule, above, returning)
    frontier, depth = changed, 1
    while frontier and cascade.selves:  # a table's keys into itself, level by level
        depth += 1
        if depth > INNODB_MAX_DEPTH + 1:
            raise CascadeError(
                f"a cascade into {stream.target} itself goes deeper than InnoDB's {INNODB_MAX_DEPTH} levels at {at}"
            )
        frontier = [row for rule in cascade.selves for row in _below(cur, stream, rule, frontier, returning)]
        changed += frontier
    if cascade.keep:
        record_cascade(
            cur.connection,
            state_schema,
            stream.schema.db,
            stream.schema.table,
            at,
            [
                [deleted, {c: old[c] for c in cascade.keep}, None if new is None else {c: new[c] for c in cascade.keep}]
                for deleted, old, new in changed
            ],
        )
    return len(changed)


def _index(cur, stream, columns: tuple[str, ...]) -> None:
    """An index on ``columns``, made in the sink's transaction unless one leads with them. InnoDB keeps one on
    every foreign key's columns; the target had only the key, so each cascade statement read the whole table (a
    child of 600,000 rows: 40 ms each; a writer changing 100 parents' codes a second left the stream behind for
    good). Made once per table, when the first cascade reaches it: as long as that index build."""
    found = cur.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = to_regclass(%s) AND i.indnkeyatts >= %s AND "
        "(SELECT array_agg(a.attname::text ORDER BY a.attname::text) FROM unnest((i.indkey::int2[])[0:%s - 1]) k "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k) = %s::text[])",
        (stream.target, len(columns), len(columns), sorted(columns)),
    ).fetchone()[0]
    if found:
        return
    name = qi(clipped(f"{stream.schema.table}_{'_'.join(columns)}_cascades", 63))
    try:
        with cur.connection.transaction():  # a savepoint: a table Seam does not own is changed without it
            cur.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {stream.target} ({', '.join(qi(c) for c in columns)})")
            cur.execute(f"COMMENT ON INDEX {qi(stream.schema.db)}.{name} IS '{INDEX_COMMENT}'")  # (a constant)
    except psycopg.errors.InsufficientPrivilege as exc:
        log.warning(
            "%s: no index on (%s) for its cascades (%s): each cascade reads the whole table; its owner can make one",
            stream.target,
            ", ".join(columns),
            first_line(exc),
        )


def _below(cur, stream, rule: Rule, above: list, returning: tuple[str, ...]) -> list:
    """Apply ``rule`` for rows the level above changed (``[deleted, old, new]``, values as text)."""
    by_action: dict[str, set] = {}
    for deleted, old, new in above:
        if not set(rule.referenced) <= set(old):
            raise CascadeError(f"the recorded cascade rows lack {', '.join(rule.referenced)} for {stream.target}")
        was = tuple(old[c] for c in rule.referenced)
        if any(v is None for v in was):
            continue  # a NULL is referenced by no row
        if deleted:
            action, now = rule.on_delete, ()
        else:
            now = tuple(new[c] for c in rule.referenced)
            if now == was:
                continue
            action = rule.on_update
        if action is not None:
            by_action.setdefault(action, set()).add((was, now if action == "update" else ()))
    changed = []
    for action, pairs in by_action.items():
        changed += _step(cur, stream, action, rule.columns, [(list(o), list(n)) for o, n in sorted(pairs)], returning)
    return changed


def _step(cur, stream, action: str, columns: tuple[str, ...], pairs: list, returning: tuple[str, ...]) -> list:
    """One statement per (old, new) pair; the changed rows as ``[deleted, old, new]`` of ``returning``."""
    if columns not in stream.indexed:
        _index(cur, stream, columns)
        stream.indexed.add(columns)
    types = {c.name: pg_type(c, stream.postgis) for c in stream.schema.columns}
    match = " AND ".join(f"{qi(c)} = %s::{types[c]}" for c in columns)
    if action == "delete":
        sql = f"DELETE FROM {stream.target} WHERE {match}"
    elif action == "set_null":
        sql = f"UPDATE {stream.target} SET {', '.join(f'{qi(c)} = NULL' for c in columns)} WHERE {match}"
    else:
        sql = f"UPDATE {stream.target} SET {', '.join(f'{qi(c)} = %s::{types[c]}' for c in columns)} WHERE {match}"
    olds = action != "delete" and returning  # the old values of the columns set, as the target renders them
    if returning:
        sql += " RETURNING " + ", ".join(
            [f"{qi(c)}::text" for c in returning] + ([f"%s::{types[c]}::text" for c in columns] if olds else [])
        )
    params = [(new if action == "update" else []) + old + (old if olds else []) for old, new in pairs]
    if not returning:
        cur.executemany(sql, params)
        return [[action == "delete", {}, None]] * max(cur.rowcount, 0)
    cur.executemany(sql, params, returning=True)
    changed = []
    while True:
        for row in cur.fetchall():
            values = dict(zip(returning, row))
            if action == "delete":
                changed.append([True, values, None])
            else:
                before = dict(values)
                before.update((c, v) for c, v in zip(columns, row[len(returning) :]) if c in before)
                changed.append([False, before, values])
        if not cur.nextset():
            break
    return changed
