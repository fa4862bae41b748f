"""Resumable full loads (issue 33): a load whose every process is killed part-way leaves its batch open with
the chunks it published whole; `seam load full` again keeps those (`resumed: K of N chunks kept`), reads the
others, and ends the batch exact at one position, under a writer whose changes to the kept chunks after their
snapshots are folded in. `--restart` starts afresh. Checked with the independent comparer."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
import yaml

from seam.config import load_pipeline
from seam.state.connection import sink_session_name
from seam.state.ledger import staging_tables
from seam.wire.topics import table_topic
from seam_dev import demo
from seam_dev.topic_rows import rows_published, topic_end
from tests.support.commands import process_tree, run_command
from tests.support.independent import compare
from tests.support.pipelines import one_core_spark, pipeline_file
from tests.support.source import numbered_table

DB = "resume_test"
ROWS = 600_000
pytestmark = pytest.mark.stack


def _seam(path: str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True, timeout=timeout
    )


def _kill_all(marker: str, only: str = "") -> int:
    """SIGKILL every process whose command line names ``marker`` (the load, its Spark job, its sink): as if
    the machine running them was lost (``only``: those whose command line also holds it)."""
    killed = 0
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            pid = int(cmdline.parent.name)
        except (OSError, ValueError):
            continue
        if marker in text and only in text and pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    return killed


def _paced_table(tmp_path_factory, table: str, chunks: int) -> str:
    """A 300,000-row table and its pipeline file, on one core in ``chunks`` chunks, publishers at most 20,000
    rows ahead of the sink: a kill once a chunk is staged leaves chunks unpublished. (With the default bound,
    200,000, a killed job could publish the whole table first: the resume then kept every chunk. CI.)"""
    numbered_table(DB, table, 300_000)
    path = pipeline_file(
        tmp_path_factory, table, [{"name": f"{DB}.{table}", "key": ["id"]}], spark=one_core_spark(chunks)
    )
    _bound_unapplied(path, 20_000)
    return path


def _bound_unapplied(path: str, events: int) -> None:
    doc = yaml.safe_load(open(path))
    doc["kafka"]["max_unapplied_events"] = events
    Path(path).write_text(yaml.safe_dump(doc))


def _load_until_two_chunks_are_staged(path: str, pipeline, *args: str) -> subprocess.Popen:
    """``seam load full ARGS`` started, returned once the sink holds two of its chunks whole (to be killed: at 45%
    of the rows published it had held none yet, in CI)."""
    load = subprocess.Popen(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 300
    while _parts_done(pipeline)[0] < 2 and time.time() < deadline and load.poll() is None:
        time.sleep(0.05)
    assert load.poll() is None, "the load ended before it could be killed"
    return load


def _load_started(path: str, *args: str) -> subprocess.Popen:
    """``seam load full ARGS`` running, its output (text, stderr with it) to read when it ends."""
    return subprocess.Popen(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _sink_waiting_behind(blocker: psycopg.Connection, look: psycopg.Connection, pipeline) -> int:
    """Lock the open batch's staging table in ``blocker``'s transaction; the backend pid of the sink's session
    once it waits behind that lock (seen from ``look``: a transaction keeps one picture of pg_stat_activity)."""
    batch = blocker.execute("SELECT batch_id FROM seam.batches WHERE db = %s AND state = 'open'", (DB,)).fetchone()[0]
    blocker.execute(f'LOCK TABLE seam."{staging_tables(batch)[0]}" IN ACCESS EXCLUSIVE MODE')
    deadline = time.time() + 120
    while time.time() < deadline:
        row = look.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
            (sink_session_name(pipeline),),
        ).fetchone()
        if row:
            return row[0]
        time.sleep(0.05)
    raise AssertionError("the sink never reached the staging table")


def _topic(pipeline) -> str:

    return table_topic(pipeline, pipeline.table(f"{DB}.big"))


def _parts_done(pipeline) -> tuple[int, int]:
    """(chunks published whole, chunks) of the table's open batch."""
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('seam.batch_parts_done')").fetchone()[0] is None:
            return 0, 0  # the load has not migrated the state schema yet
        row = conn.execute(
            "SELECT b.batch_id, jsonb_array_length(b.plan->'chunks') FROM seam.batches b WHERE db = %s AND "
            "state = 'open' ORDER BY opened_at DESC LIMIT 1",
            (DB,),
        ).fetchone()
        if row is None:
            return 0, 0
        done = conn.execute(
            "SELECT count(DISTINCT part) FROM seam.batch_parts_done WHERE batch_id = %s", (row[0],)
        ).fetchone()[0]
    return done, row[1]


