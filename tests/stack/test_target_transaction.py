"""The sink's unit of commit (``seam.apply.transaction``), on the real target: what it announces moves only
on commit, and after a failed transaction the sink applies nothing more."""

from __future__ import annotations

import contextlib

import psycopg
import pytest

from seam.apply import SinkError
from seam.apply.retry import Retrier
from seam.apply.transaction import TargetTransaction
from seam.state.connection import connect_target

pytestmark = pytest.mark.stack


def test_actions_run_on_commit_and_a_failed_transaction_ends_the_sink(pipeline):
    conn = connect_target(pipeline)
    try:
        conn.autocommit = True
        conn.execute("DROP TABLE IF EXISTS public.txn_test")
        conn.execute("CREATE TABLE public.txn_test (id int PRIMARY KEY)")
        conn.autocommit = False
        txn, seen = TargetTransaction(conn), []

        with txn():
            conn.execute("INSERT INTO public.txn_test VALUES (1)")
            txn.on_commit(lambda: seen.append("first"))
            txn.on_commit(lambda: seen.append("second"))
            assert seen == []  # nothing moves before the commit
        assert seen == ["first", "second"]

        with pytest.raises(RuntimeError), txn():
            conn.execute("INSERT INTO public.txn_test VALUES (2)")
            txn.on_commit(lambda: seen.append("never"))
            raise RuntimeError("the apply failed")
        assert seen == ["first", "second"] and "the apply failed" in (txn.failed or "")
        with pytest.raises(SinkError, match="start the sink again"), txn():
            conn.execute("INSERT INTO public.txn_test VALUES (3)")
        conn.rollback()
        assert [r[0] for r in conn.execute("SELECT id FROM public.txn_test ORDER BY id").fetchall()] == [1]
    finally:
        conn.rollback()
        conn.autocommit = True
        conn.execute("DROP TABLE IF EXISTS public.txn_test")
        conn.close()


def test_a_cancel_that_lands_on_the_savepoints_rollback_is_left_to_the_sink(pipeline, monkeypatch):
    """Under `make faults`' cancel storm a cancel landed on the ROLLBACK TO SAVEPOINT after a cancelled step:
    psycopg logs that and raises the step's error, the transaction stays failed, and the retry inside it
    failed with 'current transaction is aborted', which stopped the table. The transient error must go up
    instead (the sink then resumes from the target). The second cancel is the one thing made up here: the
    savepoint is left as a cancelled ROLLBACK TO leaves it."""
    conn = connect_target(pipeline)
    conn.autocommit = False

    @contextlib.contextmanager
    def savepoint_whose_rollback_is_cancelled():
        conn.execute("SAVEPOINT cancelled")
        yield  # an error in the block leaves the savepoint as it is: the transaction failed
        conn.execute("RELEASE SAVEPOINT cancelled")

    steps = []

    def cancelled_step() -> None:
        steps.append(1)
        conn.execute("SET LOCAL statement_timeout = '10ms'")
        conn.execute("SELECT pg_sleep(2)")

    try:
        conn.execute("SELECT 1")
        monkeypatch.setattr(conn, "transaction", savepoint_whose_rollback_is_cancelled)
        with pytest.raises(psycopg.errors.QueryCanceled):
            Retrier().run(conn, cancelled_step, "a step")
        assert steps == [1], "retried inside a failed transaction"
        conn.rollback()
        assert conn.execute("SELECT 2").fetchone() == (2,)
    finally:
        conn.close()
