"""A statement from the binlog as the server read it, for the DDL matcher (``seam.source.ddl``): comments
gone, a versioned comment's content kept (``/*!50100 ...*/``, MariaDB's ``/*M!...*/``: the server ran it),
and every string literal in one spelling, in its own quotes with that quote doubled and no backslash
escape, read under the ``sql_mode`` the binlog logged with the statement. Without this,
``COMMENT 'issue #5', DROP COLUMN x`` lost its DROP to a ``#`` comment that was not one, and
``COMMENT 'a\\'', MODIFY x ...`` its MODIFY to a string that did not end where it seemed to.

The binlog keeps a statement in the bytes its client sent, with the client's character set beside it
(``statement_text``): read as UTF-8, ``TRUNCATE TABLE café`` from a latin1 client named no table Seam follows.

The pieces of the grammar the matchers share are here too: a name, a qualified name, a list's clauses.

Delivery guarantee: none of its own (pure text); a statement it cannot read raises ``UnreadableStatement``,
which the matcher turns into a stop for a table the statement names.
"""

from __future__ import annotations

import functools
import re

from pymysql.charset import charset_by_id

from seam.core.errors import SourceError
from seam.source.row_values import exact_codec

# sql_mode bits as the binlog logs them (the same in MySQL and MariaDB)
ANSI_QUOTES = 0x4
NO_BACKSLASH_ESCAPES = 0x100000

# what MySQL makes of a backslash and the character after it; any other character stands for itself
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}
_VERSIONED = re.compile(r"/\*M?!\d*")


class UnreadableStatement(SourceError):
    """A string, a quoted name or a comment that does not end: the server read the statement otherwise."""

    retry = False


def statement_text(raw: bytes, client_collation: int | None) -> str:
    """A statement's bytes read in its client's character set (``character_set_client`` as the binlog logs it:
    the number of its collation). A byte the character set does not know stays visible as ``\\xNN``."""
    codec = _client_codec(client_collation)
    try:
        return raw.decode(codec)
    except UnicodeDecodeError:
        return raw.decode(codec, "backslashreplace")


@functools.cache
def _client_codec(collation: int | None) -> str:
    try:
        charset = charset_by_id(collation)
    except KeyError:  # none logged (an old server), or one of MariaDB's own numbers: all of them Unicode ones
        return "utf8"
    return exact_codec(charset.name) or charset.encoding


@functools.lru_cache(maxsize=32)  # the DDL matcher asks once per followed table
def plain_statement(query: str, sql_mode: int | None = None) -> str:
    """``query`` without its comments and with its strings in one spelling (see the module)."""
    mode = sql_mode or 0
    backslashes, ansi = not mode & NO_BACKSLASH_ESCAPES, bool(mode & ANSI_QUOTES)
    out: list[str] = []
    at, versioned = 0, False
    while at < len(query):
        ch = query[at]
        if ch == "`" or (ch == '"' and ansi):
            end = _quoted_name_end(query, at)
            out.append(query[at:end])
            at = end
        elif ch in "'\"":
            value, at = _string(query, at, backslashes)
            out.append(ch + value.replace(ch, ch * 2) + ch)
        elif versioned and query.startswith("*/", at):
            out.append(" ")
            at, versioned = at + 2, False
        elif (marker := _VERSIONED.match(query, at)) is not None:
            out.append(" ")
            at, versioned = marker.end(), True
        elif query.startswith("/*", at):
            end = query.find("*/", at + 2)
            if end < 0:
                raise UnreadableStatement("a comment that does not end")
            out.append(" ")
            at = end + 2
        elif ch == "#" or (query.startswith("--", at) and (at + 2 == len(query) or query[at + 2] <= " ")):
            end = query.find("\n", at)
            out.append(" ")
            at = len(query) if end < 0 else end
        else:
            out.append(ch)
            at += 1
    return "".join(out)


def literal_value(quoted: str) -> str:
    """The value of one string literal in quotes, read with backslash escapes (MariaDB's COLUMN_DEFAULT)."""
    value, end = _string(quoted, 0, backslashes=True)
    if end != len(quoted):
        raise UnreadableStatement(f"not one string: {quoted[:40]!r}")
    return value


def _quoted_name_end(query: str, at: int) -> int:
    quote = query[at]
    i = at + 1
    while True:
        i = query.find(quote, i)
        if i < 0:
            raise UnreadableStatement(f"a name in {quote} that does not end")
        if query.startswith(quote * 2, i):
            i += 2
            continue
        return i + 1


def _string(query: str, at: int, backslashes: bool) -> tuple[str, int]:
    """The value of the string literal that starts at ``at``, and where it ends."""
    quote, value, i = query[at], [], at + 1
    while i < len(query):
        ch = query[i]
        if ch == "\\" and backslashes and i + 1 < len(query):
            value.append(_ESCAPES.get(query[i + 1], query[i + 1]))
            i += 2
        elif ch == quote and query.startswith(quote * 2, i):
            value.append(quote)
            i += 2
        elif ch == quote:
            return "".join(value), i + 1
        else:
            value.append(ch)
            i += 1
    raise UnreadableStatement("a string that does not end")


# a name in backticks, in double quotes (a writer's sql_mode ANSI_QUOTES: the statement would have failed
# without it, so a double-quoted name here is one), or bare
NAME = r'(?:`(?:[^`]|``)+`|"(?:[^"]|"")+"|[\w$]+)'
QUALIFIED = re.compile(rf"\s*(?:({NAME})\s*\.\s*)?({NAME})", re.S)


def unquote(name: str) -> str:
    quote = name[0]
    return name[1:-1].replace(quote * 2, quote) if quote in '`"' else name


def table_name_at(
    text: str, at: int, default_db: str | None, fold_names: bool
) -> tuple[tuple[str | None, str] | None, int]:
    """The table named at ``at`` in ``text`` as (database, table), the database ``default_db`` when none is
    named, both folded to lower case when the source compares names so (``fold_names``); and where it ends."""
    m = QUALIFIED.match(text, at)
    if not m:
        return None, at
    fold = str.lower if fold_names else str
    schema = unquote(m.group(1)) if m.group(1) else default_db
    return (schema and fold(schema), fold(unquote(m.group(2)))), m.end()


def _scanned(text: str):
    """Each character of ``text``: (where, it, the depth of parentheses after it, whether it is outside quotes)."""
    depth, quote = 0, None
    for at, ch in enumerate(text):
        bare = quote is None and ch not in "'\"`"
        if quote:
            quote = None if ch == quote else quote
        elif not bare:
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        yield at, ch, depth, bare


def closing_parenthesis(text: str) -> int | None:
    """Where the parenthesis that opens ``text`` closes (None: it does not open with one, or never closes)."""
    if not text.startswith("("):
        return None
    return next((at for at, ch, depth, bare in _scanned(text) if bare and ch == ")" and depth == 0), None)


def split_clauses(text: str) -> list[str]:
    """Top-level comma-separated clauses (commas inside parentheses or quotes do not split)."""
    clauses: list[str] = []
    current: list[str] = []
    for _, ch, depth, bare in _scanned(text):
        if bare and ch == "," and depth == 0:
            clauses.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    clauses.append("".join(current).strip())
    return [c for c in clauses if c]
