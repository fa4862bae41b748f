"""The tools users would pick instead of ``seam load full``, run on the same table of the same MariaDB into the
same PostgreSQL (the ``peers`` case of ``benchmarks/harness.py``): wall time of each whole command, and each
copy's row count checked against the source.

- pgloader (Debian's ``pgloader``, installed with apt-get when missing): a load file copying one table into
  schema ``peer_pgloader``. The file holds the credentials: it is written 0600 in a private directory and
  removed after the run. pgloader sets the target database's ``search_path`` as a side effect: reset after.
- sling (PyPI ``sling-linux-amd64``, which ships the binary, in a venv of its own under ``.bench-peers``):
  ``sling run ... --mode full-refresh`` into ``peer_sling.<table>``; the connections come from the environment.
- pg_chameleon (PyPI ``pg_chameleon``, in a venv of its own: ``chameleon_venv``): ``chameleon init_replica``
  of one source table into schema ``peer_chameleon``, timed (its ``create_replica_schema`` and ``add_source``
  before it are not). It refuses to run as root, so as root it runs as ``nobody``, with a home of its own
  (0700) holding its configuration (0600: it carries the credentials), removed after the run; it logs to
  stdout, as it dies silently as a daemon otherwise.

A peer that cannot be installed is reported and skipped; the rest runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

PEERS_DIR = Path(__file__).resolve().parents[1] / ".bench-peers"
SLING_PACKAGE = "sling-linux-amd64==1.4.11"
CHAMELEON_PACKAGE = "pg_chameleon==2.0.21"
CHAMELEON_USER = "nobody"  # pg_chameleon refuses to run as root
CHAMELEON_ROOT_VENV = Path("/opt/seam-bench-peers/pg_chameleon")


def pgloader_binary() -> str | None:
    if shutil.which("pgloader") is None and os.geteuid() == 0 and shutil.which("apt-get"):
        try:
            subprocess.run(["apt-get", "install", "-y", "-q", "pgloader"], capture_output=True, timeout=300)
        except subprocess.TimeoutExpired:
            return None
    return shutil.which("pgloader")


def sling_binary() -> str | None:
    venv = PEERS_DIR / "sling"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    found = sorted(venv.glob("lib/python*/site-packages/sling_linux_amd64/bin/sling*"))
    if not found:
        try:
            done = subprocess.run(
                [str(venv / "bin" / "pip"), "install", "-q", SLING_PACKAGE], capture_output=True, text=True, timeout=300
            )
        except subprocess.TimeoutExpired:
            return None
        if done.returncode != 0:
            print(f"sling: cannot install {SLING_PACKAGE}: {done.stderr[-300:]}", flush=True)
            return None
        found = sorted(venv.glob("lib/python*/site-packages/sling_linux_amd64/bin/sling*"))
    return str(found[0]) if found else None


def chameleon_venv() -> Path:
    """pg_chameleon's venv: as root under /opt, because it runs as ``nobody``, who cannot reach a checkout in a
    private directory (a clone in ``mktemp -d``, or under /root); else under ``.bench-peers``."""
    return CHAMELEON_ROOT_VENV if os.geteuid() == 0 else PEERS_DIR / "pg_chameleon"


def chameleon_binary() -> str | None:
    venv = chameleon_venv()
    binary = venv / "bin" / "chameleon"
    if not binary.exists():
        # on the system Python: the one Seam runs on may live where the unprivileged user cannot reach it
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        venv.parent.mkdir(parents=True, exist_ok=True)
        made = subprocess.run([python, "-m", "venv", "--clear", str(venv)], capture_output=True, text=True)
        done = (
            made
            if made.returncode
            else subprocess.run(
                [str(venv / "bin" / "pip"), "install", "-q", CHAMELEON_PACKAGE], capture_output=True, text=True
            )
        )
        if done.returncode != 0:
            print(f"pg_chameleon: cannot install {CHAMELEON_PACKAGE}: {done.stderr[-300:]}", flush=True)
            return None
        subprocess.run(["chmod", "-R", "a+rX", str(venv.parent)], check=True)  # whatever the umask was
    return str(binary) if binary.exists() else None


def _mysql_url(pipeline, db: str) -> str:
    s = pipeline.source
    return f"mysql://{s.user}:{urllib.parse.quote(s.password.reveal(), safe='')}@{s.host}:{s.port}/{db}"


def _pg_url(pipeline) -> str:
    t = pipeline.target.conninfo()
    password = urllib.parse.quote(t["password"], safe="")
    return f"postgresql://{t['user']}:{password}@{t['host']}:{t['port']}/{t['dbname']}"


def target_count(pipeline, schema: str, table: str) -> int | None:
    import psycopg

    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        if conn.execute("SELECT to_regclass(%s)", (f'"{schema}"."{table}"',)).fetchone()[0] is None:
            return None
        return conn.execute(f'SELECT count(*) FROM "{schema}"."{table}"').fetchone()[0]


def drop_schema(pipeline, schema: str) -> None:
    import psycopg

    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def pgloader_load(pipeline, db: str, table: str, rows: int) -> float:
    """Seconds of ``pgloader`` copying ``db.table`` into ``peer_pgloader.table``; checked by count."""
    binary = pgloader_binary()
    if binary is None:
        raise PeerMissing("pgloader is not installed (apt-get install pgloader)")
    drop_schema(pipeline, "peer_pgloader")
    private = Path(tempfile.mkdtemp(prefix="seam-peer-"))
    load_file = private / "lineitem.load"
    fd = os.open(load_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(
            f"LOAD DATABASE FROM {_mysql_url(pipeline, db)} INTO {_pg_url(pipeline)}\n"
            "  WITH include drop, create tables, create indexes, reset sequences, workers = 4, concurrency = 1\n"
            f"  INCLUDING ONLY TABLE NAMES MATCHING '{table}'\n"
            f"  ALTER SCHEMA '{db}' RENAME TO 'peer_pgloader';\n"
        )
    try:
        began = time.perf_counter()
        done = subprocess.run([binary, "--no-ssl-cert-verification", str(load_file)], capture_output=True, text=True)
        seconds = time.perf_counter() - began
    finally:
        shutil.rmtree(private, ignore_errors=True)
        _reset_search_path(pipeline)
    if done.returncode != 0:
        raise PeerFailed(f"pgloader failed: {(done.stdout + done.stderr)[-500:]}")
    _check(pipeline, "peer_pgloader", table, rows, "pgloader")
    return seconds


def sling_load(pipeline, db: str, table: str, rows: int) -> float:
    """Seconds of ``sling run`` copying ``db.table`` into ``peer_sling.table`` (full refresh); checked by count."""
    binary = sling_binary()
    if binary is None:
        raise PeerMissing(f"sling is not installed ({SLING_PACKAGE} into {PEERS_DIR / 'sling'})")
    drop_schema(pipeline, "peer_sling")
    env = {
        **os.environ,
        "SEAM_PEER_SOURCE": _mysql_url(pipeline, db),
        "SEAM_PEER_TARGET": _pg_url(pipeline) + "?sslmode=disable",
        "SLING_HOME_DIR": str(PEERS_DIR / "sling-home"),
        "SLING_DISABLE_TELEMETRY": "true",
    }
    command = [binary, "run", "--src-conn", "SEAM_PEER_SOURCE", "--src-stream", f"{db}.{table}"]
    command += ["--tgt-conn", "SEAM_PEER_TARGET", "--tgt-object", f"peer_sling.{table}", "--mode", "full-refresh"]
    began = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise PeerFailed(f"sling failed: {(done.stdout + done.stderr)[-500:]}")
    _check(pipeline, "peer_sling", table, rows, "sling")
    return seconds


class Chameleon:
    """pg_chameleon with a replica configuration of its own, copying ``db``'s ``tables`` into ``peer_chameleon``
    (``with``: its home, which holds the configuration and the credentials, is removed after)."""

    def __init__(self, pipeline, db: str, tables: list[str]):
        binary = chameleon_binary()
        if binary is None:
            raise PeerMissing(f"pg_chameleon is not installed ({CHAMELEON_PACKAGE} into {chameleon_venv()})")
        self.binary, self.pipeline, self.db, self.tables = binary, pipeline, db, tables

    def __enter__(self) -> Chameleon:
        for schema in ("peer_chameleon", "sch_chameleon"):
            drop_schema(self.pipeline, schema)
        # in /tmp as root: a TMPDIR may be private, and the home is handed to the unprivileged user
        self.home = home = Path(tempfile.mkdtemp(prefix="seam-chameleon-", dir="/tmp" if os.geteuid() == 0 else None))
        for folder in (".pg_chameleon/configuration", "pid", "logs"):
            (home / folder).mkdir(parents=True)
        config = home / ".pg_chameleon" / "configuration" / "bench.yml"
        config.write_text(_chameleon_config(self.pipeline, self.db, self.tables, home))
        config.chmod(0o600)
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", CHAMELEON_USER, str(home)], check=True)
            self.as_user = ["runuser", "-u", CHAMELEON_USER, "--"]
        for command in (("create_replica_schema",), ("add_source", "--source", "mysql")):
            done = self.run(*command)
            if done.returncode != 0:
                raise PeerFailed(f"pg_chameleon {command[0]} failed: {(done.stdout + done.stderr)[-500:]}")
        return self

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.home, ignore_errors=True)
        drop_schema(self.pipeline, "sch_chameleon")

    def _command(self, *command: str) -> list[str]:
        return [*self.as_user, "env", f"HOME={self.home}", self.binary, *command, "--config", "bench"]

    def run(self, *command: str) -> subprocess.CompletedProcess:
        return subprocess.run(self._command(*command), capture_output=True, text=True, cwd=self.home)

    def start(self, *command: str) -> subprocess.Popen:
        """A long-running command (``start_replica``), its output in a file of the home."""
        with open(self.home / "logs" / "run.log", "w") as log:  # the child keeps its own copy of the file
            return subprocess.Popen(
                self._command(*command), stdout=log, stderr=subprocess.STDOUT, cwd=self.home, start_new_session=True
            )

    def stop(self, process: subprocess.Popen) -> None:
        """SIGINT to the command's process group, then SIGKILL: its replica daemons do not always stop."""
        for sig, wait in ((signal.SIGINT, 10), (signal.SIGKILL, 30)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def output(self) -> str:
        return (self.home / "logs" / "run.log").read_text(errors="replace")


def chameleon_load(pipeline, db: str, table: str, rows: int) -> float:
    """Seconds of ``chameleon init_replica`` copying ``db.table`` into ``peer_chameleon.table``; checked by count."""
    with Chameleon(pipeline, db, [table]) as chameleon:
        began = time.perf_counter()
        done = chameleon.run("init_replica", "--source", "mysql")
        seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise PeerFailed(f"pg_chameleon init_replica failed: {(done.stdout + done.stderr)[-500:]}")
    _check(pipeline, "peer_chameleon", table, rows, "pg_chameleon")
    return seconds


def _chameleon_config(pipeline, db: str, tables: list[str], home: Path) -> str:
    """pg_chameleon's replica configuration (its own YAML format; values JSON-quoted, which YAML reads)."""
    import json

    s, t = pipeline.source, pipeline.target.conninfo()
    q = json.dumps
    return f"""---
pid_dir: {q(str(home / "pid"))}
log_dir: {q(str(home / "logs"))}
log_dest: stdout
log_level: info
log_days_keep: 1
rollbar_key: ''
rollbar_env: ''
type_override: {{}}
pg_conn:
  host: {q(t["host"])}
  port: {q(str(t["port"]))}
  user: {q(t["user"])}
  password: {q(t["password"])}
  database: {q(t["dbname"])}
  charset: "utf8"
sources:
  mysql:
    db_conn:
      host: {q(s.host)}
      port: {q(str(s.port))}
      user: {q(s.user)}
      password: {q(s.password.reveal())}
      charset: "utf8"
      connect_timeout: 10
    schema_mappings:
      {q(db)}: "peer_chameleon"
    limit_tables: {q([f"{db}.{table}" for table in tables])}
    skip_tables: []
    grant_select_to: []
    lock_timeout: "120s"
    my_server_id: 7101
    replica_batch_size: 10000
    replay_max_rows: 10000
    batch_retention: '1 day'
    copy_max_memory: "300M"
    copy_mode: 'file'
    out_dir: {q(str(home))}
    sleep_loop: 1
    on_error_replay: exit
    on_error_read: exit
    auto_maintenance: "disabled"
    gtid_enable: false
    type: mysql
    skip_events:
      insert: []
      delete: []
      update: []
    keep_existing_schema: No
    net_read_timeout: 600
"""


def _check(pipeline, schema: str, table: str, rows: int, peer: str) -> None:
    found = target_count(pipeline, schema, table)
    if found != rows:
        raise PeerFailed(f"{peer} copied {found} rows of {rows:,}")


def _reset_search_path(pipeline) -> None:
    import psycopg

    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{pipeline.target.database}" RESET search_path')


class PeerMissing(RuntimeError):
    """The peer cannot be installed here: the case says so and goes on."""


class PeerFailed(RuntimeError):
    """The peer ran and failed, or copied a different number of rows."""
