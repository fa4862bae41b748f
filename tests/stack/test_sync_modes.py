"""Sync modes (issue 13): a table is kept current by its stream or by windows, full loads at any time.

One flow on one table set, every switch between modes in order: windows refused on a streamed table; soft
deletes then hard deletes streamed without a false divergence; a real divergence (a target row deleted by
hand) stops only its table while the others go on; `seam load full` of it succeeds and the stream follows
again; DDL the stream cannot follow leaves the table STALE; the stream leaves a windows table alone; a
streamed table whose last load was a window waits for a full load before the stream follows it again.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import psycopg
import pytest

from seam.config import load_pipeline
from seam.validate.validation import validate
from seam_dev import demo
from tests.support.commands import run_command
from tests.support.compare import diff, source_rows, target_rows
from tests.support.pipelines import pipeline_file, stream_once

DB = "modes_test"
pytestmark = pytest.mark.stack

STREAMED = {
    "name": f"{DB}.payments",
    "key": ["id"],
    "cursor": "updated_at",
    "sync": "stream",
    "soft_delete": "is_deleted",
}
TABLES = [
    STREAMED,
    {"name": f"{DB}.audit_log", "key": "none"},
    {"name": f"{DB}.accounts", "key": ["id"], "cursor": "updated_at", "sync": "windows"},
]


def _seam(path: str, *args, timeout: float = 600) -> subprocess.CompletedProcess:
    return run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True, timeout=timeout
    )


def _source(sql: str, *params):
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params or None)
            return cur.fetchall()
    finally:
        conn.close()


def _target(pipeline, sql: str, *params):
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else None


def _live(rows: collections.Counter) -> collections.Counter:
    """Source rows the target should hold: those not flagged deleted."""
    return collections.Counter({r: n for r, n in rows.items() if json.loads(r).get("is_deleted") in (0, None)})


def _stopped(pipeline, table: str):
    return _target(pipeline, "SELECT stopped FROM seam.positions WHERE db = %s AND tbl = %s", DB, table)[0][0]


@pytest.fixture(scope="module")
def path(stack, tmp_path_factory):
    demo.seed(load_pipeline(), rows=2000, admin_url=os.environ["SEAM_MYSQL_URL"], database=DB, log=lambda m: None)
    _source("UPDATE payments SET is_deleted = 1 WHERE id % 10 = 0")  # flagged before the full load
    file = pipeline_file(tmp_path_factory, "modes", TABLES)
    loaded = _seam(file, "load", "full", *[t["name"] for t in TABLES])
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    return file


def test_modes_and_every_switch_between_them(path, tmp_path_factory):
    pipeline = load_pipeline(path)
    src, schema = source_rows(pipeline, DB, "payments")
    assert target_rows(pipeline, schema) == _live(src) != src  # the full load left the flagged rows out

    # windows are refused on a streamed table: one line, nothing published
    refused = _seam(path, "load", "incremental", f"{DB}.payments")
    assert refused.returncode == 2 and "kept current by its stream" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1

    # soft delete, then hard delete of rows Seam removed: not a divergence
    flagged_before_load = _source("SELECT id FROM payments WHERE is_deleted = 1 ORDER BY id LIMIT 3")
    _source("UPDATE payments SET is_deleted = 1 WHERE id IN (1, 2, 3)")
    _source("DELETE FROM payments WHERE id IN (2, %s, %s)", flagged_before_load[0][0], flagged_before_load[1][0])
    _source("UPDATE payments SET is_deleted = 0, memo = 'restored' WHERE id = %s", flagged_before_load[2][0])
    _source("INSERT INTO audit_log VALUES (NOW(6), 1, 'modes', 'one')")
    _source("UPDATE accounts SET balance = balance + 1 WHERE id = 1")  # a windows table: not streamed
    accounts_before = target_rows(pipeline, source_rows(pipeline, DB, "accounts")[1])
    stream_once(pipeline)
    src, schema = source_rows(pipeline, DB, "payments")
    assert target_rows(pipeline, schema) == _live(src), diff(_live(src), target_rows(pipeline, schema))
    assert _stopped(pipeline, "payments") is None
    assert target_rows(pipeline, source_rows(pipeline, DB, "accounts")[1]) == accounts_before

    # a real divergence stops that table only; the others go on
    victim = _target(pipeline, f'SELECT max(id) FROM "{DB}".payments')[0][0]
    _target(pipeline, f'DELETE FROM "{DB}".payments WHERE id = %s', victim)
    _source("DELETE FROM payments WHERE id = %s", victim)
    _source("INSERT INTO audit_log VALUES (NOW(6), 2, 'modes', 'two')")
    stream_once(pipeline)  # the sink does not raise
    assert "diverged" in _stopped(pipeline, "payments") and "seam load full" in _stopped(pipeline, "payments")
    audit, audit_schema = source_rows(pipeline, DB, "audit_log")
    assert target_rows(pipeline, audit_schema) == audit
    _source("UPDATE payments SET memo = 'while stopped' WHERE id = 5")
    stream_once(pipeline)
    assert _target(pipeline, f'SELECT memo FROM "{DB}".payments WHERE id = 5')[0][0] != "while stopped"
    status = _seam(path, "stream", "status", timeout=60)
    assert status.returncode == 1 and "STOPPED" in status.stdout, status.stdout

    # a full load is the way out, and the stream follows from its position
    reloaded = _seam(path, "load", "full", f"{DB}.payments")
    assert reloaded.returncode == 0, reloaded.stdout + reloaded.stderr
    assert _stopped(pipeline, "payments") is None
    _source("UPDATE payments SET memo = 'after the reload' WHERE id = 6")
    stream_once(pipeline)
    src, schema = source_rows(pipeline, DB, "payments")
    assert target_rows(pipeline, schema) == _live(src), diff(_live(src), target_rows(pipeline, schema))
    assert validate(pipeline, pipeline.table(f"{DB}.payments"), say=lambda m: None).verdict == "equal"

    # DDL the stream cannot follow: the table is STOPPED and validates STALE, not EQUAL
    _source("ALTER TABLE payments MODIFY memo VARCHAR(200) NULL")  # narrowing: not followed
    stream_once(pipeline)
    report = validate(pipeline, pipeline.table(f"{DB}.payments"), say=lambda m: None)
    assert report.verdict == "stale" and "stream is stopped" in report.summary(), report.summary()

    # the same table switched to windows: a window loads it, and the stream then leaves it alone ...
    windows_file = pipeline_file(tmp_path_factory, "modes", [{**STREAMED, "sync": "windows"}, *TABLES[1:]])
    window = _seam(windows_file, "load", "incremental", f"{DB}.payments")
    assert window.returncode == 0, window.stdout + window.stderr
    _source("UPDATE payments SET memo = 'after the window' WHERE id = 7")
    stream_once(pipeline)  # the streaming config again: its last load was a window, so it is not followed
    assert _target(pipeline, f'SELECT memo FROM "{DB}".payments WHERE id = 7')[0][0] != "after the window"
    # ... until a full load gives the stream an exact position again
    assert _seam(path, "load", "full", f"{DB}.payments").returncode == 0
    _source("UPDATE payments SET memo = 'streamed again' WHERE id = 8")
    stream_once(pipeline)
    src, schema = source_rows(pipeline, DB, "payments")
    assert target_rows(pipeline, schema) == _live(src), diff(_live(src), target_rows(pipeline, schema))

    # every table gets a verdict
    out = _seam(path, "validate", "--all")
    assert f"{DB}.payments EQUAL" in out.stdout and f"{DB}.audit_log EQUAL" in out.stdout, out.stdout
    assert f"{DB}.accounts" in out.stdout.split("verdicts:")[-1], out.stdout


def test_transactions_with_savepoints_stream_whole(path):
    """ORMs nest transactions with savepoints (Django atomic, SQLAlchemy begin_nested): SAVEPOINT, RELEASE
    SAVEPOINT and ROLLBACK TO SAVEPOINT are logged inside the transaction; the changes before and after them
    arrive, the rolled-back ones never existed."""
    pipeline = load_pipeline(path)
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    try:
        conn.autocommit(False)
        with conn.cursor() as cur:
            cur.execute("UPDATE payments SET memo = 'before the savepoint' WHERE id = 11")
            cur.execute("SAVEPOINT s1")
            cur.execute("UPDATE payments SET memo = 'rolled back' WHERE id = 12")
            cur.execute("ROLLBACK TO SAVEPOINT s1")
            cur.execute("UPDATE payments SET memo = 'after the rollback' WHERE id = 13")
            cur.execute("SAVEPOINT s2")
            cur.execute("INSERT INTO audit_log VALUES (NOW(6), 3, 'savepoint', 'released')")
            cur.execute("RELEASE SAVEPOINT s2")
            cur.execute("DELETE FROM payments WHERE id = 14")
        conn.commit()
    finally:
        conn.close()
    stream_once(pipeline)
    memos = dict(_target(pipeline, f'SELECT id, memo FROM "{DB}".payments WHERE id IN (11, 12, 13, 14)'))
    assert memos.get(11) == "before the savepoint" and memos.get(13) == "after the rollback", memos
    assert memos.get(12) != "rolled back" and 14 not in memos, memos
    src, schema = source_rows(pipeline, DB, "payments")
    assert target_rows(pipeline, schema) == _live(src), diff(_live(src), target_rows(pipeline, schema))
    audit, audit_schema = source_rows(pipeline, DB, "audit_log")
    assert target_rows(pipeline, audit_schema) == audit
