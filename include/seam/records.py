"""One record shape for snapshot rows and binlog change events, and the value
normalisation that makes the same data compare equal wherever it was read.

Shape (JSON, versioned ``"v": 1``)::

    {"v": 1, "op": "r|c|u|d", "ts_ms": 1764000000000,
     "key": {...}, "before": {...}|null, "after": {...}|null,
     "source": {"db", "table", "snapshot": bool, "batch": id|null,
                "file": "mysql-bin.000003", "pos": 1234, "row": 0, "gtid": "0-1-42"|null,
                "txn": {"file", "pos"}, "last": bool, "prev": {"file", "pos", "row"},
                "part": 0, "attempt": 7}}
                (txn/last/prev: change events only; part/attempt: batch records only)

A foreign-key cascade (MySQL applies it inside the storage engine, so the
binlog has no rows for it) is published on the child table's topic, in the
parent's transaction at the parent's change, as ``"op": "x"`` with
``"cascade": {"action": "delete"|"set_null"|"update", "parent": "db.table",
"columns": [child FK columns], "old": [values], "new": [values]|null}``.

``txn`` is where the source transaction commits; ``last`` marks the table's
last change in it, so a sink can apply whole source transactions only. ``prev`` is the
table's previously published position: a sink that has not applied it has
missed something (Kafka lost it) and waits for the reader to republish.
``part`` and ``attempt`` say which snapshot chunk and which Spark task attempt
published a batch record: END names the attempt whose output counts.

Why JSON, not Avro: any Kafka consumer (kcat, a shell script, another
language) can read it without a schema registry, which the embedded broker
does not run; the version field lets the format evolve.

Normalisation rules (``normalize``), one per MySQL type family:

- DECIMAL: string with exactly the declared scale ("-0.000001"), never float.
- BIGINT UNSIGNED: decimal string (JSON numbers lose precision past 2^53).
  Other integers (incl. TINYINT(1), YEAR): JSON numbers.
- FLOAT: JSON number, the shortest decimal that round-trips in 32 bits
  (1.1, not 1.100000023841858). DOUBLE: JSON number (repr round-trips).
- DATETIME(p): "YYYY-MM-DDTHH:MM:SS.ffffff", always 6 fraction digits.
- TIMESTAMP(p): the same, in UTC with a trailing "Z" (sessions run in UTC).
- DATE: "YYYY-MM-DD". TIME: "[-]H...H:MM:SS.ffffff" (TIME spans +-838 h).
- Zero and partial-zero dates ("0000-00-00", "2024-00-10"), and a zero
  TIMESTAMP (which the binlog carries as epoch 0): null. MySQL
  cannot store them in PostgreSQL's types; null is what JDBC's
  zeroDateTimeBehavior=convertToNull and Debezium do, and it is the same on
  every path, so validation stays exact.
- BIT(n): the integer value. SET: members comma-joined in definition order.
  ENUM: the member string.
- JSON: canonical text (keys sorted, compact, UTF-8 kept).
- BLOB/BINARY: base64. Text: str.

Delivery guarantee: none by itself (a value format); positions defined here
are what the sinks use to apply each change exactly once.
"""
from __future__ import annotations

import base64
import contextlib
import functools
import gc
import datetime as dt
import json
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from seam.schema import Column, TableSchema

FORMAT_VERSION = 1
OPS = ("r", "c", "u", "d", "x")  # x: a foreign-key cascade (``cascade``), change events only
THROUGH = 2**31 - 1  # row index meaning "every row of the event"

_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
_BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_EPOCH = dt.datetime(1970, 1, 1)
_INTS = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"}


@functools.total_ordering
@dataclass(frozen=True)
class Position:
    """A point in the source's binlog, totally ordered per server: (file, pos, row).

    ``pos`` is where the event ENDS (python-mysql-replication's ``log_pos``, and
    what MariaDB's BINLOG_SNAPSHOT_POSITION reports for a snapshot). ``row`` is
    the index of a row within its event (one event carries many rows), so every
    change has its own position; a snapshot's position uses ``THROUGH``.
    """

    file: str
    pos: int
    row: int = 0

    @property
    def sort_key(self) -> tuple[int, int, int]:
        return (int(self.file.rsplit(".", 1)[-1]), self.pos, self.row)

    def __lt__(self, other: "Position") -> bool:  # by binlog file number, not by name
        return self.sort_key < other.sort_key

    @classmethod
    def through(cls, file: str, pos: int) -> "Position":
        """Everything up to and including the binlog event that ends at ``pos``: a snapshot's position."""
        return cls(file, pos, THROUGH)

    def after(self, other: "Position") -> bool:
        """True if this event position is not covered by ``other`` (compares events, not rows)."""
        return self.sort_key[:2] > other.sort_key[:2]

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" if self.row == THROUGH else f"{self.file}:{self.pos}#{self.row}"


