"""The big-transaction case of ``benchmarks/harness.py`` (issue 34): one ``UPDATE`` of every row of a table of
millions of rows, in ONE source transaction, streamed with the default ``stream.max_transaction_memory``
while the change reader's and the sink's process trees are sampled for RSS (each on its own, every 0.2 s):
idle before the transaction, peak while it streams. The rate is changes per second from the commit to the
target having applied it; the baseline is the same stream applying a backlog of 10-row transactions on the
same table in the same run. The target is compared with the source (row count and sum) after each.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))

from common import bench_pipeline  # noqa: E402
from stream_cdc import seam, source  # noqa: E402

from seam.cli.stream_start import stream_processes  # noqa: E402
from seam.config import load_pipeline  # noqa: E402
from seam.core.position import Position  # noqa: E402
from seam.source.snapshot import source_head  # noqa: E402
from seam_dev.stack import EmbeddedStack  # noqa: E402

DB = "bench_big"


class TreeRss:
    """Peak memory of each named process tree, sampled every 0.2 s in a thread: the sum of its processes'
    PSS, which is their RSS with each shared page counted once (a JVM's fork that has not exec'd yet would
    count the JVM's whole RSS twice, and pyspark's forked workers share their interpreter's pages)."""

    def __init__(self, pids: dict[str, int]):
        self.pids, self.peak = pids, dict.fromkeys(pids, 0)
        # besides: the plain RSS sum of the processes that ran when the tree was first sampled (``known``)
        self.known: set[int] | None = None
        self._seen: set[int] = set()
        self.rss, self.rss_peak = dict.fromkeys(pids, 0), dict.fromkeys(pids, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def now(self, by_process: dict[str, int] | None = None) -> dict[str, int]:
        """Each tree's RSS now; ``by_process`` gets the peak of each process in it (``part pid name``)."""
        out = {}
        for part, pid in self.pids.items():
            try:
                root = psutil.Process(pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                out[part] = 0
                continue
            total = plain = 0
            first = self.known is None
            for p in tree:
                try:
                    info = p.memory_full_info()
                    if by_process is not None:
                        label = f"{part} {p.pid} {' '.join(p.cmdline()[-3:])[-60:]}"
                        by_process[label] = max(by_process.get(label, 0), info.pss)
                except psutil.Error:
                    continue
                total += info.pss  # shared pages counted once in the tree (a fork of the JVM)
                if first or p.pid in (self.known or ()):
                    plain += info.rss
                    if first:
                        self._seen.add(p.pid)
            out[part] = total
            self.rss[part] = plain
        if self.known is None:
            self.known = self._seen
        return out

    def _run(self) -> None:
        # a sample at once and one at the end: a run shorter than the interval (the baseline, now that the
        # reader's first messages are not held 0.5 - 1 s) still has its figure
        self.by_process: dict[str, int] = {}
        while True:
            self._sample()
            if self._stop.wait(0.2):
                self._sample()
                return

    def _sample(self) -> None:
        for part, pss in self.now(self.by_process).items():
            self.peak[part] = max(self.peak[part], pss)
            self.rss_peak[part] = max(self.rss_peak[part], self.rss[part])

    def __enter__(self) -> TreeRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _applied(pipeline) -> Position | None:
    import psycopg

    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        row = conn.execute(
            "SELECT file, pos, row_index FROM seam.positions WHERE db = %s AND tbl = 'big'", (DB,)
        ).fetchone()
    return Position(*row) if row else None


def _wait_applied(pipeline, end: Position, timeout: float = 3600) -> float:
    began = time.perf_counter()
    while time.perf_counter() - began < timeout:
        p = _applied(pipeline)
        if p is not None and not end.after(p):
            return time.perf_counter() - began
        time.sleep(0.2)
    sys.exit(f"the stream did not apply up to {end} within {timeout:.0f}s")


def _equal(pipeline, conn) -> None:
    import psycopg

    with conn.cursor() as cur:
        cur.execute(f"SELECT count(*), sum(n) FROM `{DB}`.big")
        want = tuple(int(x) for x in cur.fetchone())
    with psycopg.connect(**pipeline.target.conninfo()) as pg:
        got = tuple(int(x) for x in pg.execute(f'SELECT count(*), sum(n) FROM "{DB}".big').fetchone())
    if got != want:
        sys.exit(f"big transaction: the target has (rows, sum) {got}, the source {want}")


def run(rows: int, backlog: int, say) -> dict:
    """One run: the figures of the big transaction and of the 10-row-transaction baseline."""
    path = bench_pipeline([{"name": f"{DB}.big", "key": ["id"]}], topic_prefix="seam.benchbig")
    pipeline = load_pipeline(path)
    conn = source(pipeline, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
            cur.execute(f"CREATE DATABASE `{DB}`")
            cur.execute(f"USE `{DB}`")  # MariaDB's sequence tables (seq_1_to_N) are in every database
            cur.execute(f"CREATE TABLE `{DB}`.big (id BIGINT PRIMARY KEY, n INT NOT NULL, note VARCHAR(24) NOT NULL)")
            say(f"big transaction: {rows:,} rows into {DB}.big")
            for first in range(1, rows + 1, 1_000_000):
                last = min(rows, first + 999_999)
                cur.execute(
                    f"INSERT INTO `{DB}`.big SELECT seq, seq % 1000, CONCAT('row ', seq) FROM seq_{first}_to_{last}"
                )
        seam(path, "stream", "stop", check=False)
        seam(path, "load", "full", f"{DB}.big")
        seam(path, "stream", "start")
        with conn.cursor() as cur:  # the stream warm: one small transaction applied
            cur.execute(f"UPDATE `{DB}`.big SET n = n + 1 WHERE id <= 10")
        _wait_applied(pipeline, source_head(conn), timeout=600)

        say(f"big transaction: baseline, {backlog:,} changes in 10-row transactions")
        stack = EmbeddedStack()
        stack.stop(stream_processes(pipeline)["reader"])
        with conn.cursor() as cur:
            for first in range(1, backlog + 1, 10):
                cur.execute("BEGIN")
                cur.execute(f"UPDATE `{DB}`.big SET n = n + 1 WHERE id BETWEEN {first} AND {first + 9}")
                cur.execute("COMMIT")
        began = time.perf_counter()
        seam(path, "stream", "start")
        pids = {part: stack.running(name) for part, name in stream_processes(pipeline).items()}
        with TreeRss({p: pid for p, pid in pids.items() if pid is not None}) as small_rss:
            _wait_applied(pipeline, source_head(conn))
        small_s = time.perf_counter() - began  # from the reader's start, as the stream case measures
        _equal(pipeline, conn)

        rss = TreeRss({p: pid for p, pid in pids.items() if pid is not None})
        time.sleep(2)
        idle_by_process: dict[str, int] = {}
        idle = rss.now(idle_by_process)
        idle_rss = dict(rss.rss)
        say(f"big transaction: UPDATE of all {rows:,} rows in one transaction (idle RSS {_mb(idle)})")
        with rss:
            with conn.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute(f"UPDATE `{DB}`.big SET n = n + 1, note = CONCAT('settled ', id)")
                cur.execute("COMMIT")
            big_s = _wait_applied(pipeline, source_head(conn))
        _equal(pipeline, conn)
        figures = {
            "rows": rows,
            "seconds": big_s,
            "baseline_changes": backlog,
            "baseline_seconds": small_s,
            "baseline_peak_rss_mb": {p: v / 2**20 for p, v in small_rss.peak.items()},
            "idle_rss_mb": {p: v / 2**20 for p, v in idle.items()},
            "peak_rss_mb": {p: v / 2**20 for p, v in rss.peak.items()},
            "growth_mb": {p: (rss.peak[p] - idle[p]) / 2**20 for p in idle},
            # plain RSS of the processes running at idle (a process started since, or a fork, not counted)
            "rss_growth_mb": {p: (rss.rss_peak[p] - idle_rss[p]) / 2**20 for p in idle},
            "by_process_mb": {
                label: [idle_by_process.get(label, 0) / 2**20, peak / 2**20] for label, peak in rss.by_process.items()
            },
        }
        say(
            f"big transaction: applied {big_s:.1f}s after its commit ({rows / big_s:,.0f} changes/s; "
            f"10-row transactions {backlog / small_s:,.0f}/s); growth over idle: PSS "
            + ", ".join(f"{p} {g:,.0f} MB" for p, g in figures["growth_mb"].items())
            + "; RSS of the processes running at idle "
            + ", ".join(f"{p} {g:,.0f} MB" for p, g in figures["rss_growth_mb"].items())
        )
        return figures
    finally:
        seam(path, "stream", "stop", check=False)
        conn.close()
        os.unlink(path)


def _mb(sizes: dict[str, int]) -> str:
    return ", ".join(f"{p} {v / 2**20:,.0f} MB" for p, v in sizes.items())
