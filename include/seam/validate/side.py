"""What validation compares and on which side: the ``Scope`` (a window of the cursor, a range of the key), and a
``Side``, one database's view of the table (its dialect's SQL for the canonical texts, the bucket checksums and
the rows by key, inside that side's snapshot). Delivery guarantee: read-only.
"""

from __future__ import annotations

from dataclasses import dataclass

from seam.apply.target import normalize_target, read_back_as_records
from seam.core.errors import ValidationError
from seam.core.identifiers import qi, quote
from seam.core.pipeline import TableConfig
from seam.core.schema import TableSchema
from seam.source.incremental import Window, check_time_bounds, window_condition
from seam.validate import canonical
from seam.wire.codecs import codec
from seam.wire.records import normalize_row

INTEGER = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}

# where a key value goes in a statement built from SQL texts, until the driver's %s replaces it
_PLACE = "\x00key\x00"


@dataclass(frozen=True)
class Scope:
    """What to compare: an incremental window of the cursor (``(start, end]``, given as two strings or
    resolved to a ``Window``), and/or an inclusive range of the first key."""

    window: Window | tuple[str, str] | None = None
    key_range: tuple[int, int] | None = None

    @property
    def resolved(self) -> Window | None:
        """The window once ``_resolve`` has made it a ``Window`` (it is two strings before)."""
        assert not isinstance(self.window, tuple), "the scope's window was not resolved"
        return self.window

    def describe(self) -> str:
        parts = []
        if self.resolved:
            parts.append(f"{self.resolved.cursor} in ({self.resolved.start}, {self.resolved.end}]")
        if self.key_range:
            parts.append(f"key in [{self.key_range[0]}, {self.key_range[1]}]")
        return " and ".join(parts) or "whole table"


WHOLE_TABLE = Scope()


