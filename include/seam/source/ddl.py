"""What a statement in the binlog does to one followed table: the DDL the stream follows, the DDL that stops it.

Every statement that removes, recreates, renames onto, refills or reshapes the table is seen (never ignored):
``DROP DATABASE``/``DROP SCHEMA`` of its database, ``DROP TABLE``, ``CREATE [OR REPLACE] TABLE`` of its name,
``RENAME TABLE`` away from or onto its name (also ``ALTER TABLE ... RENAME``), ``EXCHANGE PARTITION`` on
either side, ``IMPORT``/``DISCARD TABLESPACE``, ``TRUNCATE``, every ``ALTER TABLE`` clause that is not an
index, key or table option, and DML logged as a statement.

A statement is read as the server read it, under the ``sql_mode`` logged with it (``seam.source.sql_text``).

The answer is data for the change reader (``seam.source.streaming``), which decides with the source's new
definition in hand:

- ``None``: nothing happens to the table's rows or columns.
- ``("truncate", what)``: every row is gone; the sink empties the target in the transaction of the position.
- ``("cutover", (db, table))``: the table is swapped, in one RENAME, for another one (the cut-over of gh-ost or
  pt-online-schema-change): its columns are followed where the target can, then it waits for a repair.
- ``("alter", [clause, ...])``: column clauses the stream may follow, each a tuple ``("add", name)``,
  ``("drop", name)``, ``("rename", old, new)``, ``("change", old, new)`` or ``("modify", name)``; the reader
  checks the result against the source (``widening``) and stops the table when the target cannot follow. A
  clause with ``IF [NOT] EXISTS`` has a kind ending in ``?`` (``"add?"``): ``composed_clauses`` skips it
  where the server did.
- ``("default", [clause, ...])``: only ``("default", name, declared)`` clauses (``ALTER COLUMN ... SET/DROP
  DEFAULT``): no row changes; the reader takes it into ALTERs that wait for the ones after them.
- ``("stop", what)``: the table's stream stops, loudly, naming ``what``.

ADD, MODIFY and CHANGE clauses end with what they declare, ``("column", definition)`` (and a default
clause with ``("default", text)``), read by ``seam.source.declared``.

Delivery guarantee: none of its own (pure parsing); what it misses would be applied silently, so anything it
does not recognise as harmless on the table is a stop.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from seam.core.schema import INTEGER_TYPES, Column
from seam.source.declared import COMPUTED, declared_column, declared_default, declared_nullable
from seam.source.fills import Unfilled, Unreproduced, catalog_default, fill, same_default, unreproduced
from seam.source.sql_text import NAME, UnreadableStatement, plain_statement, split_clauses, table_name_at, unquote

_IF_EXISTS = r"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?"
# clauses that change neither rows nor columns: indexes, keys other than the primary, table options, defaults
_HARMLESS = re.compile(
    r"^(ADD\s+(INDEX|KEY|UNIQUE|FULLTEXT|SPATIAL|CONSTRAINT|FOREIGN|CHECK)\b|DROP\s+(INDEX|KEY|FOREIGN|CONSTRAINT"
    r"|CHECK)\b|ALGORITHM\b|LOCK\b|COMMENT\b|FORCE$|ENGINE\b|RENAME\s+(INDEX|KEY)\b|AUTO_INCREMENT\b|ROW_FORMAT\b"
    r"|KEY_BLOCK_SIZE\b|STATS_\w+\b|(DEFAULT\s+)?(CHARACTER\s+SET|CHARSET|COLLATE)\b|ALTER\s+(INDEX|KEY)\b"
    r"|ALTER\s+(CHECK|CONSTRAINT)\b|ORDER\s+BY\b|(ENABLE|DISABLE)\s+KEYS$"
    rf"|ALTER\s+(COLUMN\s+)?{NAME}\s+SET\s+(IN)?VISIBLE$"  # MySQL 8: the binlog carries invisible columns too
    r"|(PAGE_CHECKSUM|TRANSACTIONAL|ENCRYPTED|ENCRYPTION|ENCRYPTION_KEY_ID|PAGE_COMPRESSED|PAGE_COMPRESSION_LEVEL"
    r"|PACK_KEYS|CHECKSUM|TABLE_CHECKSUM|DELAY_KEY_WRITE|MAX_ROWS|MIN_ROWS|AVG_ROW_LENGTH|COMPRESSION|TABLESPACE"
    r"|SECONDARY_ENGINE|SECONDARY_ENGINE_ATTRIBUTE|ENGINE_ATTRIBUTE|(DATA|INDEX)\s+DIRECTORY)\b)",
    re.I,
)
# MariaDB's lock wait of the statement (`ALTER TABLE t WAIT 5 ...`), between the name and the clauses
_WAIT = re.compile(r"\s*(?:WAIT\s+\d+(?:\.\d*)?|NOWAIT)\b", re.I)
# every text column in another character set (a TEXT grown to hold as many characters); what a lossless one
# leaves is checked column by column as a MODIFY's is (``composed_clauses``, ``widening``)
_CONVERT = re.compile(r"^CONVERT\s+TO\s+(CHARACTER\s+SET|CHARSET)\s+\S+(\s+COLLATE\s+\S+)?$", re.I)
# `ADD [COLUMN] (a INT, b INT)`: several columns in one clause
_ADD_SEVERAL = re.compile(rf"^ADD\s+(?:COLUMN\s+)?({_IF_EXISTS})\((.*)\)$", re.I | re.S)
# a key that ALTER IGNORE TABLE makes unique by deleting, unlogged, every row but the first of each value
_UNIQUE_KEY = re.compile(r"\bUNIQUE\b|\bPRIMARY\s+KEY\b", re.I)
# a DBA's partition maintenance: rows unchanged; the statement's only clause, its partitions listed by commas
_PARTITION_UPKEEP = re.compile(r"\s*(ANALYZE|CHECK|OPTIMIZE|REBUILD|REPAIR)\s+PARTITION\b", re.I)
# each with the column's name(s), then what the clause declares (the definition, or the default), if anything
_COLUMN_CLAUSES = [
    ("add", re.compile(rf"^ADD\s+(?:COLUMN\s+)?{_IF_EXISTS}({NAME})\s(.*)$", re.I | re.S)),
    ("drop", re.compile(rf"^DROP\s+(?:COLUMN\s+)?{_IF_EXISTS}({NAME})\s*$", re.I)),
    ("rename", re.compile(rf"^RENAME\s+COLUMN\s+{_IF_EXISTS}({NAME})\s+TO\s+({NAME})\s*$", re.I)),
    ("change", re.compile(rf"^CHANGE\s+(?:COLUMN\s+)?{_IF_EXISTS}({NAME})\s+({NAME})\s(.*)$", re.I | re.S)),
    ("modify", re.compile(rf"^MODIFY\s+(?:COLUMN\s+)?{_IF_EXISTS}({NAME})\s(.*)$", re.I | re.S)),
    ("default", re.compile(rf"^ALTER\s+(?:COLUMN\s+)?({NAME})\s+((?:SET|DROP)\s+DEFAULT\b.*)$", re.I | re.S)),
]
_CONDITIONAL = re.compile(r"\w+\s+(?:COLUMN\s+)?IF\s+(?:NOT\s+)?EXISTS\s", re.I)  # a clause with IF [NOT] EXISTS
# words after ADD/DROP that are not a column name (ADD PRIMARY KEY, DROP PARTITION, ADD PERIOD ...)
_NOT_A_COLUMN = {"PRIMARY", "PARTITION", "SYSTEM", "PERIOD", "INDEX", "KEY", "CONSTRAINT", "FOREIGN", "CHECK"}
_STATEMENT_DML = re.compile(r"(INSERT|REPLACE|UPDATE|DELETE|LOAD\s+DATA|LOAD\s+XML|CALL)\b", re.I)


def _column_clause(clause: str) -> tuple | None:
    """A column clause as a tuple (see the module); its kind ends in ``?`` when it has ``IF [NOT] EXISTS``: the
    server skipped it if the column was there (ADD) or was not (the others), ``composed_clauses`` decides."""
    for kind, pattern in _COLUMN_CLAUSES:
        m = pattern.match(clause + " ")
        if m and not (m.group(1).upper() in _NOT_A_COLUMN and not re.match(r"\w+\s+COLUMN\b", clause, re.I)):
            tag = kind + "?" if _CONDITIONAL.match(clause) else kind
            if kind in ("drop", "rename"):
                return (tag, *(unquote(g) for g in m.groups()))
            *names, declared = m.groups()
            return (
                tag,
                *(unquote(n) for n in names),
                ("default" if kind == "default" else "column", declared.strip()),
            )
    return None


def ddl_effect(
    query: str, default_db: str | None, db: str, table: str, sql_mode: int | None = None, fold_names: bool = False
) -> tuple[str, Any] | None:
    """What ``query`` (run with ``default_db`` as the session's database, under ``sql_mode`` as the binlog
    logged it) does to ``db.table``: see the module. ``fold_names``: the source compares table and database
    names in any case (``lower_case_table_names`` 1 or 2), and so does this."""
    try:
        q = plain_statement(query, sql_mode).strip().rstrip(";").strip()
    except UnreadableStatement as exc:
        return ("stop", f"a statement Seam cannot read ({exc})") if table.lower() in query.lower() else None
    fold = str.lower if fold_names else str
    me = (fold(db), fold(table))

    def name_at(text: str, at: int = 0) -> tuple[tuple[str | None, str] | None, int]:
        return table_name_at(text, at, default_db, fold_names)

    def names_in(text: str) -> list[tuple[str | None, str]]:
        return [n for n in (name_at(part)[0] for part in split_clauses(text)) if n]

    m = re.match(r"ALTER\s+(?:ONLINE\s+)?(IGNORE\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?", q, re.I)
    if m:
        name, end = name_at(q, m.end())
        wait = _WAIT.match(q, end)
        rest = q[wait.end() if wait else end :]
        if m.group(1) and name == me and _UNIQUE_KEY.search(re.sub(r"'(?:[^']|'')*'", "''", rest)):
            return ("stop", "ALTER IGNORE TABLE ... ADD UNIQUE (the source dropped the rows that repeat the key)")
        return _alter(rest, name == me, me, name_at)
    m = re.match(r"(DROP|CREATE\s+OR\s+REPLACE)\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+EXISTS\s+)?", q, re.I)
    if m:  # a database name is one name, which name_at takes for a table's
        name, _ = name_at(q, m.end())
        return ("stop", f"{m.group(1).split()[0].upper()} DATABASE") if name and name[1] == me[0] else None
    m = re.match(r"DROP\s+(TEMPORARY\s+)?TABLES?\s+(?:IF\s+EXISTS\s+)?", q, re.I)
    if m:  # a temporary table only hides the real one from its own session, and its rows are never logged
        return ("stop", "DROP TABLE") if not m.group(1) and me in names_in(q[m.end() :]) else None
    m = re.match(r"CREATE\s+(OR\s+REPLACE\s+)?(TEMPORARY\s+)?TABLE\s+(IF\s+NOT\s+EXISTS\s+)?", q, re.I)
    if m:
        # IF NOT EXISTS on a followed table does nothing: the table is there (its DROP would have stopped it)
        name, _ = name_at(q, m.end())
        if name != me or m.group(2) or (m.group(3) and not m.group(1)):
            return None
        return ("stop", "CREATE OR REPLACE TABLE" if m.group(1) else "CREATE TABLE (the table was recreated)")
    m = re.match(r"TRUNCATE\s+(?:TABLE\s+)?", q, re.I)
    if m:
        name, _ = name_at(q, m.end())
        return ("truncate", "TRUNCATE") if name == me else None
    m = re.match(r"RENAME\s+TABLES?\s+", q, re.I)
    if m:
        pairs = [(re.split(r"\s+TO\s+", p, maxsplit=1, flags=re.I) + [""])[:2] for p in split_clauses(q[m.end() :])]
        away = any(name_at(old)[0] == me for old, _ in pairs)
        onto = [old for old, new in pairs if name_at(new)[0] == me and name_at(old)[0] != me]
        if away and onto:  # `t TO _t_old, _t_new TO t` in one statement: gh-ost's and pt-online-schema-change's
            return ("cutover", name_at(onto[0])[0])
        if away:
            return ("stop", RENAMED_AWAY)
        if onto:
            return ("stop", RENAMED_ONTO)
        return None
    m = _STATEMENT_DML.match(q)
    flags = re.I if fold_names else 0
    if (
        m
        and ((default_db and fold(default_db)) == me[0] or re.search(rf"(?<![\w$]){re.escape(db)}(?![\w$])", q, flags))
        and re.search(rf"(?<![\w$]){re.escape(table)}(?![\w$])", q, flags)
    ):
        return ("stop", f"{' '.join(m.group(1).split()).upper()} logged as a statement, not as rows")
    return None


def reshapes(statement, db: str, table: str) -> bool:
    """Whether a binlog ``statement`` (``seam.source.binlog.Statement``) changes the rows or columns of
    ``db.table`` (a default alone does neither)."""
    effect = ddl_effect(statement.query, statement.schema, db, table, statement.sql_mode, statement.fold_names)
    return effect is not None and effect[0] != "default"


def _one_column_each(clauses: list[str]) -> list[str]:
    """``ADD (a INT, b INT)`` as ``ADD COLUMN a INT`` and ``ADD COLUMN b INT``; other clauses as they are."""
    out = []
    for clause in clauses:
        several = _ADD_SEVERAL.match(clause)
        out += [f"ADD COLUMN {several.group(1)}{c}" for c in split_clauses(several.group(2))] if several else [clause]
    return out


def _alter(rest: str, mine: bool, me: tuple[str, str], name_at) -> tuple[str, Any] | None:
    """The clauses of an ALTER TABLE: of the followed table (``mine``), or of another one, which reaches the
    followed table only by exchanging a partition with it or by being renamed onto its name."""
    clauses = split_clauses(rest)
    if not mine:
        for clause in clauses:
            m = re.match(r"(EXCHANGE\s+PARTITION\s+\S+\s+WITH\s+TABLE|RENAME(?:\s+TO|\s+AS)?)\s+", clause, re.I)
            if m and not re.match(r"RENAME\s+(COLUMN|INDEX|KEY)\b", clause, re.I) and name_at(clause, m.end())[0] == me:
                what = "EXCHANGE PARTITION" if m.group(1).upper().startswith("EX") else "RENAME (onto its name)"
                return ("stop", f"ALTER TABLE {what}")
        return None
    if _PARTITION_UPKEEP.match(rest):
        return None
    followed, other = [], []
    for clause in _one_column_each(clauses):
        if _HARMLESS.match(clause):
            continue
        if _CONVERT.match(clause):
            followed.append(("convert", "*"))
            continue
        column = _column_clause(clause)
        if column:
            followed.append(column)
        else:
            words = clause.split() + [""]
            other.append(f"{words[0].upper()} {words[1]}".strip())
    if other:
        return ("stop", "ALTER TABLE " + ", ".join(other))
    if followed and all(c[0] == "default" for c in followed):  # rows keep their values: see ``composed_clauses``
        return ("default", followed)
    return ("alter", followed) if followed else None


# ------------------------------------------------------------------ following an ALTER ----

_TEXTS = ["tinytext", "text", "mediumtext", "longtext"]
_BLOBS = ["tinyblob", "blob", "mediumblob", "longblob"]
# bytes each holds: a VARCHAR(n) fits whole in one of n * 4 bytes (utf8mb4's widest), a VARBINARY(n) in n
_CAPACITY = {
    **dict(zip(_TEXTS, (255, 65_535, 16_777_215, 4_294_967_295))),
    **dict(zip(_BLOBS, (255, 65_535, 16_777_215, 4_294_967_295))),
}
_COMPUTED = COMPUTED


# a CHAR's or BINARY's values as a VARCHAR or VARBINARY (or a TEXT or BLOB) keeps them: MariaDB and MySQL read a
# CHAR without its trailing spaces (unless the ALTER's session pads them: seam.source.stream_ddl), a BINARY with
# its zero bytes
_VARYING = {"char": "varchar", "binary": "varbinary"}
_STRINGS = ("varchar", "char", "varbinary", "binary")


def _numbers(column: Column) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", column.column_type.split(")")[0])]


def _length(column: Column) -> int:
    """A string column's declared length (``char`` alone is one)."""
    return 1 if column.size is None else column.size


