"""Staging a batch's rows (``seam.apply.batch``) gives the same result in worker processes as in the sink's own
process, and the right one: random seeded runs of messages with awkward values (tabs, newlines, backslashes,
quotes, NUL-free unicode, bytes, NULLs), rows of several chunks and attempts, a superseded batch's rows,
change events and foreign records to hold, and reconciliation changes with key moves. The oracle computes
tallies and held messages itself, and reads the staged rows back from the real PostgreSQL."""

from __future__ import annotations

import base64
import random
import zlib

import pytest

from seam.apply.batch import Stager, Staging, stage_rows
from seam.apply.target import Landing, create_table_sql
from seam.core.identifiers import qi
from seam.core.position import Position
from seam.core.schema import Column, TableSchema
from seam.state.connection import connect_target
from seam.wire.records import Record

pytestmark = pytest.mark.stack

SCHEMA = TableSchema(
    db="staging_test",
    table="t",
    primary_key=("id",),
    columns=(
        Column("id", "int", "int(11)", False),
        Column("note", "varchar", "varchar(4000)", True),
        Column("amount", "decimal", "decimal(12,2)", True, numeric_scale=2),
        Column("raw", "blob", "blob", True),
        Column("day", "date", "date", True),
    ),
)
BATCH = "20261124T000000-staging"
NOTES = [
    None,
    "",
    "x" * 3000,
    "plain",
    "tab\there",
    "line\nbreak",
    "cr\rx",
    "back\\slash",
    '"quoted"',
    "é ü 中文 🙂",
    "\\N",
    "a,b",
]


def _image(rnd: random.Random, i: int) -> dict:
    raw = bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 6)))
    return {
        "id": i,
        "note": rnd.choice(NOTES),
        "amount": rnd.choice([None, "0.00", "-12.50", "9999999999.99"]),
        "raw": rnd.choice([None, base64.b64encode(raw).decode()]),
        "day": rnd.choice([None, "0099-03-04", "2026-11-24"]),
    }


def _messages(rnd: random.Random) -> tuple[list[bytes], dict, list[int], list[tuple], list[tuple]]:
    """Messages, and what staging them must give: tallies, held indexes, snapshot rows, change rows."""
    values: list[bytes] = []
    sums: dict[tuple[int, int], list[int]] = {}
    held: list[int] = []
    rows: list[tuple] = []
    changes: list[tuple] = []
    for n in range(rnd.randint(1, 2000)):  # runs past psycopg's 32 KB COPY buffer
        what = rnd.random()
        image = _image(rnd, rnd.randint(1, 50))
        position = Position("mysql-bin.000001", 4000 + n, 0)
        if what < 0.7:
            kind = (rnd.randint(0, 2), rnd.choice([1, 2]))
            record = Record("r", SCHEMA.db, SCHEMA.table, {"id": image["id"]}, None, image, position, True, BATCH)
            value = _with(record, *kind).to_json()
            rows.append((image, kind))
        elif what < 0.75:  # a superseded batch's row: dropped, not counted
            record = Record("r", SCHEMA.db, SCHEMA.table, {"id": 1}, None, image, position, True, "older")
            values.append(_with(record, 0, 1).to_json())
            continue
        elif what < 0.85:  # a change event while the batch is open: held
            record = Record("u", SCHEMA.db, SCHEMA.table, {"id": image["id"]}, image, image, position)
            values.append(record.to_json())
            held.append(len(values) - 1)
            continue
        elif what < 0.88:  # not this batch's columns: held
            odd = dict(image, extra=1)
            record = Record("r", SCHEMA.db, SCHEMA.table, {"id": 1}, None, odd, position, True, BATCH)
            values.append(_with(record, 0, 1).to_json())
            held.append(len(values) - 1)
            continue
        else:  # a reconciliation change: update (maybe moving the key), insert or delete
            before = _image(rnd, image["id"] if rnd.random() < 0.5 else rnd.randint(51, 60))
            op = rnd.choice("cud")
            record = Record(
                op,
                SCHEMA.db,
                SCHEMA.table,
                {"id": image["id"]},
                None if op == "c" else before,
                None if op == "d" else image,
                position,
                False,
                BATCH,
            )
            kind = (-1, 0)
            value = _with(record, *kind).to_json()
            seq = (100 + len(values)) * 2
            if op != "c" and (op == "d" or before["id"] != image["id"]):
                changes.append((before, seq, True))
            if op != "d":
                changes.append((image, seq + 1, False))
        values.append(value)
        tally = sums.setdefault(kind, [0, 0])
        tally[0] += 1
        tally[1] += zlib.crc32(value)
    return values, sums, held, rows, changes


