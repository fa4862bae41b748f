"""Row events decoded by a decoder built once per table map.

The binlog reader would spend most of its time in python-mysql-replication's TABLE_MAP parsing (an OLTP binlog
has a TABLE_MAP before nearly every row event) and in its per-value decoding, which looks the column up and
branches on its type for every value. The replication connection (``seam.source.replication``) therefore parses
a table map once per distinct map (by its bytes), and gives row events as ``Rows``, whose ``images()`` decodes
with per-column readers chosen once per table map (``Decoder``; the readers are ``seam.source.row_values``).
Values are the library's (an empty SET as "", not its None), except a negative TIME with a fraction, which the
library misreads and MySQL's own layout reads right. ``tests/stack/test_row_decoder.py`` compares the two on
every type family, and both with the source.

A row event Seam cannot decode exactly raises in ``images()``; the binlog reader then stops that table (never a
skipped row).

Delivery guarantee: none of its own (decoding only); nothing is dropped without an error.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from seam.core.errors import SourceError
from seam.source.row_values import Reader, value_reader


class PartialRowImage(SourceError, ValueError):
    """A row event lacks columns (binlog_row_image is not FULL): the values that were not logged are unknown."""


# ------------------------------------------------------------------ rows ----


class Decoder:
    """A table map's row images: its column names and one reader per column."""

    def __init__(self, table):
        self.schema, self.table = table.schema, table.table
        self.names = [c.name or f"UNKNOWN_COL{i}" for i, c in enumerate(table.columns)]
        self._readers: list[Reader] | None = None
        self.columns = table.columns  # the map's (python-mysql-replication's Column: type, metadata)
        self.unnamed = any(not c.name for c in table.columns)

    @property
    def readers(self) -> list[Reader]:
        if self._readers is None:  # on first use: an unknown type fails that table's rows, not the map
            self._readers = [value_reader(c) for c in self.columns]
        return self._readers

    @functools.cached_property
    def _plan(self) -> list[tuple[str, Reader, int, int]]:
        """Per column of a full image: its name, reader, and its bit in the NULL bitmap."""
        return [(name, read, i >> 3, 1 << (i & 7)) for i, (name, read) in enumerate(zip(self.names, self.readers))]

    @functools.cached_property
    def full(self) -> bytes:
        """The column bitmap of an image that holds every column."""
        width = len(self.names)
        return bytes([0xFF] * (width // 8) + ([(1 << (width % 8)) - 1] if width % 8 else []))

    @functools.cached_property
    def _null_bytes(self) -> int:
        return (len(self.names) + 7) // 8

    def image(self, data: bytes, pos: int, present: bytes) -> tuple[dict, int]:
        if self.unnamed:  # matched to today's columns by position, a row could land in the wrong columns
            raise PartialRowImage(
                "the binlog's table map carries no column names: the source logs binlog_row_metadata MINIMAL "
                "(since this table was loaded), and Seam needs FULL. SET GLOBAL binlog_row_metadata = 'FULL' "
                "(and in my.cnf) before the table is taken up again"
            )
        if present == self.full:  # every column in the image (binlog_row_image FULL): the short way
            nulls = data[pos : pos + self._null_bytes]
            pos += self._null_bytes
            row: dict[str, Any] = {}
            for name, read, byte, bit in self._plan:
                if nulls[byte] & bit:
                    row[name] = None
                else:
                    row[name], pos = read(data, pos)
            return row, pos
        return self._partial_image(present)

    def _partial_image(self, present: bytes) -> tuple[dict, int]:
        """A row image without some columns (binlog_row_image MINIMAL or NOBLOB): their values are not in the
        binlog, and a NULL in their place would be silently wrong. The table stops, naming the setting."""
        missing = [n for i, n in enumerate(self.names) if not present[i >> 3] & (1 << (i & 7))]
        raise PartialRowImage(
            f"a row image without column(s) {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}: the "
            "source logs binlog_row_image MINIMAL or NOBLOB (for this session or globally), and Seam needs FULL. "
            "Set binlog_row_image = FULL (globally and for the sessions that write) before the table is taken up again"
        )


@dataclass
class Rows:
    """A row event of a watched table; ``images()`` gives its rows as (before, after) pairs."""

    op: str  # c, u or d
    schema: str
    table: str
    timestamp: int
    log_pos: int
    _decoder: Decoder | None
    _data: bytes
    _start: int  # where the body (the column count) starts
    _end: int
    _refused: str | None = None
    # the session ran with foreign_key_checks = 0 (the event's NO_FOREIGN_KEY_CHECKS_F): the engine cascaded nothing
    unchecked_keys: bool = False
    # one of a compressed transaction's events (``seam.source.payload``): they all end where it ends, so its rows
    # are numbered across the transaction, not from 0 in each event
    shared_end: bool = False

    @property
    def size(self) -> int:
        """The bytes of its rows in the event."""
        return self._end - self._start

    @property
    def decoder(self) -> Decoder | None:
        return self._decoder

    @property
    def data(self) -> bytes:
        return self._data

    @property
    def start(self) -> int:
        return self._start

    @property
    def end(self) -> int:
        return self._end

    def _bitmaps(self) -> tuple[bytes, bytes, int]:
        """The columns present in the before (or only) image and in the after image, and where the rows begin."""
        if self._refused:
            raise ValueError(self._refused)
        data, pos = self._data, self._start
        width = data[pos]
        if width == 0xFC:  # a length-encoded count: 251 columns or more
            width, pos = int.from_bytes(data[pos + 1 : pos + 3], "little"), pos + 3
        elif width < 0xFB:
            pos += 1
        else:
            raise ValueError(f"a row event with a column count coded as {width:#x} is not one Seam reads")
        bitmap = (width + 7) // 8
        present = data[pos : pos + bitmap]
        pos += bitmap
        if self.op != "u":
            return present, present, pos
        return present, data[pos : pos + bitmap], pos + bitmap

    def body(self) -> int | None:
        """Where the rows begin, when every image holds every column of the map (binlog_row_image FULL);
        None otherwise (``images()`` then says why)."""
        assert self._decoder is not None
        try:
            present, present_after, pos = self._bitmaps()
        except (ValueError, IndexError):
            return None
        full = self._decoder.full
        return pos if present == full and present_after == full else None

    def images(self) -> list[tuple[dict | None, dict | None]]:
        assert self._decoder is not None
        present, present_after, pos = self._bitmaps()
        data, end, image = self._data, self._end, self._decoder.image
        out: list[tuple[dict | None, dict | None]] = []
        if self.op == "u":
            while pos < end:
                before, pos = image(data, pos, present)
                after, pos = image(data, pos, present_after)
                out.append((before, after))
        elif self.op == "c":
            while pos < end:
                after, pos = image(data, pos, present)
                out.append((None, after))
        else:
            while pos < end:
                before, pos = image(data, pos, present)
                out.append((before, None))
        if pos != end:
            raise ValueError(f"a row event of {self.schema}.{self.table} ends {pos - end} bytes past its size")
        return out