def widening(old: Column, new: Column) -> str | None:
    """None when every value of ``old`` is the same value of ``new`` and the source rewrote no row for it
    (so the target, changed the same way, still holds the source's rows); else why not."""
    if new.nullable < old.nullable:
        return f"column {new.name} became NOT NULL (the source may have rewritten its NULLs)"
    if old.charset and new.charset and old.charset != new.charset and not _lossless(old.charset, new.charset):
        return (
            f"column {new.name} changed its character set from {old.charset} to {new.charset} (the source "
            "converted its values, replacing what the new one cannot hold)"
        )
    if _width_spelled(old.column_type) == _width_spelled(new.column_type):
        return None
    a, b = old.data_type, new.data_type
    same_sign = old.unsigned == new.unsigned and old.zerofill == new.zerofill
    if a in INTEGER_TYPES and b in INTEGER_TYPES and not (new.zerofill or old.zerofill):
        wider = INTEGER_TYPES.index(b) - INTEGER_TYPES.index(a)
        if (same_sign and wider >= 0) or (old.unsigned and not new.unsigned and wider > 0):
            return None
    elif a == b and a in ("varchar", "char", "varbinary"):
        if _numbers(new) >= _numbers(old):
            return None
    elif _VARYING.get(a) == b:  # values as the column returned them: a CHAR's without its trailing spaces
        if _length(new) >= _length(old):
            return None
    elif a == b == "decimal" and same_sign:
        (p, s), (p2, s2) = (_numbers(old) + [0, 0])[:2], (_numbers(new) + [0, 0])[:2]
        if s2 >= s and p2 - s2 >= p - s:  # as many digits before the point, and as many or more after it
            return None
    elif (a in _TEXTS and b in _TEXTS and _TEXTS.index(b) >= _TEXTS.index(a)) or (
        a in _BLOBS and b in _BLOBS and _BLOBS.index(b) >= _BLOBS.index(a)
    ):
        return None
    elif a in _STRINGS and b in _CAPACITY:  # to a TEXT or a BLOB that holds it all
        text = a in ("varchar", "char")
        if (b in _TEXTS) == text and _CAPACITY[b] >= _length(old) * (4 if text else 1):
            return None
    elif a == b and a in ("datetime", "timestamp", "time"):  # more fractional digits: zeros appended
        if (new.datetime_precision or 0) >= (old.datetime_precision or 0):
            return None
    elif a == "float" and b == "double" and "(" not in new.column_type and (old.unsigned or not new.unsigned):
        return None  # the server copies the single-precision value as it is (1.1 is 1.100000023841858)
    elif a == b and a in ("enum", "set") and new.members[: len(old.members)] == old.members:
        return None
    return f"column {new.name} changed from {old.column_type} to {new.column_type}, which is not a widening"