@dataclass(frozen=True)
class Record:
    op: str
    db: str
    table: str
    key: dict[str, Any]
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    position: Position
    snapshot: bool = False
    batch: str | None = None
    gtid: str | None = None
    ts_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    txn: Position | None = None  # change events: where the source transaction commits (its XID event ends)
    last: bool = False           # change events: the table's last change in that transaction
    prev: Position | None = None  # change events: the table's previous published position (the chain)
    part: int | None = None      # batch records: the chunk (RECONCILE_PART for reconciliation changes)
    attempt: int | None = None   # batch records: the Spark task attempt that published it
    cascade: dict | None = None  # op x: {"action": delete|set_null|update, "columns", "old", "new", "parent"}

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"op must be one of {OPS}, got {self.op!r}")

    def to_json(self) -> bytes:
        return record_json(self.op, self.db, self.table, self.key, self.before, self.after, self.position,
                           self.snapshot, self.batch, self.gtid, self.ts_ms, self.txn, self.last, self.prev, self.part,
                           self.attempt, self.cascade)

    def kafka_key(self) -> bytes:
        return kafka_key(self.key)

    @classmethod
    def from_json(cls, data: bytes) -> "Record":
        doc = json.loads(data)
        if doc.get("v") != FORMAT_VERSION:
            raise ValueError(f"record format version {doc.get('v')!r} is not {FORMAT_VERSION}; upgrade Seam")
        s = doc["source"]
        txn = Position.through(s["txn"]["file"], s["txn"]["pos"]) if s.get("txn") else None
        prev = Position(**s["prev"]) if s.get("prev") else None
        return cls(op=doc["op"], db=s["db"], table=s["table"], key=doc["key"], before=doc["before"],
                   after=doc["after"], position=Position(s["file"], s["pos"], s["row"]),
                   snapshot=s["snapshot"], batch=s["batch"], gtid=s["gtid"], ts_ms=doc["ts_ms"], txn=txn,
                   last=s.get("last", False), prev=prev, part=s.get("part"), attempt=s.get("attempt"),
                   cascade=doc.get("cascade"))


def record_json(op: str, db: str, table: str, key: dict, before: dict | None, after: dict | None,
                position: Position, snapshot: bool, batch: str | None, gtid: str | None, ts_ms: int,
                txn: Position | None = None, last: bool = False, prev: Position | None = None,
                part: int | None = None, attempt: int | None = None, cascade: dict | None = None) -> bytes:
    """The serialised record (the one place that defines the wire form)."""
    source = {"db": db, "table": table, "snapshot": snapshot, "batch": batch,
              "file": position.file, "pos": position.pos, "row": position.row, "gtid": gtid}
    if txn is not None:
        source["txn"] = {"file": txn.file, "pos": txn.pos}
        source["last"] = last
        source["prev"] = None if prev is None else {"file": prev.file, "pos": prev.pos, "row": prev.row}
    if part is not None:
        source["part"], source["attempt"] = part, attempt
    doc = {"v": FORMAT_VERSION, "op": op, "ts_ms": ts_ms, "key": key, "before": before, "after": after,
           "source": source}
    if cascade is not None:
        doc["cascade"] = cascade
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


