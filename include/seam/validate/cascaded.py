"""The keys of a table that foreign-key cascades changed between two positions.

InnoDB applies ON DELETE / ON UPDATE CASCADE and SET NULL inside the storage engine: the binlog has the
parent's row and nothing for the child's rows it changed, so ``changes_since`` does not see them. Which child
rows a parent's change reached is read from the target, which has not applied it yet:

- the rows whose foreign key holds a value the parent deleted or re-keyed in the range;
- when a cascade from further up may have changed the parent's rows in the range (a grandparent's delete:
  owners -> entries -> postings), which the binlog does not show either: the rows whose foreign key holds a
  value the parent no longer has at the end of the range (read in the caller's snapshot there), or one the
  binlog wrote to the parent in the range (a value deleted by a cascade and written again);
- below every row found, its replies through the table's keys into itself (a tree), level by level.

Finding more keys than changed costs only their rows: a repair copies these keys again with their rows at
the end of the range (``seam.repair``). Keys are matched as text in the target, so the foreign key's and
the table's key columns must be integers or character strings; a cascade through other types raises
``ValidationError`` naming the way out.

Delivery guarantee: none (reading only).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from seam.apply.target import target_table
from seam.core.errors import ValidationError
from seam.core.identifiers import qi
from seam.core.pipeline import Pipeline, TableConfig
from seam.core.position import Position
from seam.core.schema import SchemaError, TableSchema
from seam.source.schema import ForeignKey, read_foreign_keys, read_schema
from seam.validate.at_position import changes_since, value_texts
from seam.validate.side import INTEGER

TEXT_MATCHED = INTEGER | {"char", "varchar"}
_BATCH = 1000  # parent values looked up per statement

Name = tuple[str, str]
Changes = list[tuple[dict | None, dict | None]]


class _Range:
    """The parents' binlog changes in (start, end], each table's read once, and their foreign keys."""

    def __init__(self, pipeline: Pipeline, src, table: TableConfig, start: Position, end: Position) -> None:
        self.pipeline, self.src, self.table, self.start, self.end = pipeline, src, table, start, end
        self.read: dict[Name, tuple[TableSchema, Changes]] = {}
        self.keys: dict[Name, list[ForeignKey]] = {}

    def changes(self, name: Name) -> tuple[TableSchema, Changes]:
        if name not in self.read:
            try:
                schema = read_schema(self.src, *name)
            except SchemaError as exc:  # a table above it that Seam's user was not granted
                raise ValidationError(
                    f"{self.table.name}: a foreign-key cascade from {'.'.join(name)} changes its rows, and {exc}"
                ) from None
            self.read[name] = (schema, changes_since(self.pipeline, self.src, schema, self.table, self.start, self.end))
        return self.read[name]

    def foreign_keys(self, child: Name) -> list[ForeignKey]:
        """The child's foreign keys whose rules change it without a row event (not the whole database's:
        names may compare in any case there)."""
        if child not in self.keys:
            found = read_foreign_keys(self.src, {child[0]}, child=child)
            self.keys[child] = [fk for fk in found if fk.child == child and fk.follows()]
        return self.keys[child]

    def cascaded_into(self, name: Name, seen: frozenset = frozenset()) -> bool:
        """Whether a cascade may have changed ``name``'s rows in the range: a table above it (through any
        number of cascading foreign keys, or its keys into itself) deleted or re-keyed a referenced row."""
        for fk in self.foreign_keys(name):
            if any(_cascading(fk, *self.changes(fk.parent))):
                return True
            if fk.parent != name and fk.parent not in seen and self.cascaded_into(fk.parent, seen | {name}):
                return True
        return False


def cascaded_keys(
    pipeline: Pipeline,
    src,
    tgt,
    schema: TableSchema,
    table: TableConfig,
    start: Position,
    end: Position,
    own_changes: Changes,
) -> set[tuple[str, ...]]:
    """Keys (``key_texts`` form) of ``table``'s target rows that a cascade changed at the source in
    (start, end]; ``src`` is in a snapshot at ``end``. ``own_changes``: the table's own row changes in that
    range (its parent, for a key into itself)."""
    name = (schema.db, schema.table)
    span = _Range(pipeline, src, table, start, end)
    span.read[name] = (schema, own_changes)
    fks = span.foreign_keys(name)
    selves = [fk for fk in fks if fk.parent == name]
    found: dict[tuple[str, ...], tuple] = {}  # key -> its referenced values through each key into itself

    def reach(fk: ForeignKey, values: set) -> dict:
        if not values:
            return {}
        _check_matched(schema, table, fk)
        new = {k: refs for k, refs in _referencing(tgt, schema, table, fk.columns, values, selves) if k not in found}
        found.update(new)
        return new

    frontier: dict = {}
    for fk in fks:
        if fk.parent == name:
            continue
        parent, changes = span.changes(fk.parent)
        values = set(_cascading(fk, parent, changes))
        if span.cascaded_into(fk.parent):
            values |= _vanished(src, tgt, schema, fk) | set(_written(fk, parent, changes))
        frontier.update(reach(fk, values))
    for fk in selves:  # the table's own deletes and re-keys reach its replies
        frontier.update(reach(fk, set(_cascading(fk, schema, own_changes))))
    while frontier:  # every row reached reaches its replies, level by level down the tree
        below: dict = {}
        for i, fk in enumerate(selves):
            below.update(reach(fk, {refs[i] for refs in frontier.values() if None not in refs[i]}))
        frontier = below
    return set(found)


def _cascading(fk: ForeignKey, parent: TableSchema, changes: Iterable) -> Iterable[tuple[str, ...]]:
    """The parent's referenced values (as text) that a delete or a key update took away under a rule."""
    for before, after in changes:
        if before is None:
            continue
        old = [before[c] for c in fk.referenced]
        new = None if after is None else [after[c] for c in fk.referenced]
        if fk.action_for("d" if after is None else "u", old, new):
            texts = value_texts(parent, fk.referenced, before)
            if all(t is not None for t in texts):
                yield cast(tuple[str, ...], texts)