def _lossless(old: str, new: str) -> bool:
    """Whether every text of character set ``old`` converts to ``new`` unchanged."""
    return new in ("utf8mb4", "utf16", "utf32") or old == "ascii"


def _width_spelled(column_type: str) -> str:
    """A type as MariaDB's catalog spells it: ``YEAR`` is ``year(4)``, ``BIT`` ``bit(1)`` (MySQL 8 shows ``year``)."""
    return _DEFAULT_WIDTHS.get(column_type, column_type)


_DEFAULT_WIDTHS = {"year": "year(4)", "bit": "bit(1)", "binary": "binary(1)", "char": "char(1)"}
RENAMED_AWAY = "RENAME TABLE (renamed away)"
RENAMED_ONTO = "RENAME TABLE (another table renamed onto its name)"
LATER_CHANGE = "a later change came first"


def composed_clauses(old_names: list[str], statements: list[list[tuple]]) -> list[tuple] | str:
    """The column clauses of several ALTERs in a row, with no row of the table between them, as those of one
    statement: each resulting column traced back through renames to the column it was before the first
    (drops, then renames, then changes in place, then additions), or why they cannot be composed."""
    origin: dict[str, tuple[str | None, bool]] = {n: (n, False) for n in old_names}  # now -> (before, changed)
    declared: dict[str, list] = {}  # a column (by its name now) -> what each clause that added or changed it declared
    for clauses in statements:
        for clause in clauses:
            kind, name = clause[0], _spelled(clause[1], origin)
            said = _declarations(clause)
            if kind == "convert":  # each column the table has may now be in another character set
                origin.update((n, (was, True)) for n, (was, _) in list(origin.items()))
                continue
            if kind.endswith("?"):  # IF [NOT] EXISTS: skipped by the server when the column was (not) there
                kind = kind[:-1]
                if (name in origin) == (kind == "add"):
                    continue
            if kind == "add":
                if name in origin:
                    return f"column {name} is added where one of that name is"
                origin[name], declared[name] = (None, True), said
            elif name not in origin:
                return f"column {name} is not one the stream knows"
            elif kind == "default":  # no row changes; an added column's default is checked with the source's
                if name in declared:
                    declared[name].extend(said)
            elif kind == "drop":
                del origin[name]
                declared.pop(name, None)
            else:
                new = clause[2] if kind in ("rename", "change") else clause[1]  # MODIFY v: the column is `v` now
                if new.lower() != name.lower() and _spelled(new, origin) in origin:
                    return f"column {name} is renamed onto {new}, a name the table has"
                was, changed = origin.pop(name)
                origin[new] = (was, changed or kind != "rename")
                if name in declared or said:
                    declared[new] = declared.pop(name, []) + said
    kept = {was for was, _ in origin.values()}
    return (
        [("drop", n) for n in old_names if n not in kept]
        + [
            ("change", was, n, *declared.get(n, ())) if ch else ("rename", was, n)
            for n, (was, ch) in origin.items()
            if was not in (None, n)
        ]
        + [("modify", n, *declared.get(n, ())) for n, (was, ch) in origin.items() if was == n and ch]
        + [("add", n, *declared[n]) for n, (was, _) in origin.items() if was is None]
    )


