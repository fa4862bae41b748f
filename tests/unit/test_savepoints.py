"""Rows rolled back to a savepoint, as the binlog holds them when the transaction also changed a
non-transactional table: a ``ROLLBACK TO`` after them. ``Transaction.savepoint`` keeps each savepoint's place in
the transaction's changes and the tables changed since; the changes after the place are left out when read.
The row events here are stand-ins: what is tested is the bookkeeping, the decoding is the real one's elsewhere
(``tests/stack/test_transactions.py`` and ``test_big_transaction.py`` run it on MariaDB, in memory and spilled)."""

from __future__ import annotations

from dataclasses import dataclass

from seam.core.position import Position
from seam.source.binlog import Transaction
from seam.source.spill import ChangeBuffer

AT = Position("mysql-bin.000001", 4)


@dataclass
class RowEvent:
    """What ChangeBuffer reads of a row event held in memory."""

    id: int
    table: str
    op: str = "c"
    schema: str = "shop"
    log_pos: int = 100
    size: int = 40
    data: bytes = b"x" * 40
    unchecked_keys: bool = False
    shared_end: bool = False

    def images(self):
        return [(None, {"id": self.id})]


def _transaction() -> Transaction:
    return Transaction(AT, None, 0, ChangeBuffer())


def _ids(txn: Transaction) -> list[int]:
    return [c.after["id"] for c in txn.changes]


def _run(txn: Transaction, *steps) -> set:
    undone: set = set()
    for step in steps:
        if isinstance(step, RowEvent):
            txn.add(step, "mysql-bin.000001", None)
        else:
            undone = txn.savepoint(*step, AT)
    return undone


def test_rows_after_a_savepoint_rolled_back_to_are_left_out_and_their_tables_named():
    txn = _transaction()
    undone = _run(
        txn,
        RowEvent(1, "t"),
        ("savepoint", "a"),
        RowEvent(2, "t"),
        RowEvent(3, "u"),
        ("savepoint", "b"),
        RowEvent(4, "t"),
        ("savepoint_rollback", "a"),  # b goes with it
    )
    assert undone == {("shop", "t"), ("shop", "u")} and _ids(txn) == [1] and len(txn.changes) == 1
    assert list(txn.savepoints) == ["a"]
    assert _run(txn, RowEvent(5, "t"), ("savepoint", "c"), RowEvent(6, "v"), ("savepoint_rollback", "c")) == {
        ("shop", "v")
    }
    assert _ids(txn) == [1, 5]
    assert _run(txn, ("savepoint_rollback", "a")) == {("shop", "t"), ("shop", "v")}  # a is still there
    assert _ids(txn) == [1]
    _run(txn, RowEvent(7, "t"), ("savepoint_release", "a"))
    assert _ids(txn) == [1, 7] and bool(txn.changes) and txn.savepoints == {}
    assert txn.changes.tables == {("shop", "t"), ("shop", "u"), ("shop", "v")}


def test_a_savepoint_set_again_moves_and_one_set_before_at_the_same_place_stays():
    txn = _transaction()
    _run(txn, ("savepoint", "a"), ("savepoint", "b"), ("savepoint", "a"), RowEvent(1, "t"))
    assert _run(txn, ("savepoint_rollback", "a")) == {("shop", "t")} and list(txn.savepoints) == ["b", "a"]
    assert _ids(txn) == [] and not txn.changes


def test_a_rollback_to_a_savepoint_never_set_stops_the_tables_of_the_transaction():
    txn = _transaction()
    assert _run(txn, RowEvent(1, "t"), ("savepoint_rollback", "nowhere")) == set()
    assert "a savepoint it never saw set" in txn.errors[("shop", "t")] and _ids(txn) == [1]