def test_a_load_killed_part_way_resumes_keeping_its_chunks(stack, tmp_path_factory):
    numbered_table(DB, "big", ROWS)
    spark = one_core_spark(12)  # a kill lands between chunks
    path = pipeline_file(tmp_path_factory, "resume", [{"name": f"{DB}.big", "key": ["id"]}], spark=spark)
    _bound_unapplied(path, 20_000)  # at the kill, the sink holds all but the last 20,000 rows published
    pipeline = load_pipeline(path)
    stop = threading.Event()

    def write():
        conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
        conn.autocommit(True)
        rng = random.Random(33)
        while not stop.is_set():
            with conn.cursor() as cur:
                i = rng.randrange(1, ROWS)
                cur.execute("UPDATE big SET amount = amount + 1, note = 'moved' WHERE id = %s", (i,))
                cur.execute("DELETE FROM big WHERE id = %s", (rng.randrange(1, ROWS),))
                cur.execute("INSERT IGNORE INTO big VALUES (%s, 1.5, 'new')", (ROWS + rng.randrange(1, 10_000),))
            time.sleep(0.01)
        conn.close()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        first = subprocess.Popen(
            [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{DB}.big", "--restart"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        deadline, before = time.time() + 600, topic_end(pipeline, _topic(pipeline))

        def published() -> int:
            return rows_published(pipeline, _topic(pipeline), before)

        while published() < ROWS * 0.45 and time.time() < deadline and first.poll() is None:
            time.sleep(0.05)
        assert first.poll() is None and published() < ROWS, first.poll()
        assert _kill_all(path) >= 2  # about half of the rows published, no END
        chunks = _parts_done(pipeline)[1]
        assert chunks == 12, chunks
        first.wait(30)
        time.sleep(2)  # the writer goes on changing chunks already kept
    finally:
        stop.set()
        writer.join()

    again = _seam(path, "load", "full", f"{DB}.big")
    assert again.returncode == 0, again.stdout + again.stderr
    kept = re.search(r"resumed: (\d+) of (\d+) chunks kept", again.stdout)
    assert kept and 4 <= int(kept.group(1)) < chunks == int(kept.group(2)), again.stdout
    # the killed load's rows of chunks not kept are dropped at END: never counted as staged
    staged = [int(n.replace(",", "")) for n in re.findall(r"staged ([\d,]+) rows in the target", again.stdout)]
    assert staged and max(staged) <= ROWS + 10_000, again.stdout
    published = re.search(r"SEAM_RESULT .* position=(\S+)", again.stdout)
    assert published and f"binlog position {published.group(1)}," in again.stdout, again.stdout  # this END counted
    # the rows changed after the kept chunks' snapshots were folded in: exact at the batch's position, and
    # the stream from there makes the table equal to its source
    started = _seam(path, "stream", "start", timeout=180)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        waited = _seam(path, "stream", "wait", "--timeout", "180", timeout=240)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "big") is None
    finally:
        _seam(path, "stream", "stop", timeout=120)

    # --restart starts afresh
    fresh = _seam(path, "load", "full", f"{DB}.big", "--restart")
    assert fresh.returncode == 0 and "resumed" not in fresh.stdout, fresh.stdout + fresh.stderr
    assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "big") is None


def test_a_load_killed_under_a_running_stream_and_a_writer_resumes_once_the_sink_has_its_messages(
    stack, tmp_path_factory
):
    """The running sink applies what the killed load published while the stream's changes keep coming in
    behind it: the load run again goes on once the sink has applied the topic as far as it went when the
    load began again, not after its catch-up's time limit (``seam.loads.CATCH_UP_S``, 300 s)."""
    path = _paced_table(tmp_path_factory, "busy", 12)
    pipeline = load_pipeline(path)
    assert _seam(path, "load", "full", f"{DB}.busy").returncode == 0
    started = _seam(path, "stream", "start", timeout=180)
    assert started.returncode == 0, started.stdout + started.stderr
    stop = threading.Event()

    def write():  # a change every few milliseconds, streamed into the table's topic behind the load's rows
        conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
        conn.autocommit(True)
        rng = random.Random(34)
        while not stop.is_set():
            with conn.cursor() as cur:
                cur.execute("UPDATE busy SET amount = amount + 1 WHERE id = %s", (rng.randrange(1, 300_000),))
            time.sleep(0.005)
        conn.close()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        first = _load_until_two_chunks_are_staged(path, pipeline, f"{DB}.busy")
        for pid in process_tree(first.pid):  # the load alone: the stream's reader and sink go on
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        first.wait(30)
        status = _seam(path, "stream", "status").stdout  # why the table's changes wait, and the way on
        assert f"its load is gone: `seam load full {DB}.busy` resumes it, else the sink abandons it" in status, status
        began = time.monotonic()
        again = _seam(path, "load", "full", f"{DB}.busy")
        took = time.monotonic() - began
    finally:
        stop.set()
        writer.join()
    try:
        assert again.returncode == 0, again.stdout + again.stderr
        assert re.search(r"resumed: [1-9]\d* of \d+ chunks kept", again.stdout), again.stdout
        assert f"{DB}.busy: the running sink has applied what it published" in again.stdout, (took, again.stdout)
        waited = _seam(path, "stream", "wait", "--timeout", "180", timeout=240)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "busy") is None
    finally:
        _seam(path, "stream", "stop", timeout=120)


