"""The many-tables case of ``benchmarks/harness.py`` (issue 34): a schema of ``tables`` tables of 1,000 to
100,000 rows each (log-uniform, seeded), all full-loaded by one ``seam load full`` (wall time of the command),
against the same number of rows in one table (the baseline, one command too); then the stream started over
all of them and a writer touching every table in turn (10-row transactions at a steady rate): each
transaction's commit to its table's applied position in the target (p50/p95/p99), and the wall time of
``seam stream status``. Every table is compared with its source (rows and sum) after the load and after the
stream.
"""

from __future__ import annotations

import math
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))

from common import bench_pipeline, side_by_side  # noqa: E402
from stream_cdc import seam, source  # noqa: E402

from seam.config import load_pipeline  # noqa: E402
from seam.core.position import Position  # noqa: E402
from seam.source.snapshot import source_head  # noqa: E402

DB = "bench_many"
ONE = "one"  # the baseline: all the rows in one table


def sizes(tables: int, low: int, high: int) -> list[int]:
    """Each table's rows, log-uniform between ``low`` and ``high`` (the same for a given count)."""
    rng = random.Random(34)
    return [int(math.exp(rng.uniform(math.log(low), math.log(high)))) for _ in range(tables)]


def names(tables: int) -> list[str]:
    return [f"t{i:03d}" for i in range(1, tables + 1)]


def create(conn, rows: list[int], say) -> None:
    """The tables and the baseline's one table with their sum of rows, written by MariaDB's sequence engine."""
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
        cur.execute(f"CREATE DATABASE `{DB}`")
        cur.execute(f"USE `{DB}`")  # MariaDB's sequence tables (seq_1_to_N) are in every database
        say(f"many tables: {len(rows)} tables, {sum(rows):,} rows, and one table of as many rows")
        for name, n in [*zip(names(len(rows)), rows), (ONE, sum(rows))]:
            cur.execute(
                f"CREATE TABLE `{DB}`.`{name}` (id BIGINT PRIMARY KEY, account INT NOT NULL, "
                "amount DECIMAL(14,2) NOT NULL, note VARCHAR(40) NOT NULL, updated_at DATETIME(6) NOT NULL)"
            )
            for first in range(1, n + 1, 1_000_000):
                last = min(n, first + 999_999)
                cur.execute(
                    f"INSERT INTO `{DB}`.`{name}` SELECT seq, seq % 997, seq / 100, CONCAT('note ', seq), "
                    f"'2026-01-01' + INTERVAL seq SECOND FROM seq_{first}_to_{last}"
                )


def equal(pipeline, conn, tables: list[str]) -> None:
    """Rows and sum of amount of every table, source against target (one query each side)."""
    import psycopg

    def union(quote: str) -> str:
        return " UNION ALL ".join(
            f"SELECT '{t}', count(*), coalesce(sum(amount), 0) FROM {quote}{DB}{quote}.{quote}{t}{quote}"
            for t in tables
        )

    with conn.cursor() as cur:
        cur.execute(union("`"))
        want = {t: (int(n), str(s)) for t, n, s in cur.fetchall()}
    with psycopg.connect(**pipeline.target.conninfo()) as pg:
        got = {t: (int(n), str(s)) for t, n, s in pg.execute(union('"')).fetchall()}
    wrong = sorted(t for t in tables if got.get(t) != want[t])
    if wrong:
        sys.exit(
            f"many tables: {len(wrong)} tables differ from the source, e.g. {wrong[0]}: {got.get(wrong[0])} "
            f"against {want[wrong[0]]}"
        )


def timed(path: str, *args: str) -> float:
    began = time.perf_counter()
    seam(path, *args)
    return time.perf_counter() - began


def applied(pg, tables: list[str]) -> dict[str, Position]:
    rows = pg.execute("SELECT tbl, file, pos, row_index FROM seam.positions WHERE db = %s", (DB,)).fetchall()
    wanted = set(tables)
    return {t: Position(f, p, r) for t, f, p, r in rows if t in wanted}


