"""Source table schemas read from MySQL's information_schema: column types
(with unsigned, scale, precision, ENUM/SET members) and the key Seam uses.

Delivery guarantee: none (metadata). Errors name the table and what to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from seam.core.schema import Column, SchemaError, TableSchema


def read_schema(conn, db: str, table: str) -> TableSchema:
    """Read a table's columns and primary key through a PyMySQL connection. The name must be spelled as the
    source stores it: a source with ``lower_case_table_names`` 1 or 2 finds `Orders` for `orders` here, but
    its binlog names the table as stored, and the stream would not know its rows for the table's."""
    with conn.cursor() as cur:
        found = _column_rows(cur, db, table)
        rows = [r for r in found if (r[-2], r[-1]) == (db, table)]
        if found and not rows:
            stored = f"{found[0][-2]}.{found[0][-1]}"
            raise SchemaError(
                f"table {db}.{table} is stored as {stored} on the source (it compares names in any case: "
                f"lower_case_table_names), and its binlog names it so: name it {stored} in the pipeline"
            )
        if not rows:
            raise SchemaError(
                f"table {db}.{table} does not exist on the source, or the Seam user cannot see "
                f"it: check the name, and GRANT SELECT ON `{db}`.* TO the Seam user"
            )
        cur.execute(
            "SELECT COLUMN_NAME, TABLE_SCHEMA, TABLE_NAME FROM information_schema.KEY_COLUMN_USAGE "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
            (db, table),
        )
        pk = tuple(r[0] for r in cur.fetchall() if (r[1], r[2]) == (db, table))
    return TableSchema(db=db, table=table, columns=tuple(column_from_row(r) for r in rows), primary_key=pk)


def read_columns(cur, db: str, table: str) -> tuple[Column, ...]:
    """The table's columns as information_schema has them now, through any DB-API cursor (a chunk's snapshot
    reads them in its own transaction)."""
    return tuple(column_from_row(r) for r in _column_rows(cur, db, table) if (r[-2], r[-1]) == (db, table))


def _column_rows(cur, db: str, table: str) -> list:
    """information_schema.COLUMNS rows: ``COLUMN_FIELDS``, then the schema and table names as stored."""
    cur.execute(
        f"SELECT {COLUMN_FIELDS}, TABLE_SCHEMA, TABLE_NAME FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
        (db, table),
    )
    return list(cur.fetchall())


COLUMN_FIELDS = (
    "COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_SET_NAME"
)


def column_from_row(r) -> Column:
    """A ``Column`` from an information_schema.COLUMNS row that starts with ``COLUMN_FIELDS``."""
    return Column(
        name=r[0],
        data_type=r[1].lower(),
        column_type=r[2],
        nullable=r[3] == "YES",
        numeric_scale=r[4],
        datetime_precision=r[5],
        charset=r[6],
    )


@dataclass(frozen=True)
class ForeignKey:
    """A child table's foreign key: ``columns`` reference ``parent``'s ``referenced`` columns."""

    child: tuple[str, str]
    columns: tuple[str, ...]
    parent: tuple[str, str]
    referenced: tuple[str, ...]
    on_delete: str  # CASCADE, SET NULL, RESTRICT, NO ACTION, SET DEFAULT
    on_update: str

    # The rules InnoDB applies to the child without logging its rows; RESTRICT / NO ACTION change nothing
    # (SET DEFAULT is refused by InnoDB).
    _ACTIONS = {"CASCADE": {"d": "delete", "u": "update"}, "SET NULL": {"d": "set_null", "u": "set_null"}}

    def follows(self) -> bool:
        """A parent's delete or key update changes the child's rows without a row event for them."""
        return self.on_delete in self._ACTIONS or self.on_update in self._ACTIONS

    def rules_followed(self) -> list[str]:
        return [
            f"ON {verb} {rule}"
            for verb, rule in (("DELETE", self.on_delete), ("UPDATE", self.on_update))
            if rule in self._ACTIONS
        ]

    def action_for(self, op: str, old: list | None, new: list | None) -> str | None:
        """What a parent row's change does to the children that reference it: ``delete``, ``update``,
        ``set_null`` or None. ``old``/``new`` are the parent's referenced values before and after; a parent
        key with a NULL is referenced by no row."""
        if old is None or any(v is None for v in old):
            return None
        if op == "d" or (op == "u" and new != old):
            return self.action_on(op)
        return None

    def action_on(self, op: str) -> str | None:
        """The rule's action when a referenced row is deleted (``d``) or its referenced values change (``u``)."""
        return self._ACTIONS.get(self.on_delete if op == "d" else self.on_update, {}).get(op)

    def rule(self) -> dict:
        """The rule as a cascade message carries it for a level below the first (see seam.wire.records)."""
        return {
            "columns": list(self.columns),
            "referenced": list(self.referenced),
            "on_delete": self.action_on("d"),
            "on_update": self.action_on("u"),
        }


