"""Throwaway MariaDB servers of a test's own, for what the test stack's one server cannot be: a primary and
its replica (``tests/stack/test_failover.py``), a server started with another setting."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pymysql


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MariaDB:
    """A throwaway MariaDB with ROW binlog and strict GTIDs, root and Seam's user as on the test stack
    (``add_users``); ``options``: more of the server's command line (``--lower-case-table-names=1``)."""

    def __init__(self, base: Path, server_id: int, *options: str):
        self.base, self.server_id, self.port = base, server_id, _free_port()
        self.password = os.environ["SEAM_MYSQL_PASSWORD"]
        data = base / "data"
        (base / "binlog").mkdir(parents=True)
        (base / "tmp").mkdir()  # its own: starting with /tmp, it would delete the stack server's temporary tables
        install = subprocess.run(
            [
                shutil.which("mariadb-install-db"),
                "--no-defaults",
                f"--datadir={data}",
                f"--user={pwd.getpwuid(os.geteuid()).pw_name}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                # the bootstrap server's own too: two bootstraps sharing /tmp delete each other's #sql files
                f"--tmpdir={base / 'tmp'}",
            ],
            capture_output=True,
            text=True,
        )
        if install.returncode:
            raise RuntimeError(f"mariadb-install-db in {base} failed: {(install.stdout + install.stderr)[-2000:]}")
        cmd = [
            shutil.which("mariadbd"),
            "--no-defaults",
            f"--datadir={data}",
            f"--port={self.port}",
            f"--socket={base / 'sock'}",
            "--bind-address=127.0.0.1",
            f"--log-error={base / 'err.log'}",
            f"--tmpdir={base / 'tmp'}",
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
            *options,
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

    def replicate_from(self, primary: MariaDB) -> None:
        self.run(
            "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s, MASTER_USER = 'root', "
            "MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos",
            "START SLAVE",
            args=(primary.port, primary.password),
        )

    def caught_up_with(self, primary: MariaDB, timeout: float = 120) -> None:
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
