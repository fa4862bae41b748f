"""A resumed load drops the rows its batch does not keep (the killed load's chunks it had not published whole)
beside its job, not in END's transaction: ``ledger.drop_left_over`` deletes exactly those, never a kept
chunk's rows nor a new attempt's, and records how many, so that END scans for them again only when more of
them arrived since (a killed job's tasks being cancelled); a no-op once they are gone or the staging table is.
Before that, the resumed load waits for the killed job's tasks to stop publishing (``seam.loads.DeadTasks``)."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

import seam.loads
from seam.config import load_pipeline
from seam.loads import DeadTasks
from seam.state.connection import connect_state
from seam.state.ledger import drop_left_over, left_over_parts, left_over_rows, staging_tables, undropped
from tests.support.pipelines import pipeline_file

pytestmark = pytest.mark.stack
BATCH = "20990101T000000-left0ver"


def test_only_the_rows_of_chunks_not_kept_are_dropped(stack, tmp_path_factory):
    pipeline = load_pipeline(pipeline_file(tmp_path_factory, "left_over", [{"name": "left_over.t", "key": ["id"]}]))
    schema = pipeline.target.state_schema
    stage = f'"{schema}"."{staging_tables(BATCH)[0]}"'
    with connect_state(pipeline) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {stage}")
        for table in ("batches", "batch_parts", "batch_parts_done"):
            conn.execute(f'DELETE FROM "{schema}".{table} WHERE batch_id = %s', (BATCH,))
        conn.execute(
            f'INSERT INTO "{schema}".batches (batch_id, db, tbl, mode, state, topic, columns, key_columns) '
            "VALUES (%s, 'left_over', 't', 'full', 'open', 'left_over', '[]', '[\"id\"]')",
            (BATCH,),
        )
        conn.execute(f"CREATE TABLE {stage} (id int, _seam_part int, _seam_attempt bigint)")
        # chunk 0: attempt 1 whole (kept), attempt 2 a duplicate; chunk 1: attempt 3 cut off by the kill;
        # chunk 2: attempt 4 published whole but one row short in the target (not kept either)
        staged = {(0, 1): range(0, 100), (0, 2): range(0, 40), (1, 3): range(100, 130), (2, 4): range(200, 249)}
        for (part, attempt), ids in staged.items():
            conn.execute(
                f"INSERT INTO {stage} SELECT g, {part}, {attempt} FROM generate_series({ids.start}, {ids.stop - 1}) g"
            )
            conn.execute(
                f'INSERT INTO "{schema}".batch_parts VALUES (%s, %s, %s, %s, 7)', (BATCH, part, attempt, len(ids))
            )
        for part, attempt, rows in ((0, 1, 100), (0, 2, 100), (2, 4, 50)):
            conn.execute(
                f'INSERT INTO "{schema}".batch_parts_done VALUES (%s, %s, %s, %s, 7, %s, %s)',
                (BATCH, part, attempt, rows, "mysql-bin.000001", 4),
            )
        assert left_over_rows(conn, schema, [BATCH]) == {BATCH: 40 + 30 + 49}
        dead = left_over_parts(conn, schema, BATCH)  # read before the resumed job starts
        assert dead == [(0, 2), (1, 3), (2, 4)]
        # the resumed job's new attempts stage meanwhile, not kept until done: theirs are never dropped
        conn.execute(f"INSERT INTO {stage} SELECT g, 1, 900 FROM generate_series(100, 199) g")
        conn.execute(f'INSERT INTO "{schema}".batch_parts VALUES (%s, 1, 900, 100, 7)', (BATCH,))

        assert drop_left_over(conn, schema, BATCH, dead) == 40 + 30 + 49
        left = conn.execute(f"SELECT _seam_part, _seam_attempt, count(*) FROM {stage} GROUP BY 1, 2 ORDER BY 1, 2")
        assert left.fetchall() == [(0, 1, 100), (1, 900, 100)]
        losers = {(0, 2): 40, (1, 3): 30, (2, 4): 49, (3, 5): 10}  # END's: the rows their tallies say then
        assert undropped(conn, schema, BATCH, losers) == {(3, 5)}  # one it never saw: END drops it
        assert drop_left_over(conn, schema, BATCH, dead) == 0
        assert left_over_rows(conn, schema, [BATCH]) == {BATCH: 40 + 30 + 49 + 100}  # (the new one: not done yet)

        # the killed job's tasks, being cancelled, staged one more row of a dead attempt: END drops it
        conn.execute(f"INSERT INTO {stage} VALUES (130, 1, 3)")
        conn.execute(f'UPDATE "{schema}".batch_parts SET rows = 31 WHERE batch_id = %s AND attempt = 3', (BATCH,))
        assert undropped(conn, schema, BATCH, {**losers, (1, 3): 31}) == {(1, 3), (3, 5)}
        assert drop_left_over(conn, schema, BATCH, dead) == 1  # (or a resumed load's next drop does)
        assert undropped(conn, schema, BATCH, {**losers, (1, 3): 31}) == {(3, 5)}

        conn.execute(f"DROP TABLE {stage}")  # END came first and the batch is gone: nothing to do, no error
        assert drop_left_over(conn, schema, BATCH, dead) == 0
        for table in ("batches", "batch_parts", "batch_parts_done"):
            conn.execute(f'DELETE FROM "{schema}".{table} WHERE batch_id = %s', (BATCH,))
    with pytest.raises(psycopg.Error):  # a closed connection: the load's thread says so and END drops them
        drop_left_over(conn, schema, BATCH, dead)


def test_a_resumed_load_waits_for_the_killed_tasks_until_their_chunks_stop_growing(
    stack, tmp_path_factory, monkeypatch
):
    """A killed load's cancelled tasks go on publishing their chunks: the resumed load applies them until the
    rows staged of chunks not kept stop changing for ``DEAD_TASKS_QUIET_S``, so that a chunk a task finished
    meanwhile is kept, not read again; with nothing left over it does not wait at all. (The quiet time is
    longer here than the task's steps on any machine.)"""
    monkeypatch.setattr(seam.loads, "DEAD_TASKS_QUIET_S", 2.0)
    quiet = seam.loads.DEAD_TASKS_QUIET_S
    pipeline = load_pipeline(pipeline_file(tmp_path_factory, "left_over", [{"name": "left_over.t", "key": ["id"]}]))
    schema, batch = pipeline.target.state_schema, "20990101T000000-deadtask"

    def clear(conn) -> None:
        for table in ("batches", "batch_parts", "batch_parts_done"):
            conn.execute(f'DELETE FROM "{schema}".{table} WHERE batch_id = %s', (batch,))

    def part(conn, part: int, attempt: int, rows: int, done: bool = False) -> None:
        conn.execute(
            f'INSERT INTO "{schema}".batch_parts VALUES (%s, %s, %s, %s, 7) ON CONFLICT (batch_id, part, attempt) '
            "DO UPDATE SET rows = EXCLUDED.rows",
            (batch, part, attempt, rows),
        )
        if done:
            conn.execute(
                f'INSERT INTO "{schema}".batch_parts_done VALUES (%s, %s, %s, %s, 7, %s, %s)',
                (batch, part, attempt, rows, "mysql-bin.000001", 4),
            )

    said: list[str] = []
    table = pipeline.table("left_over.t")
    with connect_state(pipeline) as conn, connect_state(pipeline) as task:
        clear(conn)
        part(conn, 0, 1, 100, done=True)
        assert not DeadTasks(conn, schema, [batch]).publishing()  # nothing left over: no wait

        part(conn, 1, 2, 10)  # a task killed with its chunk part-way

        def go_on() -> None:  # ... goes on: its chunk grows, then its PART arrives (kept)
            for rows in (20, 30, 40):
                time.sleep(0.3)
                part(task, 1, 2, rows)
            time.sleep(0.3)
            part(task, 1, 2, 50, done=True)

        going = threading.Thread(target=go_on)
        dead, began = DeadTasks(conn, schema, [batch]), time.monotonic()
        going.start()
        while dead.publishing():
            pass
        going.join()
        assert 1.1 < time.monotonic() - began < 1.2 + quiet, time.monotonic() - began
        assert left_over_rows(conn, schema, [batch]) == {}  # the chunk it finished is kept
        dead.said(said.append, [table])
        assert said and "went on publishing their chunks" in said[0], said

        part(conn, 2, 3, 10)  # a task that died part-way: waited for the quiet time, then not again
        dead, began = DeadTasks(conn, schema, [batch]), time.monotonic()
        while dead.publishing():
            pass
        assert quiet <= time.monotonic() - began < quiet + 1
        said.clear()
        dead.said(said.append, [table])
        assert said == []
        clear(conn)
