"""Canonical text of every column, computed INSIDE each database, identical on
MySQL/MariaDB and PostgreSQL for equal data; and the 64-bit row hash built on
it. Validation sums these hashes per key range on both sides and compares.

The text follows the record shape's normalisation rules (``seam.wire.records``),
written the way MariaDB prints them, because the source is the side whose
functions Seam cannot extend; the target gets small SQL functions in Seam's
state schema (``pg_functions``) that print PostgreSQL values the same way:

- integers, BIT, YEAR, DECIMAL: plain decimal text, DECIMAL with its scale;
- FLOAT/DOUBLE: the shortest round-trip digits in MariaDB's notation
  (``1.5e20``, ``0.00000015``); FLOAT widened exactly to double first;
- DATE ``YYYY-MM-DD``; DATETIME ``YYYY-MM-DD HH:MM:SS.ffffff``; TIMESTAMP the
  same in UTC; zero dates NULL; TIME ``[-]HH:MM:SS.ffffff`` (hours may exceed 99);
- text, ENUM, SET (members comma-joined in definition order): UTF-8 text; on the source side a NUL mapped
  as the sink maps it (``target.text_nul``, ``seam.apply.decode``);
- JSON: MariaDB's ``JSON_NORMALIZE`` form (keys sorted, numbers as ``1.0E0``); the escape ``\u0000`` mapped
  the same way on the source side;
- BINARY/BLOB: lower-case hex;
- UUID: lower-case 8-4-4-4-12; INET4/INET6: the address as MariaDB prints it (PostgreSQL's ``host()``).

A row's text joins its columns with U+001F, NULL as U+001E; its hash is the
first 64 bits of the MD5 of that text. A sum of hashes mod 2^64 is
order-independent and additive, so key ranges can be summed and split freely.
Where the key is one integer column and a bucket's rows are bounded in size, a
bucket's checksum is instead the MD5 of its rows' texts joined by U+001D in key
order (``mysql_digest``/``pg_digest``): one MD5 per bucket, not one per row,
which was half of a narrow table's scan on both sides.

Each type family's text is defined in ``seam.wire.codecs`` next to its other renderings.

Delivery guarantee: none (expressions only).
"""

from __future__ import annotations

import re

from seam.core.identifiers import qi, quote
from seam.core.schema import Column
from seam.wire.codecs import Enum, Json, Set, Text, codec, json_document

MOD = 2**64
DIGEST_BYTES = 64 << 20  # the most text a digest bucket may join (``Side.digest_fits``)
_UTF8 = ("utf8mb4", "utf8mb3", "utf8", "ascii")  # character sets whose bytes are UTF-8's


def mysql_text(column: Column, nul: str, alias: str = "x", hashed: bool = False) -> str:
    """The column's canonical text in MariaDB/MySQL (session time_zone '+00:00'); ``nul``: what the sink
    writes for a NUL in text and JSON (``target.nul_replacement``). ``hashed``: the same bytes, for an MD5
    only to read: a text whose bytes are UTF-8 already is read as a binary string, not converted, and its NUL
    is replaced byte by byte (no other UTF-8 character has a zero byte); that took two fifths off a text
    column's cost in MariaDB's checksum scan."""
    family = codec(column)
    raw = f"{alias}.{quote(column.name)}"
    text = family.check_mysql(column, raw)
    if not isinstance(family, (Text, Enum, Set, Json)):
        return text
    if hashed and not isinstance(family, Json):
        utf8 = f"CAST({raw} AS BINARY)" if column.charset in _UTF8 else text
        return f"REPLACE({utf8}, X'00', X'{nul.encode().hex()}')"
    instead = f"_utf8mb4 X'{nul.encode().hex()}'" if nul else "''"
    if not isinstance(family, Json):
        return f"REPLACE({text}, CHAR(0 USING utf8mb4), {instead})"
    # the escape \u0000, not a backslash escaped before "u0000": escaped backslashes (\\, paired left to right as
    # JSON reads them) are set aside as CHAR(1) first, which JSON text never holds raw
    pairs, aside = "_utf8mb4 X'5c5c'", "CHAR(1 USING utf8mb4)"
    escape = "_utf8mb4 X'5c7530303030'"
    return f"REPLACE(REPLACE(REPLACE({text}, {pairs}, {aside}), {escape}, {instead}), {aside}, {pairs})"


