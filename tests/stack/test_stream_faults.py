"""Faults of the stream: DDL the target can follow is applied mid-stream under a writer, other DDL (and a
`seam seed` dropping the database) stops only its tables; back-pressure
bounds what a stopped sink leaves unapplied. (SIGKILLs of the reader, the sink and the broker under a
workload are in test_torture.py, the randomized differential test.)"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

import psycopg
import pytest
import yaml
from confluent_kafka import Producer

from seam.apply import SinkError
from seam.apply.sink import Sink
from seam.config import load_pipeline
from seam.core.position import Position
from seam.source import stream_servers
from seam.source.streaming import ChangeReader
from seam.state.connection import sink_session_name
from seam.state.owners import Owner
from seam.wire.boundary import CONTROL_HEADER, Heartbeat
from seam.wire.topics import table_topic
from seam_dev import demo
from tests.support.commands import run_command
from tests.support.compare import diff, source_rows, target_rows
from tests.support.pipelines import stream_once

DB = "faults_test"
TABLES = ["accounts", "payments", "audit_log"]
pytestmark = pytest.mark.stack


def _pipeline_file(tmp_path_factory, name: str, kafka_extra: dict | None = None, webhook: str | None = None) -> str:
    doc = yaml.safe_load(open(load_pipeline().path))
    doc["tables"] = [
        {"name": f"{DB}.accounts", "key": ["id"]},
        {"name": f"{DB}.payments", "key": ["id"]},
        {"name": f"{DB}.audit_log", "key": "none"},
    ]
    doc["kafka"]["topic_prefix"] = f"seam.{name}"
    doc["kafka"].update(kafka_extra or {})
    if webhook:
        doc["notify"] = {"webhook": webhook}
    path = tmp_path_factory.mktemp(name) / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _seam(pipeline_path: str, *args, timeout: float = 900) -> subprocess.CompletedProcess:
    return run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", pipeline_path, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _converged(pipeline, tables=TABLES) -> tuple[bool, str]:
    for table in tables:
        src, schema = source_rows(pipeline, DB, table)
        try:
            tgt = target_rows(pipeline, schema)
        except psycopg.errors.UndefinedColumn as exc:  # a column the stream has not added yet
            return False, f"{table}: {exc}"
        if src != tgt:
            return False, f"{table}: {diff(src, tgt)}"
    return True, ""


def _wait_converged(pipeline, seconds: float, tables=TABLES) -> None:
    deadline, why = time.time() + seconds, ""
    while time.time() < deadline:
        ok, why = _converged(pipeline, tables)
        if ok:
            return
        time.sleep(3)
    raise AssertionError(f"target did not converge to the source within {seconds:.0f} s: {why}")


@pytest.fixture(scope="module")
def seeded_db(stack):
    demo.seed(load_pipeline(), rows=5_000, admin_url=os.environ["SEAM_MYSQL_URL"], database=DB, log=lambda m: None)


@pytest.fixture
def reseeded(stack):
    """The demo schema as seeded (the DDL test changes its columns)."""
    demo.seed(load_pipeline(), rows=5_000, admin_url=os.environ["SEAM_MYSQL_URL"], database=DB, log=lambda m: None)


def test_back_pressure_bounds_what_a_stopped_sink_leaves(seeded_db, tmp_path_factory):
    """With the sink stopped, the reader publishes at most the bound (plus one transaction) and pauses;
    restarted, the sink applies everything and the target converges."""
    bound = 300
    path = _pipeline_file(tmp_path_factory, "pressure", {"max_unapplied_events": bound})
    pipeline = load_pipeline(path)
    load = _seam(path, "load", "full", *[f"{DB}.{t}" for t in TABLES])
    assert load.returncode == 0, load.stderr + load.stdout
    reader = ChangeReader(pipeline)
    stop = threading.Event()
    peak = {}

    def watch():
        while not stop.is_set():
            for table, (events, _) in reader.unapplied().items():
                peak[table] = max(peak.get(table, 0), events)
            time.sleep(0.05)

    threads = [threading.Thread(target=lambda: reader.serve(should_stop=stop.is_set)), threading.Thread(target=watch)]
    for t in threads:
        t.start()
    try:
        demo.run_writer(os.environ["SEAM_MYSQL_URL"], rate=400, seconds=12, threads=2, seed=3, database=DB)
        time.sleep(3)
        print(
            f"\nunapplied events per table with the sink stopped (peak): {peak}; bound {bound}; paused "
            f"{reader.paused_for():.1f} s so far"
        )
        assert reader.paused_for() > 0, "the reader never paused"
        assert max(peak.values()) <= bound + 50, peak  # at most one source transaction over the bound
        sink = Sink(pipeline)  # the sink comes back: the reader resumes and the target converges
        threads.append(threading.Thread(target=lambda: sink.run(should_stop=stop.is_set)))
        threads[-1].start()
        _wait_converged(pipeline, 180)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        reader.close()


class _Hooks(http.server.BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self):
        self.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


# DDL the stream follows, run while a writer changes the same tables (the writer updates accounts by id and
# balance only, inserts payments by column name, and audit_log by position)
FOLLOWED_DDL = [
    "ALTER TABLE accounts ADD COLUMN `risk note` varchar(40) NULL AFTER owner, ADD COLUMN tier int NOT NULL DEFAULT 3 FIRST",
    "UPDATE accounts SET `risk note` = concat('r', id), tier = id % 5 WHERE id % 3 = 0",
    "ALTER TABLE accounts RENAME COLUMN owner TO holder",
    # a `#` and an escaped quote inside a string: neither hides the clause after it
    "ALTER TABLE accounts COMMENT 'ticket #5, it\\'s', DROP COLUMN currency",
    "ALTER TABLE accounts MODIFY status ENUM('open','frozen','closed','dormant') NOT NULL DEFAULT 'open'",
    "UPDATE accounts SET status = 'dormant' WHERE id % 4 = 0",
    "ALTER TABLE accounts MODIFY holder VARCHAR(200) NULL, CHANGE balance balance DECIMAL(24,6) NOT NULL DEFAULT 0",
    "UPDATE accounts SET holder = NULL WHERE id % 10 = 0",
    "ALTER TABLE accounts ALTER COLUMN tier SET DEFAULT 7",
    # a migration run again (IF NOT EXISTS of a column there), the statement's time on this session's wall
    # clock, a NOT NULL column without a default (its rows get 0)
    "SET time_zone = '-03:00'",
    "ALTER TABLE accounts ADD COLUMN IF NOT EXISTS tier INT, ADD COLUMN opened DATETIME(3) NOT NULL "
    "DEFAULT CURRENT_TIMESTAMP(3), ADD COLUMN flags INT UNSIGNED NOT NULL",
    "ALTER TABLE payments MODIFY amount DECIMAL(24,6) NOT NULL, MODIFY reference VARCHAR(100) NOT NULL",
    "ALTER TABLE payments MODIFY account_id BIGINT NOT NULL",  # no change at all
    "TRUNCATE TABLE audit_log",
]


def test_ddl_the_target_can_follow_is_followed_under_a_writer_other_ddl_stops_only_its_table(
    seeded_db, tmp_path_factory
):
    """Each DDL of FOLLOWED_DDL is applied at its binlog position, in order with the writer's changes; the
    target converges row by row. Then a narrowing MODIFY stops payments alone, loudly, with the remedy."""
    receiver = http.server.HTTPServer(("127.0.0.1", 0), _Hooks)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    path = _pipeline_file(tmp_path_factory, "ddl", webhook=f"http://127.0.0.1:{receiver.server_port}/seam")
    pipeline = load_pipeline(path)
    load = _seam(path, "load", "full", *[f"{DB}.{t}" for t in TABLES])
    assert load.returncode == 0, load.stderr + load.stdout
    started = _seam(path, "stream", "start", timeout=120)
    assert started.returncode == 0, started.stderr + started.stdout
    admin = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    admin.autocommit(True)
    failed: list[BaseException] = []
    altered = threading.Event()  # the writer runs through every statement and a second after

    def write():
        try:
            demo.run_writer(
                os.environ["SEAM_MYSQL_URL"], rate=150, seconds=120, threads=1, seed=5, database=DB, until=altered
            )
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failed.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with admin.cursor() as cur:
            for statement in FOLLOWED_DDL:
                cur.execute(statement)
                time.sleep(1)
        altered.set()
        writer.join()
        assert not failed, failed
        _wait_converged(pipeline, 180)
        with psycopg.connect(**pipeline.target.conninfo()) as conn:
            cols = {
                r[0]: r[1]
                for r in conn.execute(
                    "SELECT column_name, is_nullable FROM information_schema.columns WHERE "
                    "table_schema = %s AND table_name = 'accounts'",
                    (DB,),
                )
            }
        assert {"risk note", "tier", "holder", "opened", "flags"} <= set(cols), cols
        assert not {"owner", "currency"} & set(cols), cols
        assert cols["holder"] == "YES"
        status = _seam(path, "stream", "status", timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        with admin.cursor() as cur:  # read under the writer's sql_mode: here the string ends at the backslash
            cur.execute("SET SESSION sql_mode = concat(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
            cur.execute("ALTER TABLE payments COMMENT 'C:\\', MODIFY reference VARCHAR(80) NOT NULL")
            cur.execute("UPDATE accounts SET balance = balance - 1 WHERE id % 11 = 0")
            cur.execute("INSERT INTO audit_log VALUES (NOW(6), 2, 'y', 'after the narrowing')")
        _wait_converged(pipeline, 120, tables=["accounts", "audit_log"])
        status = _seam(path, "stream", "status", timeout=60)
        assert status.returncode == 1, status.stdout + status.stderr  # a stopped table is a failure to see
        assert f"{DB}.payments" in status.stdout and "STOPPED" in status.stdout and "not a widening" in status.stdout
        assert "seam load full faults_test.payments" in status.stdout
        alerts = [a for a in _Hooks.received if a["table"] == f"{DB}.payments"]  # the webhook alert
        assert alerts and alerts[0]["problem"] == "stream stopped" and "VARCHAR(80)" in alerts[0]["detail"], (
            _Hooks.received
        )
        assert not [a for a in _Hooks.received if a["table"] != f"{DB}.payments"]
        # the remedy: a new full load of the stopped table, after which it streams again
        reload = _seam(path, "load", "full", f"{DB}.payments")
        assert reload.returncode == 0, reload.stderr + reload.stdout
        with admin.cursor() as cur:
            cur.execute("UPDATE payments SET amount = amount + 1 WHERE id % 13 = 0")
        _wait_converged(pipeline, 120)
        with psycopg.connect(**pipeline.target.conninfo()) as conn:  # the sink's run tables: one per keyed table
            runs = conn.execute(
                # those of this sink's session (the one whose run table has the added column), not other sinks'
                "SELECT count(*) FROM pg_class WHERE relpersistence = 't' AND relname LIKE 'seam\\_run\\_%' "
                "AND relnamespace IN (SELECT relnamespace FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid "
                "WHERE c.relpersistence = 't' AND c.relname LIKE 'seam\\_run\\_%' AND a.attname = 'risk note')"
            ).fetchone()[0]
        assert 1 <= runs <= 2, f"{runs} run tables: those of the columns before the DDL, or before the reload, linger"
    finally:
        altered.set()
        writer.join()
        admin.close()
        _seam(path, "stream", "stop", timeout=120)
        receiver.shutdown()


def test_seam_seed_under_a_running_stream_stops_its_tables_never_applies_onto_them(reseeded, tmp_path_factory):
    """`seam seed` drops and recreates the database while the stream follows it: DROP DATABASE stops every
    table of it (the recreated tables' rows are never applied on top of the old ones); a full load resumes."""
    path = _pipeline_file(tmp_path_factory, "reseed")
    pipeline = load_pipeline(path)
    load = _seam(path, "load", "full", *[f"{DB}.{t}" for t in TABLES])
    assert load.returncode == 0, load.stderr + load.stdout
    started = _seam(path, "stream", "start", timeout=120)
    assert started.returncode == 0, started.stderr + started.stdout
    try:
        demo.seed(load_pipeline(), rows=2_000, admin_url=os.environ["SEAM_MYSQL_URL"], database=DB, log=lambda m: None)
        demo.run_writer(os.environ["SEAM_MYSQL_URL"], rate=200, seconds=5, threads=1, seed=9, database=DB)
        waited = _seam(path, "stream", "wait", "--timeout", "120", timeout=180)
        assert waited.returncode == 3, waited.stdout + waited.stderr  # tables stopped
        with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
            stopped = dict(conn.execute("SELECT tbl, stopped FROM seam.positions WHERE db = %s", (DB,)).fetchall())
        for table in TABLES:
            assert stopped.get(table) and "DROP DATABASE" in stopped[table], stopped
        reload = _seam(path, "load", "full", *[f"{DB}.{t}" for t in TABLES])
        assert reload.returncode == 0, reload.stderr + reload.stdout
        demo.run_writer(os.environ["SEAM_MYSQL_URL"], rate=200, seconds=5, threads=1, seed=10, database=DB)
        _wait_converged(pipeline, 180)
    finally:
        _seam(path, "stream", "stop", timeout=120)


def _waiting_on_a_lock(pipeline) -> list[int]:
    """The pids of the pipeline's target sessions waiting on a lock (the sink's, while the reporting session
    holds a row)."""
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        return [
            r[0]
            for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname = current_database() "
                "AND state <> 'idle' AND wait_event_type = 'Lock' AND application_name = %s",
                (sink_session_name(pipeline),),
            )
        ]


