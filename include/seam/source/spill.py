"""A transaction's row changes as the binlog reader collects them until its commit: in memory up to a budget
(``stream.max_transaction_memory``), the rest in a private temporary file, so that a transaction of any size is
read with bounded memory. A nightly job that updates millions of rows in one transaction is read, spilled and
then published from the file at its commit, in binlog order, as one source transaction.

Delivery guarantee: none of its own; every change appended is given back once per reading, in order.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO

DEFAULT_BUDGET = 64 * 1024 * 1024
# memory a decoded change takes per byte of its row event, and per change: a 90-byte UPDATE row takes
# about 1,080 bytes as a RowChange with its two dicts (measured with tracemalloc)
COST_PER_BYTE = 10
COST_PER_CHANGE = 200


class ChangeBuffer:
    """An append-only list of changes that spills to a temporary file (unlinked at once, mode 0600) when
    those held in memory would take more than ``budget`` bytes."""

    def __init__(self, budget: int = DEFAULT_BUDGET):
        self.budget = budget
        self._held: list = []
        self._cost = 0
        self._file: IO[bytes] | None = None
        self._chunks = 0
        self._count = 0
        self.spilled = 0  # changes written to the file

    def extend(self, changes: Iterable, event_bytes: int) -> None:
        """Append the changes of one row event of ``event_bytes`` bytes."""
        before = len(self._held)
        self._held.extend(changes)
        added = len(self._held) - before
        self._count += added
        self._cost += event_bytes * COST_PER_BYTE + added * COST_PER_CHANGE
        if self._cost > self.budget / 2:  # reading back holds one spilled chunk besides those held
            self._spill()

    def _spill(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="seam-transaction-")
        file = self._file
        file.seek(0, 2)
        pickle.dump(self._held, file, protocol=pickle.HIGHEST_PROTOCOL)
        self.spilled += len(self._held)
        self._chunks += 1
        self._held, self._cost = [], 0

    def __iter__(self) -> Iterator:
        if self._file is not None:
            self._file.seek(0)
            for _ in range(self._chunks):
                yield from pickle.load(self._file)
        yield from self._held

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