def _written(fk: ForeignKey, parent: TableSchema, changes: Iterable) -> Iterable[tuple[str, ...]]:
    """The parent's referenced values (as text) that the binlog wrote in the range: a value a cascade took
    away before may be back, and the target's rows referencing it are then not the source's."""
    for before, after in changes:
        if after is None or (before is not None and all(before[c] == after[c] for c in fk.referenced)):
            continue
        texts = value_texts(parent, fk.referenced, after)
        if all(t is not None for t in texts):
            yield cast(tuple[str, ...], texts)


def _vanished(src, tgt, schema: TableSchema, fk: ForeignKey) -> set[tuple[str, ...]]:
    """The foreign key's values (as text) in the target's table that the parent has no row for in ``src``'s
    snapshot. A value the parent holds in another case or padding is taken as gone too: that costs only the
    rows of it copied again."""
    held = tgt.execute(
        f"SELECT DISTINCT {', '.join(f'{qi(c)}::text' for c in fk.columns)} FROM "
        f"{target_table(schema.db, schema.table)} WHERE {' AND '.join(f'{qi(c)} IS NOT NULL' for c in fk.columns)}"
    ).fetchall()
    parent = f"`{fk.parent[0].replace('`', '``')}`.`{fk.parent[1].replace('`', '``')}`"
    columns = ", ".join(f"`{c.replace('`', '``')}`" for c in fk.referenced)
    one = "(" + ", ".join(["%s"] * len(fk.referenced)) + ")"
    present: set[tuple[str, ...]] = set()
    with src.cursor() as cur:
        for i in range(0, len(held), _BATCH):
            batch = held[i : i + _BATCH]
            cur.execute(
                f"SELECT {columns} FROM {parent} WHERE ({columns}) IN ({', '.join([one] * len(batch))})",
                [v for row in batch for v in row],
            )
            present.update(tuple(str(v) for v in row) for row in cur.fetchall())
    return {tuple(row) for row in held} - present


def _check_matched(schema: TableSchema, table: TableConfig, fk: ForeignKey) -> None:
    columns = [*fk.columns, *table.key, *(fk.referenced if fk.parent == fk.child else ())]
    other = [c for c in columns if schema.column(c).data_type not in TEXT_MATCHED]
    if other:
        raise ValidationError(
            f"{table.name}: a cascade from {'.'.join(fk.parent)} changed rows of it meanwhile, which cannot be "
            f"found by {', '.join(other)} (not an integer or a string): compare it while {'.'.join(fk.parent)} "
            f"does not change, or run `seam load full {'.'.join(fk.parent)} {table.name}`"
        )


def _referencing(
    tgt, schema: TableSchema, table: TableConfig, columns: tuple[str, ...], values: set, selves: list[ForeignKey]
) -> list[tuple]:
    """(key texts, referenced texts through each of ``selves``) of the target rows whose ``columns`` hold one
    of ``values``."""
    texts = [f"{qi(c)}::text" for c in columns]
    keys = [f"{qi(c)}::text" for c in table.key]
    refs = [f"{qi(c)}::text" for fk in selves for c in fk.referenced]
    arrays = ", ".join(["%s::text[]"] * len(columns))
    rows = tgt.execute(
        f"SELECT {', '.join(keys + refs)} FROM {target_table(schema.db, schema.table)} "
        f"WHERE ({', '.join(texts)}) IN (SELECT * FROM unnest({arrays}))",
        [list(column) for column in zip(*values)],
    ).fetchall()
    out = []
    for row in rows:
        at, per_self = len(keys), []
        for fk in selves:
            per_self.append(tuple(row[at : at + len(fk.referenced)]))
            at += len(fk.referenced)
        out.append((tuple(row[: len(keys)]), tuple(per_self)))
    return out