def _loaded(tmp_path_factory, name: str):
    """A pipeline of its own (topics under ``name``) with every table full-loaded: (path, pipeline)."""
    path = _pipeline_file(tmp_path_factory, name)
    load = _seam(path, "load", "full", *[f"{DB}.{t}" for t in TABLES])
    assert load.returncode == 0, load.stderr + load.stdout
    return path, load_pipeline(path)


@contextlib.contextmanager
def _streaming(pipeline):
    """The change reader and the sink's Kafka loop running in this process (threads) until the block ends;
    yields the sink."""
    with _running(pipeline, pipeline) as (sink, _):
        yield sink


@contextlib.contextmanager
def _running(pipeline, sink_pipeline):
    """``_streaming`` with the sink reaching the target as ``sink_pipeline`` says; yields the sink and the
    (reader, sink) threads."""
    reader, sink = ChangeReader(pipeline), Sink(sink_pipeline)
    stop = threading.Event()
    threads = [
        threading.Thread(target=lambda: reader.serve(should_stop=stop.is_set)),
        threading.Thread(target=lambda: sink.run(should_stop=stop.is_set)),
    ]
    for t in threads:
        t.start()
    try:
        yield sink, threads
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        reader.close()
        sink.close()


def _stopped(pipeline) -> dict[str, str]:
    """The pipeline's stopped tables (another test's tables of this database may be stopped still)."""
    names = [t.table for t in pipeline.tables]
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        rows = conn.execute(
            "SELECT tbl, stopped FROM seam.positions WHERE db = %s AND tbl = ANY(%s) AND stopped IS NOT NULL",
            (DB, names),
        )
        return dict(rows.fetchall())


