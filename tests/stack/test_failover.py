"""GTID positions (issue 15): a stream resumes on another server after a failover.

Two MariaDB servers of their own (a primary and its replica, GTID replication, the replica's binlog
files numbered apart from the primary's), the test stack's broker and target. Seam loads and streams
from the primary; the primary dies with changes Seam has not read; the pipeline is pointed at the
promoted replica, which takes more writes. The stream finds each table's GTID set in the replica's binlog
and goes on: the target equals the replica, row by row (independent comparer), nothing lost or doubled.
A failover that lost transactions the target already has stops with the remedy instead."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pymysql
import pytest
import yaml

from seam.config import load_pipeline
from seam.source.streaming import ChangeReader
from seam_dev import demo
from tests.support.commands import run_command
from tests.support.compare import diff, source_rows, target_rows
from tests.support.pipelines import stream_once

DB = "failover_test"
TABLES = ["accounts", "payments", "audit_log"]
pytestmark = pytest.mark.stack


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A throwaway MariaDB with ROW binlog and strict GTIDs, root and Seam's user as on the test stack."""

    def __init__(self, base: Path, server_id: int):
        self.base, self.server_id, self.port = base, server_id, _free_port()
        self.password = os.environ["SEAM_MYSQL_PASSWORD"]
        data = base / "data"
        (base / "binlog").mkdir(parents=True)
        subprocess.run(
            [
                shutil.which("mariadb-install-db"),
                "--no-defaults",
                f"--datadir={data}",
                f"--user={pwd.getpwuid(os.geteuid()).pw_name}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            check=True,
            capture_output=True,
        )
        cmd = [
            shutil.which("mariadbd"),
            "--no-defaults",
            f"--datadir={data}",
            f"--port={self.port}",
            f"--socket={base / 'sock'}",
            "--bind-address=127.0.0.1",
            f"--log-error={base / 'err.log'}",
            f"--log-bin={base / 'binlog' / 'mysql-bin'}",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            f"--server-id={server_id}",
            "--log-slave-updates",
            "--gtid-strict-mode=1",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=64M",
            "--default-time-zone=+00:00",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
        ]
        if os.geteuid() == 0:
            cmd.insert(2, "--user=root")
        self.process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while True:
            try:
                pymysql.connect(unix_socket=str(base / "sock"), user="root").close()
                break
            except pymysql.err.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"MariaDB in {base} did not start: {(base / 'err.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.3)

    def root(self, **kwargs) -> pymysql.Connection:
        return pymysql.connect(unix_socket=str(self.base / "sock"), user="root", autocommit=True, **kwargs)

    def run(self, *statements: str, args=None) -> list:
        conn = self.root()
        try:
            with conn.cursor() as cur:
                for i, statement in enumerate(statements):
                    cur.execute(statement, args if i == 0 else None)  # ``args``: the first statement's
                return list(cur.fetchall())
        finally:
            conn.close()

    def add_users(self) -> None:
        for user in ("'root'@'127.0.0.1'", "'seam'@'%%'"):
            self.run(f"CREATE OR REPLACE USER {user} IDENTIFIED BY %s", args=(self.password,))
        self.run(
            "GRANT ALL ON *.* TO 'root'@'127.0.0.1'",
            "GRANT SELECT, RELOAD, LOCK TABLES, REPLICATION CLIENT, REPLICATION SLAVE ON *.* TO 'seam'@'%'",
        )

    @property
    def admin_url(self) -> str:
        return f"mysql+pymysql://root:{self.password}@127.0.0.1:{self.port}/"

    def replicate_from(self, primary: Server) -> None:
        self.run(
            "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s, MASTER_USER = 'root', "
            "MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos",
            "START SLAVE",
            args=(primary.port, primary.password),
        )

    def caught_up_with(self, primary: Server, timeout: float = 120) -> None:
        want = primary.run("SELECT @@gtid_binlog_pos")[0][0]
        deadline = time.monotonic() + timeout
        while self.run("SELECT @@gtid_slave_pos")[0][0] != want:
            assert time.monotonic() < deadline, f"replica at {self.run('SELECT @@gtid_slave_pos')}, primary {want}"
            time.sleep(0.2)

    def promote(self) -> None:
        self.run("STOP SLAVE", "RESET SLAVE ALL")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)  # a crash, not a clean shutdown
            self.process.wait(60)


@pytest.fixture
def servers(stack, tmp_path):
    primary, replica = Server(tmp_path / "primary", 11), Server(tmp_path / "replica", 12)
    try:
        for _ in range(3):  # the replica's binlog files are numbered apart from the primary's
            replica.run("FLUSH BINARY LOGS")
        primary.add_users()
        replica.replicate_from(primary)
        yield primary, replica
    finally:
        primary.stop()
        replica.stop()


def _pipeline_file(tmp_path: Path, server: Server, name: str) -> str:
    doc = yaml.safe_load(open(load_pipeline().path))
    doc["name"] = name
    doc["kafka"]["topic_prefix"] = f"seam.{name}"
    doc["source"]["port"] = server.port
    doc["tables"] = [
        {"name": f"{DB}.accounts", "key": ["id"]},
        {"name": f"{DB}.payments", "key": ["id"]},
        {"name": f"{DB}.audit_log", "key": "none"},
    ]
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _seam(path: str, *args: str) -> subprocess.CompletedProcess:
    return run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True, timeout=600
    )


