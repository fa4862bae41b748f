"""An open batch as the sink holds it between its BEGIN and its END (its staging tables and the tallies of
what was staged per (part, attempt)), and the staging of its rows: each record decoded, counted and turned
into COPY text (a block message's records one by one: ``seam.wire.boundary.blocks``), by worker processes when
a long run of messages takes the Python path.

Staging is a pure function of the messages (``stage_rows``): the sink writes what it returns, in the
transaction that stores their Kafka offsets. The snapshot rows of Seam's own full load, in the exact form it
writes them, go to COPY text in compiled code (``seam.apply._snapshotrows``, built by ``make setup``), or to
COPY's binary rows where every column has a binary form there and every value of the run is sure; every other
message, and all of them where it is not built, the Python way, with the same result. Where it runs
(this process or a worker) changes nothing that reaches the target; the workers only spread the decoding over
the machine's cores.

Delivery guarantee: none of its own; the tallies are stored with the staged rows (``state.ledger``), so a
restarted sink resumes a batch exactly.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from zlib import crc32

import msgspec
import psycopg
from psycopg import adapt, postgres
from psycopg.adapt import Dumper
from psycopg.pq import Format

from seam.apply import SinkError
from seam.apply.decode import record_decoder
from seam.apply.target import Landing, pg_type, row_converter, zero_dates_as_infinity
from seam.core.schema import TableSchema
from seam.wire.boundary import BLOCK_KINDS, Begin, Tally, block_records
from seam.wire.codecs import codec

try:
    from seam.apply import _snapshotrows as native  # type: ignore[attr-defined]
except ImportError:  # not built: see the docstring
    native = None


@dataclass(frozen=True)
class Staging:
    """What staging a batch's rows needs, as a plain value (it is sent to the workers)."""

    batch: str
    schema: TableSchema
    key: tuple[str, ...]
    landing: Landing  # how values land in the target's columns


@dataclass
class OpenBatch:
    begin: Begin
    staging: Staging
    stage: str
    changes: str
    tallies: dict[tuple[int, int], Tally] = field(default_factory=dict)
    rows_at: float = field(default_factory=time.monotonic)  # when its last rows arrived (or the sink took it up)

    @property
    def schema(self) -> TableSchema:
        return self.staging.schema


@dataclass
class Staged:
    """One run of messages staged: COPY data for the stage table (snapshot rows with their part and attempt:
    text, or COPY's binary rows without its header where ``binary``) and COPY text for the changes table (the
    batch's change records with seq and deleted), the indexes of the messages held for END (change events, or
    not this batch's columns) and (rows, CRC sum) per (part, attempt)."""

    stage: bytes
    changes: bytes
    held: list[int]
    sums: dict[tuple[int, int], list[int]]
    binary: bool = False


def stage_rows(staging: Staging, values: list[bytes], offsets: list[int], kinds: bytes | None = None) -> Staged:
    """Stage messages of the open batch (none of them a control message; ``kinds``: where not 0, a block of rows,
    ``seam.wire.boundary.BLOCK_KINDS``). A message of another (superseded) batch is dropped; one that does not
    decode as the batch's columns, or is not a batch record, is held (a block holding such a record too)."""
    from psycopg._copy_base import format_row_text  # psycopg's C formatter (pinned <3.4 for it)

    decode, convert = _codecs(staging)
    tx = _transformer()
    plan = _native_plan(staging)
    flags = kinds if kinds is not None else bytes(len(values))
    rest: Iterable[tuple[int, bytes | None]]
    sums: dict[tuple[int, int], list[int]] = {}
    if plan is not None and isinstance(values, list):  # the records it does not take are staged below
        text, rest, sums, binary = native.stage(values, flags, staging.batch.encode(), *plan)
        if binary:  # every record staged there (so none below)
            return Staged(text, b"", [], sums, binary=True)
        rows = bytearray(text)
    else:
        rest = ((i, None) for i in range(len(values)))
        rows = bytearray()
    changes = bytearray()
    key = [staging.schema.names.index(k) for k in staging.key] or None
    held: list[int] = []
    for i, value in _records(values, flags, rest):
        try:
            doc = decode(value)
        except msgspec.DecodeError:  # not this batch's columns: a change event, or garbage (quarantined when replayed)
            held.append(i)
            continue
        source = doc.source
        if source.batch != staging.batch:
            if source.batch is None:  # a change event, held until the batch's END: applied if after it
                held.append(i)
            continue  # else a superseded batch's rows
        if flags[i] and doc.op != "r":  # a block holds snapshot rows only: it is not Seam's
            held.append(i)
            continue
        kind = (source.part, source.attempt)
        tally = sums.get(kind)
        if tally is None:
            tally = sums[kind] = [0, 0]
        tally[0] += 1
        tally[1] += crc32(value)
        if doc.op == "r":
            format_row_text(convert(doc.after) + kind, tx, rows)
            continue
        seq = offsets[i] * 2
        before, after = doc.before, doc.after
        if before is not None and (after is None or _key(before, key) != _key(after, key)):
            format_row_text(convert(before) + (seq, True), tx, changes)  # deleted, or its key moved
        if after is not None:
            format_row_text(convert(after) + (seq + 1, False), tx, changes)
    return Staged(bytes(rows), bytes(changes), sorted(set(held)), sums)