def test_transient_target_errors_are_retried_and_stop_no_table(reseeded, tmp_path_factory):
    """A reporting session holds a target row; the sink's statement waits on it and is cancelled (as a DBA or
    a statement_timeout would), twice; then its session is terminated. Nothing stops: the change is applied
    once the lock is gone, and every table equals the source."""
    _, pipeline = _loaded(tmp_path_factory, "transient")
    with (
        psycopg.connect(**pipeline.target.conninfo()) as report,  # the reporting session
        contextlib.closing(demo.connect(os.environ["SEAM_MYSQL_URL"], DB)) as admin,
        _streaming(pipeline) as sink,
    ):
        report.execute(f'SELECT * FROM "{DB}".accounts WHERE id = 1 FOR UPDATE')
        with admin.cursor() as cur:
            cur.execute("UPDATE accounts SET balance = balance + 5 WHERE id IN (1, 2)")
            cur.execute("INSERT INTO audit_log VALUES (NOW(6), 9, 'z', 'while a lock is held')")
        cancelled = 0
        deadline = time.time() + 120
        while cancelled < 2 and time.time() < deadline:
            for pid in _waiting_on_a_lock(pipeline):
                with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as dba:
                    cancelled += dba.execute("SELECT pg_cancel_backend(%s)", (pid,)).fetchone()[0]
            time.sleep(0.05)
        assert cancelled == 2, "the sink's statement never waited on the held row"
        report.rollback()  # the report ends
        _wait_converged(pipeline, 120)
        with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as dba:  # a failover-like loss
            dba.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                "AND datname = current_database() AND application_name = %s "
                "AND backend_type = 'client backend' AND pid IN (SELECT pid FROM pg_locks WHERE "
                "locktype = 'advisory')",
                (sink_session_name(pipeline),),  # this pipeline's sessions: the tests beside it keep theirs
            )
        demo.run_writer(os.environ["SEAM_MYSQL_URL"], rate=200, seconds=5, threads=1, seed=11, database=DB)
        _wait_converged(pipeline, 180)
        assert _stopped(pipeline) == {}
        assert sink.retrier.count >= 3, (sink.retrier.count, sink.retrier.last)  # 2 cancels, 1 lost connection


