"""The boundary protocol: BEGIN and END control messages around every batch.

A batch (a full load or an incremental window) is published to its table's
topic as::

    BEGIN(batch, table, mode, columns, key)  row ... row  change ... change  END(batch, position, parts, count, checksum)

Placement rule: each table topic has ONE partition, so Kafka's per-partition
order is the batch's order: the sink sees BEGIN before and END after every
message of the batch. Rows are published by several Spark tasks at once, but
BEGIN is acknowledged before the Spark job starts and END is sent only after
every task has flushed, so no row can land outside its brackets. (A topic with
more partitions would need BEGIN/END in every partition and an END barrier;
the pipeline config refuses that layout instead.)

Control messages are JSON with ``"control": "BEGIN"|"END"``, the key
``__seam_control__`` and the header ``seam-control``: the only messages with
headers, so a consumer tells them apart without parsing. Data messages are
plain records (``seam.wire.records``) whose ``source`` names the chunk (``part``)
and the Spark task attempt (``attempt``) that published them. END lists, per
chunk, the attempt whose output counts and that part's row count and
checksum; output of other attempts (a retried task) is discarded by the sink.
The checksum is the sum mod 2^64 of the CRC-32 of each message value
(order-independent), so the sink can verify exactly what it staged in any
order; with the count it detects a lost or doubled message.

Snapshot rows travel many to a message (a *block*), with no headers, in one of two forms:

- ``__seam_rows__`` as the Kafka key: the value is the rows' records, each exactly as it would be alone,
  joined by newlines (a record never holds a raw newline: JSON escapes it);
- ``__seam_frame__``: the records of one chunk share all but their key and row image, so the value's first
  line is that frame, ``b"%d %d %d " % (len(head), len(middle), len(tail)) + head + middle + tail``, and each
  further line is a row, ``key + TAB + after`` (``after`` alone where the key is the row: keyless tables); the
  row's record is ``head + key + middle + after + tail`` (a third fewer bytes on the wire than whole records).

Counts and checksums are still per record, so END checks a block's rows one by one; a block is at most
``BLOCK_BYTES`` (or one row, when a row alone is larger) and ``BLOCK_ROWS``. One record per message is read
the same way (a repair's rows, an older Seam's loads).

Change events need no brackets: the change reader publishes each source
transaction whole and chains them per table (see ``Heartbeat``).

Delivery guarantee: the protocol makes partial batches detectable. A sink
that applies a batch only on a matching END, and discards a batch whose BEGIN
was followed by another BEGIN for the same table, never exposes half a batch.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any
from zlib import crc32

from seam.core.position import Position
from seam.wire.records import FORMAT_VERSION

try:
    from seam.wire import _frames  # type: ignore[attr-defined]
except ImportError:  # not built (or not shipped to a Spark executor): the same in Python
    _frames = None

MODES = ("full", "incremental", "repair")
# a committed batch of these modes leaves the whole table exact at its END's position: the stream goes on from it
EXACT_MODES = ("full", "repair")
CONTROL_HEADER = "seam-control"
RECONCILE_PART = -1  # binlog changes that bring every chunk to the batch position
ROWS_KEY = b"__seam_rows__"  # the Kafka key of a block of snapshot records
FRAME_KEY = b"__seam_frame__"  # of a block of rows sharing one frame
BLOCK_KINDS = {ROWS_KEY: 1, FRAME_KEY: 2}  # 0: any other message (the compiled stager's kinds)
# A block's size: large enough that the per-message costs (the producer's call, the broker's record batch
# header, the consumer's message object) vanish next to the rows', small enough that a consumer's prefetch
# (``topics.FETCH_MAX_BYTES``) holds several
BLOCK_BYTES = 256 * 1024
BLOCK_ROWS = 1_000
_MOD = 2**64


def message_hash(value: bytes) -> int:
    return crc32(value)


@dataclass
class Tally:
    """Count and order-independent checksum of published or staged messages."""

    rows: int = 0
    checksum: int = 0

    def add(self, value: bytes) -> None:
        self.rows += 1
        self.checksum = (self.checksum + message_hash(value)) % _MOD

    def add_many(self, rows: int, hash_sum: int) -> None:
        self.rows += rows
        self.checksum = (self.checksum + hash_sum) % _MOD

    def merge(self, other: Tally) -> Tally:
        return Tally(self.rows + other.rows, (self.checksum + other.checksum) % _MOD)


def blocks(records: list[bytes], first: bytes | None = None) -> list[bytes]:
    """``records`` (snapshot rows, in order) as the values of block messages, in order; ``first``: a line each
    block begins with (a frame)."""
    out: list[bytes] = []
    lead = [first] if first is not None else []
    start, size = 0, len(first or b"")
    for i, record in enumerate(records):
        if i > start and (size + len(record) > BLOCK_BYTES or i - start >= BLOCK_ROWS):
            out.append(b"\n".join(lead + records[start:i]))
            start, size = i, len(first or b"")
        size += len(record) + 1
    if start < len(records):
        out.append(b"\n".join(lead + records[start:]))
    return out


def frame(head: bytes, middle: bytes, tail: bytes) -> bytes:
    """The first line of a ``__seam_frame__`` block (its rows' records are ``head + key + middle + after +
    tail``)."""
    return b"%d %d %d " % (len(head), len(middle), len(tail)) + head + middle + tail


def frame_blocks(
    rows: list[tuple[bytes, bytes]], keyed: bool, head: bytes, middle: bytes, tail: bytes
) -> tuple[list[bytes], int]:
    """``rows`` ((after, key) JSON, as the source returns them; the key unused where not ``keyed``) as the values
    of frame blocks, and the sum of their records' CRC-32s (made in one pass by ``_frames`` where it is built)."""
    first = frame(head, middle, tail)
    if _frames is not None:
        return _frames.frame_blocks(rows, keyed, head, middle, tail, first, BLOCK_BYTES, BLOCK_ROWS)
    pairs = [(k, a) for a, k in rows] if keyed else [(a, a) for a, _ in rows]
    lines = [k + b"\t" + a for k, a in pairs] if keyed else [a + b"" for _, a in pairs]
    start = crc32(head)
    crcs = sum(crc32(tail, crc32(a, crc32(middle, crc32(k, start)))) for k, a in pairs)
    return blocks(lines, first), crcs


