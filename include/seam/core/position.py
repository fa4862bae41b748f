"""A point in the source's binlog: what every room records, compares and resumes from.

Delivery guarantee: none (a value).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

THROUGH = 2**31 - 1  # row index meaning "every row of the event"


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

    def __init__(self, file: str, pos: int, row: int = 0):
        # frozen all the same (assignment raises); set through the instance's dict because the reader makes
        # several per change, and this takes half the time of a frozen dataclass's generated __init__
        values = self.__dict__
        values["file"], values["pos"], values["row"] = file, pos, row

    @property
    def sort_key(self) -> tuple[int, int, int]:
        return (int(self.file.rsplit(".", 1)[-1]), self.pos, self.row)

    def __lt__(self, other: Position) -> bool:  # by binlog file number, not by name
        if self.file == other.file:  # the common case, read per change: no tuples built
            return (self.pos, self.row) < (other.pos, other.row)
        return self.sort_key < other.sort_key

    @classmethod
    def through(cls, file: str, pos: int) -> Position:
        """Everything up to and including the binlog event that ends at ``pos``: a snapshot's position."""
        return cls(file, pos, THROUGH)

    def after(self, other: Position) -> bool:
        """True if this event position is not covered by ``other`` (compares events, not rows)."""
        if self.file == other.file:  # the common case, asked per change
            return self.pos > other.pos
        return self.sort_key[:2] > other.sort_key[:2]

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" if self.row == THROUGH else f"{self.file}:{self.pos}#{self.row}"
