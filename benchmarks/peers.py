"""The tools users would pick instead of ``seam load full``, run on the same table of the same MariaDB into the
same PostgreSQL (the ``peers`` case of ``benchmarks/harness.py``): wall time of each whole command, and each
copy's row count checked against the source.

- pgloader (Debian's ``pgloader``, installed with apt-get when missing): a load file copying one table into
  schema ``peer_pgloader``. The file holds the credentials: it is written 0600 in a private directory and
  removed after the run. pgloader sets the target database's ``search_path`` as a side effect: reset after.
- sling (PyPI ``sling-linux-amd64``, which ships the binary, in a venv of its own under ``.bench-peers``):
  ``sling run ... --mode full-refresh`` into ``peer_sling.<table>``; the connections come from the environment.
- pg_chameleon: not run yet (it must run as an unprivileged user with a replica configuration of its own); the
  case says so.

A peer that cannot be installed is reported and skipped; the rest runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

PEERS_DIR = Path(__file__).resolve().parents[1] / ".bench-peers"
SLING_PACKAGE = "sling-linux-amd64==1.4.11"


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
