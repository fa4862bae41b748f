"""A run of changes merged as sets (``seam.apply.changes.merge_run``) leaves a keyed table exactly as the
changes applied one by one would, on the real PostgreSQL: random runs over a few keys, seeded, with
inserts, updates, key moves, deletes, deletes of rows Seam removed, and deletes of rows the target does not
have. The oracle is a dict applying each change in order; it shares no code with the sink."""

from __future__ import annotations

import random

import pytest

from seam.apply import SinkError
from seam.apply.stream_table import StreamTable, merge_run
from seam.apply.target import Landing, create_table_sql
from seam.core.identifiers import qi
from seam.core.position import Position
from seam.core.schema import Column, TableSchema
from seam.state.connection import connect_target

pytestmark = pytest.mark.stack

SCHEMA = TableSchema(
    db="merge_run_test",
    table="t",
    primary_key=("region", "id"),
    columns=(
        Column("note", "varchar", "varchar(20)", True),
        Column("id", "int", "int(11)", False),
        Column('we"ird {run}', "decimal", "decimal(12,2)", True, numeric_scale=2),
        Column("region", "varchar", "varchar(8)", False),
    ),
)


@pytest.fixture
def stream(pipeline):
    conn = connect_target(pipeline)
    conn.execute(f"DROP SCHEMA IF EXISTS {qi(SCHEMA.db)} CASCADE")
    conn.execute(f"CREATE SCHEMA {qi(SCHEMA.db)}")
    table = StreamTable("t", SCHEMA, SCHEMA.primary_key, Position("f", 4, 0), None, None, Landing(postgis=True))
    conn.execute(create_table_sql(table.target, SCHEMA, SCHEMA.primary_key))
    conn.execute(f"ALTER TABLE {table.target} ADD PRIMARY KEY (region, id)")
    conn.commit()
    yield conn, table
    conn.rollback()
    conn.execute(f"DROP SCHEMA {qi(SCHEMA.db)} CASCADE")
    conn.commit()
    conn.close()


def _row(rnd: random.Random, region: str, i: int) -> tuple:
    note = rnd.choice([None, "", "a", "é ü", "tab\there", "line\nbreak", "back\\slash"])
    return (note, i, rnd.choice([None, "0.00", "-12.50", "9999999999.99"]), region)


def _run(rnd: random.Random, start: dict, table: StreamTable) -> tuple[list, dict, bool]:
    """Random changes as the sink queues them, and the rows and divergence applying them in order gives."""
    keys = [(r, i) for r in ("eu", "EU", "us") for i in range(4)]
    model, ops, diverged = dict(start), [], False
    for _ in range(rnd.randint(1, 40)):
        key = rnd.choice(keys)
        what = rnd.random()
        if what < 0.45:  # an insert or update (an upsert), sometimes moving a key
            row = _row(rnd, *key)
            if rnd.random() < 0.2 and key in model:
                moved = rnd.choice(keys)
                row = _row(rnd, *moved)
                ops.append((table, table.delete_sql, (key[0], key[1]), True))
                del model[key]
                key = moved
            ops.append((table, table.upsert_sql, row, False))
            model[key] = row
        else:  # a delete: one that must find its row, or one of a row Seam removed (soft delete)
            must = what < 0.9
            if model and rnd.random() < 0.97:
                key = rnd.choice(list(model))
            ops.append((table, table.delete_sql, key, must))
            if must and key not in model:
                diverged = True
            model.pop(key, None)
    return ops, model, diverged


@pytest.mark.parametrize("seed", range(12))
def test_a_merged_run_equals_its_changes_in_order(stream, seed):
    conn, table = stream
    rnd = random.Random(seed)
    agreed = diverged_runs = 0
    for n in range(25):
        conn.execute(f"TRUNCATE {table.target}")
        start = {}
        for region, i in rnd.sample([(r, i) for r in ("eu", "EU", "us") for i in range(4)], rnd.randint(0, 8)):
            start[(region, i)] = _row(rnd, region, i)
        with conn.cursor() as cur, cur.copy(f"COPY {table.target} FROM STDIN") as copy:
            for row in start.values():
                copy.write_row(row)
        ops, model, diverged = _run(rnd, start, table)
        try:
            with conn.transaction(), conn.cursor() as cur:
                merge_run(cur, table, ops)
        except SinkError as exc:
            assert diverged, f"seed {seed} run {n}: {exc}"
            assert "diverged" in str(exc)
            diverged_runs += 1
            continue
        assert not diverged, f"seed {seed} run {n}: a delete of a missing row went unnoticed"
        rows = conn.execute(f"SELECT * FROM {table.target}").fetchall()
        got = {(r[3], r[1]): (r[0], r[1], None if r[2] is None else f"{r[2]:.2f}", r[3]) for r in rows}
        assert got == model, f"seed {seed} run {n}"
        agreed += 1
    assert agreed and diverged_runs  # both outcomes were exercised