def _spelled(name: str, names) -> str:
    """``name`` as the table spells it: a statement may name a column in any case (``DROP COLUMN NOTE`` drops
    ``note``), as MySQL's column names are not case-sensitive; ``MODIFY NOTE ...`` also renames it ``NOTE``."""
    if name in names:
        return name
    return next((n for n in names if n.lower() == name.lower()), name)


def followed_columns(
    old: tuple[Column, ...], key: tuple[str, ...], clauses: list[tuple], now: list[tuple[Column, Any]]
) -> tuple[list[Column], dict[str, str], dict[str, Any]] | str:
    """The table's columns after an ALTER of ``clauses``, given its columns before (``old``) and the
    source's definition now (``now``: each column with its COLUMN_DEFAULT, in the source's order):
    (columns, renamed old -> new, defaults of added columns as source literals, ``Unfilled`` where the stream
    cannot reproduce one), or why the stream cannot follow it exactly. The source's definition must be what the
    clauses leave: when a later ALTER already changed it, the stream stops rather than guess."""
    names = [c.name for c in old]
    renamed: dict[str, str] = {}
    changed, dropped = set(), set()
    added: dict[str, list] = {}  # name -> what its clauses declared (``composed_clauses``)
    for clause in clauses:
        kind, name = clause[0], clause[1]
        why = _key_changed(clause, key)
        if why:
            return why
        if kind == "add":
            if name in names or name in dropped:
                return f"column {name} is added where one of that name was or is"
            names.append(name)
            added[name] = _declarations(clause)
        elif name not in names or name in added:
            return f"column {name} is not one the stream knows"
        elif kind == "drop":
            names.remove(name)
            dropped.add(name)
        else:
            new = clause[2] if kind in ("rename", "change") else name
            if new != name:
                if new in names or new in dropped:
                    return f"column {name} is renamed onto {new}, a name the table had"
                names[names.index(name)] = new
                first = next((o for o, n in renamed.items() if n == name), name)
                renamed.pop(first, None)
                renamed[first] = new
            if kind != "rename":
                changed.add(new)
    current = {c.name: (c, d) for c, d in now}
    if set(current) != set(names):
        return (
            f"the source's columns now ({', '.join(current)}) are not those the statement leaves "
            f"({', '.join(names)}): {LATER_CHANGE}"
        )
    before = {renamed.get(c.name, c.name): c for c in old}
    defaults: dict[str, Any] = {}
    for column, default in now:
        if column.name in added:
            value, why = _unfilled(*_added_value(column, default, added[column.name]))
            if why:
                return why
            defaults[column.name] = value
            continue
        was = before[column.name]
        if column.name not in changed and not same_type(was, column):
            return f"column {column.name} is not {was.column_type} any more: {LATER_CHANGE}"
        why = widening(was, column)
        if why:
            return why
    return [c for c, _ in now], renamed, defaults


