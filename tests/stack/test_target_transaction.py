"""The sink's unit of commit (``seam.apply.transaction``), on the real target: what it announces moves only
on commit, and after a failed transaction the sink applies nothing more."""

from __future__ import annotations

import pytest

from seam.apply import SinkError
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