def block_records(key: bytes | None, value: bytes | None) -> list[bytes] | None:
    """The records of a block message; None for any other message (a record alone, a control message). A frame
    that does not parse gives the whole value, as one record that is none."""
    kind = BLOCK_KINDS.get(key or b"")
    if kind is None or not value:
        return None
    lines = value.split(b"\n")
    if kind == 1:
        return lines
    parts = _frame_parts(lines[0])
    if parts is None:
        return [value]
    head, middle, tail = parts
    records = []
    for line in lines[1:]:
        key, tab, after = line.partition(b"\t")  # no tab: the row is its own key (keyless)
        records.append(head + key + middle + (after if tab else key) + tail)
    return records


def _frame_parts(line: bytes) -> tuple[bytes, bytes, bytes] | None:
    try:
        a, b, c, rest = line.split(b" ", 3)
        sizes = int(a), int(b), int(c)
    except ValueError:
        return None
    if min(sizes) < 0 or sum(sizes) != len(rest) or not all(x.isdigit() for x in (a, b, c)):
        return None
    return rest[: sizes[0]], rest[sizes[0] : sizes[0] + sizes[1]], rest[sizes[0] + sizes[1] :]


@dataclass(frozen=True)
class Part:
    """One chunk's published output: which attempt counts, its snapshot position, rows and checksum."""

    part: int
    attempt: int
    rows: int
    checksum: int
    file: str | None = None
    pos: int | None = None


