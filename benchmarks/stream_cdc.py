"""The stream case of ``benchmarks/harness.py``: binlog CDC through the whole chain (binlog -> change reader ->
Kafka -> sink -> PostgreSQL; ``stream.sink`` as given: direct by default, or spark), next to the decoders'
rates on the same binlog, and commit-to-visible latency under steady write rates.

1. ``bench_stream.events`` (keyed, 20k rows) and ``bench_stream.ticks`` are created and fully loaded.
2. Backlog: with the change reader stopped (the sink running and warm), row changes are written in
   transactions of 10 rows. python-mysql-replication, and ``mariadb-binlog --verbose`` (MariaDB's C decoder),
   decode exactly that binlog range. Chain: the reader starts; the time until the target has applied the
   last of those transactions is measured.
3. Latency: the stream running, a writer commits a rate of changes/s (each transaction inserts one ``ticks``
   row numbered in order, plus 9 updates of ``events``); a poller sees the highest applied tick in
   PostgreSQL every 20 ms; latency = first seen - commit returned.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))

from common import bench_pipeline, side_by_side  # noqa: E402

from seam.cli.stream_start import stream_processes  # noqa: E402
from seam.config import load_pipeline  # noqa: E402
from seam.source.snapshot import source_head  # noqa: E402
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


def wait_applied(pipeline, end: Position, timeout: float = 900) -> float:
    """Seconds until the target has applied both tables up to ``end``: looked at every 20 ms on one session (a
    look every 0.1 s, each on a session of its own, added 0.05 s to a run of about 3 s on average)."""
    import psycopg

    began = time.perf_counter()
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        while time.perf_counter() - began < timeout:
            rows = conn.execute(
                "SELECT file, pos, row_index FROM seam.positions WHERE db = %s AND tbl IN ('events', 'ticks')", (DB,)
            ).fetchall()
            if len(rows) == 2 and not any(end.after(Position(*row)) for row in rows):
                return time.perf_counter() - began
            time.sleep(0.02)
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
    side_by_side(write, poll, timeout=seconds + 300)
    return sorted(seen[t] - committed[t] for t in committed if t in seen)


class BenchStream:
    """The stream case's stack: tables created and loaded, the stream running (``with``); then backlogs and
    steady write rates, each measured against the same binlog's decoders."""

    def __init__(self, sink: str | None = None, fresh: bool = True):
        self.sink = sink  # stream.sink (the pipeline's default, direct, unless given)
        self.fresh = fresh  # False: the tables as an earlier BenchStream left them, loaded; its stream resumed

    def __enter__(self) -> BenchStream:
        self.path = bench_pipeline(
            [{"name": f"{DB}.events", "key": ["id"]}, {"name": f"{DB}.ticks", "key": ["seq"]}],
            topic_prefix="seam.bench",
            stream={"sink": self.sink} if self.sink else {},
        )
        self.pipeline = load_pipeline(self.path)
        self.conn = source(self.pipeline, autocommit=True)
        seam(self.path, "stream", "stop", check=False)
        if self.fresh:
            with self.conn.cursor() as cur:
                for stmt in DDL:
                    cur.execute(stmt)
                cur.executemany(
                    f"INSERT INTO `{DB}`.`events` VALUES (%s, %s, %s, %s, NOW(6))",
                    [(i, i % 997, f"{i}.5", f"row {i}") for i in range(ROWS)],
                )
            seam(self.path, "load", "full", f"{DB}.events", f"{DB}.ticks")
        seam(self.path, "stream", "start")
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT COALESCE(MAX(seq), 0) + 1 FROM `{DB}`.ticks")
            tick = int(cur.fetchone()[0])
        self.tick = write_changes(self.pipeline, 10, tick)  # a transaction to apply: the sink is up and warm
        wait_applied(self.pipeline, source_head(self.conn), timeout=300)
        return self

    def __exit__(self, *exc) -> None:
        seam(self.path, "stream", "stop", check=False)
        self.conn.close()
        os.unlink(self.path)

    def backlog(self, changes: int) -> tuple[Position, Position]:
        """``changes`` written with the change reader stopped (the sink running and warm)."""
        EmbeddedStack().stop(stream_processes(self.pipeline)["reader"])
        start = source_head(self.conn)
        self.tick = write_changes(self.pipeline, changes, self.tick)
        return start, source_head(self.conn)

    def raw_decode(self, start: Position, end: Position) -> tuple[int, float]:
        return raw_decode(self.pipeline, start, end)

    def mariadb_binlog(self, start: Position, end: Position) -> tuple[int, float]:
        return mariadb_binlog_decode(self.pipeline, start, end)

    def apply_backlog(self, end: Position) -> float:
        """Seconds from starting the reader until the target has applied everything up to ``end``."""
        began = time.perf_counter()
        seam(self.path, "stream", "start")
        wait_applied(self.pipeline, end)
        return time.perf_counter() - began

    def steady(self, rate: float, seconds: float):
        """``rate`` changes/s for ``seconds``; a Run whose note holds each transaction's commit-to-visible."""
        from harness import Run

        seam(self.path, "stream", "start")
        lat = latency(self.pipeline, rate, seconds, self.tick)
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT COALESCE(MAX(seq), 0) + 1 FROM `{DB}`.ticks")
            self.tick = int(cur.fetchone()[0])
        return Run(len(lat) * 10, seconds + (max(lat) if lat else 0.0), note=json.dumps({"latencies": lat}))