def pg_text(column: Column, state: str, alias: str = "x") -> str:
    """The same text for the column as Seam maps it into PostgreSQL (``seam.wire.codecs``)."""
    return codec(column).check_pg(column, f"{alias}.{qi(column.name)}", qi(state))


def mysql_row_text(columns, nul: str, alias: str = "x", hashed: bool = False) -> str:
    parts = [f"COALESCE({mysql_text(c, nul, alias, hashed)}, CHAR(30 USING utf8mb4))" for c in columns]
    return f"CONCAT_WS(CHAR(31 USING utf8mb4), {', '.join(parts)})" if len(parts) > 1 else parts[0]


def pg_row_text(columns, state: str, alias: str = "x") -> str:
    return " || chr(31) || ".join(f"coalesce({pg_text(c, state, alias)}, chr(30))" for c in columns)


def mysql_hash(row_text: str) -> str:
    """First 64 bits of MD5, unsigned."""
    return f"CAST(CONV(LEFT(MD5({row_text}), 16), 16, 10) AS UNSIGNED)"


def pg_hash(row_text: str) -> str:
    """First 64 bits of MD5, signed (sums are compared mod 2^64, where the sign does not matter)."""
    return f"('x' || left(md5({row_text}), 16))::bit(64)::bigint"


def mysql_bucket_hash(row_text: str) -> str:
    """28 other bits of the MD5 (always positive on both sides): hash buckets for non-integer keys."""
    return f"CAST(CONV(SUBSTRING(MD5({row_text}), 17, 7), 16, 10) AS UNSIGNED)"


def pg_bucket_hash(row_text: str) -> str:
    return f"('x' || substr(md5({row_text}), 17, 7))::bit(28)::int"


def mysql_digest(row_text: str, order_by: str) -> str:
    """The MD5 of a bucket's row texts in key order (the session's ``group_concat_max_len`` must hold them: a
    text cut short makes the bucket differ, and its rows are then compared one by one)."""
    return f"MD5(GROUP_CONCAT({row_text} ORDER BY {order_by} SEPARATOR X'1d'))"


def pg_digest(row_text: str, order_by: str) -> str:
    return f"md5(string_agg({row_text}, chr(29) ORDER BY {order_by}))"