def kafka_key(key: dict[str, Any]) -> bytes:
    """The Kafka message key: the primary key (or the whole row of a keyless table), canonical JSON."""
    return json.dumps(key, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def key_of(schema: TableSchema, key_columns: tuple[str, ...], row: dict[str, Any]) -> dict[str, Any]:
    """The record key of a normalised row: its key columns, or the whole row when keyless."""
    return {c: row[c] for c in key_columns} if key_columns else dict(row)


def normalize_row(schema: TableSchema, row: dict[str, Any]) -> dict[str, Any]:
    return {c.name: normalize(c, row[c.name]) for c in schema.columns}


def binlog_values(values: dict[str, Any], none_sources: dict[str, str] | None) -> dict[str, Any]:
    """Undo python-mysql-replication's lossy ``None``s, using the reason it records.

    It decodes an empty SET as ``None`` (reason "empty set"), which would
    otherwise be indistinguishable from NULL. A partial JSON update (MySQL 8
    with binlog_row_value_options=PARTIAL_JSON) carries no full value: refuse it.
    """
    if not none_sources:
        return values
    fixed = dict(values)
    for name, reason in none_sources.items():
        if reason == "empty set":
            fixed[name] = ""
        elif reason == "same with before values":  # NONE_SOURCE.JSON_PARTIAL_UPDATE
            raise ValueError(f"column {name!r} arrived as a partial JSON update: set "
                             "binlog_row_value_options='' on the source so row images are full")
    return fixed


def normalize(column: Column, value: Any) -> Any:
    """A source value (from a SELECT or from a binlog event) in Seam's canonical form."""
    if value is None:
        return None
    t = column.data_type
    if t == "decimal":
        scale = column.numeric_scale or 0
        return f"{Decimal(str(value)):.{scale}f}"
    if t == "year":  # YEAR holds 1901-2155 or 0000; the binlog decoder turns the stored 0 into 1900
        number = int(value)
        return 0 if number == 1900 else number
    if t in _INTS:
        number = int(value)
        if t == "bigint" and column.unsigned:
            return str(number if number >= 0 else number + 2**64)
        return number
    if t == "float":  # single precision: the shortest text that round-trips in 32 bits, as PostgreSQL prints it
        import numpy
        return float(str(numpy.float32(value)))
    if t in ("double", "real"):
        return float(value)
    if t in ("datetime", "timestamp", "date"):
        return _temporal(t, value)
    if t == "time":
        return _time(value)
    if t == "bit":
        if isinstance(value, (bytes, bytearray)):
            return int.from_bytes(value, "big")
        if isinstance(value, str):  # python-mysql-replication renders BIT as a string of 0/1
            return int(value, 2) if value else 0
        return int(value)
    if t == "set":  # members exactly as defined (their case too), in definition order
        members = set(value.split(",")) if isinstance(value, str) else {_text(m) for m in value}
        members.discard("")
        return ",".join(m for m in column.members if m in members)
    if t == "enum":
        if isinstance(value, int):  # an index, when the binlog lacks metadata
            return column.members[value - 1] if value else ""
        return _text(value)
    if t == "json":
        if isinstance(value, (bytes, bytearray, str)):
            value = json.loads(value) if value not in ("", b"") else None
        return json.dumps(_json_text(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    if t in _BINARY:  # the binlog reader hands an empty binary value back as ''
        return base64.b64encode(value.encode() if isinstance(value, str) else bytes(value)).decode()
    if t in _TEXT:
        return _text(value)
    return _text(value) if isinstance(value, (bytes, str)) else value


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def _json_text(value: Any) -> Any:
    """MySQL 8's binary JSON arrives with bytes keys/strings from the binlog."""
    if isinstance(value, dict):
        return {_text(k): _json_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_text(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8")
    return value


def _temporal(kind: str, value: Any) -> str | None:
    if isinstance(value, (str, bytes)):  # drivers hand back invalid (zero) dates as text
        text = _text(value)
        if text.startswith("0000") or "-00" in text[:10]:
            return None
        value = dt.datetime.fromisoformat(text) if kind != "date" else dt.date.fromisoformat(text)
    if kind == "date":
        return (value.date() if isinstance(value, dt.datetime) else value).isoformat()
    if not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if kind == "timestamp" and value == _EPOCH:
        return None  # the binlog's form of a zero TIMESTAMP (valid ones start at 00:00:01)
    text = value.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return text + "Z" if kind == "timestamp" else text


def _time(value: Any) -> str:
    if isinstance(value, (str, bytes)):
        return _time_text(_text(value))
    if isinstance(value, dt.time):
        value = dt.timedelta(hours=value.hour, minutes=value.minute, seconds=value.second,
                             microseconds=value.microsecond)
    micros = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, frac = divmod(micros, 1_000_000)
    return f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}.{frac:06d}"


def _time_text(text: str) -> str:
    sign = "-" if text.startswith("-") else ""
    hms, _, frac = text.lstrip("-").partition(".")
    h, m, s = hms.split(":")
    return f"{sign}{int(h):02d}:{int(m):02d}:{int(s):02d}.{frac.ljust(6, '0')[:6]}"


@contextlib.contextmanager
def no_cyclic_gc():
    """Hold the cyclic garbage collector off while a batch of rows is handled: it would otherwise walk the
    growing lists of row tuples again and again (a fifth of the sink's CPU). Memory is still freed by
    reference counting; the collector runs as usual between batches."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
