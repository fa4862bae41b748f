"""One table's share of a source transaction as the sink receives it, until the record flagged ``last``: held
in memory up to a budget (``stream.max_transaction_memory``), the rest staged as the raw messages in a
temporary table of the sink's session in the target, and read back in order, a slice at a time, when the
transaction is applied. So a transaction of millions of rows is applied whole, in one target transaction,
with the sink's memory bounded.

Delivery guarantee: none of its own. Until the transaction is applied the table's stored offset stays at its
first message (``StreamTable.resume_offset``): a sink started again (a new session, without the temporary
table) reads the transaction from Kafka again.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

DEFAULT_BUDGET = 64 * 1024 * 1024
# memory a buffered record takes per byte of its message, and per record (the decoded record's objects)
COST_PER_BYTE = 5
COST_PER_RECORD = 300
READ_BACK = 20_000  # records per slice read back from the temporary table
PREFIX = "seam_txn_"
# COPY's binary format (PostgreSQL's "COPY", File Formats): a signature, no flags, no header extension; then each
# row's field count and each field's length and bytes; then -1. Staged messages go in as they are: in text
# format each would be written out in hex and parsed back
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_ROW = struct.Struct(">hiqiqi")  # 3 fields; seq and the message's offset: 8 bytes each, bigints; value: its length
_TRAILER = b"\xff\xff"

_TABLES = itertools.count(1)


@dataclass
class StagedTransaction:
    """A complete transaction whose first records are staged in ``table`` (``staged`` of them, in order) and
    whose rest is ``tail``; ``last`` is its last record."""

    table: str
    staged: int
    tail: list
    last: Any
    cascades: bool  # whether any record is a foreign-key cascade

    def __len__(self) -> int:
        return self.staged + len(self.tail)

    def slices(self, conn, decode: Callable[[bytes], Any], size: int = READ_BACK) -> Iterator[list]:
        """The records in order, ``size`` at a time (decoded again from the staged messages)."""
        for rows in _read_back(conn, self.table, self.staged, size):
            yield [decode(value) for _, value in rows]
        for i in range(0, len(self.tail), size):
            yield self.tail[i : i + size]

    def records(self, conn, decode: Callable[[bytes], Any]) -> Iterator:
        for piece in self.slices(conn, decode):
            yield from piece


@dataclass
class TransactionBuffer:
    """The records of the transaction being received, with their offsets and messages."""

    budget: int = DEFAULT_BUDGET
    garbage: list[str] = field(default_factory=list)  # staged tables no longer needed: the applier drops them
    commit: Any = None  # the transaction's commit position
    at: Any = None  # the position of the last record received
    first_offset: int | None = None
    _held: list = field(default_factory=list)  # (doc, value, offset) not staged
    _cost: int = 0
    _table: str | None = None
    _staged: int = 0
    _cascades: bool = False

    def __len__(self) -> int:
        return self._staged + len(self._held)

    def __bool__(self) -> bool:
        return len(self) > 0

    def add(self, conn, offset: int, value: bytes, doc) -> None:
        """Append a record (inside the sink's transaction: staging writes to the target)."""
        if self.first_offset is None:
            self.first_offset = offset
        self._held.append((doc, value, offset))
        self._cascades = self._cascades or doc.op == "x"
        self._cost += len(value) * COST_PER_BYTE + COST_PER_RECORD
        if self._cost > self.budget and not doc.source.last:  # (the last one is taken at once)
            self._stage(conn)

    def _stage(self, conn) -> None:
        """Move the held records into the temporary table (created with the first of them)."""
        if self._table is None:
            self._table = f"{PREFIX}{next(_TABLES)}"
            conn.execute(
                f"CREATE TEMPORARY TABLE {self._table} "
                "(seq bigint PRIMARY KEY, message_offset bigint NOT NULL, value bytea NOT NULL)"
            )
        copy_in = f"COPY pg_temp.{self._table} (seq, message_offset, value) FROM STDIN (FORMAT BINARY)"
        with conn.cursor() as cur, cur.copy(copy_in) as copy:
            copy.write(_binary_copy(self._staged, [(offset, value) for _, value, offset in self._held]))
        self._staged += len(self._held)
        self._held, self._cost = [], 0

    def take(self) -> list | StagedTransaction:
        """The complete transaction (a list of records, or a StagedTransaction when part of it is staged); the
        buffer is empty after."""
        docs = [doc for doc, _, _ in self._held]
        if self._table is None:
            taken: list | StagedTransaction = docs
        else:
            taken = StagedTransaction(self._table, self._staged, docs, docs[-1], self._cascades)
        self._reset(drop=False)
        return taken

    def messages(self, conn, size: int = READ_BACK) -> Iterator[tuple[int, bytes]]:
        """The messages received so far, (offset, value) in order (the staged ones read back ``size`` at a time);
        the buffer is left as it is."""
        if self._table is not None:
            for rows in _read_back(conn, self._table, self._staged, size):
                yield from ((offset, bytes(value)) for offset, value in rows)
        yield from ((offset, value) for _, value, offset in self._held)

    def clear(self) -> None:
        """Forget a transaction that will not be applied (its staged table goes to the garbage)."""
        self._reset(drop=True)

    def _reset(self, drop: bool) -> None:
        if drop and self._table is not None:
            self.garbage.append(self._table)
        self.commit = self.at = self.first_offset = self._table = None
        self._held, self._cost, self._staged, self._cascades = [], 0, 0, False


def _read_back(conn, table: str, staged: int, size: int) -> Iterator[list[tuple[int, Any]]]:
    """A staged table's (offset, value) rows in order, ``size`` at a time."""
    seq = -1
    while seq < staged - 1:
        rows = conn.execute(
            f"SELECT seq, message_offset, value FROM pg_temp.{table} WHERE seq > %s ORDER BY seq LIMIT %s",
            (seq, size),
            binary=True,  # bytea as it is: in text it comes in hex, twice the bytes, then decoded
        ).fetchall()
        if not rows:
            raise RuntimeError(f"staged records of a transaction missing from {table} after {seq}")
        seq = rows[-1][0]
        yield [(offset, value) for _, offset, value in rows]


def _binary_copy(first_seq: int, messages: list[tuple[int, bytes]]) -> bytearray:
    """(seq, offset, value) rows numbered from ``first_seq``, as a whole COPY in binary format."""
    out, row = bytearray(_SIGNATURE), _ROW.pack
    for seq, (offset, value) in enumerate(messages, start=first_seq):
        out += row(3, 8, seq, 8, offset, len(value))
        out += value
    out += _TRAILER
    return out


def drop_staged(conn, tables: list[str]) -> None:
    """Drop staged tables (inside a transaction of the sink's session); the list is emptied."""
    for table in tables:
        conn.execute(f"DROP TABLE IF EXISTS pg_temp.{table}")
    tables.clear()


def drop_all_staged(conn) -> None:
    """Every staged table of the session (after a transaction failed: what the sink held is read again)."""
    rows = conn.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = pg_my_temp_schema() AND relkind = 'r' "
        "AND starts_with(relname, %s)",
        (PREFIX,),
    ).fetchall()
    drop_staged(conn, [r[0] for r in rows])
