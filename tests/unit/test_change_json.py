"""The reader's change-event serialiser (``change_json``) gives ``record_json``'s bytes for every change event
``Record.chained_json`` sends through it, and the records that are not plain change events keep going through
``record_json``: one wire form."""

from __future__ import annotations

import itertools
import json

import pytest

from seam.core.position import Position
from seam.wire.records import Record, change_json, record_json

AT = Position("mysql-bin.000007", 4321, 2)
COMMIT = Position.through("mysql-bin.000007", 9876)
ROWS = [
    {"id": 1, "note": "plain", "amount": "1.500000"},
    {"id": 2, "note": 'quote " and \\ and \u00e9 \U0001f600', "blob": None, "at": "2026-12-04T10:00:00.123456"},
]


@pytest.mark.parametrize(
    ("op", "before", "after", "prev", "seq", "anchor", "last"),
    [
        (op, before, after, prev, seq, anchor, last)
        for op, (before, after) in (("c", (None, ROWS[0])), ("u", (ROWS[0], ROWS[1])), ("d", (ROWS[1], None)))
        for prev, seq, anchor, last in itertools.product(
            (None, Position("mysql-bin.000006", 77, 0)),
            (None, 0, 12),
            ((None, None), ("0-1-5", "server_id 1")),
            (False, True),
        )
    ],
)
def test_a_change_event_has_the_same_bytes_either_way(op, before, after, prev, seq, anchor, last):
    gtids, server = anchor
    key = {"id": (after or before)["id"]}
    expected = record_json(
        op,
        "db",
        "t",
        key,
        before,
        after,
        AT,
        False,
        None,
        "0-1-9",
        1_700_000_000_000,
        COMMIT,
        last,
        prev,
        None,
        None,
        None,
        seq,
        gtids,
        server,
    )
    got = change_json(
        op, "db", "t", key, before, after, AT, "0-1-9", 1_700_000_000_000, COMMIT, last, prev, seq, gtids, server
    )
    assert got == expected
    record = Record(op=op, db="db", table="t", key=key, before=before, after=after, position=AT, gtid="0-1-9", ts_ms=1)
    assert json.loads(record.chained_json(COMMIT, last, prev, seq, gtids, server))["source"]["txn"] == {
        "file": COMMIT.file,
        "pos": COMMIT.pos,
    }


@pytest.mark.parametrize(
    "extra",
    [
        {"cascade": {"via": ["db", "p"], "action": "delete"}, "op": "x"},
        {"part": 3, "attempt": 1, "batch": "b1"},
        {"snapshot": True},
        {"batch": ""},
    ],
)
def test_records_that_are_not_plain_change_events_keep_record_json(extra):
    fields = {
        "op": "u",
        "db": "db",
        "table": "t",
        "key": {"id": 1},
        "before": ROWS[0],
        "after": ROWS[0],
        "position": AT,
    }
    record = Record(**{**fields, **extra, "ts_ms": 5})
    chained = record.chained_json(COMMIT, True, None, 1, None, None)
    doc = json.loads(chained)
    expected = record_json(
        record.op,
        "db",
        "t",
        {"id": 1},
        ROWS[0],
        ROWS[0],
        AT,
        record.snapshot,
        record.batch,
        None,
        5,
        COMMIT,
        True,
        None,
        record.part,
        record.attempt,
        record.cascade,
        1,
        None,
        None,
    )
    assert chained == expected
    assert doc["source"]["batch"] == record.batch