def new_batch_id() -> str:
    """Sortable by start time, unique: ``20261122T101500-9f3a1c2b``."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{secrets.token_hex(4)}"


@dataclass(frozen=True)
class Begin:
    batch: str
    db: str
    table: str
    mode: str
    columns: list[dict[str, Any]]  # source schema, so the sink can create the staging table without the source
    key: list[str]
    window: dict[str, str] | None = None
    soft_delete: str | None = None  # rows with this column set are kept out of the target (every mode)
    plan: dict[str, Any] | None = None  # a full load's chunks ({"column", "chunks": [[index, lo, hi]]}): to resume

    def to_json(self) -> bytes:
        return _dump({"control": "BEGIN", **asdict(self)})


@dataclass(frozen=True)
class PartDone:
    """A chunk of a batch was published whole (after its rows, from the task that read it): the sink records
    it, so that a load started again for the table keeps the chunk (``seam.source.full_load``: resume)."""

    batch: str
    db: str
    table: str
    part: Part

    def to_json(self) -> bytes:
        return _dump(
            {
                "control": "PART",
                "batch": self.batch,
                "db": self.db,
                "table": self.table,
                "part": {**asdict(self.part), "checksum": str(self.part.checksum)},
            }
        )


@dataclass(frozen=True)
class End:
    batch: str
    db: str
    table: str
    mode: str
    position: Position | None  # None for an incremental window (a query, not a binlog snapshot)
    parts: list[Part]
    rows: int
    checksum: int
    window: dict[str, str] | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    gtids: str | None = None  # full loads: the GTID set executed through ``position``, and the server's identity
    server: str | None = None

    def to_json(self) -> bytes:
        doc = asdict(self)
        doc["position"] = _pos(self.position)
        doc["checksum"] = str(self.checksum)
        for p in doc["parts"]:
            p["checksum"] = str(p["checksum"])
        return _dump({"control": "END", **doc})


def _pos(p: Position | None) -> dict | None:
    return None if p is None else {"file": p.file, "pos": p.pos, "row": p.row}


def _unpos(doc: dict | None) -> Position | None:
    return None if doc is None else Position(**doc)


# Stream control messages come from the change reader and form, per table, one chain with its change
# events: each names the table's previous published position (``prev``), so a sink that has not applied
# ``prev`` knows that something before it was lost (a broker restart) and waits for the republication.


@dataclass(frozen=True)
class Heartbeat:
    """Between source transactions: every change of this table up to ``position`` has been published, the last
    at ``prev``; ``seen_ms`` is when the reader had read the binlog to ``position`` (for lag in seconds)."""

    position: Position
    prev: Position | None = None
    seen_ms: int = 0
    gtids: str | None = None  # the GTID set executed through ``position`` (seam.source.gtid), and the server it is on
    server: str | None = None

    def to_json(self) -> bytes:
        return _dump(
            {
                "control": "HEARTBEAT",
                "position": _pos(self.position),
                "prev": _pos(self.prev),
                "seen_ms": self.seen_ms,
                "gtids": self.gtids,
                "server": self.server,
            }
        )


@dataclass(frozen=True)
class SchemaChange:
    """DDL the stream follows, at ``position``: the table's columns from here on (``seam.source.ddl``), with
    the value the source gave existing rows in added columns (``defaults``) and the columns ``renamed`` (old
    name to new); ``truncate``: every row is gone. The sink makes the target's table the same, in the
    transaction that stores the position."""

    position: Position
    prev: Position | None
    columns: list[dict[str, Any]]
    defaults: dict[str, Any]
    ddl: str
    gtids: str | None = None
    server: str | None = None
    renamed: dict[str, str] = field(default_factory=dict)
    truncate: bool = False
    stop: str | None = None  # then the table stops for this reason, and waits for `seam repair` (a cut-over, or an
    # added column whose value in the rows there the stream cannot reproduce)

    def to_json(self) -> bytes:
        return _dump(
            {
                "control": "SCHEMA",
                "renamed": self.renamed,
                "truncate": self.truncate,
                "stop": self.stop,
                "position": _pos(self.position),
                "prev": _pos(self.prev),
                "columns": self.columns,
                "defaults": self.defaults,
                "ddl": self.ddl,
                "gtids": self.gtids,
                "server": self.server,
            }
        )


@dataclass(frozen=True)
class StreamStop:
    """DDL the stream cannot follow (DROP/MODIFY/RENAME/TRUNCATE...): the table's stream stops here."""

    position: Position
    prev: Position | None
    reason: str

    def to_json(self) -> bytes:
        return _dump(
            {"control": "STOP", "position": _pos(self.position), "prev": _pos(self.prev), "reason": self.reason}
        )


@dataclass(frozen=True)
class Rebase:
    """The source is another server now (a failover, or a replica): the table's applied position ``prev``, read
    on the old server, is ``position`` on ``server``, found there by its GTID set ``gtids`` (seam.source.gtid). A sink
    takes it only when it has applied exactly ``prev``; else it reports a gap and the reader finds it anew."""

    position: Position
    prev: Position
    gtids: str
    server: str

    def to_json(self) -> bytes:
        return _dump(
            {
                "control": "REBASE",
                "position": _pos(self.position),
                "prev": _pos(self.prev),
                "gtids": self.gtids,
                "server": self.server,
            }
        )


def parse_control(value: bytes) -> Begin | End | PartDone | Heartbeat | SchemaChange | StreamStop | Rebase:
    doc = json.loads(value)
    if doc.get("v") != FORMAT_VERSION:
        raise ValueError(f"control message version {doc.get('v')!r} is not {FORMAT_VERSION}")
    kind = doc.pop("control")
    doc.pop("v")
    if kind == "BEGIN":
        return Begin(**doc)
    if kind == "PART":
        return PartDone(**{**doc, "part": Part(**{**doc["part"], "checksum": int(doc["part"]["checksum"])})})
    if kind in ("HEARTBEAT", "SCHEMA", "STOP", "REBASE"):
        doc["position"], doc["prev"] = _unpos(doc["position"]), _unpos(doc.get("prev"))
        return {"HEARTBEAT": Heartbeat, "SCHEMA": SchemaChange, "STOP": StreamStop, "REBASE": Rebase}[kind](**doc)
    if kind == "END":
        doc["position"] = _unpos(doc["position"])
        doc["checksum"] = int(doc["checksum"])
        doc["parts"] = [Part(**{**p, "checksum": int(p["checksum"])}) for p in doc["parts"]]
        return End(**doc)
    raise ValueError(f"unknown control message {kind!r}")


def _dump(doc: dict) -> bytes:
    return json.dumps({"v": FORMAT_VERSION, **doc}, ensure_ascii=False, separators=(",", ":")).encode()