def declared_columns(
    old: tuple[Column, ...],
    key: tuple[str, ...],
    clauses: list[tuple],
    order: list[str],
    charsets: dict[str, str | None] | None = None,
) -> tuple[list[Column], dict[str, str], dict[str, Any]] | str:
    """The table's columns after ``clauses`` (``composed_clauses``) from what the statements declared alone,
    in ``order`` (the names a row event's table map carries, in the source's order): for ALTERs read after the
    source's definition had passed them, when a row of the table follows them. (columns, renamed old -> new,
    defaults of added columns, ``Unfilled`` as in ``followed_columns``), or why not: a type not read from a
    statement, a change that is not a widening, columns that are not the row's. ``charsets``: each column's
    character set as the row's table map logs it (a text column declared without one takes the table's
    default, which the statement does not name)."""
    before = {c.name: c for c in old}
    touched = {c[1] for c in clauses}
    columns = {n: c for n, c in before.items() if n not in touched}
    renamed: dict[str, str] = {}
    defaults: dict[str, Any] = {}
    for clause in clauses:
        kind, name = clause[0], clause[1]
        why = _key_changed(clause, key)
        if why:
            return why
        new = clause[2] if kind in ("rename", "change") else name
        if kind == "drop":
            continue
        if new != name:
            renamed[name] = new
        if kind == "rename":
            columns[new] = replace(before[name], name=new)
            continue
        said = _declarations(clause)
        found = [declared_column(new, d) for d in said if d[0] == "column"]
        declared = [c for c in found if c is not None]
        if not said and kind == "modify":  # only a CONVERT TO CHARACTER SET changes a column without declaring it
            return f"column {new} is converted to another character set, which the stream reads from the source alone"
        if not declared or len(declared) < len(found):
            return f"column {new} is declared with a type the stream does not read from a statement"
        if declared[-1].charset is None and (charsets or {}).get(new):
            declared[-1] = replace(declared[-1], charset=(charsets or {})[new])
        why = _rewrites(declared if kind == "add" else [before[name], *declared])
        if why:
            return why
        if kind == "add":  # the rows got the ADD's fill, which the widenings after it kept
            value, why = _unfilled(*fill(declared[0], declared_default(said[0]), said[0][1]))
            if why:
                return why
            defaults[new] = value
        columns[new] = declared[-1]
    if sorted(columns) != sorted(order):
        return f"the row's columns ({', '.join(order)}) are not those the statements leave ({', '.join(columns)})"
    return [columns[n] for n in order], renamed, defaults