def chameleon_catch_up(bench: BenchStream, chameleon, changes: int, timeout: float = 900) -> float:
    """pg_chameleon's replica of the same tables (``peers.Chameleon``, its ``init_replica`` done): a backlog of
    ``changes`` written with both pg_chameleon and Seam's change reader stopped, then seconds from
    ``start_replica`` until its copy holds exactly the source's rows. Seam's stream is left behind by the backlog."""
    import psycopg

    EmbeddedStack().stop(stream_processes(bench.pipeline)["reader"])
    bench.tick = write_changes(bench.pipeline, changes, bench.tick)
    expected = _rows(bench.conn.cursor, "`bench_stream`")
    began = time.perf_counter()
    process = chameleon.start("start_replica", "--source", "mysql")
    try:
        with psycopg.connect(**bench.pipeline.target.conninfo(), autocommit=True) as pg:
            last = (expected[1][1],)
            while pg.execute('SELECT max(seq) FROM "peer_chameleon".ticks').fetchone() != last or (
                _rows(pg.cursor, '"peer_chameleon"') != expected  # read in full only once the last tick is there
            ):
                if process.poll() is not None or time.perf_counter() - began > timeout:
                    raise RuntimeError(f"pg_chameleon did not catch up: {chameleon.output()[-800:]}")
                time.sleep(0.05)
        seconds = time.perf_counter() - began
    finally:
        chameleon.stop(process)
    return seconds


def _rows(cursor, schema: str) -> tuple:
    """The stream tables' rows that the backlog changes, as both sides read them (the timestamps left out)."""
    with cursor() as cur:
        cur.execute(f"SELECT id, amount, note FROM {schema}.events ORDER BY id")
        events = [(int(i), Decimal(a), n) for i, a, n in cur.fetchall()]
        cur.execute(f"SELECT count(*), max(seq) FROM {schema}.ticks")
        return events, tuple(cur.fetchone())


def mariadb_binlog_decode(pipeline, start: Position, end: Position) -> tuple[int, float]:
    """``mariadb-binlog --verbose`` of the same range, from the server (MariaDB's C decoder, text included).
    The password goes in an option file only this user can read: never on a command line."""
    src = pipeline.source
    with tempfile.NamedTemporaryFile("w", suffix=".cnf") as cnf:
        os.chmod(cnf.name, 0o600)
        cnf.write(f"[client]\npassword={src.password.reveal()}\n")
        cnf.flush()
        command = [
            "mariadb-binlog",
            f"--defaults-extra-file={cnf.name}",
            "--read-from-remote-server",
            f"--host={src.host}",
            f"--port={src.port}",
            f"--user={src.user}",
            "--verbose",
            "--base64-output=DECODE-ROWS",
            f"--start-position={start.pos}",
            f"--stop-position={end.pos}",
            start.file,
        ]
        began = time.perf_counter()
        out = subprocess.run(command, capture_output=True, text=True, errors="replace")
        seconds = time.perf_counter() - began
    if out.returncode:
        sys.exit(f"mariadb-binlog failed: {out.stderr.strip()}")
    ours = tuple(f"### {verb} `{DB}`." for verb in ("INSERT INTO", "UPDATE", "DELETE FROM"))  # not other writers'
    rows = sum(line.startswith(ours) for line in out.stdout.splitlines())
    print(
        f"mariadb-binlog --verbose decode: {rows:,} rows in {seconds:.2f}s = {rows / seconds:,.0f} rows/s", flush=True
    )
    return rows, seconds
