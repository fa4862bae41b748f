"""Transient source errors in the full load and in validation are retried, never a failed load or an ERROR
verdict: a DBA kills a snapshot chunk's connection in the middle of its read (Spark reads the chunk again as a
new attempt, which the sink tells apart), and kills validation's checksum query (the table is validated
again). Both end equal to the source, checked by the independent comparer."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time

import psycopg
import pytest

from seam.config import load_pipeline
from seam_dev import demo
from tests.support.commands import run_command
from tests.support.independent import compare
from tests.support.pipelines import pipeline_file

DB = "transient_test"
ROWS = 400_000
pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def big(stack, tmp_path_factory):
    admin = demo.connect(os.environ["SEAM_MYSQL_URL"], None)
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute(f"CREATE TABLE {DB}.big (id INT PRIMARY KEY, amount DECIMAL(12,2), note VARCHAR(40))")
        cur.execute(f"INSERT INTO {DB}.big SELECT seq, seq / 7, CONCAT('note ', seq) FROM {DB}.seq_1_to_{ROWS}")
    admin.commit()
    admin.close()
    return pipeline_file(tmp_path_factory, "transient", [{"name": f"{DB}.big", "key": ["id"]}])


@contextlib.contextmanager
def _killing(pattern: str, statement: str):
    """While the block runs, kills (``statement``: KILL or KILL QUERY) the first source session whose running
    query matches ``pattern``; yields the list of what it killed."""
    killed: list[str] = []
    done = threading.Event()

    def watch() -> None:
        conn = demo.connect(os.environ["SEAM_MYSQL_URL"], None)
        try:
            with conn.cursor() as cur:
                while not killed and not done.is_set():
                    cur.execute(
                        "SELECT ID, INFO FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() "
                        "AND COMMAND = 'Query' AND INFO LIKE %s",
                        (pattern,),
                    )
                    row = cur.fetchone()
                    if row is not None:
                        cur.execute(f"{statement} {int(row[0])}")
                        killed.append(row[1][:200])
                    time.sleep(0.01)
        finally:
            conn.close()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield killed
    finally:
        done.set()
        thread.join(30)


def _seam(path: str, *args: str) -> subprocess.CompletedProcess:
    return run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True, timeout=900
    )


def test_a_killed_chunk_read_is_read_again_and_the_load_is_exact(big):
    with _killing(f"%FROM `{DB}`.`big`%WHERE%", "KILL") as killed:  # a chunk's read, not the planner's
        load = _seam(big, "load", "full", f"{DB}.big")
    assert killed, "no chunk read was caught running: nothing was killed"
    assert load.returncode == 0, load.stdout[-3000:] + load.stderr[-3000:]
    pipeline = load_pipeline(big)
    assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "big") is None


def test_a_killed_checksum_query_is_validated_again(big):
    pipeline = load_pipeline(big)
    if compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "big") is not None:
        assert _seam(big, "load", "full", f"{DB}.big").returncode == 0  # run alone: load it first
    with _killing(f"%MD5(%`{DB}`.`big`%", "KILL QUERY") as killed:  # this table's checksum, no other test's
        checked = _seam(big, "validate", f"{DB}.big")
    assert killed, "no checksum query was caught running: nothing was killed"
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "transient): validating again in" in checked.stdout and f"{DB}.big: EQUAL" in checked.stdout


@pytest.mark.alone  # max_statement_time is set server-wide
def test_a_dbas_statement_time_limit_does_not_kill_seams_long_reads(big):
    """A DBA caps every statement at 50 ms (MariaDB's global max_statement_time; MySQL's max_execution_time):
    validation's checksum of 400,000 rows takes longer, and killed at the limit it would fail the same way on
    every retry ("transient", five times, then an error). Seam's sessions lift the limit for themselves; the
    load and the validation end exact, while a session of anyone else is still held to it."""
    admin = demo.connect(os.environ["SEAM_MYSQL_URL"], None)
    admin.autocommit(True)
    try:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL max_statement_time = 0.05")
            try:
                limited = demo.connect(os.environ["SEAM_MYSQL_URL"], None)
                with pytest.raises(Exception, match="max_statement_time exceeded"), limited.cursor() as other:
                    other.execute(f"SELECT SUM(CONV(LEFT(MD5(CONCAT(id, note, amount)), 8), 16, 10)) FROM {DB}.big")
                limited.close()
                loaded = _seam(big, "load", "full", f"{DB}.big")
                checked = _seam(big, "validate", f"{DB}.big")
            finally:
                cur.execute("SET GLOBAL max_statement_time = 0")
    finally:
        admin.close()
    assert loaded.returncode == 0, loaded.stdout[-3000:] + loaded.stderr[-3000:]
    assert checked.returncode == 0 and f"{DB}.big: EQUAL" in checked.stdout, checked.stdout + checked.stderr
    assert "validating again" not in checked.stdout, checked.stdout


@pytest.mark.alone  # a role's default statement_timeout reaches every session of the role
def test_a_dbas_statement_timeout_on_the_target_does_not_cancel_seams_work(big):
    """A DBA gives the target role a 50 ms statement_timeout (and an idle-in-transaction limit, and a 1 s
    idle_session_timeout): a session that keeps the defaults is cancelled, or ended when it idles; Seam's
    sessions lift all three for themselves, and the load and the validation (its checksum of 400,000 rows) end
    exact instead of 'retrying' a cancel that comes back every time. The idle limit ended the load's sink
    while it waited for Spark's start: "the target broke off the command ...: run it again when it is back"."""
    pipeline = load_pipeline(big)
    t = pipeline.target
    role = f'ALTER ROLE "{t.user}" IN DATABASE "{t.database}"'
    plain = {k: v for k, v in t.conninfo().items() if k != "options"}  # a session of anyone else
    with psycopg.connect(**t.conninfo(), autocommit=True) as dba:
        dba.execute(f"{role} SET statement_timeout = '50ms'")
        try:
            dba.execute(f"{role} SET idle_in_transaction_session_timeout = '1s'")
            dba.execute(f"{role} SET idle_session_timeout = '1s'")
            with psycopg.connect(**plain, autocommit=True) as other, pytest.raises(psycopg.errors.QueryCanceled):
                other.execute("SELECT pg_sleep(0.5)")
            with psycopg.connect(**plain, autocommit=True) as other, pytest.raises(psycopg.OperationalError):
                time.sleep(1.5)
                other.execute("SELECT 1")  # the server ended the idle session
            loaded = _seam(big, "load", "full", f"{DB}.big")
            checked = _seam(big, "validate", f"{DB}.big")
        finally:
            dba.execute(f"{role} RESET statement_timeout")
            dba.execute(f"{role} RESET idle_in_transaction_session_timeout")
            dba.execute(f"{role} RESET idle_session_timeout")
    assert loaded.returncode == 0, loaded.stdout[-3000:] + loaded.stderr[-3000:]
    assert checked.returncode == 0 and f"{DB}.big: EQUAL" in checked.stdout, checked.stdout + checked.stderr
    assert "validating again" not in checked.stdout, checked.stdout