def _positions(pipeline) -> dict:
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        rows = conn.execute(
            "SELECT tbl, file, pos, gtids, server, stopped FROM seam.positions WHERE db = %s", (DB,)
        ).fetchall()
    return {r[0]: r[1:] for r in rows}


def _assert_equal(pipeline) -> None:
    for table in TABLES:
        src, schema = source_rows(pipeline, DB, table)
        tgt = target_rows(pipeline, schema)
        assert src == tgt, f"{table}: {diff(src, tgt)}"


def _load_and_stream(path: str, primary: Server) -> None:
    demo.seed(load_pipeline(path), rows=3_000, admin_url=primary.admin_url, database=DB, log=lambda m: None)
    load = _seam(path, "load", "full", *[f"{DB}.{t}" for t in TABLES])
    assert load.returncode == 0, load.stderr + load.stdout
    demo.run_writer(primary.admin_url, rate=200, seconds=4, threads=1, seed=21, database=DB)
    stream_once(load_pipeline(path))
    _assert_equal(load_pipeline(path))


def test_stream_resumes_on_the_promoted_replica_by_gtid(servers, tmp_path):
    primary, replica = servers
    path = _pipeline_file(tmp_path, primary, "failover")
    _load_and_stream(path, primary)
    before = _positions(load_pipeline(path))
    assert all(p[3] == "server_id 11" and p[2] for p in before.values()), before

    # changes Seam never read, then the primary dies; its replica has them and is promoted
    unread = demo.run_writer(primary.admin_url, rate=200, seconds=4, threads=1, seed=22, database=DB)
    replica.caught_up_with(primary)
    primary.stop()
    replica.promote()
    after = demo.run_writer(replica.admin_url, rate=200, seconds=4, threads=1, seed=23, database=DB)
    assert unread["transactions"] > 50 and after["transactions"] > 50

    path = _pipeline_file(tmp_path, replica, "failover")
    pipeline = load_pipeline(path)
    early = _seam(path, "validate", f"{DB}.accounts")
    assert early.returncode != 0 and "was read on server_id 11, not on this source" in early.stderr, early.stderr
    first = stream_once(pipeline)
    stream_once(pipeline)  # what the sink applied after the first reader stopped
    _assert_equal(pipeline)
    moved = _positions(pipeline)
    assert all(p[3] == "server_id 12" and p[4] is None for p in moved.values()), moved
    # the replica's files are numbered apart: the primary's file/pos would have been meaningless here
    assert {p[0] for p in moved.values()}.isdisjoint({p[0] for p in before.values()}), (before, moved)
    assert first["changes"] > 0

    again = stream_once(pipeline)  # nothing doubled: a second pass from the stored positions changes nothing
    _assert_equal(pipeline)
    assert again["changes"] == 0
    validated = _seam(path, "validate", *[f"{DB}.{t}" for t in TABLES])  # at the moved positions
    assert validated.returncode == 0 and validated.stdout.count(": EQUAL:") == 3, validated.stdout + validated.stderr


def test_failover_that_lost_applied_transactions_stops_with_the_remedy(servers, tmp_path):
    primary, replica = servers
    path = _pipeline_file(tmp_path, primary, "failover_lost")
    replica.caught_up_with(primary)
    _load_and_stream(path, primary)
    replica.caught_up_with(primary)
    replica.run("STOP SLAVE")  # the replica falls behind; Seam applies what it never gets
    demo.run_writer(primary.admin_url, rate=200, seconds=2, threads=1, seed=24, database=DB)
    stream_once(load_pipeline(path))
    primary.stop()
    replica.promote()

    path = _pipeline_file(tmp_path, replica, "failover_lost")
    pipeline = load_pipeline(path)
    reader = ChangeReader(pipeline)
    try:
        reader.run(until_idle=True)  # each table whose position is lost stops; none is moved
    finally:
        reader.close()
    positions = _positions(pipeline)
    assert all(p[3] == "server_id 11" for p in positions.values()), positions  # nothing moved
    for table in ("accounts", "payments"):
        stopped = positions[table][4]
        assert stopped and "the source is server_id 12 now" in stopped, stopped
        assert f"`seam repair {DB}.{table} --full`" in stopped, stopped
    assert f"`seam load full {DB}.audit_log`" in positions["audit_log"][4]
    # the ways out, as printed: the target's rows the new primary never had are found and replaced
    for table in ("accounts", "payments"):
        repaired = _seam(path, "repair", f"{DB}.{table}", "--full", "--max-rows", "100000")
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    reload = _seam(path, "load", "full", f"{DB}.audit_log")
    assert reload.returncode == 0, reload.stdout + reload.stderr
    demo.run_writer(replica.admin_url, rate=200, seconds=2, threads=1, seed=25, database=DB)
    stream_once(pipeline)
    _assert_equal(pipeline)
