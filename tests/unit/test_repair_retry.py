"""``seam.repair.repair_table`` does an attempt again after a transient error of either database (the attempt
changed nothing: its batch was cancelled), says so, and gives up with one line after ``REPAIR_ATTEMPTS``; any
other error ends it at once. The attempt itself is replaced here: what is tested is the loop around it (the
attempts are checked against the real stack in tests/stack/test_repair.py and test_load_target_lost.py)."""

from __future__ import annotations

import psycopg
import pymysql
import pytest

from seam import repair
from seam.core.pipeline import TableConfig

TABLE = TableConfig(db="shop", table="orders", key=("id",))
DONE = repair.RepairResult("shop.orders", "b1", "f:4", "f:9", 3, 0, 3, 0, 0.1)


def _attempts(monkeypatch, failures: list[Exception]) -> tuple[list[str], list[float]]:
    said, slept = [], []

    def once(*args, **kwargs):
        if failures:
            raise failures.pop(0)
        return DONE

    monkeypatch.setattr(repair, "_repair_once", once)
    monkeypatch.setattr(repair.time, "sleep", slept.append)
    return said, slept


def test_a_transient_error_of_either_database_is_repaired_again(monkeypatch):
    failures = [
        psycopg.OperationalError("server closed the connection unexpectedly"),
        pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query"),
    ]
    said, slept = _attempts(monkeypatch, failures)
    assert repair.repair_table(None, TABLE, say=said.append) is DONE
    assert slept == [1, 2]
    assert len(said) == 2 and all("transient); nothing was changed; repairing again" in line for line in said), said


def test_it_gives_up_with_one_line_after_the_last_attempt(monkeypatch):
    failures = [psycopg.OperationalError("the database system is starting up")] * repair.REPAIR_ATTEMPTS
    said, slept = _attempts(monkeypatch, failures)
    with pytest.raises(repair.RepairError, match=r"interrupted 4 times .* run `seam repair shop.orders` again"):
        repair.repair_table(None, TABLE, say=said.append)
    assert slept == [1, 2, 4]


def test_any_other_error_ends_it_at_once(monkeypatch):
    said, slept = _attempts(monkeypatch, [repair.RepairError("shop.orders: 9 rows differ, more than repair.max_rows")])
    with pytest.raises(repair.RepairError, match="more than repair.max_rows"):
        repair.repair_table(None, TABLE, say=said.append)
    assert said == [] and slept == []
