"""What an ALTER's column clause declares, read from the statement itself: the column's type and NULL-ness
(``declared_column``) and its default (``declared_default``). The change reader needs them because the
source's catalog, when the reader gets to a statement, may already show a later one: the rows that were
there when a column was added got the default the ADD declared, whatever the column's default is now.

It reads a statement as ``seam.source.sql_text.plain_statement`` spells it: each string in one spelling,
its backslashes resolved under the statement's sql_mode, so a backslash left in a string is one.

Only what is read with certainty is returned; anything else is None (a type not known here) or
``COMPUTED`` (a default the stream does not reproduce), and the caller then stops the table or falls back
to the catalog.

Delivery guarantee: none of its own (pure parsing).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from seam.core.schema import Column

COMPUTED = object()  # an expression, a sequence, a generated value: not one literal for every row


@dataclass(frozen=True)
class StatementClock:
    """When a statement ran, as the binlog logs it: the time every row there got from its ``CURRENT_TIMESTAMP``
    (seconds since the epoch; microseconds when the server logged them, which it does when the statement used
    them) and the session's ``time_zone`` (None: not logged, the server's own)."""

    seconds: int
    microseconds: int | None
    time_zone: str | None


@dataclass(frozen=True)
class Instant:
    """A statement's time in UTC and on its session's wall clock (``seam.source.stream_ddl``: the source
    converts it, as it did for the statement); ``exact_fraction`` False when the server did not log it."""

    utc: dt.datetime
    local: dt.datetime
    exact_fraction: bool
    # each date-and-time literal of the statement in UTC, read on its session's clock as a TIMESTAMP reads it
    in_utc: dict[str, dt.datetime] = field(default_factory=dict, compare=False)


class SessionTime(str):
    """A string literal of a stamped statement that reads as a time: its text (what a DATETIME or a CHAR
    stores), and ``utc``, what a TIMESTAMP stores (the literal on the statement's session clock)."""

    utc: dt.datetime

    def __new__(cls, text: str, utc: dt.datetime) -> SessionTime:
        literal = super().__new__(cls, text)
        literal.utc = utc
        return literal


class NumberLiteral(str):
    """An unquoted number as a statement spells it: a string column stores the server's spelling of its value
    (``DEFAULT 1e3`` is '1000'), a YEAR reads 5 as 2005."""


class BitLiteral(str):
    """A bit literal (b'101', 0b101) as the catalog spells a BIT's default: a binary string to other columns."""


class HexLiteral(str):
    """A hexadecimal literal (x'00ff', 0xff) by its digits, an even number of them: bytes to a binary column, an
    unsigned integer to an integer one (``data``: its bytes)."""

    @property
    def data(self) -> bytes:
        return bytes.fromhex(self)


def hex_literal(digits: str) -> HexLiteral | None:
    """``HexLiteral`` of a literal's digits: 0x123 is 0x0123 (the server pads it on the left); None when they are
    not hexadecimal digits."""
    if not re.fullmatch(r"[0-9a-fA-F]*", digits):
        return None
    return HexLiteral(("0" if len(digits) % 2 else "") + digits.lower())


class EmptyDocument(str):
    """``JSON_ARRAY()`` or ``JSON_OBJECT()``, the expression applications give a JSON column as its default (MySQL 8
    allows it no literal: ``json NOT NULL DEFAULT (json_object())``): every row gets the same empty document, '[]'
    or '{}', as a text column gets that text. Only a document or text column holds it as such."""


# JSON_ARRAY() or JSON_OBJECT() alone, in parentheses or not (MariaDB refuses an operator after a bare call)
_EMPTY_DOCUMENT = re.compile(r"((?:\(\s*)*)JSON_(ARRAY|OBJECT)\s*\(\s*\)((?:\s*\))*)", re.I)


def empty_document(text: str, start: int = 0, whole: bool = False) -> EmptyDocument | None:
    """The ``EmptyDocument`` a default spelled at ``start`` of ``text`` is (all of ``text`` with ``whole``: the
    catalog's ``json_array()``), or None."""
    m = (_EMPTY_DOCUMENT.fullmatch if whole else _EMPTY_DOCUMENT.match)(text.strip() if whole else text, start)
    if m is None or m.group(1).count("(") > m.group(3).count(")"):  # more would close the column's list
        return None
    return EmptyDocument("[]" if m.group(2).upper() == "ARRAY" else "{}")


@dataclass(frozen=True)
class Now:
    """A default of the statement's time (``CURRENT_TIMESTAMP(n)``, ``NOW()``, ``(CURRENT_DATE)``): one value
    for every row there, that of the statement that added the column (``at``, stamped on its declaration).
    ``precision`` None: the function names no digits, and as a default it keeps the column's (MariaDB shows
    ``DATETIME(2) DEFAULT NOW()`` as ``current_timestamp(2)``; MySQL 8 refuses digits other than the column's)."""

    precision: int | None
    date_only: bool
    at: Instant | None = field(default=None, compare=False)
    # an interval added to it, (CURDATE() + INTERVAL 1 YEAR): (its signed amount, its unit), as in ``SHIFT_UNITS``
    shift: tuple[int, str] | None = None


# the functions that give the statement's time, their digits and the date's named (for ``_SHIFTED``)
_NOW_NAMED = (
    r"(?:(?:CURRENT_TIMESTAMP|LOCALTIMESTAMP|LOCALTIME)\b(?:\s*\(\s*(?P<digits>\d?)\s*\))?"
    r"|NOW\s*\(\s*(?P<now_digits>\d?)\s*\)|(?P<date>CURRENT_DATE\b(?:\s*\(\s*\))?|CURDATE\s*\(\s*\)))"
)
_NOW_FUNCTION = re.sub(r"\?P<\w+>", "", _NOW_NAMED)
_NOW = re.compile(rf"(\()?\s*{_NOW_FUNCTION}\s*(?(1)\))", re.I)
SHIFT_UNITS = ("SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR")
_INTERVAL = rf"INTERVAL\s+(?P<amount>\d+)\s+(?P<unit>{'|'.join(SHIFT_UNITS)})\b"
# the statement's time with an interval added, in parentheses (an expression has them): NOW() - INTERVAL 1 DAY,
# or DATE_ADD(CURDATE(), INTERVAL 1 MONTH) as MariaDB's catalog shows it, (curdate() + interval 1 month)
_SHIFTED = (
    re.compile(rf"(?P<open>(?:\(\s*)+){_NOW_NAMED}\s*(?P<sign>[-+])\s*{_INTERVAL}(?P<close>(?:\s*\))+)", re.I),
    re.compile(
        rf"(?P<open>(?:\(\s*)+)(?P<call>DATE_ADD|ADDDATE|DATE_SUB|SUBDATE)\s*\(\s*{_NOW_NAMED}\s*,\s*{_INTERVAL}\s*\)"
        r"(?P<close>(?:\s*\))+)",
        re.I,
    ),
)

_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", re.S)  # as seam.source.sql_text spells them
_TYPE = re.compile(
    r"\s*([a-z]\w*(?:\s+(?:precision|varying))?)(?:\s*(\((?:[^()']|'(?:[^']|'')*')*\)))?"
    r"((?:\s+(?:unsigned|signed|zerofill)\b)*)",
    re.I,
)
_SYNONYMS = {
    "integer": "int",
    "int1": "tinyint",
    "int2": "smallint",
    "int3": "mediumint",
    "int4": "int",
    "int8": "bigint",
    "middleint": "mediumint",
    "dec": "decimal",
    "numeric": "decimal",
    "fixed": "decimal",
    "double precision": "double",
    "real": "double",
    "character": "char",
    "character varying": "varchar",
    "char varying": "varchar",
}
_BOOLEANS = {"bool", "boolean"}
_KNOWN = {
    *("tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "float", "double", "bit"),
    *("char", "varchar", "binary", "varbinary", "tinytext", "text", "mediumtext", "longtext"),
    *("tinyblob", "blob", "mediumblob", "longblob", "enum", "set", "json"),
    *("date", "datetime", "timestamp", "time", "year"),
}
_NUMBER = re.compile(r"[-+]?\d+(\.\d*)?([eE][-+]?\d+)?|[-+]?\.\d+([eE][-+]?\d+)?")


def _masked(text: str) -> tuple[str, list[str]]:
    """``text`` with each quoted string replaced by ``\\0N\\0`` (keywords inside a COMMENT are not keywords)."""
    strings: list[str] = []

    def hide(m: re.Match) -> str:
        strings.append(m.group(0))
        return f"\0{len(strings) - 1}\0"

    return _QUOTED.sub(hide, text), strings


def _string(quoted: str) -> str:
    """A quoted SQL string's value, as ``seam.source.sql_text`` spells it (a backslash is one)."""
    return quoted[1:-1].replace(quoted[0] * 2, quoted[0])


def declared_default(declared: tuple[str, str]) -> Any:
    """The default a column clause declares: None (none, or NULL), the literal's text (a BIT's as ``b'101'``),
    a ``HexLiteral``, a ``Now``, an ``EmptyDocument``, or COMPUTED. ``declared``: ("column", the definition
    after the name) or ("default", "SET DEFAULT x"/"DROP DEFAULT"), with the statement's ``Instant`` third once
    ``seam.source.stream_ddl`` stamped it (a ``Now`` then carries it)."""
    kind, text = declared[:2]
    masked, strings = _masked(text)
    if kind == "column" and re.search(r"\b(AUTO_INCREMENT|GENERATED|SERIAL)\b|\bAS\s*\(", masked, re.I):
        return COMPUTED
    m = re.search(r"\bDEFAULT\b\s*(\0\d+\0|[^\s,()]+|\()", masked, re.I)
    if (kind == "default" and re.match(r"\s*DROP\b", masked, re.I)) or m is None:
        return None
    now = _NOW.match(masked, m.start(1))
    if now is not None:
        return _now(now, declared[2] if len(declared) > 2 else None)
    shifted = shifted_now(masked, m.start(1), declared[2] if len(declared) > 2 else None)
    if shifted is not None:
        return shifted
    document = empty_document(masked, m.start(1))
    if document is not None:
        return document
    start = _unwrapped(masked, m.start(1))
    if start is None:
        return COMPUTED
    token = _TOKEN.match(masked, start).group(0)  # type: ignore[union-attr]
    if token.startswith("\0"):
        text = "".join(_string(strings[int(t)]) for t in _ADJACENT.findall(_literals(masked, start)))  # 'a' 'b' is 'ab'
        at = declared[2] if len(declared) > 2 else None
        return SessionTime(text, at.in_utc[text]) if at is not None and text in at.in_utc else text
    bits = re.fullmatch(r"[bB]\0(\d+)\0|0b([01]+)", token)
    if bits:  # a bit literal, b'101' or 0b101, as the catalog spells it
        digits = bits.group(2) or _string(strings[int(bits.group(1))])
        return BitLiteral(f"b'{digits}'") if re.fullmatch(r"[01]+", digits) else COMPUTED
    hexed = re.fullmatch(r"[xX]\0(\d+)\0|0x([0-9a-fA-F]+)", token)
    if hexed:  # x'00ff' (an even number of digits, or the server refused it) or 0xff
        return hex_literal(hexed.group(2) or _string(strings[int(hexed.group(1))])) or COMPUTED
    upper = token.upper()
    if upper == "NULL":  # (NULL) is an expression: a NOT NULL TIMESTAMP gets the time of each row's insert from it
        return None if start == m.start(1) else COMPUTED
    if upper in ("TRUE", "FALSE"):
        return "1" if upper == "TRUE" else "0"
    return NumberLiteral(token) if _NUMBER.fullmatch(token) else COMPUTED


_ADJACENT = re.compile(r"\0(\d+)\0")
_STRINGS = r"\0\d+\0(?:\s*\0\d+\0)*"  # adjacent string literals, as ``_masked`` leaves them
_TOKEN = re.compile(rf"{_STRINGS}|[^\s,()]+")  # the string literals a value is made of, or one word


def _literals(masked: str, start: int) -> str:
    """The string literals a DEFAULT's value is made of: the server joins adjacent ones ('a' 'b' is 'ab')."""
    return re.compile(_STRINGS).match(masked, start).group(0)  # type: ignore[union-attr]


def _unwrapped(masked: str, start: int) -> int | None:
    """Where the literal of a DEFAULT at ``start`` begins inside its parentheses (``DEFAULT ('')``, MySQL 8's
    only way to give a TEXT, BLOB or JSON column a default; MariaDB's catalog shows it as the literal): ``start``
    when there are none, None when they hold more than one literal (an expression)."""
    opened = re.compile(r"(?:\(\s*)*").match(masked, start).group(0)  # type: ignore[union-attr]
    inner = start + len(opened)
    depth = opened.count("(")
    if not depth:
        return start
    token = _TOKEN.match(masked, inner)
    closed = token and re.compile(rf"(?:\s*\)){{{depth}}}").match(masked, token.end())  # no operator may follow
    return inner if closed else None


def now_default(catalog: str | None) -> Now | None:
    """The source's COLUMN_DEFAULT as a ``Now`` (MariaDB's ``current_timestamp(6)``, MySQL's
    ``CURRENT_TIMESTAMP``, ``curdate()``, ``(curdate() + interval 1 year)``), or None when it is something else."""
    if not catalog:
        return None
    now = _NOW.fullmatch(catalog.strip())
    return _now(now, None) if now is not None else shifted_now(catalog.strip(), 0, None, whole=True)


def _now(match: re.Match, at: Instant | None) -> Now:
    digits = match.group(2) or match.group(3)
    return Now(int(digits) if digits else None, match.group(4) is not None, at)


def shifted_now(text: str, start: int, at: Instant | None, whole: bool = False) -> Now | None:
    """The ``Now`` with a ``shift`` a default spelled at ``start`` of ``text`` is (all of it with ``whole``), or
    None."""
    for pattern in _SHIFTED:
        m = (pattern.fullmatch if whole else pattern.match)(text, start)
        if m is None or m["open"].count("(") > m["close"].count(")"):  # no operator may follow
            continue
        call = m.groupdict().get("call")
        backwards = call.upper() in ("DATE_SUB", "SUBDATE") if call else m["sign"] == "-"
        digits = m["digits"] or m["now_digits"]
        shift = ((-1 if backwards else 1) * int(m["amount"]), m["unit"].upper())
        return Now(int(digits) if digits else None, m["date"] is not None, at, shift)
    return None


def declared_column(name: str, declared: tuple[str, str]) -> Column | None:
    """The column a definition declares (type, signedness, NULL-ness), as the catalog would spell it closely
    enough for ``seam.source.ddl.widening``; None when this is a default alone or a type not known here."""
    kind, text = declared[:2]
    m = _TYPE.match(text)
    if kind != "column" or not m or "\\" in (m.group(2) or ""):  # ENUM members: the catalog spells them otherwise
        return None
    base, args, flags = " ".join(m.group(1).lower().split()), m.group(2) or "", m.group(3).lower().split()
    if base in _BOOLEANS:
        base, args = "tinyint", "(1)"
    base = _SYNONYMS.get(base, base)
    if base not in _KNOWN:
        return None
    scale, precision = None, None
    if base in ("float", "double") and args:
        numbers = re.findall(r"\d+", args)
        if len(numbers) != 2:
            return None  # FLOAT(p) is a DOUBLE above 24: the catalog decides
        args, scale = f"({numbers[0]},{numbers[1]})", int(numbers[1])  # rounds to D digits (``fills``)
    if base in ("datetime", "timestamp", "time"):
        precision = int((re.findall(r"\d+", args) or ["0"])[0])
        args = f"({precision})" if precision else ""  # the catalog shows TIMESTAMP(0) as timestamp
    if base == "decimal":
        numbers = [int(n) for n in re.findall(r"\d+", args)] or [10]
        args = f"({numbers[0]},{(numbers[1:] or [0])[0]})"
        scale = (numbers[1:] or [0])[0]
    if base in ("enum", "set"):  # the server keeps each member without its trailing spaces
        members = Column(name, base, base + args, True).members
        args = "(" + ",".join("'" + m.rstrip(" ").replace("'", "''") + "'" for m in members) + ")"
    unsigned = "unsigned" in flags or "zerofill" in flags  # ZEROFILL makes a number UNSIGNED
    flags = ["unsigned"] * unsigned + ["zerofill"] * ("zerofill" in flags)  # in the catalog's order
    column_type = base + args + "".join(f" {f}" for f in flags)
    rest, _ = _masked(text[m.end() :])
    return Column(name, base, column_type, declared_nullable(declared), scale, precision, _charset(rest))


def declared_nullable(declared: tuple) -> bool:
    """Whether a column definition allows NULL: no NOT NULL, PRIMARY KEY or SERIAL outside its strings."""
    rest, _ = _masked(declared[1])
    return not re.search(r"\bNOT\s+NULL\b|\bPRIMARY\s+KEY\b|\bSERIAL\b", rest, re.I)


def _charset(attributes: str) -> str | None:
    """The character set a declaration names (its own, or its collation's); None: the table's default."""
    m = re.search(r"\b(?:CHARACTER\s+SET|CHARSET)\s*=?\s*`?(\w+)|\bCOLLATE\s*=?\s*`?(\w+)", attributes, re.I)
    if m is None:
        return None
    return collation_charset(m.group(2)) if m.group(2) else collation_charset(m.group(1) + "_")


def collation_charset(collation: str) -> str:
    """The character set of a collation (``utf8mb4_bin``: utf8mb4), as the catalog names it (utf8 is utf8mb3)."""
    name = collation.lower().split("_")[0]
    return "utf8mb3" if name == "utf8" else name


def is_number(text: Any) -> bool:
    return isinstance(text, str) and _NUMBER.fullmatch(text) is not None


# ---------------------------------------------------------- explicit_defaults_for_timestamp ----

_POSITION = re.compile(r"\s+(?:FIRST|AFTER\s+\S+)\s*$", re.I)
_SETTING = "explicit_defaults_for_timestamp"


def settled_timestamps(clauses: list[tuple], explicit: bool | None, before: tuple[Column, ...]) -> list[tuple] | str:
    """An ALTER's column clauses (``seam.source.ddl``) with each TIMESTAMP declaration whose NULL-ness or default
    the session's ``explicit_defaults_for_timestamp`` decides (``explicit``, as the binlog logged it) spelled as
    the server read it. With the setting OFF a TIMESTAMP not declared NULL is NOT NULL, and one with neither a
    DEFAULT nor ON UPDATE gets DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP when it is the table's first
    TIMESTAMP (``before``: the columns before the statement), the zero timestamp otherwise. A string (why the
    stream cannot follow) when the setting was not logged, or the first TIMESTAMP cannot be told. With the
    setting unknown, reading the declaration as written would fill NULL where the server filled the ALTER's time."""
    if explicit:
        return clauses
    settled = []
    for clause in clauses:
        parts = list(clause)
        for i, part in enumerate(parts):
            if not (isinstance(part, tuple) and part[0] == "column" and _left_to_the_setting(part[1])):
                continue
            name, text = parts[i - 1], part[1]  # a clause names its column just before its declaration
            if explicit is None:
                return (
                    f"column {name} is declared {text.strip()!r}, whose NULL-ness and default {_SETTING} decides, and "
                    "the binlog does not say how the statement's session had it (MariaDB logs it since 10.10)"
                )
            first = _first_timestamp(clauses, before)
            if first is None:
                return f"column {name} is declared {text.strip()!r} under {_SETTING}=OFF, beside clauses not known here"
            parts[i] = ("column", _read_as_off(text, first == name.lower()), *part[2:])
        settled.append(tuple(parts))
    return settled


def _left_to_the_setting(text: str) -> bool:
    """Whether a declaration is a TIMESTAMP whose NULL-ness or default ``explicit_defaults_for_timestamp`` decides."""
    m = _TYPE.match(text)
    if not m or m.group(1).lower() != "timestamp":
        return False
    masked, _ = _masked(text[m.end() :])
    attributes = re.sub(r"\bNOT\s+NULL\b|\bDEFAULT\s+NULL\b", " ", masked, flags=re.I)
    if re.search(r"\bNULL\b", attributes, re.I):
        return False  # declared NULL: the same either way
    return not (re.search(r"\bNOT\s+NULL\b", masked, re.I) and re.search(r"\bDEFAULT\b|\bON\s+UPDATE\b", masked, re.I))


def _read_as_off(text: str, first: bool) -> str:
    """A TIMESTAMP declaration as ``explicit_defaults_for_timestamp=OFF`` reads it (its position clause kept last)."""
    position = _POSITION.search(_masked(text)[0])
    head, tail = (text[: position.start()], text[position.start() :]) if position else (text, "")
    masked, _ = _masked(head)
    if not re.search(r"\bNOT\s+NULL\b", masked, re.I):
        head += " NOT NULL"
    if not re.search(r"\bDEFAULT\b|\bON\s+UPDATE\b", masked, re.I):
        m = _TYPE.match(text)
        digits = (re.findall(r"\d+", (m.group(2) if m else None) or "") or ["0"])[0]
        now = "CURRENT_TIMESTAMP" + (f"({digits})" if digits != "0" else "")
        head += f" DEFAULT {now} ON UPDATE {now}" if first else " DEFAULT '0000-00-00 00:00:00'"
    return head + tail


def _first_timestamp(clauses: list[tuple], before: tuple[Column, ...]) -> str | None:
    """The (lower-cased) name of the table's first TIMESTAMP column after ``clauses`` ("" for none); None when a
    clause may have been skipped (IF [NOT] EXISTS) or names a column not known here."""
    order = [c.name.lower() for c in before]
    types = {c.name.lower(): c.data_type for c in before}
    for clause in clauses:
        kind, name = clause[0], clause[1].lower()
        said = [d[1] for d in clause[2:] if isinstance(d, tuple) and d[0] == "column"]
        if kind.endswith("?") or (kind != "add" and name not in types):
            return None
        new = clause[2].lower() if kind in ("rename", "change") else name
        at = order.index(name) if name in order else len(order)
        if name in order:
            order.remove(name)
        if kind == "drop":
            continue
        position = _POSITION.search(_masked(said[-1])[0]) if said else None
        if position:
            after = position.group(0).split()[1:]
            if after and _unquoted(after[0]) not in order:
                return None
            at = order.index(_unquoted(after[0])) + 1 if after else 0
        order.insert(at, new)
        types[new] = types.pop(name, "")
        if said:
            m = _TYPE.match(said[-1])
            types[new] = m.group(1).lower() if m else ""
    return next((n for n in order if types.get(n) == "timestamp"), "")


def _unquoted(name: str) -> str:
    return name.strip("`").replace("``", "`").lower()


# ---------------------------------------------------------- a session's sql_mode ----

EMPTY_STRING_IS_NULL, ORACLE = 1 << 32, 0x200  # MariaDB's sql_mode bits, as the binlog logs them
REAL_AS_FLOAT = 0x1  # MariaDB's and MySQL's
PAD_CHAR_TO_FULL_LENGTH = 1 << 31  # MariaDB's and MySQL's
# what a type named in an ORACLE-mode statement is (each checked against MariaDB 10.11's catalog)
_ORACLE_TYPES = {"date": "DATETIME", "blob": "LONGBLOB", "clob": "LONGTEXT", "raw": "VARBINARY", "varchar2": "VARCHAR"}


def settled_for_mode(clauses: list[tuple], sql_mode: int | None) -> list[tuple]:
    """An ALTER's column clauses with each declaration spelled as its session's ``sql_mode`` read it: under
    EMPTY_STRING_IS_NULL a default of '' is NULL; under ORACLE, DATE is DATETIME, BLOB LONGBLOB, NUMBER a DOUBLE
    or, with digits, a DECIMAL (and so on: ``_ORACLE_TYPES``); under REAL_AS_FLOAT, REAL is FLOAT."""
    mode = sql_mode or 0
    if not mode & (EMPTY_STRING_IS_NULL | ORACLE | REAL_AS_FLOAT):
        return clauses
    return [tuple(_for_mode(d, mode) if isinstance(d, tuple) else d for d in clause) for clause in clauses]


def _for_mode(declared: tuple, mode: int) -> tuple:
    kind, text = declared[:2]
    if mode & EMPTY_STRING_IS_NULL and declared_default(declared) == "":
        masked, strings = _masked(text)
        m = re.search(r"\bDEFAULT\b\s*(?:\(\s*)*(\0)", masked, re.I)
        if m:
            masked = masked[: m.start(1)] + "NULL" + masked[m.start(1) + len(_literals(masked, m.start(1))) :]
            text = _ADJACENT.sub(lambda n: strings[int(n.group(1))], masked)
    m = _TYPE.match(text) if kind == "column" and mode & (ORACLE | REAL_AS_FLOAT) else None
    if m:
        base = m.group(1).lower()
        spelled = "FLOAT" if base == "real" and mode & REAL_AS_FLOAT else None
        if mode & ORACLE and not spelled:
            spelled = "DECIMAL" if base == "number" and m.group(2) else "DOUBLE" if base == "number" else None
            spelled = spelled or _ORACLE_TYPES.get(base)
        if spelled:
            text = text[: m.start(1)] + spelled + text[m.end(1) :]
    return (kind, text, *declared[2:])


_JSON = re.compile(r"\s*JSON\b", re.I)


def declares_json(clauses: list[tuple]) -> bool:
    return any(isinstance(d, tuple) and d[0] == "column" and _JSON.match(d[1]) for c in clauses for d in c)


def json_as_longtext(clauses: list[tuple]) -> list[tuple]:
    """An ALTER's column clauses as MariaDB reads them: its JSON is LONGTEXT in utf8mb4_bin (with a CHECK that
    the text is JSON); its catalog shows that, and its binlog carries the text."""
    return [
        tuple(
            ("column", "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin" + d[1][m.end() :], *d[2:])
            if isinstance(d, tuple) and d[0] == "column" and (m := _JSON.match(d[1]))
            else d
            for d in clause
        )
        for clause in clauses
    ]
