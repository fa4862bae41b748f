"""The keys of a table that foreign-key cascades changed between two positions.

InnoDB applies ON DELETE / ON UPDATE CASCADE and SET NULL inside the storage engine: the binlog has the
parent's row and nothing for the child's rows it changed, so ``changes_since`` does not see them. Which child
rows a parent's change reached is read from the target, which has not applied it yet: the rows whose
foreign key holds a value the parent deleted or re-keyed in the range (for a table's keys into itself, level
by level down the tree). A repair copies these keys again too (``seam.repair``).

Keys are matched as text in the target, so the foreign key's and the table's key columns must be integers
or character strings; a cascade through other types raises ``ValidationError`` naming the way out.

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
from seam.core.schema import TableSchema
from seam.source.schema import ForeignKey, read_foreign_keys, read_schema
from seam.validate.at_position import changes_since, value_texts
from seam.validate.side import INTEGER

TEXT_MATCHED = INTEGER | {"char", "varchar"}


def cascaded_keys(
    pipeline: Pipeline,
    src,
    tgt,
    schema: TableSchema,
    table: TableConfig,
    start: Position,
    end: Position,
    own_changes: list[tuple[dict | None, dict | None]],
) -> set[tuple[str, ...]]:
    """Keys (``key_texts`` form) of ``table``'s target rows that a cascade changed at the source in
    (start, end]. ``own_changes``: the table's own row changes in that range (its parent, for a key into
    itself)."""
    found: set[tuple[str, ...]] = set()
    read: dict[tuple[str, str], tuple[TableSchema, list]] = {(schema.db, schema.table): (schema, own_changes)}
    for fk in read_foreign_keys(src, {schema.db}, child=(schema.db, schema.table)):  # not the whole database's
        if fk.child != (schema.db, schema.table) or not fk.follows():  # (names may compare in any case there)
            continue
        itself = fk.parent == fk.child
        if fk.parent not in read:  # a parent's binlog range is read once, however many keys reference it
            parent_schema = read_schema(src, *fk.parent)
            read[fk.parent] = (parent_schema, changes_since(pipeline, src, parent_schema, table, start, end))
        parent, changes = read[fk.parent]
        values = set(_cascading(fk, parent, changes))
        if values:
            _check_matched(schema, table, fk)
        while values:  # a key into itself: the rows reached reach their own children, level by level
            reached = {key: refs for key, refs in _referencing(tgt, schema, table, fk, values) if key not in found}
            found |= reached.keys()
            values = set(reached.values()) if itself else set()
    return found


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


def _check_matched(schema: TableSchema, table: TableConfig, fk: ForeignKey) -> None:
    columns = [*fk.columns, *table.key, *(fk.referenced if fk.parent == fk.child else ())]
    other = [c for c in columns if schema.column(c).data_type not in TEXT_MATCHED]
    if other:
        raise ValidationError(
            f"{table.name}: a cascade from {'.'.join(fk.parent)} changed rows of it meanwhile, which cannot be "
            f"found by {', '.join(other)} (not an integer or a string): repair it while {'.'.join(fk.parent)} "
            f"does not change, or run `seam load full {'.'.join(fk.parent)} {table.name}`"
        )


def _referencing(tgt, schema: TableSchema, table: TableConfig, fk: ForeignKey, values: set) -> list[tuple]:
    """(key texts, referenced texts) of the target rows whose foreign key holds one of ``values``."""
    texts = [f"{qi(c)}::text" for c in fk.columns]
    keys = [f"{qi(c)}::text" for c in table.key]
    refs = [f"{qi(c)}::text" for c in fk.referenced] if fk.parent == fk.child else []
    arrays = ", ".join(["%s::text[]"] * len(fk.columns))
    rows = tgt.execute(
        f"SELECT {', '.join(keys + refs)} FROM {target_table(schema.db, schema.table)} "
        f"WHERE ({', '.join(texts)}) IN (SELECT * FROM unnest({arrays}))",
        [list(column) for column in zip(*values)],
    ).fetchall()
    width = len(keys)
    return [(tuple(row[:width]), tuple(row[width:])) for row in rows]