def _unfilled(value: Any, why: str | None) -> tuple[Any, str | None]:
    """A fill the stream cannot reproduce as ``Unfilled`` (the column is added, NULL in the rows there, and the table
    repaired); any other reason stays one the table stops for."""
    return (Unfilled(why), None) if isinstance(why, Unreproduced) else (value, why)


def _declarations(clause: tuple) -> list[tuple]:
    """What a column clause declared (``composed_clauses``: each clause since the column's ADD or change)."""
    return [c for c in clause[2:] if isinstance(c, tuple)]


def _key_changed(clause: tuple, key: tuple[str, ...]) -> str | None:
    kind, name = clause[0], clause[1]
    if kind in ("drop", "rename", "change") and name in key and (kind == "drop" or clause[2] != name):
        return f"it {'drops' if kind == 'drop' else 'renames'} key column {name}"
    return None


def _rewrites(chain: list[Column]) -> str | None:
    """Why a column that went through these definitions in turn had its values rewritten; None if none did."""
    for before, after in zip(chain, chain[1:]):
        why = widening(before, after)
        if why:
            return why
    return None


def same_type(a: Column, b: Column) -> bool:
    """The same type, however spelled ("int" as a statement declares it, "int(11)" as MariaDB shows it)."""
    return a.column_type == b.column_type or (widening(a, b) is None and widening(b, a) is None)


