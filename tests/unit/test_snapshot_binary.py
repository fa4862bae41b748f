"""The compiled stager's COPY binary rows (``seam.apply._snapshotrows`` with binary kinds), read back by
psycopg's own binary loaders (code that shares nothing with Seam's): every value must come back as the record
said, and anything the binary form could get wrong must make the whole run COPY text instead.

Seeded random rows of integers at and near their types' limits, decimals (zeros, signs, long, integer tokens),
dates over the whole range MySQL has (leap days, the first and last day, -infinity for a zero date in a NOT NULL
column) and text with escapes, quotes, backslashes, control characters and text outside the BMP. The stack
test ``test_binary_staging`` compares what PostgreSQL stores both ways."""

from __future__ import annotations

import datetime
import json
import random
from decimal import Decimal

import psycopg
import pytest
from psycopg import adapt, postgres
from psycopg._copy_base import parse_row_binary
from psycopg.pq import Format
from psycopg.types.datetime import DateBinaryLoader

import seam.apply.batch as batch_module
from seam.apply.batch import Staging, stage_rows
from seam.apply.target import Landing
from seam.core.schema import Column, TableSchema
from seam.source.full_load import record_frame
from seam.wire.boundary import BLOCK_KINDS, FRAME_KEY, frame_blocks
from tests.support.binary_rows import BATCH, COLUMNS, SCHEMA, random_row, record_of

TYPES = ["int8", "int2", "int4", "numeric", "numeric", "date", "date", "varchar", "text", "int4", "int8"]


class _DateOrMinusInfinity(DateBinaryLoader):
    """psycopg refuses a date before year 1: -infinity (PostgreSQL's smallest int32) read as the word."""

    def load(self, data):
        return "-infinity" if bytes(data) == b"\x80\x00\x00\x00" else super().load(data)


def _loaders() -> adapt.Transformer:
    adapters = adapt.AdaptersMap(psycopg.adapters)
    adapters.register_loader("date", _DateOrMinusInfinity)
    tx = adapt.Transformer(adapters)
    tx.set_loader_types([postgres.types[t].oid for t in TYPES], Format.BINARY)
    return tx


def _rows_back(data: bytes) -> list[tuple]:
    tx, rows, at = _loaders(), [], 0
    while at < len(data):  # one row at a time: its field count, then each field's length and bytes
        count = int.from_bytes(data[at : at + 2], "big")
        end = at + 2
        for _ in range(count):
            size = int.from_bytes(data[end : end + 4], "big", signed=True)
            end += 4 + max(size, 0)
        rows.append(parse_row_binary(data[at:end], tx))
        at = end
    return rows


def _expected(row: dict, part: int, attempt: int) -> tuple:
    def decimal(v):
        return None if v is None else Decimal(str(v))

    def day(v, infinite=False):
        if v is None:
            return "-infinity" if infinite else None
        return datetime.date.fromisoformat(v)

    return (row["id"], row["small"], row["i"], decimal(row["amount"]), decimal(row["price"]), day(row["day"], True),
            day(row["maybe_day"]), row["note"], row["body"], part, attempt)  # fmt: skip


def _staging() -> Staging:
    return Staging(BATCH, SCHEMA, ("id",), Landing(zero_dates="-infinity"))


@pytest.mark.parametrize("seed", range(10))
def test_binary_rows_read_back_as_the_records_values(seed):
    r = random.Random(seed)
    staging = _staging()
    rows = [(random_row(r, n), r.randrange(20), r.choice([0, 1, 2**40])) for n in range(2_000)]
    values = [record_of(row, part, attempt, r.random() < 0.5) for row, part, attempt in rows]
    staged = stage_rows(staging, values, list(range(len(values))))
    assert staged.binary and staged.held == []
    back = _rows_back(staged.stage)
    assert [tuple(v) for v in back] == [_expected(row, part, attempt) for row, part, attempt in rows]
    assert sum(n for n, _ in staged.sums.values()) == len(rows)


@pytest.mark.parametrize(
    "column, value",
    [
        ("small", 32768),  # out of smallint: PostgreSQL's own error, as COPY text
        ("i", 2**31),
        ("id", 2**63),
        ("day", "0000-01-01"),  # no year 0 in PostgreSQL
        ("day", "2023-02-29"),
        ("day", "2024-1-01"),
        ("price", "1e5"),
        ("price", "12."),
        ("i", "12"),  # a string where an integer is meant
        ("day", 20240101),
        ("note", "nul\x00inside"),  # the Python path maps it
    ],
)
def test_a_value_the_binary_form_is_not_sure_of_makes_the_run_copy_text(column, value):
    r = random.Random(1)
    rows = [random_row(r, n) for n in range(5)]
    rows[3][column] = value
    values = [record_of(row, 0, 0, False) for row in rows]
    staged = stage_rows(_staging(), values, list(range(len(values))))
    assert not staged.binary
    assert staged.stage.count(b"\n") == 5  # every row as a line of COPY text, the odd one too


def test_a_message_left_to_python_makes_the_run_copy_text():
    rows = [random_row(random.Random(2), n) for n in range(3)]
    values = [record_of(row, 0, 0, False) for row in rows] + [b'{"op":"u"}']
    staged = stage_rows(_staging(), values, list(range(len(values))))
    assert not staged.binary and staged.held == [3]


def test_a_type_without_a_binary_form_stages_text():
    columns = (*COLUMNS, Column("at", "datetime", "datetime(6)", True))
    staging = Staging(BATCH, TableSchema("d", "t", columns, ("id",)), ("id",), Landing())
    assert batch_module._native_plan(staging)[2] is None
    row = {**random_row(random.Random(3), 1), "at": "2026-01-02T03:04:05.000000"}
    staged = stage_rows(staging, [record_of(row, 0, 0, False)], [0])
    assert not staged.binary and staged.stage.endswith(b"\t0\t0\n")


@pytest.mark.parametrize("seed", range(4))
def test_frame_blocks_as_the_tasks_write_them_stage_the_same_binary_rows(seed):
    """The tasks' own framing (``record_frame``, ``frame_blocks``): the sink reads a frame's rows without making
    their records, and stages the same rows as from the records one by one."""
    r = random.Random(seed)
    rows = [random_row(r, n) for n in range(1_500)]
    head, middle, tail = record_frame("d", "t", BATCH, 1, True, "mysql-bin.000001", 4, 7, 2**40)
    pairs = [
        (json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode(), b'{"id":%d}' % row["id"]) for row in rows
    ]
    messages, crcs = frame_blocks(pairs, True, head, middle, tail)
    framed = stage_rows(
        _staging(), messages, list(range(len(messages))), bytes([BLOCK_KINDS[FRAME_KEY]] * len(messages))
    )
    records = [head + k + middle + a + tail for a, k in pairs]
    alone = stage_rows(_staging(), records, list(range(len(records))))
    assert framed.binary and framed.stage == alone.stage and framed.sums == alone.sums == {(7, 2**40): [1_500, crcs]}
    assert [tuple(v) for v in _rows_back(framed.stage)] == [_expected(row, 7, 2**40) for row in rows]