def test_a_cancelled_poll_of_the_target_is_polled_again_not_a_resume(seeded_db, tmp_path_factory, caplog):
    """The reader's poll of the applied positions is cancelled (a DBA's pg_cancel_backend, or here its
    statement_timeout while a session locks seam.positions): the reader polls again at its next turn rather
    than abandoning its pass (a resume re-reads the binlog from the target's positions: `make faults`'
    cancel storm counted one per cancel that hit it)."""
    pipeline = load_pipeline(_pipeline_file(tmp_path_factory, "cancelled_poll"))
    reader = ChangeReader(pipeline)
    schema = pipeline.target.state_schema
    try:
        with psycopg.connect(**pipeline.target.conninfo()) as locker, caplog.at_level("INFO", "seam.streaming"):
            locker.execute(f'LOCK TABLE "{schema}".positions IN ACCESS EXCLUSIVE MODE')
            reader._target.execute("SET statement_timeout = '300ms'")
            reader._poll(None, {})  # cancelled: must return, not raise
            locker.rollback()
        assert "a poll of the target's positions was cancelled; polling again" in caplog.text
        reader._target.execute("SET statement_timeout = 0")
        reader._poll(None, {})  # and the next poll reads
    finally:
        reader.close()


class _Outage:
    """A TCP proxy in front of the target that can go down (its sessions cut, new ones refused), as a
    restarting PostgreSQL is to its clients, without touching the server the other tests use."""

    def __init__(self, host: str, port: int):
        self.upstream = (host, port)
        self.conns: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._serve()

    def _serve(self) -> None:
        def accept(listener: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while True:
                    client, _ = listener.accept()
                    server = socket.create_connection(self.upstream)
                    self.conns += [client, server]
                    for a, b in ((client, server), (server, client)):
                        threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

        threading.Thread(target=accept, args=(self.listener,), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                b.sendall(data)
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def down(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes its accept() (close alone would not, on Linux)
        self.listener.close()
        for c in self.conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        self.conns = []

    def up(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        self._serve()


def test_a_target_that_goes_away_and_comes_back_is_retried_not_stopped(reseeded, tmp_path_factory):
    """The sink's target goes away under a writer (sessions cut, connections refused, as while PostgreSQL
    restarts) and comes back: the sink keeps retrying (connection refused is transient), nothing stops, and
    every change lands once."""
    path, pipeline = _loaded(tmp_path_factory, "outage")
    outage = _Outage(pipeline.target.host, pipeline.target.port)
    doc = yaml.safe_load(open(path))
    doc["target"]["port"] = outage.port
    through = tmp_path_factory.mktemp("outage") / "through-proxy.yaml"
    through.write_text(yaml.safe_dump(doc))
    try:
        with _running(pipeline, load_pipeline(str(through))) as (sink, threads):
            demo.run_writer(os.environ["SEAM_MYSQL_URL"], rate=200, seconds=2, threads=1, seed=12, database=DB)
            outage.down()
            demo.run_writer(os.environ["SEAM_MYSQL_URL"], rate=200, seconds=2, threads=1, seed=13, database=DB)
            deadline = time.time() + 60
            while "unreachable" not in (sink.retrier.last or "") and time.time() < deadline:
                time.sleep(0.2)
            assert "unreachable" in (sink.retrier.last or ""), sink.retrier.last  # it tried while the target was away
            assert threads[1].is_alive()
            outage.up()
            _wait_converged(pipeline, 180)
            assert _stopped(pipeline) == {}
    finally:
        outage.down()


def test_messages_that_are_not_seams_are_quarantined_and_stop_only_their_table(reseeded, tmp_path_factory):
    """A plain Kafka client writes garbage on payments' topic and a BEGIN naming payments on accounts' topic,
    under a running stream and writer. Those two tables stop, each naming its message and the way out; the
    third is applied throughout; `seam quarantine skip` lets both go on, and every table equals the source."""
    path, pipeline = _loaded(tmp_path_factory, f"quarantine{os.getpid()}")  # topics of its own: no earlier garbage
    with _streaming(pipeline):
        topic = {t.table: table_topic(pipeline, t) for t in pipeline.tables}
        producer = Producer({"bootstrap.servers": pipeline.kafka.bootstrap})
        producer.produce(topic["payments"], b"\x00not a seam record!!", key=b"k")
        forged = {"v": 1, "control": "BEGIN", "batch": "forged", "db": DB, "table": "payments", "mode": "full"}
        producer.produce(
            topic["accounts"],
            json.dumps({**forged, "columns": [], "key": []}).encode(),
            headers=[(CONTROL_HEADER, b"1")],
        )
        producer.flush(30)
        demo.run_writer(os.environ["SEAM_MYSQL_URL"], rate=200, seconds=5, threads=1, seed=5, database=DB)
        _wait_converged(pipeline, 120, tables=["audit_log"])  # the third table is applied throughout
        deadline = time.time() + 60
        while set(_stopped(pipeline)) != {"payments", "accounts"} and time.time() < deadline:
            time.sleep(1)
        stopped = _stopped(pipeline)
        assert set(stopped) == {"payments", "accounts"}, stopped
        assert "not a Seam change record" in stopped["payments"] and "seam quarantine skip" in stopped["payments"]
        assert f"naming table {DB}.payments, not this topic's {DB}.accounts" in stopped["accounts"]
        listed = _seam(path, "quarantine", "list")
        assert listed.returncode == 1 and listed.stdout.count("\n") == 2, listed.stdout + listed.stderr
        ids = [line.split()[0].lstrip("#") for line in listed.stdout.splitlines()]
        shown = _seam(path, "quarantine", "show", ids[0])
        assert shown.returncode == 0 and "offset" in shown.stdout, shown.stdout + shown.stderr
        for id_ in ids:
            skipped = _seam(path, "quarantine", "skip", id_, "--note", "test garbage")
            assert skipped.returncode == 0 and "goes on" in skipped.stdout, skipped.stdout + skipped.stderr
        demo.run_writer(os.environ["SEAM_MYSQL_URL"], rate=100, seconds=3, threads=1, seed=6, database=DB)
        _wait_converged(pipeline, 180)
        assert _stopped(pipeline) == {}
        assert _seam(path, "quarantine", "list").returncode == 0
        # a HEARTBEAT without prev, far ahead: applied, it would move audit_log past changes never applied
        ahead = Heartbeat(Position.through("mysql-bin.999999", 4), prev=None)
        producer.produce(topic["audit_log"], ahead.to_json(), key=b"__seam_control__", headers=[(CONTROL_HEADER, b"1")])
        producer.flush(30)
        deadline = time.time() + 60
        while "audit_log" not in _stopped(pipeline) and time.time() < deadline:
            time.sleep(1)
        assert "a Heartbeat without prev" in _stopped(pipeline).get("audit_log", ""), _stopped(pipeline)
        (held,) = [line.split()[0].lstrip("#") for line in _seam(path, "quarantine", "list").stdout.splitlines()]
        assert _seam(path, "quarantine", "skip", held, "--note", "forged heartbeat").returncode == 0
        demo.run_writer(os.environ["SEAM_MYSQL_URL"], rate=100, seconds=3, threads=1, seed=7, database=DB)
        _wait_converged(pipeline, 180)
        assert _stopped(pipeline) == {}


@pytest.mark.parametrize("image", ["MINIMAL", "NOBLOB"])
def test_a_partial_row_image_stops_its_table_naming_the_setting(reseeded, tmp_path_factory, image):
    """An UPDATE logged with binlog_row_image MINIMAL or NOBLOB (a session's setting) lacks the values of
    columns it did not log: the table stops naming binlog_row_image, never a NULL in their place; a table
    written with FULL meanwhile goes on. The way out printed (the columns are as they were: a repair against
    the source as it is now, not a reload) copies the rows that update changed, and the stream goes on."""
    path, pipeline = _loaded(tmp_path_factory, f"image{image.lower()}")
    admin = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    admin.autocommit(True)
    try:
        with admin.cursor() as cur:
            cur.execute(f"SET SESSION binlog_row_image = '{image}'")
            if image == "NOBLOB":  # NOBLOB leaves out BLOB/TEXT columns an UPDATE does not change
                cur.execute("ALTER TABLE payments MODIFY memo TEXT NULL")
                load = _seam(path, "load", "full", f"{DB}.payments")
                assert load.returncode == 0, load.stderr + load.stdout
            cur.execute("UPDATE payments SET amount = amount + 1000 WHERE id <= 5")
            cur.execute("SET SESSION binlog_row_image = 'FULL'")
            cur.execute("UPDATE accounts SET balance = balance + 1 WHERE id <= 5")
        stream_once(pipeline)
    finally:
        admin.close()
    stopped = _stopped(pipeline)
    assert set(stopped) == {"payments"} and "binlog_row_image" in stopped["payments"], stopped
    _wait_converged(pipeline, 60, tables=["accounts", "audit_log"])
    # `seam stream wait` names the stopped table, sees the others caught up, and exits 3; --fail-fast exits 3
    # at the stop, whether or not the others caught up. The stream runs meanwhile: the source's head moves on
    # with other databases' writes
    with _streaming(pipeline):
        for fail_fast in ([], ["--fail-fast"]):
            waited = _seam(path, "stream", "wait", "--timeout", "60", *fail_fast, timeout=120)
            assert waited.returncode == 3, waited.stdout + waited.stderr
            assert f"{DB}.payments STOPPED: " in waited.stderr and "binlog_row_image" in waited.stderr
            assert "1 table(s) stopped: faults_test.payments" in waited.stderr
            assert fail_fast or "every other streamed table caught up" in waited.stderr, waited.stderr
    way_out = re.search(r"run `(seam repair \S+ --full)`", stopped["payments"])
    assert way_out and way_out.group(1) == f"seam repair {DB}.payments --full", stopped
    repaired = _seam(path, *way_out.group(1).split()[1:])
    assert repaired.returncode == 0 and "5 differing row(s)" in repaired.stdout, repaired.stdout + repaired.stderr
    demo.run_writer(os.environ["SEAM_MYSQL_URL"], rate=100, seconds=2, threads=1, seed=11, database=DB)
    stream_once(pipeline)
    _wait_converged(pipeline, 60)
    assert _stopped(pipeline) == {}


def test_large_values_load_and_stream_and_one_over_the_limit_stops_only_its_table(reseeded, tmp_path_factory):
    """A 5 MiB LONGBLOB and a 1 MiB JSON document go through the full load and the stream (messages, topics
    and consumers are sized by kafka.max_value_bytes, 64 MiB by default). With the limit at 1 MiB, a change
    too large for it stops its table naming the setting, and the other tables go on."""
    admin = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    admin.autocommit(True)
    big = os.urandom(5 * 2**20)
    document = json.dumps({"k": "x" * 2**20})
    with admin.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS blobs")
        cur.execute("CREATE TABLE blobs (id INT PRIMARY KEY, b LONGBLOB, j JSON)")
        cur.execute("INSERT INTO blobs VALUES (1, %s, %s), (2, 'small', '{}')", (big, document))
    paths = {}
    for name, limit in (("large", None), ("limited", 2**20)):
        doc = yaml.safe_load(open(_pipeline_file(tmp_path_factory, f"{name}{os.getpid()}")))
        doc["tables"].append({"name": f"{DB}.blobs", "key": ["id"]})
        if limit:
            doc["kafka"]["max_value_bytes"] = limit
        paths[name] = tmp_path_factory.mktemp(name) / "pipeline.yaml"
        paths[name].write_text(yaml.safe_dump(doc))
    try:
        load = _seam(str(paths["large"]), "load", "full", *[f"{DB}.{t}" for t in [*TABLES, "blobs"]])
        assert load.returncode == 0, load.stderr + load.stdout
        pipeline = load_pipeline(str(paths["large"]))
        _wait_converged(pipeline, 10, tables=["blobs"])
        with admin.cursor() as cur:
            cur.execute("UPDATE blobs SET b = %s, j = %s WHERE id = 2", (big[::-1], document))
        stream_once(pipeline)
        _wait_converged(pipeline, 10, tables=["blobs"])

        limited = load_pipeline(str(paths["limited"]))
        with admin.cursor() as cur:  # what the limited pipeline loads fits its limit
            cur.execute("UPDATE blobs SET b = 'small', j = '{}'")
        load = _seam(str(paths["limited"]), "load", "full", *[f"{DB}.{t}" for t in [*TABLES, "blobs"]])
        assert load.returncode == 0, load.stderr + load.stdout
        with admin.cursor() as cur:
            # 2.5 MiB: its base64 is over the 2 x 1 MiB + 1 MiB a record may have at this limit
            cur.execute("UPDATE blobs SET b = %s WHERE id = 2", (big[: 5 * 2**19],))
            cur.execute("UPDATE accounts SET balance = balance + 3 WHERE id <= 10")
        stream_once(limited)
        stopped = _stopped(limited)
        assert set(stopped) == {"blobs"} and "kafka.max_value_bytes" in stopped["blobs"], stopped
        _wait_converged(limited, 60, tables=TABLES)
    finally:
        with admin.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS blobs")
        admin.close()


def test_one_reader_and_one_sink_per_pipeline_a_second_refuses_naming_the_holder(stack, tmp_path_factory):
    """A second change reader of a pipeline refuses with one line naming the first (host, pid, since); so does
    a second sink on its topics. A reader whose lock's session was lost (a PostgreSQL restart) while another
    took the lock stops, naming the new holder."""
    path = _pipeline_file(tmp_path_factory, "owners")
    pipeline = load_pipeline(path)
    first = Owner(pipeline, "change reader")
    try:
        second = _seam(path, "stream", "reader", timeout=120)
        line = second.stderr.strip()
        assert second.returncode == 2 and "\n" not in line, second.stderr + second.stdout
        assert f"already runs: the change reader of pipeline {pipeline.name!r}" in line
        assert f"on host {socket.gethostname()}, pid {os.getpid()}, since " in line and "seam stream stop" in line
        sink = Sink(pipeline)
        try:
            with pytest.raises(
                SinkError, match=rf"already applying topic .*: a Seam sink on host .*, pid {os.getpid()}"
            ):
                Sink(pipeline)
            # `seam sink` refuses in one line; a load's or a repair's own sink (--until-batch) leaves its
            # batches to the sink that holds the topic, and says so
            table = pipeline.tables[0].name
            refused = _seam(path, "sink", "--table", table, timeout=120)
            assert refused.returncode == 2 and "already applying topic" in refused.stderr, refused.stderr
            left = _seam(path, "sink", "--table", table, "--until-batch", "b-1", timeout=120)
            assert left.returncode == 0 and "already applying" not in left.stderr, left.stderr
            assert f"is applied by a Seam sink on host {socket.gethostname()}, pid {os.getpid()}" in left.stdout
            assert left.stdout.strip().endswith("it applies batch b-1"), left.stdout
        finally:
            sink.close()
        with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as dba:  # the lock's session is lost
            dba.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND pid IN "
                "(SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND application_name = %s)",  # this pipeline's sessions: the tests beside it keep theirs
                (sink_session_name(pipeline),),
            )
        usurper = Owner(pipeline, "change reader")  # another process takes the lock before the first is back
        try:
            deadline = time.time() + 30
            while not first.lost and time.time() < deadline:
                time.sleep(0.5)
            assert first.lost and "already runs: the change reader" in first.lost, first.lost
        finally:
            usurper.release()
    finally:
        first.release()
    again = Owner(pipeline, "change reader")  # released: free for the next one
    again.release()


def test_a_database_the_binlog_leaves_out_stops_its_tables_and_the_repair_printed_takes_them_up(
    reseeded, tmp_path_factory, monkeypatch
):
    """A DBA adds ``--binlog-ignore-db`` for the tables' database (a restart with a new configuration, which the
    shared MariaDB cannot take: only the reader's reading of the filters, SHOW MASTER STATUS's answer, is
    faked). No change of theirs will reach the binlog: each table stops at the reader's next pass, naming the
    filter and the way out, instead of lagging for ever at "lag 0". With the filter gone, the way out printed
    (`seam repair T --full`) takes the keyed table up again; the keyless one is told to reload."""
    path, pipeline = _loaded(tmp_path_factory, "filtered")
    seen = stream_servers.binlog_status
    monkeypatch.setattr(stream_servers, "binlog_status", lambda conn: (*seen(conn)[:2], "", f"tmp,{DB}"))
    stream_once(pipeline)
    stopped = _stopped(pipeline)
    assert set(stopped) == set(TABLES), stopped
    for table, reason in stopped.items():
        assert f"the source does not log the changes of database {DB} (binlog-ignore-db)" in reason, reason
        way_out = f"`seam load full {DB}.{table}`" if table == "audit_log" else f"`seam repair {DB}.{table} --full`"
        assert f"run {way_out}" in reason and "remove the filter" in reason, reason
    monkeypatch.undo()  # the DBA removed the filter
    admin = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    admin.autocommit(True)
    with admin.cursor() as cur:  # written while the table was stopped
        cur.execute("UPDATE payments SET amount = amount + 7 WHERE id <= 4")
    admin.close()
    repaired = _seam(path, "repair", f"{DB}.payments", "--full")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    stream_once(pipeline)
    assert "payments" not in _stopped(pipeline)
    _wait_converged(pipeline, 60, tables=["payments"])


def test_a_lock_held_on_one_table_does_not_hold_the_others(reseeded, tmp_path_factory):
    """A reporting session holds a row of accounts for longer than the sink's lock_timeout: accounts' changes
    are left for the change reader to publish again, payments and audit_log are applied meanwhile; once the
    report ends, accounts catches up. Nothing stops."""
    _, pipeline = _loaded(tmp_path_factory, "lockheld")
    with (
        psycopg.connect(**pipeline.target.conninfo()) as report,
        contextlib.closing(demo.connect(os.environ["SEAM_MYSQL_URL"], DB)) as admin,
        _streaming(pipeline),
    ):
        report.execute(f'SELECT * FROM "{DB}".accounts WHERE id = 1 FOR UPDATE')  # held until the rollback
        with admin.cursor() as cur:
            cur.execute("UPDATE accounts SET balance = balance + 5 WHERE id IN (1, 2)")
            admin.commit()
        demo.run_writer(os.environ["SEAM_MYSQL_URL"], rate=200, seconds=5, threads=1, seed=21, database=DB)
        _wait_converged(pipeline, 120, tables=["payments", "audit_log"])  # while accounts' row is held
        ok, _ = _converged(pipeline, ["accounts"])
        assert not ok, "accounts cannot be equal while its row is held"
        report.rollback()
        _wait_converged(pipeline, 180)
        assert _stopped(pipeline) == {}