class Side:
    """One database's view of the table: SQL text for its dialect, and a connection inside its snapshot."""

    def __init__(
        self,
        kind: str,
        conn,
        schema: TableSchema,
        table: TableConfig,
        state: str,
        scope: Scope,
        soft_delete: bool,
        nul: str,
    ):
        if kind != "mysql":  # a NOT NULL column's zero dates are -infinity there, null in records
            read_back_as_records(conn)
        self.kind, self.conn, self.schema, self.table, self.state = kind, conn, schema, table, state
        self.scope, self.soft_delete, self.nul = scope, soft_delete, nul
        # keyless: the rows' buckets by their columns' texts, but a JSON document's, which the servers print apart
        unprinted = [c for c in schema.columns if c.data_type != "json"] or list(schema.columns)
        self.key_cols = [schema.column(k) for k in table.key] or unprinted
        self.documents = [i for i, c in enumerate(schema.columns) if c.data_type == "json"]  # compared by value
        my = kind == "mysql"
        self.ref = f"{quote(schema.db)}.{quote(schema.table)}" if my else f"{qi(schema.db)}.{qi(schema.table)}"
        self.col = (lambda name: f"x.{quote(name)}") if my else (lambda name: f"x.{qi(name)}")
        # the columns' values as a driver reads them exactly (FLOAT as its widened double, not 6 printed digits)
        self.values_sql = ", ".join(
            codec(c).read_mysql(c, self.col(c.name)) if my else self.col(c.name) for c in schema.columns
        )
        # the source's text maps a NUL as the sink does (seam.apply.decode)
        self.text = (lambda c: canonical.mysql_text(c, nul)) if my else (lambda c: canonical.pg_text(c, state))
        self.row_text = (  # read by MD5 only: bytes
            canonical.mysql_row_text(schema.columns, nul, hashed=True)
            if my
            else canonical.pg_row_text(schema.columns, state)
        )
        key_cols = self.key_cols  # (its text is read back)
        self.key_text = canonical.mysql_row_text(key_cols, nul) if my else canonical.pg_row_text(key_cols, state)
        self.hash = (canonical.mysql_hash if my else canonical.pg_hash)(self.row_text)
        order = ", ".join(self.col(c.name) for c in self.key_cols)
        self.digest = (canonical.mysql_digest if my else canonical.pg_digest)(self.row_text, order)
        if my:  # a digest bucket's texts are joined in the server (``digest_fits`` bounds their size)
            self.run(f"SET SESSION group_concat_max_len = {canonical.DIGEST_BYTES}")
        self.bucket_hash = (canonical.mysql_bucket_hash if my else canonical.pg_bucket_hash)(self.key_text)

    def run(self, sql: str, params: tuple = ()) -> list[tuple]:
        if self.kind == "mysql":
            with self.conn.cursor() as cur:
                cur.execute(sql, params or None)
                return list(cur.fetchall())
        return self.conn.execute(sql, params or None).fetchall()

    def where(self, extra: str = "") -> str:
        terms = []
        w = self.scope.resolved
        if w is not None:
            terms.append(window_condition(self.schema, w) if self.kind == "mysql" else self._pg_window(w))
        if self.scope.key_range is not None:
            k = self.col(self.key_cols[0].name)
            terms.append(f"{k} >= {int(self.scope.key_range[0])} AND {k} <= {int(self.scope.key_range[1])}")
        if self.soft_delete:
            flag = self.col(self.table.soft_delete)
            terms.append(
                f"COALESCE({flag}, 0) = 0" if self.kind == "mysql" else f"coalesce({flag}::text, '0') IN ('0', 'false')"
            )
        if extra:
            terms.append(extra)
        return " AND ".join(f"({t})" for t in terms) or "1 = 1"

    def _pg_window(self, w: Window) -> str:
        column = self.schema.column(w.cursor)
        x = self.col(w.cursor)
        if column.data_type in INTEGER:
            return f"{x} > {int(w.start)} AND {x} <= {int(w.end)}"
        check_time_bounds(w)
        kind = {"date": "date", "datetime": "timestamp"}.get(column.data_type)
        if kind is None:  # TIMESTAMP: timestamptz in the target, compared in UTC as on the source
            return (
                f"{x} > ('{w.start}'::timestamp AT TIME ZONE 'UTC') AND "
                f"{x} <= ('{w.end}'::timestamp AT TIME ZONE 'UTC')"
            )
        return f"{x} > '{w.start}'::{kind} AND {x} <= '{w.end}'::{kind}"

    def key_bounds(self) -> tuple[int | None, int | None]:
        k = self.col(self.key_cols[0].name)
        lo, hi = self.run(f"SELECT MIN({k}), MAX({k}) FROM {self.ref} x WHERE {self.where()}")[0]
        return (None if lo is None else int(lo)), (None if hi is None else int(hi))

    def bucket_of_range(self, lo: int, width: int) -> str:
        k = self.col(self.key_cols[0].name)
        if self.kind == "mysql":
            return f"({k} - {lo}) DIV {width}"
        return f"div({k}::numeric - {lo}, {width})" if self.key_cols[0].unsigned else f"({k}::bigint - {lo}) / {width}"

    def bucket_of_hash(self, buckets: int) -> str:
        return f"({self.bucket_hash}) % {buckets}"

    def digest_fits(self, width: int) -> bool:
        """Whether buckets of ``width`` consecutive values of the key can be checksummed as one digest each: the
        key is one integer column (so both sides order it alike and a bucket holds at most ``width`` rows) and
        the texts of that many rows are bounded well within what either server joins in memory."""
        if len(self.table.key) != 1 or self.key_cols[0].data_type not in INTEGER:
            return False
        bounds = [canonical.text_bound(c, self.nul) for c in self.schema.columns]
        if None in bounds:
            return False
        return width * (sum(b for b in bounds if b is not None) + len(bounds) + 1) <= canonical.DIGEST_BYTES

    def aggregate(
        self, bucket_expr: str, metrics: list[tuple[str, str]], extra_where: str = "", digest: bool = False
    ) -> dict[int, tuple]:
        """Per bucket: (rows, checksum, *metrics). The checksum: the hash sum mod 2^64, or with ``digest`` (see
        ``digest_fits``) the MD5 of the rows' texts in key order."""
        parts = [f"{bucket_expr} AS b", "COUNT(*)", self.digest if digest else f"SUM({self.hash})"]
        for column, metric in metrics:
            x = self.col(column)
            if metric == "sum":
                parts.append(f"SUM({x})")
            else:
                parts.append(f"SUM(CASE WHEN {x} IS NULL THEN 1 ELSE 0 END)")
        rows = self.run(f"SELECT {', '.join(parts)} FROM {self.ref} x WHERE {self.where(extra_where)} GROUP BY 1")
        if digest:
            return {int(r[0]): (int(r[1]), r[2], *r[3:]) for r in rows}
        return {int(r[0]): (int(r[1]), int(r[2] or 0) % canonical.MOD, *r[3:]) for r in rows}

    def texts(self, extra_where: str) -> list[tuple[tuple[str, ...], tuple[str | None, ...]]]:
        """(key texts, column texts) of the rows in scope matching ``extra_where``."""
        n = len(self.key_cols)
        cols = [self.text(c) for c in self.key_cols] + [self.text(c) for c in self.schema.columns]
        rows = self.run(f"SELECT {', '.join(cols)} FROM {self.ref} x WHERE {self.where(extra_where)}")
        if self.documents:  # each server prints numbers its own way: compared by value
            rows = [
                (*r[:n], *(canonical.json_text(t) if i in self.documents else t for i, t in enumerate(r[n:])))
                for r in rows
            ]
        return [(tuple(r[:n]), tuple(r[n:])) for r in rows]

    def row_digests(self, extra_where: str) -> dict[str, str]:
        """Key text -> MD5 of the row's canonical text, for the rows in scope matching ``extra_where``, packed by
        the server into one value: the driver's cost per row was more than the server's (5.5 of 7 us a row read
        as texts). For one integer key (its text holds neither separator)."""
        my = self.kind == "mysql"
        pair = (
            f"CONCAT({self.key_text}, CHAR(31 USING utf8mb4), MD5({self.row_text}))"
            if my
            else f"{self.key_text} || chr(31) || md5({self.row_text})"
        )
        packed = f"GROUP_CONCAT({pair} SEPARATOR X'1d')" if my else f"string_agg({pair}, chr(29))"
        rows, text = self.run(f"SELECT COUNT(*), {packed} FROM {self.ref} x WHERE {self.where(extra_where)}")[0]
        if isinstance(text, bytes):
            text = text.decode()
        digests = dict(item.split("\x1f") for item in text.split("\x1d")) if text else {}
        if len(digests) != rows:  # cut short (a server that caps group_concat_max_len): never taken for equal
            raise ValidationError(
                f"{self.schema.db}.{self.schema.table}: the {self.kind} side packed {len(digests):,} of {rows:,} "
                "rows' digests (its group_concat_max_len is capped below the session's setting?): raise its limit"
            )
        return digests

    def all_values(self) -> list[dict]:
        """Every row in scope, normalised (record-shape values)."""
        return [
            self._normalised(dict(zip(self.schema.names, r)))
            for r in self.run(f"SELECT {self.values_sql} FROM {self.ref} x WHERE {self.where()}")
        ]

    def _normalised(self, values: dict) -> dict:
        if self.kind == "mysql":
            return normalize_row(self.schema, values)
        return {c.name: normalize_target(c, values[c.name]) for c in self.schema.columns}

    def values_by_key(self, keys: list[tuple[str, ...]], in_scope: bool) -> dict[tuple[str, ...], dict]:
        """Normalised rows (record-shape values) for the given key texts."""
        if not keys:
            return {}
        out: dict[tuple[str, ...], dict] = {}
        names = self.values_sql
        key_texts = ", ".join(self.text(c) for c in self.key_cols)
        for i in range(0, len(keys), 1000):
            chunk = keys[i : i + 1000]
            if len(self.key_cols) == 1 and self.key_cols[0].data_type in INTEGER:
                match = f"{self.col(self.key_cols[0].name)} IN ({', '.join(str(int(k[0])) for k in chunk)})"
                params: tuple = ()
            else:
                tup = "(" + ", ".join([_PLACE] * len(self.key_cols)) + ")"
                match = f"({key_texts}) IN ({', '.join([tup] * len(chunk))})"
                params = tuple(v for k in chunk for v in k)
            sql = f"SELECT {key_texts}, {names} FROM {self.ref} x WHERE " + (self.where(match) if in_scope else match)
            if params:  # the canonical texts hold a % of their own (DATE_FORMAT's '%Y'): doubled for the driver
                sql = sql.replace("%", "%%").replace(_PLACE, "%s")
            rows = self.run(sql, params)
            n = len(self.key_cols)
            for r in rows:
                out[tuple(r[:n])] = self._normalised(dict(zip(self.schema.names, r[n:])))
        return out