# the longest canonical text of a column of each type, in bytes (None: unbounded, or not known here)
_FIXED_TEXT = {
    **dict.fromkeys(("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "bit"), 21),
    **dict.fromkeys(("float", "double", "real"), 32),
    "year": 4,
    "date": 10,
    **dict.fromkeys(("datetime", "timestamp"), 26),
    "time": 17,
    "uuid": 36,
    "inet4": 15,
    "inet6": 45,
    "tinytext": 255 * 4,
    "tinyblob": 255 * 2,
}


def text_bound(column: Column, nul: str) -> int | None:
    """An upper bound of the column's canonical text in bytes, or None where it has none (TEXT, BLOB, JSON...)."""
    if column.data_type in _FIXED_TEXT:
        return _FIXED_TEXT[column.data_type]
    length = re.search(r"\((\d+)", column.column_type)
    n = int(length.group(1)) if length else None
    if column.data_type in ("char", "varchar") and n is not None:
        return n * max(4, len(nul.encode()))  # a NUL (one byte) may print as the replacement
    if column.data_type in ("binary", "varbinary") and n is not None:
        return 2 * n
    if column.data_type == "decimal" and n is not None:
        return n + 2
    if column.data_type in ("enum", "set"):
        return 4 * (sum(len(m) + 1 for m in column.members) or 1)
    return None


def pg_functions(state: str) -> list[str]:
    """Printers of PostgreSQL values in MariaDB's notation, created in Seam's state schema."""
    s = qi(state)
    return [
        # a double as MariaDB prints it: shortest round-trip digits; positional between 1e-15 and 1e15
        f"""CREATE OR REPLACE FUNCTION {s}.mariadb_double(v float8) RETURNS text LANGUAGE plpgsql IMMUTABLE
        PARALLEL SAFE AS $$
        DECLARE t text; m text; p int; c numeric; e int := 0; digits text; lead int; decpt int; n int; sign text := '';
        BEGIN
          IF v IS NULL THEN RETURN NULL; END IF;
          IF v = 0 THEN RETURN '0'; END IF;
          t := v::text;
          IF left(t, 1) = '-' THEN sign := '-'; t := substr(t, 2); END IF;
          IF position('e' IN t) > 0 THEN
            m := split_part(t, 'e', 1); e := split_part(t, 'e', 2)::int;
          ELSE m := t; END IF;
          digits := replace(m, '.', '');
          lead := length(digits) - length(ltrim(digits, '0'));
          decpt := length(split_part(m, '.', 1)) - lead + e;
          digits := rtrim(ltrim(digits, '0'), '0');
          n := length(digits);
          FOR p IN 15..CASE WHEN abs(v) < 1e308 THEN n - 1 ELSE 0 END LOOP  -- PostgreSQL prints some doubles with 17 digits where fewer round-trip
            c := round(('0.' || digits)::numeric, p);
            IF (c::text || 'e' || decpt)::float8 = abs(v) THEN
              IF c >= 1 THEN digits := '1'; decpt := decpt + 1; ELSE digits := rtrim(substr(c::text, 3), '0'); END IF;
              n := length(digits);
              EXIT;
            END IF;
          END LOOP;
          IF decpt > 0 AND decpt < n THEN RETURN sign || left(digits, decpt) || '.' || substr(digits, decpt + 1);
          ELSIF decpt <= 0 AND decpt >= -14 THEN RETURN sign || '0.' || repeat('0', -decpt) || digits;
          ELSIF decpt >= n AND decpt <= 15 THEN RETURN sign || digits || repeat('0', decpt - n);
          END IF;
          RETURN sign || left(digits, 1) || CASE WHEN n > 1 THEN '.' || substr(digits, 2) ELSE '' END
                 || 'e' || (decpt - 1)::text;
        END $$""",
        # an interval (a MySQL TIME) as TIME_FORMAT(x, '%H:%i:%s.%f') prints it
        f"""CREATE OR REPLACE FUNCTION {s}.mariadb_time(v interval) RETURNS text LANGUAGE sql IMMUTABLE
        PARALLEL SAFE AS $$
          SELECT CASE WHEN us < 0 THEN '-' ELSE '' END || CASE WHEN abs(us) < 36000000000 THEN '0' ELSE '' END || (abs(us) / 3600000000)::text || ':'
                 || lpad((abs(us) / 60000000 % 60)::text, 2, '0') || ':' || lpad((abs(us) / 1000000 % 60)::text, 2, '0')
                 || '.' || lpad((abs(us) % 1000000)::text, 6, '0')
          FROM (SELECT (extract(epoch FROM v) * 1000000)::bigint AS us) q
        $$""",
    ]


def pg_geometry_functions(state: str) -> list[str]:
    """``mysql_geometry``: a geometry as MySQL stores it (SRID little-endian, then little-endian WKB) in hex. The
    fallback's bytea holds exactly that; with PostGIS (which a sink may install after the first validation, so
    these run every time) the geometry overload prints it."""
    s = qi(state)
    return [
        f"""CREATE OR REPLACE FUNCTION {s}.mysql_geometry(v bytea) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
        AS $$ SELECT encode(v, 'hex') $$""",
        f"""DO $do$ BEGIN
          IF to_regtype('geometry') IS NOT NULL THEN
            EXECUTE $f$CREATE OR REPLACE FUNCTION {s}.mysql_geometry(v geometry) RETURNS text LANGUAGE sql IMMUTABLE
              PARALLEL SAFE AS $b$ SELECT lpad(to_hex(ST_SRID(v) & 255), 2, '0') || lpad(to_hex(ST_SRID(v) >> 8 & 255), 2, '0')
                || lpad(to_hex(ST_SRID(v) >> 16 & 255), 2, '0') || lpad(to_hex(ST_SRID(v) >> 24 & 255), 2, '0')
                || encode(ST_AsBinary(v, 'NDR'), 'hex') $b$$f$;
          END IF;
        END $do$""",
    ]


def json_text(text: str | None) -> str | None:
    """A JSON column's text in one form, whichever server printed it: MySQL's ``CAST(j AS CHAR)`` and
    PostgreSQL's ``jsonb::text`` agree on key order, spacing and strings, not on numbers (MySQL's ``12.50`` and
    ``1e300`` are PostgreSQL's ``12.5`` and ``1000...0``). The record's form (``json_document``: keys sorted,
    numbers by value): applied to the rows of a range whose checksums differed, before they are compared one by
    one."""
    return None if text is None else json_document(text)