def _added_value(column: Column, default: str | None, declared: list[tuple]) -> tuple[Any, str | None]:
    """(the value the rows there were got in an added column, None), or (None, why the stream cannot follow).
    The value is the ADD's default (``declared``, read from the statements), not the source's now: a later
    ALTER may have changed that. The source's definition now must be what the last statement declared, or
    a later change came first. A cut-over's column (nothing declared) takes the source's default."""
    value = catalog_default(column, default)
    if declared:
        value = declared_default(declared[0])
        if value is _COMPUTED:
            return unreproduced(column, declared[0][1])
        types = [d for d in declared if d[0] == "column"]  # the ADD's, then each MODIFY's or CHANGE's
        parsed = [declared_column(column.name, d) for d in types]
        columns = [c for c in parsed if c is not None]
        why = _rewrites(columns)  # no row between: did a later clause rewrite the fill?
        if why:
            return None, f"added, then {why}"
        if columns and widening(columns[-1], column):
            return None, f"column {column.name} was declared {columns[-1].column_type}: {LATER_CHANGE}"
        # the rows got the ADD's fill, which later widenings kept, whether read yet or not (INT NOT NULL made
        # BIGINT NULL: 0, not NULL; FLOAT made DOUBLE: single precision; DATETIME(2) made (6): two digits)
        added = parsed[0] if parsed else column
        if added is None and len(types) > 1:
            return None, f"column {column.name} is added with a type the stream does not read from a statement"
        if added is None:  # a type not read from a statement (FLOAT(7,3)): the source's, if NULL as the ADD said
            if declared_nullable(types[0]) != column.nullable:
                return (
                    None,
                    f"column {column.name} was declared {'' if column.nullable else 'not '}NULL: {LATER_CHANGE}",
                )
            added = column
        filled = fill(added, value, declared[0][1])  # one the stream does not reproduce: the server read it otherwise
        if filled[1] is None and not same_default(declared_default(declared[-1]), default, column):
            return None, f"column {column.name}'s default is not the one its last ALTER declared: {LATER_CHANGE}"
        return filled
    return fill(column, value, default)


def swapped_clauses(old: tuple[Column, ...], now: list[Column], renamed: dict[str, str] | None = None) -> list[tuple]:
    """The column clauses that take ``old`` to ``now`` by name (a cut-over swaps in a table altered apart),
    after the renames in ``renamed`` (old name -> new: what the copy's ALTERs did, ``seam.source.ghosts``);
    without them a renamed column cannot be told from a dropped and an added one."""
    names, after = {c.name for c in old}, {c.name: c for c in now}
    moves = {o: n for o, n in (renamed or {}).items() if o in names and n in after and n not in names}
    before = {moves.get(c.name, c.name): replace(c, name=moves.get(c.name, c.name)) for c in old}
    return (
        [("rename", o, n) for o, n in moves.items()]
        + [("drop", n) for n in before if n not in after]
        + [("modify", n) for n in before if n in after and before[n] != after[n]]
        + [("add", n) for n in after if n not in before]
    )
