"""The cascades a change reader follows: what the storage engine does to streamed tables without a row in
the binlog (ON DELETE / ON UPDATE CASCADE or SET NULL), published as ``x`` records at the parent's change.

The rules are read from the source's foreign keys at the reader's first pass and again after DDL that may
change them; the sink applies each level in the target (``seam.apply.cascades``).

Delivery guarantee: that of the reader (at-least-once into Kafka); a level that cannot be followed (a cycle
through other tables, a parent value that cannot be read) stops its table, it is never skipped.
"""

from __future__ import annotations

import logging

from seam.core.schema import SchemaError, TableSchema
from seam.source.binlog import Transaction
from seam.source.schema import reachable, read_foreign_keys, read_schema
from seam.wire.records import Record, normalize

log = logging.getLogger("seam.streaming")

Key = tuple[str, str]


class Cascades:
    """Per parent table, its foreign keys into streamed tables that the engine applies, with its schema."""

    def __init__(self, streamed: set[Key]):
        self.streamed = streamed
        self.rules: dict[Key, list] | None = None  # None until read
        self._cycles: set[Key] = set()

    @property
    def parents(self) -> set[Key]:
        return set(self.rules or {})

    def load(self, conn) -> set[Key]:
        """Read the rules from the source; returns the parents that were not followed before."""
        rules: dict[Key, list] = {}
        schemas: dict[Key, TableSchema] = {}
        for fk in read_foreign_keys(conn, {db for db, _ in self.streamed}):
            if fk.child in self.streamed and fk.follows():
                if fk.parent not in schemas:
                    try:
                        schemas[fk.parent] = read_schema(conn, *fk.parent)
                    except SchemaError as exc:  # another database, not granted: every other table goes on
                        log.error("the cascades of %s.%s into %s.%s are not followed: %s", *fk.parent, *fk.child, exc)
                        continue
                rules.setdefault(fk.parent, []).append((fk, schemas[fk.parent]))
        if rules != self.rules:
            for parent, fks in rules.items():
                log.info(
                    "following cascades of %s.%s into %s",
                    *parent,
                    ", ".join(f"{fk.child[0]}.{fk.child[1]} ({', '.join(fk.rules_followed())})" for fk, _ in fks),
                )
        grown = set(rules) - self.parents
        self.rules = rules
        edges = {p: {fk.child for fk, _ in fks if fk.child != p} for p, fks in rules.items()}
        self._cycles = {t for t in edges if t in reachable(t, lambda n: edges.get(n, ()))}
        return grown

    def records(self, change, txn: Transaction, followed: dict, failed: dict) -> list[tuple]:
        """What the storage engine did to streamed tables because of a parent's change (not in the binlog),
        as ``(followed, record)`` with ``x`` records at the parent's change. The first level names the parent's
        old (and new) values. A level below names the level above (``via``): which of its rows went is known
        only in the target, so the sink applies it with the rows it recorded there (see seam.wire.records). A
        table's keys into itself (a tree) are carried in the record: the sink repeats them until no row
        changes. A table that cannot be followed goes into ``failed`` (name -> (followed, why))."""
        rules = self.rules or {}
        if (change.db, change.table) not in rules:
            return []
        out: list[tuple] = []

        def publish(fk, cascade: dict) -> None:
            """Unless this level is published already, or not followed (stopped, not loaded): the levels
            below go on either way, and the sink stops a level whose level above it cannot use."""
            child = followed.get(fk.child)
            if child is None or child.table.name in failed or not txn.commit.after(child.published):
                return
            cascade = {**cascade, **self._below(fk.child)}
            record = Record(
                op="x",
                db=child.schema.db,
                table=child.schema.table,
                key={},
                before=None,
                after=None,
                position=change.position,
                gtid=txn.gtid,
                ts_ms=txn.timestamp * 1000,
                cascade=cascade,
            )
            out.append((child, record))

        reached = self._first_level(change, rules, followed, failed, publish)
        expanded = set()
        while reached:  # breadth first: each table's keys into other tables, once per parent change
            table = reached.pop(0)
            if table in expanded:
                continue
            expanded.add(table)
            for fk, _ in rules.get(table, []):
                if fk.child == table:
                    continue  # the sink repeats a table's keys into itself
                if fk.child in self._cycles:
                    deeper = followed.get(fk.child)
                    if deeper is not None and txn.commit.after(deeper.published):
                        failed[deeper.table.name] = (
                            deeper,
                            f"a cascade through {'.'.join(table)} reaches it at {txn.commit} along a cycle of "
                            "foreign keys between tables (Seam follows a table's keys into itself, not cycles "
                            "through other tables)",
                        )
                    continue
                publish(fk, {"via": list(table), **fk.rule()})
                reached.append(fk.child)
        return out

    def _first_level(self, change, rules: dict, followed: dict, failed: dict, publish) -> list[Key]:
        """The parent's own foreign keys: the rule each applies to its change, with the old and new values."""
        reached = []
        for fk, parent in rules[(change.db, change.table)]:
            try:
                old = (
                    None
                    if change.before is None
                    else [normalize(parent.column(c), change.before[c]) for c in fk.referenced]
                )
                new = (
                    None
                    if change.after is None
                    else [normalize(parent.column(c), change.after[c]) for c in fk.referenced]
                )
            except Exception as exc:  # noqa: BLE001 - named in the stop
                child = followed.get(fk.child)
                if child is not None:
                    failed[child.table.name] = (
                        child,
                        f"the cascade from {fk.parent[0]}.{fk.parent[1]} cannot be read ({type(exc).__name__}: {exc})",
                    )
                continue
            action = fk.action_for(change.op, old, new)
            if action is not None:
                publish(
                    fk,
                    {
                        "action": action,
                        "parent": f"{fk.parent[0]}.{fk.parent[1]}",
                        "columns": list(fk.columns),
                        "old": old,
                        "new": new if action == "update" else None,
                    },
                )
                reached.append(fk.child)
        return reached

    def _below(self, table: Key) -> dict:
        """What a cascaded table's record carries for the levels below it: its keys into itself (``self``),
        and the columns other streamed tables reference (``keep``: the sink records the changed rows). Every
        streamed table below counts, followed yet or not: a table loaded while this change is read gets its
        level of it when the reader rewinds for it, and then the rows must have been recorded."""
        fks = [fk for fk, _ in (self.rules or {}).get(table, [])]
        own = [fk.rule() for fk in fks if fk.child == table]
        keep = sorted({c for fk in fks if fk.child != table for c in fk.referenced})
        return {**({"self": own} if own else {}), **({"keep": keep} if keep else {})}
