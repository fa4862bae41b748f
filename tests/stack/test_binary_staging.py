"""COPY's binary rows from the compiled stager store what COPY text of the same records stores, in the real
PostgreSQL: seeded rows (``tests/support/binary_rows``: integers at their limits, long and signed
decimals, dates from year 1 to 9999 and -infinity, text with every kind of escape) staged twice, once with the
binary kinds through the sink's own ``StageCopy`` and once by the Python path as text, then compared as
PostgreSQL prints them (numeric scale, dates and all)."""

from __future__ import annotations

import random

import pytest

import seam.apply.batch as batch_module
from seam.apply.batch import Staging, stage_rows
from seam.apply.lifecycle import StageCopy
from seam.apply.target import Landing, create_table_sql
from seam.core.identifiers import qi
from seam.state.connection import connect_target
from tests.support.binary_rows import BATCH, SCHEMA, random_row, record_of

pytestmark = pytest.mark.stack

DB = "binary_staging_test"


@pytest.fixture
def target(pipeline):
    conn = connect_target(pipeline)
    conn.execute(f"DROP SCHEMA IF EXISTS {qi(DB)} CASCADE")
    conn.execute(f"CREATE SCHEMA {qi(DB)}")
    landing = Landing(zero_dates="-infinity", postgis=False)
    for name in ("by_binary", "by_text"):
        extra = "_seam_part integer NOT NULL, _seam_attempt bigint NOT NULL"
        conn.execute(create_table_sql(f"{qi(DB)}.{name}", SCHEMA, ("id",), extra=extra, landing=landing))
    conn.commit()
    yield conn, landing
    conn.rollback()
    conn.execute(f"DROP SCHEMA {qi(DB)} CASCADE")
    conn.commit()
    conn.close()


def _copy(conn, table: str, runs) -> None:
    cols = ", ".join(qi(c.name) for c in SCHEMA.columns)
    with (
        conn.cursor() as cur,
        StageCopy(cur, f"COPY {qi(DB)}.{table} ({cols}, _seam_part, _seam_attempt) FROM STDIN") as copy,
    ):
        for staged in runs:
            copy.write(staged.stage, staged.binary)
    conn.commit()


@pytest.mark.parametrize("seed", range(4))
def test_binary_rows_store_what_copy_text_stores(target, seed):
    conn, landing = target
    r = random.Random(seed)
    staging = Staging(BATCH, SCHEMA, ("id",), landing)
    values = [
        record_of(random_row(r, n), r.randrange(20), r.choice([0, 2**40]), r.random() < 0.5) for n in range(3_000)
    ]
    runs = [stage_rows(staging, values[i : i + 500], list(range(i, i + 500))) for i in range(0, 3_000, 500)]
    assert all(run.binary for run in runs)
    _copy(conn, "by_binary", runs)
    _copy(conn, "by_text", _python_path(staging, values))
    table = f"{qi(DB)}.by_binary"
    other = f"{qi(DB)}.by_text"
    assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 3_000
    for a, b in ((table, other), (other, table)):
        assert (
            conn.execute(f"SELECT count(*) FROM (SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}) d").fetchone()[0] == 0
        )
    printed = "SELECT string_agg(t::text, '|' ORDER BY id) FROM {} t"
    assert conn.execute(printed.format(table)).fetchone() == conn.execute(printed.format(other)).fetchone()


def test_text_and_binary_runs_in_one_stage_copy(target):
    conn, landing = target
    r = random.Random(9)
    staging = Staging(BATCH, SCHEMA, ("id",), landing)
    values = [record_of(random_row(r, n), 0, 0, False) for n in range(30)]
    binary = stage_rows(staging, values[:10], list(range(10)))
    text = _python_path(staging, values[10:20])[0]
    again = stage_rows(staging, values[20:], list(range(20, 30)))
    assert binary.binary and not text.binary and again.binary
    _copy(conn, "by_binary", [binary, text, again])
    _copy(conn, "by_text", _python_path(staging, values))
    assert (
        conn.execute(
            f"SELECT count(*) FROM (SELECT * FROM {qi(DB)}.by_binary EXCEPT ALL SELECT * FROM {qi(DB)}.by_text) d"
        ).fetchone()[0]
        == 0
    )
    assert conn.execute(f"SELECT count(*) FROM {qi(DB)}.by_binary").fetchone()[0] == 30


def _python_path(staging: Staging, values: list[bytes]):
    compiled = batch_module.native
    batch_module.native = None
    batch_module._native_plan.cache_clear()
    try:
        return [stage_rows(staging, values, list(range(len(values))))]
    finally:
        batch_module.native = compiled
        batch_module._native_plan.cache_clear()
