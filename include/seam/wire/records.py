"""One record shape for snapshot rows and binlog change events, and the value
normalisation that makes the same data compare equal wherever it was read.

Shape (JSON, versioned ``"v": 1``)::

    {"v": 1, "op": "r|c|u|d", "ts_ms": 1764000000000,
     "key": {...}, "before": {...}|null, "after": {...}|null,
     "source": {"db", "table", "snapshot": bool, "batch": id|null,
                "file": "mysql-bin.000003", "pos": 1234, "row": 0, "gtid": "0-1-42"|null,
                "txn": {"file", "pos"}, "last": bool, "prev": {"file", "pos", "row"}, "seq": 0,
                "gtids": "0-1-42"|"uuid:1-42", "server": "server_id 1"|uuid,
                "part": 0, "attempt": 7}}
                (txn/last/prev/seq: change events only; part/attempt: batch records only)

A foreign-key cascade (MySQL applies it inside the storage engine, so the
binlog has no rows for it) is published on the child table's topic, in the
parent's transaction at the parent's change, as ``"op": "x"`` with
``"cascade": {"action": "delete"|"set_null"|"update", "parent": "db.table",
"columns": [child FK columns], "old": [values], "new": [values]|null}``.
A level further down (the child's own cascading key into a grandchild) is
published on the grandchild's topic at the same position as
``{"via": [db, table], "columns", "referenced", "on_delete", "on_update"}``:
which child rows the level above changed is known only in the target, so
the sink applies it with the rows it recorded when it applied that level.
Either form may carry ``"keep": [columns]`` (record the changed rows' values
of these columns for the levels below) and ``"self": [rules]`` (the table's
keys into itself, repeated by the sink until no row changes).

``gtids`` (on a table's last change in a transaction) is the GTID set executed
through the commit and ``server`` the server it was read on (``seam.source.gtid``).
``txn`` is where the source transaction commits; ``last`` marks the table's
last change in it and ``seq`` counts the table's changes in it from 0 (a
cascade shares its parent row's position), so a sink can apply whole source
transactions only. ``prev`` is the
table's previously published position: a sink that has not applied it has
missed something (Kafka lost it) and waits for the reader to republish.
``part`` and ``attempt`` say which snapshot chunk and which Spark task attempt
published a batch record: END names the attempt whose output counts.

Why JSON, not Avro: any Kafka consumer (kcat, a shell script, another
language) can read it without a schema registry, which the embedded broker
does not run; the version field lets the format evolve.

Values: one canonical form per MySQL type family, defined with all its renderings
in ``seam.wire.codecs`` (its docstring and the README list what each type looks like).

Delivery guarantee: none by itself (a value format); positions defined here
are what the sinks use to apply each change exactly once.
"""

from __future__ import annotations

import contextlib
import gc
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import msgspec

from seam.core.position import Position
from seam.core.schema import Column, TableSchema
from seam.wire.codecs import codec, record_value

FORMAT_VERSION = 1
OPS = ("r", "c", "u", "d", "x")  # x: a foreign-key cascade (``cascade``), change events only


@dataclass  # not frozen (nothing changes one): a frozen dataclass's init costs 4x, and one is made per change read
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
    last: bool = False  # change events: the table's last change in that transaction
    prev: Position | None = None  # change events: the table's previous published position (the chain)
    seq: int | None = None  # change events: the index of this record among the table's in the transaction
    part: int | None = None  # batch records: the chunk (RECONCILE_PART for reconciliation changes)
    attempt: int | None = None  # batch records: the Spark task attempt that published it
    cascade: dict | None = None  # op x: {"action": delete|set_null|update, "columns", "old", "new", "parent"}
    gtids: str | None = None  # a table's last change in a transaction: the GTID set executed through its commit
    server: str | None = None  # ... and the server that is on (seam.source.gtid)

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"op must be one of {OPS}, got {self.op!r}")

    def to_json(self) -> bytes:
        return self.chained_json(self.txn, self.last, self.prev, self.seq, self.gtids, self.server)

    def chained_json(
        self,
        txn: Position | None,
        last: bool,
        prev: Position | None,
        seq: int | None,
        gtids: str | None,
        server: str | None,
    ) -> bytes:
        """The serialised record with its place in the table's chain given (a change event as published)."""
        if txn is not None and self.cascade is None and self.part is None and not self.snapshot and self.batch is None:
            return change_json(
                self.op,
                self.db,
                self.table,
                self.key,
                self.before,
                self.after,
                self.position,
                self.gtid,
                self.ts_ms,
                txn,
                last,
                prev,
                seq,
                gtids,
                server,
            )
        return record_json(
            self.op,
            self.db,
            self.table,
            self.key,
            self.before,
            self.after,
            self.position,
            self.snapshot,
            self.batch,
            self.gtid,
            self.ts_ms,
            txn,
            last,
            prev,
            self.part,
            self.attempt,
            self.cascade,
            seq,
            gtids,
            server,
        )

    def kafka_key(self) -> bytes:
        return kafka_key(self.key)

    @classmethod
    def from_json(cls, data: bytes) -> Record:
        doc = json.loads(data)
        if doc.get("v") != FORMAT_VERSION:
            raise ValueError(f"record format version {doc.get('v')!r} is not {FORMAT_VERSION}; upgrade Seam")
        s = doc["source"]
        txn = Position.through(s["txn"]["file"], s["txn"]["pos"]) if s.get("txn") else None
        prev = Position(**s["prev"]) if s.get("prev") else None
        return cls(
            op=doc["op"],
            db=s["db"],
            table=s["table"],
            key=doc["key"],
            before=doc["before"],
            after=doc["after"],
            position=Position(s["file"], s["pos"], s["row"]),
            snapshot=s["snapshot"],
            batch=s["batch"],
            gtid=s["gtid"],
            ts_ms=doc["ts_ms"],
            txn=txn,
            last=s.get("last", False),
            prev=prev,
            part=s.get("part"),
            attempt=s.get("attempt"),
            cascade=doc.get("cascade"),
            seq=s.get("seq"),
            gtids=s.get("gtids"),
            server=s.get("server"),
        )