def _records(
    values: list[bytes], kinds: bytes, rest: Iterable[tuple[int, bytes | None]]
) -> Iterator[tuple[int, bytes]]:
    """(message index, record) of what the compiled stager left (``rest``: (index, record), record None: the whole
    message); a block left whole is taken record by record."""
    for i, record in rest:
        if record is not None:
            yield i, record
        elif kinds[i]:
            yield from ((i, r) for r in block_records(_BLOCK_KEYS[kinds[i]], values[i]) or ())
        else:
            yield i, values[i]


_BLOCK_KEYS = {kind: key for key, kind in BLOCK_KINDS.items()}


def _key(image, key: list[int] | None) -> tuple:
    values = msgspec.structs.astuple(image)
    return tuple(values[i] for i in key) if key is not None else values


@functools.lru_cache(maxsize=4)
def _native_plan(staging: Staging) -> tuple[tuple[bytes, ...], bytes, bytes | None] | None:
    """The compiled stager's columns (names, whether a null is written -infinity, and each one's kind of
    COPY binary field, None where a column's type has none there), or None where it cannot stage this table's
    rows: not built, a column whose values COPY takes converted (BLOB, spatial), or a name JSON writes with an
    escape."""
    if native is None:
        return None
    columns = staging.schema.columns
    if any(codec(c).to_copy(staging.landing.postgis) is not None for c in columns):
        return None
    if any(ch in c.name for c in columns for ch in _ESCAPED):
        return None
    infinite = bytes(zero_dates_as_infinity(c, staging.landing.zero_dates) for c in columns)
    kinds = bytes(_binary_kind(pg_type(c, staging.landing.postgis)) for c in columns)
    return tuple(c.name.encode() for c in columns), infinite, kinds if all(kinds) else None


def _binary_kind(pg: str) -> int:
    """The compiled stager's kind of binary field for a staging column of type ``pg`` (``_snapshotrows``'s
    BINARY_ kinds), 0 for none: PostgreSQL parses a binary number or date in a fraction of the text's time."""
    if pg.startswith("numeric("):
        return 4
    if pg.startswith("varchar("):
        return 6
    return {"smallint": 1, "integer": 2, "bigint": 3, "date": 5, "text": 6}.get(pg, 0)


_ESCAPED = frozenset('"\\') | frozenset(map(chr, range(32)))


@functools.lru_cache(maxsize=4)
def _codecs(staging: Staging):
    """The batch's decoder and its converter to COPY values, made once per process."""
    decoder = record_decoder(staging.schema, staging.landing.nul, batch_rows=True)
    return decoder.decode, row_converter(staging.schema, staging.landing)


def _transformer():
    """psycopg's adaptation for COPY text without a connection: UTF-8 (the sink's connections use it), bytea
    in hex."""

    context = adapt.AdaptersMap(psycopg.adapters)
    context.register_dumper(bytes, _HexBytea)
    return adapt.Transformer(context)


class _HexBytea(Dumper):
    """bytea in hex, as psycopg writes it with a connection (without one it writes the older escape format)."""

    format = Format.TEXT
    oid = postgres.types["bytea"].oid

    def dump(self, obj) -> bytes:
        return b"\\x" + bytes(obj).hex().encode()


class Stager:
    """Stages runs of messages: in this process when short or taken by the compiled stager, else in slices
    spread over worker processes (started when first needed, one per core up to ``workers``). Results come back
    in message order."""

    def __init__(self, workers: int | None = None, parallel_from: int = 4_000):
        self.workers = workers if workers is not None else min(4, os.cpu_count() or 1)
        self.parallel_from = parallel_from  # shorter runs cost more to send than to stage here
        self._pool: ProcessPoolExecutor | None = None

    def stage(
        self, staging: Staging, values: list[bytes], offsets: list[int], kinds: bytes | None = None
    ) -> Iterator[Staged]:
        """``kinds``: of each message, 0 or the kind of block it is (``stage_rows``)."""
        flags = kinds if kinds is not None else bytes(len(values))
        records = len(values) + sum(len(v) // 512 for v, b in zip(values, flags) if b)  # about
        # the compiled stager takes a row in about the time it takes to send its bytes to a worker and its COPY
        # text back: workers pay only for the Python path (lineitem in one process: 11.0 - 11.4 s against
        # 11.9 - 12.5 s with two workers, alternating)
        if self.workers < 2 or records < self.parallel_from or _native_plan(staging) is not None:
            yield stage_rows(staging, values, offsets, flags)
            return
        if self._pool is None:
            # spawned, not forked: the sink's process has the Kafka client's threads
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_exit_with,
                initargs=(os.getpid(),),
            )
        size = -(-len(values) // (2 * self.workers))  # two slices per worker: COPY starts on the first early
        futures: list[Future] = [
            self._pool.submit(stage_rows, staging, values[i : i + size], offsets[i : i + size], flags[i : i + size])
            for i in range(0, len(values), size)
        ]
        try:
            for n, future in enumerate(futures):
                staged = _result(future)
                staged.held = [n * size + i for i in staged.held]
                yield staged
        finally:
            for future in futures:
                future.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _exit_with(parent: int) -> None:
    """A worker ends when the sink's process does, however it ended (SIGKILL included)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def _result(future: Future) -> Staged:
    try:
        return future.result()
    except BrokenProcessPool:
        raise SinkError(
            "a staging worker process of the sink died (killed, or out of memory); start the sink again: it "
            "resumes from what the target committed"
        ) from None