def latency(pipeline, conn, tables: list[str], rate: float, seconds: float) -> list[float]:
    """10-row transactions at ``rate`` changes/s, each on the next table in turn; per transaction, seconds from
    its commit until its table's applied position is at or past it."""
    import psycopg

    pending: list[tuple[str, Position, float]] = []
    lock, done = threading.Lock(), threading.Event()
    out: list[float] = []

    def write() -> None:
        interval, next_at, i = 10 / rate, time.perf_counter(), 0
        with conn.cursor() as cur:
            while time.perf_counter() - began < seconds:
                table = tables[i % len(tables)]
                cur.execute("BEGIN")
                cur.execute(f"UPDATE `{DB}`.`{table}` SET amount = amount + 1, updated_at = NOW(6) WHERE id <= 10")
                cur.execute("COMMIT")
                at = time.perf_counter()
                head = source_head(conn)  # the one writer: the binlog's end is this transaction's commit
                with lock:
                    pending.append((table, head, at))
                i += 1
                next_at += interval
                time.sleep(max(0.0, next_at - time.perf_counter()))
        done.set()

    def poll() -> None:
        with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as pg:
            deadline = None
            while True:
                positions, now = applied(pg, tables), time.perf_counter()
                with lock:
                    still = []
                    for table, head, at in pending:
                        p = positions.get(table)
                        if p is not None and not head.after(p):
                            out.append(now - at)
                        else:
                            still.append((table, head, at))
                    pending[:] = still
                if done.is_set():
                    deadline = deadline or now + 300
                    if not still or now > deadline:
                        return
                time.sleep(0.02)

    began = time.perf_counter()
    side_by_side(write, poll)
    if pending:
        sys.exit(f"many tables: {len(pending)} transactions were not applied within 300 s of the last commit")
    return sorted(out)


class ManyTables:
    """The case's stack (``with``): the tables created; then its phases, each measured by the caller."""

    def __init__(self, tables: int, low: int, high: int, say):
        self.rows, self.names, self.say = sizes(tables, low, high), names(tables), say

    def __enter__(self) -> ManyTables:
        self.path = bench_pipeline([{"name": f"{DB}.{t}", "key": ["id"]} for t in self.names], topic_prefix="seam.many")
        self.one = bench_pipeline([{"name": f"{DB}.{ONE}", "key": ["id"]}], topic_prefix="seam.many")
        self.pipeline = load_pipeline(self.path)
        self.conn = source(self.pipeline, autocommit=True)
        seam(self.path, "stream", "stop", check=False)
        create(self.conn, self.rows, self.say)
        return self

    def __exit__(self, *exc) -> None:
        seam(self.path, "stream", "stop", check=False)
        self.conn.close()
        Path(self.path).unlink(missing_ok=True)
        Path(self.one).unlink(missing_ok=True)

    def load_one(self) -> float:
        return timed(self.one, "load", "full", f"{DB}.{ONE}")

    def load_many(self) -> float:
        seconds = timed(self.path, "load", "full", *[f"{DB}.{t}" for t in self.names])
        equal(self.pipeline, self.conn, self.names)
        return seconds

    def stream(self, rate: float, seconds: float) -> tuple[list[float], float]:
        """The stream started (and caught up) over every table; the writer's latencies; then the seconds of
        one ``seam stream status``; every table compared once the stream has caught up."""
        seam(self.path, "stream", "start")
        latency(self.pipeline, self.conn, self.names[:1], 10, 0.1)  # one transaction applied: the sink is up
        lat = latency(self.pipeline, self.conn, self.names, rate, seconds)
        began = time.perf_counter()
        status = subprocess.run(
            [sys.executable, "-m", "seam.cli", "--pipeline", self.path, "stream", "status"],
            capture_output=True,
            text=True,
        )
        status_s = time.perf_counter() - began
        if status.returncode not in (0, 3):
            sys.exit(f"many tables: seam stream status failed: {status.stderr.strip()[-500:]}")
        seam(self.path, "stream", "wait", "--timeout", "300")
        equal(self.pipeline, self.conn, self.names)
        return lat, status_s
