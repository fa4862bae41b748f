"""Benchmark: binlog CDC through the whole chain (binlog -> change reader -> Kafka -> Structured Streaming
sink -> PostgreSQL) vs the raw decode rate of python-mysql-replication on the same binlog, and
commit-to-visible latency under a steady write rate.

Run on the embedded stack (``make bench-stream``, or ``python benchmarks/stream_cdc.py``):

1. ``bench_stream.events`` (keyed, 20k rows) and ``bench_stream.ticks`` are created and fully loaded.
2. Backlog: with the change reader stopped (the Spark sink running and warm), ``--changes`` row changes
   are written in transactions of 10 rows. Raw: python-mysql-replication decodes exactly that binlog
   range (rows touched, nothing else) - the ceiling for any Python binlog reader. Chain: the reader
   starts and the time until the target has applied the last of those transactions is measured
   (sustained events/s = changes / that time).
3. Latency: the stream running, a writer commits ``--rate`` changes/s for ``--seconds`` (each transaction
   inserts one ``ticks`` row numbered in order, plus 9 updates of ``events``); a poller sees the highest
   applied tick in PostgreSQL every 20 ms; latency = first seen - commit returned. Prints p50/p95/p99.

Targets on this 2-core machine: sustained >= 60% of the raw decode rate, p99 < 3 s at 1,000 changes/s.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))

from common import bench_pipeline  # noqa: E402

from seam.config import load_pipeline  # noqa: E402
from seam.source.streaming import source_head  # noqa: E402
from seam.wire.records import Position  # noqa: E402
from seam_dev.stack import EmbeddedStack  # noqa: E402

DB = "bench_stream"
DDL = [
    f"DROP DATABASE IF EXISTS `{DB}`",
    f"CREATE DATABASE `{DB}`",
    f"""CREATE TABLE `{DB}`.`events` (`id` BIGINT NOT NULL PRIMARY KEY, `account` BIGINT NOT NULL,
           `amount` DECIMAL(20,6) NOT NULL, `note` VARCHAR(64) NOT NULL, `updated_at` DATETIME(6) NOT NULL)""",
    f"""CREATE TABLE `{DB}`.`ticks` (`seq` BIGINT NOT NULL PRIMARY KEY, `at` DATETIME(6) NOT NULL)""",
]
ROWS = 20_000


def seam(path: str, *args: str, check: bool = True) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True
    )
    if check and result.returncode:
        sys.exit(f"seam {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def source(pipeline, autocommit=False):
    """An admin connection (the pipeline's user only reads)."""
    from seam_dev import demo

    return demo.connect(os.environ["SEAM_MYSQL_URL"], autocommit=autocommit)


def write_changes(pipeline, changes: int, first_tick: int) -> int:
    """``changes`` row changes in transactions of 10 (1 tick insert + 9 updates); returns the next tick."""
    conn = source(pipeline)
    rng = random.Random(first_tick)
    tick = first_tick
    with conn.cursor() as cur:
        for _ in range(changes // 10):
            cur.execute(f"INSERT INTO `{DB}`.ticks VALUES (%s, NOW(6))", (tick,))
            cur.executemany(
                f"UPDATE `{DB}`.events SET amount = amount + 1, note = %s, updated_at = NOW(6) WHERE id = %s",
                [(f"n{tick}", rng.randrange(ROWS)) for _ in range(9)],
            )
            conn.commit()
            tick += 1
    conn.close()
    return tick


def raw_decode(pipeline, start: Position, end: Position) -> tuple[int, float]:
    """python-mysql-replication alone: decode every row event of the range, touching each row's values."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    src = pipeline.source
    stream = BinLogStreamReader(
        connection_settings={"host": src.host, "port": src.port, "user": src.user, "passwd": src.password.reveal()},
        server_id=src.server_id + 900,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=[DB],
    )
    rows, began = 0, time.perf_counter()
    for event in stream:
        rows += len(event.rows)
        if not Position.through(stream.log_file, stream.log_pos) < end:
            break
    seconds = time.perf_counter() - began
    stream.close()
    return rows, seconds


def applied(pipeline, table: str) -> Position | None:
    import psycopg

    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        row = conn.execute(
            "SELECT file, pos, row_index FROM seam.positions WHERE db = %s AND tbl = %s", (DB, table)
        ).fetchone()
    return Position(*row) if row else None


def wait_applied(pipeline, end: Position, timeout: float = 900) -> float:
    began = time.perf_counter()
    while time.perf_counter() - began < timeout:
        if all((p := applied(pipeline, t)) is not None and not end.after(p) for t in ("events", "ticks")):
            return time.perf_counter() - began
        time.sleep(0.1)
    sys.exit(f"the stream did not apply up to {end} within {timeout:.0f}s")


def latency(pipeline, rate: float, seconds: float, first_tick: int) -> list[float]:
    import psycopg

    committed: dict[int, float] = {}
    seen: dict[int, float] = {}
    done = threading.Event()

    def write():
        conn = source(pipeline)
        rng = random.Random(1)
        tick, interval = first_tick, 10 / rate
        next_at = time.perf_counter()
        with conn.cursor() as cur:
            while time.perf_counter() - began < seconds:
                cur.execute(f"INSERT INTO `{DB}`.ticks VALUES (%s, NOW(6))", (tick,))
                cur.executemany(
                    f"UPDATE `{DB}`.events SET amount = amount + 1, updated_at = NOW(6) WHERE id = %s",
                    [(rng.randrange(ROWS),) for _ in range(9)],
                )
                conn.commit()
                committed[tick] = time.perf_counter()
                tick += 1
                next_at += interval
                time.sleep(max(0.0, next_at - time.perf_counter()))
        conn.close()
        done.set()

    def poll():
        with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
            last = first_tick - 1
            while True:
                top = conn.execute(f'SELECT max(seq) FROM "{DB}"."ticks"').fetchone()[0] or 0
                now = time.perf_counter()
                for t in range(last + 1, top + 1):
                    seen[t] = now
                last = max(last, top)
                if done.is_set() and last >= max(committed, default=first_tick - 1):
                    return
                time.sleep(0.02)

    began = time.perf_counter()
    threads = [threading.Thread(target=write), threading.Thread(target=poll)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 300)
    return sorted(seen[t] - committed[t] for t in committed if t in seen)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=100_000, help="row changes in the backlog run")
    parser.add_argument("--rate", type=float, default=1000, help="changes/s in the latency run")
    parser.add_argument("--seconds", type=float, default=30, help="length of the latency run")
    args = parser.parse_args()
    path = bench_pipeline(
        [{"name": f"{DB}.events", "key": ["id"]}, {"name": f"{DB}.ticks", "key": ["seq"]}], topic_prefix="seam.bench"
    )
    stack = EmbeddedStack()
    pipeline = load_pipeline(path)

    conn = source(pipeline, autocommit=True)
    with conn.cursor() as cur:
        for stmt in DDL:
            cur.execute(stmt)
        cur.executemany(
            f"INSERT INTO `{DB}`.`events` VALUES (%s, %s, %s, %s, NOW(6))",
            [(i, i % 997, f"{i}.5", f"row {i}") for i in range(ROWS)],
        )
    seam(path, "stream", "stop", check=False)
    seam(path, "load", "full", f"{DB}.events", f"{DB}.ticks")
    seam(path, "stream", "start")
    wait_applied(pipeline, source_head(conn), timeout=300)  # the Spark sink is up and current
    stack.stop("stream-reader")

    start = source_head(conn)
    began = time.perf_counter()
    tick = write_changes(pipeline, args.changes, 1)
    end = source_head(conn)
    print(
        f"backlog: {args.changes:,} changes written in {time.perf_counter() - began:.1f}s (binlog {start} -> {end})",
        flush=True,
    )
    raw_rows, raw_s = raw_decode(pipeline, start, end)
    raw_rate = raw_rows / raw_s
    print(
        f"raw python-mysql-replication decode: {raw_rows:,} rows in {raw_s:.1f}s = {raw_rate:,.0f} rows/s", flush=True
    )
    seam(path, "stream", "start")
    chain_s = wait_applied(pipeline, end)
    chain_rate = args.changes / chain_s
    print(
        f"whole chain: {args.changes:,} changes applied in {chain_s:.1f}s = {chain_rate:,.0f} changes/s "
        f"(reader start included)",
        flush=True,
    )

    lat = latency(pipeline, args.rate, args.seconds, tick)
    seam(path, "stream", "stop", check=False)
    conn.close()
    os.unlink(path)

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))]

    print(
        f"\nRESULT binlog CDC, {os.cpu_count()} cores:\n"
        f"  raw python-mysql-replication decode        {raw_rate:>10,.0f} rows/s\n"
        f"  seam stream, binlog -> PostgreSQL           {chain_rate:>10,.0f} changes/s  "
        f"({chain_rate / raw_rate:.0%} of raw decode; target >= 60%)\n"
        f"  commit-to-visible at {args.rate:,.0f} changes/s ({len(lat)} transactions): p50 {statistics.median(lat):.2f}s"
        f"  p95 {pct(0.95):.2f}s  p99 {pct(0.99):.2f}s  max {lat[-1]:.2f}s  (target p99 < 3 s)",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