_encode = msgspec.json.Encoder().encode
_encode_sorted = msgspec.json.Encoder(order="sorted").encode


def record_json(
    op: str,
    db: str,
    table: str,
    key: dict,
    before: dict | None,
    after: dict | None,
    position: Position,
    snapshot: bool,
    batch: str | None,
    gtid: str | None,
    ts_ms: int,
    txn: Position | None = None,
    last: bool = False,
    prev: Position | None = None,
    part: int | None = None,
    attempt: int | None = None,
    cascade: dict | None = None,
    seq: int | None = None,
    gtids: str | None = None,
    server: str | None = None,
) -> bytes:
    """The serialised record (the one place that defines the wire form)."""
    source = {
        "db": db,
        "table": table,
        "snapshot": snapshot,
        "batch": batch,
        "file": position.file,
        "pos": position.pos,
        "row": position.row,
        "gtid": gtid,
    }
    if txn is not None:
        source["txn"] = {"file": txn.file, "pos": txn.pos}
        source["last"] = last
        source["prev"] = None if prev is None else {"file": prev.file, "pos": prev.pos, "row": prev.row}
        if seq is not None:
            source["seq"] = seq
        if server is not None:
            source["gtids"], source["server"] = gtids, server
    if part is not None:
        source["part"], source["attempt"] = part, attempt
    doc = {
        "v": FORMAT_VERSION,
        "op": op,
        "ts_ms": ts_ms,
        "key": key,
        "before": before,
        "after": after,
        "source": source,
    }
    if cascade is not None:
        doc["cascade"] = cascade
    return _encode(doc)  # compact UTF-8 JSON (what json.dumps gives with these options, 10x faster)


def change_json(
    op: str,
    db: str,
    table: str,
    key: dict,
    before: dict | None,
    after: dict | None,
    position: Position,
    gtid: str | None,
    ts_ms: int,
    txn: Position,
    last: bool,
    prev: Position | None,
    seq: int | None,
    gtids: str | None,
    server: str | None,
) -> bytes:
    """``record_json`` of a change event read from the binlog (no batch, part or cascade), byte for byte, in
    less than two thirds of its time: the reader makes one per change (tests/unit/test_change_json.py holds the
    two to the same bytes)."""
    source = {
        "db": db,
        "table": table,
        "snapshot": False,
        "batch": None,
        "file": position.file,
        "pos": position.pos,
        "row": position.row,
        "gtid": gtid,
        "txn": {"file": txn.file, "pos": txn.pos},
        "last": last,
        "prev": None if prev is None else {"file": prev.file, "pos": prev.pos, "row": prev.row},
    }
    if seq is not None:
        source["seq"] = seq
    if server is not None:
        source["gtids"], source["server"] = gtids, server
    return _encode(
        {"v": FORMAT_VERSION, "op": op, "ts_ms": ts_ms, "key": key, "before": before, "after": after, "source": source}
    )


def kafka_key(key: dict[str, Any]) -> bytes:
    """The Kafka message key: the primary key (or the whole row of a keyless table), canonical JSON."""
    return _encode_sorted(key)


def key_of(schema: TableSchema, key_columns: tuple[str, ...], row: dict[str, Any] | None) -> dict[str, Any]:
    """The record key of a normalised row: its key columns, or the whole row when keyless."""
    assert row is not None  # a change has an image, after or before
    return {c: row[c] for c in key_columns} if key_columns else dict(row)


def normalize_row(schema: TableSchema, row: dict[str, Any] | None) -> dict[str, Any]:
    assert row is not None  # the image a change's op says it has
    return {name: None if (v := row[name]) is None else record(c, v) for name, c, record in _recorders(schema)}


def normalize(column: Column, value: Any) -> Any:
    """A source value (from a SELECT or from a binlog event) in Seam's canonical form (``seam.wire.codecs``)."""
    return record_value(column, value)


@contextlib.contextmanager
def no_cyclic_gc():
    """Hold the cyclic garbage collector off while a batch of rows is handled: it would otherwise walk the
    growing lists of row tuples again and again (a fifth of the sink's CPU). Memory is still freed by
    reference counting; the collector runs as usual between batches. Threads may overlap their holds: the
    collector comes back when the last one ends (if it ran before the first)."""
    with _GC_HOLD:
        if _GC_HOLDS[0] == 0:
            _GC_HOLDS[1] = gc.isenabled()
            gc.disable()
        _GC_HOLDS[0] += 1
    try:
        yield
    finally:
        with _GC_HOLD:
            _GC_HOLDS[0] -= 1
            if _GC_HOLDS[0] == 0 and _GC_HOLDS[1]:
                gc.enable()


_GC_HOLD = threading.Lock()
_GC_HOLDS: list = [0, False]  # holds open now, whether the collector ran before the first


def _recorders(schema: TableSchema) -> tuple:
    """(name, column, its codec's ``record``) per column: what ``normalize_row`` runs for every value, made once
    per schema and kept on it (as ``functools.cached_property`` keeps a value: in the instance's dict)."""
    found = schema.__dict__.get("_recorders")
    if found is None:
        found = schema.__dict__["_recorders"] = tuple((c.name, c, codec(c).record) for c in schema.columns)
    return found
