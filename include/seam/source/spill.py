"""A transaction's row changes as the binlog reader collects them until its commit: in memory up to a budget
(``stream.max_transaction_memory``), the rest in a private temporary file, so that a transaction of any size is
read with bounded memory. A nightly job that updates millions of rows in one transaction is read, spilled and
then published from the file at its commit, in binlog order, as one source transaction.

What goes to the file is each row event's own bytes, not its decoded changes: writing and reading back a
pickle of a million decoded changes took half of the reader's time in a transaction of a million rows, while
decoding an event again from its bytes is the cheapest step of the chain. The event is decoded once when it is
read (so that a table whose rows cannot be decoded is known at the commit, as for a transaction held in memory)
and again, with the same table map and schema, when the file is read back.

Changes a ``ROLLBACK TO SAVEPOINT`` undid are left out when read (``undo_since``): MySQL and MariaDB log them,
and the ROLLBACK TO after them, when the transaction also changed a non-transactional table.

Delivery guarantee: none of its own; every change appended and not undone is given back once per reading, in
order.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterator
from typing import IO, NamedTuple

from seam.core.position import Position
from seam.core.schema import TableSchema
from seam.source.record_images import record_images
from seam.source.rows import Rows

DEFAULT_BUDGET = 64 * 1024 * 1024
# memory a decoded change takes per byte of its row event, and per change: a 90-byte UPDATE row takes
# about 1,080 bytes as a RowChange with its two dicts (measured with tracemalloc)
COST_PER_BYTE = 10
COST_PER_CHANGE = 200
COST_PER_EVENT = 300  # a row event kept in memory until it goes to the file, besides its packet


class RowChange(NamedTuple):  # a tuple: made per row read, three times cheaper than a frozen dataclass
    op: str  # c, u or d
    db: str
    table: str
    before: dict | None  # decoded values, as python-mysql-replication gives them (empty SET fixed), or
    after: dict | None  # ... with ``records``, record values (seam.wire.records.normalize_row's)
    position: Position  # the row event's end, and the row's index in it
    records: bool = False
    cascades: bool = True  # False: its session ran with foreign_key_checks = 0, and the engine cascaded nothing


def row_changes(event: Rows, log_file: str, schema: TableSchema | None = None, first_row: int = 0) -> list[RowChange]:
    """The event's rows, in record values when ``schema`` is given (``RowChange.records``), numbered from
    ``first_row`` in the event's position."""
    op, db, table, end = event.op, event.schema, event.table, event.log_pos
    pairs = event.images() if schema is None else record_images(event, schema)
    records = schema is not None
    if event.unchecked_keys:
        return [
            RowChange(op, db, table, before, after, Position(log_file, end, i), records, False)
            for i, (before, after) in enumerate(pairs, first_row)
        ]
    return [
        RowChange(op, db, table, before, after, Position(log_file, end, i), records)
        for i, (before, after) in enumerate(pairs, first_row)
    ]


class ChangeBuffer:
    """An append-only list of row changes that spills their events to a temporary file (unlinked at once, mode
    0600) when the changes held in memory would take more than half of ``budget`` bytes. Reading back holds one
    chunk of event bytes (at most a quarter of the budget) and the changes of one event at a time."""

    def __init__(self, budget: int = DEFAULT_BUDGET):
        self.budget = budget
        self._held: list[RowChange] = []  # decoded, before anything is spilled
        self._events: list[
            tuple
        ] = []  # (event, log file, schema, first row) of the held changes, then of those not yet spilled
        self._cost = 0
        self._file: IO[bytes] | None = None
        self._chunks = 0
        self._count = 0
        # the table maps and schemas the spilled events are decoded with again, by identity
        self._readers: list[tuple] = []
        self._reader_index: dict[tuple[int, int], int] = {}
        self.spilled = 0  # changes whose events went to the file
        self._undone: list[list[int]] = []  # [start, end) of the changes a ROLLBACK TO SAVEPOINT undid, in order
        self.tables: set[tuple[str, str]] = set()  # (db, table) of every change appended, undone ones too

    def add(self, event: Rows, log_file: str, schema: TableSchema | None) -> None:
        """Append the changes of one row event (decoded with ``schema`` as ``row_changes`` does); raises, and
        appends nothing, when they cannot be decoded."""
        first_row = self._count if event.shared_end else 0  # numbered across a compressed transaction
        changes = row_changes(event, log_file, schema, first_row)
        if not changes:
            return
        self.tables.add((event.schema, event.table))
        self._count += len(changes)
        self._events.append((event, log_file, schema, first_row))  # ready for the file only when it goes there
        if self._file is None:
            self._held.extend(changes)
            self._cost += event.size * COST_PER_BYTE + len(changes) * COST_PER_CHANGE
        else:
            self.spilled += len(changes)
        self._cost += len(event.data) + COST_PER_EVENT
        if self._file is None and self._cost > self.budget / 2:
            self._file = tempfile.TemporaryFile(prefix="seam-transaction-")
            self.spilled += len(self._held)
            self._held = []
            self._dump()
        elif self._file is not None and self._cost > self.budget / 4:
            self._dump()

    def _spillable(self, event: Rows, log_file: str, schema: TableSchema | None, first_row: int) -> tuple:
        ids = (id(event.decoder), id(schema))
        reader = self._reader_index.get(ids)
        if reader is None:
            reader = self._reader_index[ids] = len(self._readers)
            self._readers.append((event.decoder, schema))
        body = event.data[event.start : event.end]
        return (
            reader,
            event.op,
            event.schema,
            event.table,
            event.timestamp,
            event.log_pos,
            log_file,
            body,
            event.unchecked_keys,
            first_row,
        )

    def _dump(self) -> None:
        assert self._file is not None
        self._file.seek(0, 2)
        pickle.dump([self._spillable(*e) for e in self._events], self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self._chunks += 1
        self._events, self._cost = [], 0

    def _decoded(self, spilled: list[tuple]) -> Iterator[RowChange]:
        for reader, op, db, table, timestamp, log_pos, log_file, body, unchecked, first_row in spilled:
            decoder, schema = self._readers[reader]
            event = Rows(op, db, table, timestamp, log_pos, decoder, body, 0, len(body), None, unchecked)
            yield from row_changes(event, log_file, schema, first_row)

    def mark(self) -> int:
        """Where the next change goes: a savepoint's place, for ``undo_since``."""
        return self._count

    def undo_since(self, mark: int) -> None:
        """The changes from ``mark`` on were rolled back to a savepoint (a ROLLBACK TO logged after them): they
        are left out when read."""
        self._undone = [r for r in self._undone if r[0] < mark]
        if self._undone and self._undone[-1][1] >= mark:
            self._undone[-1][1] = self._count
        elif mark < self._count:
            self._undone.append([mark, self._count])

    def __iter__(self) -> Iterator[RowChange]:
        changes = self._every_change()
        if not self._undone:
            yield from changes
            return
        undone = iter(self._undone)
        start, end = next(undone)
        for i, change in enumerate(changes):
            while i >= end:
                start, end = next(undone, (self._count, self._count))
            if i < start:
                yield change

    def _every_change(self) -> Iterator[RowChange]:
        if self._file is None:
            yield from self._held
            return
        self._file.seek(0)
        for _ in range(self._chunks):
            yield from self._decoded(pickle.load(self._file))
        for event, log_file, schema, first_row in self._events:  # not in the file yet
            yield from row_changes(event, log_file, schema, first_row)

    def __len__(self) -> int:
        return self._count - sum(end - start for start, end in self._undone)

    def __bool__(self) -> bool:
        return len(self) > 0

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