def _with(record: Record, part: int, attempt: int) -> Record:
    from dataclasses import replace

    return replace(record, part=part, attempt=attempt)


def _expected(image: dict) -> tuple:
    raw = None if image["raw"] is None else base64.b64decode(image["raw"])
    return (image["id"], image["note"], image["amount"], raw, image["day"])


@pytest.fixture
def target(pipeline):
    conn = connect_target(pipeline)
    conn.execute(f"DROP SCHEMA IF EXISTS {qi(SCHEMA.db)} CASCADE")
    conn.execute(f"CREATE SCHEMA {qi(SCHEMA.db)}")
    stage, changes = f"{qi(SCHEMA.db)}.stage", f"{qi(SCHEMA.db)}.changes"
    conn.execute(create_table_sql(stage, SCHEMA, ("id",), extra="_seam_part integer, _seam_attempt bigint"))
    conn.execute(create_table_sql(changes, SCHEMA, ("id",), extra="_seam_seq bigint, _seam_deleted boolean"))
    conn.commit()
    yield conn, stage, changes
    conn.rollback()
    conn.execute(f"DROP SCHEMA {qi(SCHEMA.db)} CASCADE")
    conn.commit()
    conn.close()


def _read(conn, table: str, extra: str) -> list[tuple]:
    cols = "id, note, amount::text, raw, to_char(day, 'YYYY-MM-DD'), " + extra
    return sorted(conn.execute(f"SELECT {cols} FROM {table}").fetchall(), key=repr)


@pytest.mark.parametrize("seed", range(6))
def test_staging_in_workers_equals_staging_here_and_reads_back_exactly(target, seed):
    conn, stage, changes = target
    rnd = random.Random(seed)
    values, sums, held, rows, change_rows = _messages(rnd)
    offsets = [100 + i for i in range(len(values))]
    staging = Staging(BATCH, SCHEMA, ("id",), Landing(postgis=False))

    here = stage_rows(staging, values, offsets)
    stager = Stager(workers=2, parallel_from=1)
    try:
        slices = list(stager.stage(staging, values, offsets))
    finally:
        stager.close()
    assert len(slices) > 1 or len(values) < 4, "the run must have been split over the workers"
    assert b"".join(s.stage for s in slices) == here.stage
    assert b"".join(s.changes for s in slices) == here.changes
    assert [i for s in slices for i in s.held] == here.held == held
    merged: dict[tuple[int, int], list[int]] = {}
    for s in slices:
        for kind, (n, crc) in s.sums.items():
            total = merged.setdefault(kind, [0, 0])
            total[0] += n
            total[1] += crc
    assert merged == here.sums == sums

    cols = ", ".join(qi(c.name) for c in SCHEMA.columns)
    with conn.cursor() as cur:
        with cur.copy(f"COPY {stage} ({cols}, _seam_part, _seam_attempt) FROM STDIN") as cp:
            for s in slices:
                cp.write(s.stage)
        with cur.copy(f"COPY {changes} ({cols}, _seam_seq, _seam_deleted) FROM STDIN") as cp:
            for s in slices:
                cp.write(s.changes)
    assert _read(conn, stage, "_seam_part, _seam_attempt") == sorted(
        (_expected(image) + kind for image, kind in rows), key=repr
    )
    assert _read(conn, changes, "_seam_seq, _seam_deleted") == sorted(
        (_expected(image) + (seq, deleted) for image, seq, deleted in change_rows), key=repr
    )