def test_a_resume_whose_kept_chunks_predate_a_truncate_gives_the_batch_up(stack, tmp_path_factory):
    """The kept chunks were read before the table was emptied: the batch cannot end exact. The load gives it up
    (cancelled: a running stream would otherwise hold the table's changes behind it), says to run the load
    again, and that works as printed: it starts afresh. Before, the batch stayed open and the way out was
    `--restart`."""
    path = _paced_table(tmp_path_factory, "cut", 12)
    pipeline = load_pipeline(path)
    first = _load_until_two_chunks_are_staged(path, pipeline, f"{DB}.cut", "--restart")
    _kill_all(path)
    assert _parts_done(pipeline)[0] < _parts_done(pipeline)[1], "every chunk was staged before the kill"
    first.wait(30)
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    conn.autocommit(True)
    with conn.cursor() as cur:
        cur.execute("TRUNCATE TABLE cut")
        cur.execute("INSERT INTO cut VALUES (1, 2.5, 'after the truncate'), (2, 3.5, 'and another')")
    conn.close()

    again = _seam(path, "load", "full", f"{DB}.cut")
    assert again.returncode != 0 and re.search(r"resumed: [1-9]\d* of \d+ chunks kept", again.stdout), again.stdout
    said = again.stdout + again.stderr
    assert "changed shape while it was read ('TRUNCATE TABLE cut'" in said and "cancelled" in said, said
    assert "run the full load again" in said and "Traceback" not in said, said
    fresh = _seam(path, "load", "full", f"{DB}.cut")
    assert fresh.returncode == 0 and "resumed" not in fresh.stdout, fresh.stdout + fresh.stderr
    assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "cut") is None


def test_a_load_whose_sink_is_killed_names_the_way_out_and_it_works(stack, tmp_path_factory):
    """The load stops its Spark job when its sink dies, so the batch may never get its END: the way out it
    prints is the load again, which resumes the batch and commits it exact. The killed sink's session outlives
    it while its statement waits (as one under way does until the target notices): that lock is no running
    sink to leave the batch to (CI: taken for one, the load started a sink of its own and said nothing)."""
    path = _paced_table(tmp_path_factory, "sunk", 6)
    pipeline = load_pipeline(path)
    load = _load_started(path, f"{DB}.sunk", "--restart")
    deadline = time.time() + 300
    while _parts_done(pipeline)[0] < 1 and time.time() < deadline and load.poll() is None:
        time.sleep(0.05)
    assert load.poll() is None, "the load ended before its sink could be killed"
    conninfo = pipeline.target.conninfo()
    with psycopg.connect(**conninfo) as blocker, psycopg.connect(**conninfo, autocommit=True) as look:
        sink_backend = _sink_waiting_behind(blocker, look, pipeline)
        assert _kill_all(path, only=" sink") >= 1
        while look.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (sink_backend,)).fetchone():
            assert load.poll() is None, "the load ended while its killed sink's session was still there"
            time.sleep(0.1)  # the session ends at the sink's lock_timeout
        blocker.rollback()
    out = load.communicate(timeout=300)[0]
    way_out = f"re-run `seam load full {DB}.sunk` (it resumes the batch, keeping the chunks already staged)"
    assert load.returncode == 2 and way_out in out, out
    again = _seam(path, "load", "full", f"{DB}.sunk")
    assert again.returncode == 0 and re.search(r"resumed: [1-9]\d* of \d+ chunks kept", again.stdout), (
        again.stdout + again.stderr
    )
    assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "sunk") is None


def test_a_load_started_while_another_runs_waits_for_it_instead_of_resuming_its_batch(stack, tmp_path_factory):
    """Seen by hand: `seam load full T` started while a load of T ran (a second trigger of the DAG, a retry
    beside a task still running) took the running load's open batch for an interrupted one, said so, and
    published it a second time (30 s of its tasks waiting on a sink). Now the second waits for the first to end,
    says what it waits for, and loads afresh: a batch of its own, both committed, nothing resumed."""
    path = _paced_table(tmp_path_factory, "twice", 6)
    pipeline = load_pipeline(path)
    first = _load_started(path, f"{DB}.twice", "--restart")
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as look:
        deadline, batch = time.time() + 300, None
        while batch is None and time.time() < deadline and first.poll() is None:
            row = look.execute(
                "SELECT b.batch_id FROM seam.batches b JOIN seam.batch_parts_done d USING (batch_id) "
                "WHERE b.db = %s AND b.tbl = 'twice' AND b.state = 'open' LIMIT 1",
                (DB,),
            ).fetchone()
            batch = row[0] if row else None
            time.sleep(0.05)
    assert batch is not None and first.poll() is None, "the first load ended before a chunk of it was staged"
    second = _seam(path, "load", "full", f"{DB}.twice")
    out = first.communicate(timeout=300)[0]
    assert first.returncode == 0 and f"committed batch {batch}:" in out, out
    said = second.stdout + second.stderr
    assert second.returncode == 0, said
    assert f"{DB}.twice: a full load of it is under way (batch {batch}): waiting for it to end first" in said, said
    assert "interrupted" not in said and "resumed" not in said and f"committed batch {batch}" not in said, said
    assert re.search(r"committed batch \S+: 300,000 rows", said), said
    assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "twice") is None