def reachable(start, step) -> set:
    """Every node reached from ``start`` by ``step(node) -> neighbours`` (not ``start`` unless on a cycle)."""
    seen, todo = set(), list(step(start))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(step(node))
    return seen


def read_foreign_keys(conn, dbs, child: tuple[str, str] | None = None) -> list[ForeignKey]:
    """The foreign keys of the tables in ``dbs`` (or of the one table ``child``), whatever database their
    parent is in (a cascade from a parent in another database changes the child all the same). Columns come
    from KEY_COLUMN_USAGE; the ON DELETE / ON UPDATE rules from SHOW CREATE TABLE, one per table with a
    foreign key, because MariaDB shows REFERENTIAL_CONSTRAINTS only to users with more than SELECT on the
    table."""
    dbs = sorted(set(dbs) if child is None else {child[0]})
    if not dbs:
        return []
    marks = ", ".join(["%s"] * len(dbs))
    one_table = "" if child is None else " AND TABLE_NAME = %s"
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, COLUMN_NAME, REFERENCED_TABLE_SCHEMA, "
            "REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
            f"WHERE TABLE_SCHEMA IN ({marks}){one_table} AND REFERENCED_TABLE_SCHEMA IS NOT NULL "
            "ORDER BY TABLE_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, ORDINAL_POSITION",
            dbs if child is None else [*dbs, child[1]],
        )
        grouped: dict[tuple, list] = {}
        for db, table, name, column, pdb, ptable, pcolumn in cur.fetchall():
            grouped.setdefault((db, table, name, pdb, ptable), []).append((column, pcolumn))
        rules: dict[tuple, dict] = {}
        for db, table in {(k[0], k[1]) for k in grouped}:
            cur.execute(f"SHOW CREATE TABLE `{db.replace('`', '``')}`.`{table.replace('`', '``')}`")
            rules[(db, table)] = _fk_rules(cur.fetchone()[1])
    out = []
    for (db, table, name, pdb, ptable), cols in grouped.items():
        on_delete, on_update = rules[(db, table)].get(name, ("RESTRICT", "RESTRICT"))
        out.append(
            ForeignKey(
                (db, table), tuple(c for c, _ in cols), (pdb, ptable), tuple(p for _, p in cols), on_delete, on_update
            )
        )
    return out


_FK_CLAUSE = re.compile(
    r"CONSTRAINT\s+`((?:[^`]|``)+)`\s+FOREIGN\s+KEY\s*\([^)]*\)\s*REFERENCES\s+[^(]+\([^)]*\)"
    r"((?:\s+ON\s+(?:DELETE|UPDATE)\s+(?:CASCADE|SET\s+NULL|SET\s+DEFAULT|RESTRICT|NO\s+ACTION))*)",
    re.I,
)
_FK_RULE = re.compile(r"ON\s+(DELETE|UPDATE)\s+(CASCADE|SET\s+NULL|SET\s+DEFAULT|RESTRICT|NO\s+ACTION)", re.I)


def _fk_rules(create_table: str) -> dict[str, tuple[str, str]]:
    """Constraint name -> (ON DELETE, ON UPDATE) from a SHOW CREATE TABLE text (absent: RESTRICT)."""
    out = {}
    for m in _FK_CLAUSE.finditer(create_table):
        found = {verb.upper(): " ".join(rule.upper().split()) for verb, rule in _FK_RULE.findall(m.group(2))}
        out[m.group(1).replace("``", "`")] = (found.get("DELETE", "RESTRICT"), found.get("UPDATE", "RESTRICT"))
    return out
