"""``make bench``: every benchmark case in one process, each next to its baselines measured in the same run.

Cases (``benchmarks/README.md`` explains each, how to reproduce it, and where the time goes):

- full load of TPC-H ``orders`` and ``lineitem``: Seam (MariaDB's snapshot; the portable one MySQL 8 gets) vs a
  raw Spark JDBC -> Parquet copy (cold and warm JVM) and ``SELECT ... INTO OUTFILE`` (the export floor);
- peers: ``seam load full`` of ``lineitem``, the whole command, vs pgloader, sling and pg_chameleon copying the same
  table into the same PostgreSQL (``benchmarks/peers.py``);
- incremental: a 1% window of ``lineitem`` (cursor ``l_shipdate``) vs a raw Spark JDBC read of that window;
- stream: a backlog applied flat out (binlog -> reader -> Kafka -> sink -> PostgreSQL) vs
  python-mysql-replication's decode and ``mariadb-binlog --verbose`` of the same binlog (the C floor); then
  commit-to-visible latency at 500, 1,000 and 2,000 changes/s; then the backlog and 1,000 changes/s with the
  Structured Streaming sink (``stream.sink: spark``) instead of the default, direct one;
- validation of ``orders``: equal, and with 10 scattered differences, vs reladiff;
- repair: 10 differing rows of a 2,000,000-row table, and 1,000 scattered over it, ``seam repair`` vs ``seam load full`` of it;
- resume: a 5,000,000-row full load killed at about 60% and started again vs a clean one
  (``benchmarks/repair_resume.py``).

Each measurement is repeated (``--repeats``, 3 by default): the median and the spread (min-max). For every run:
rows, seconds, rows/s, rows per CPU-second of Seam's processes (the harness, ``seam`` commands, the stream's
reader and sink, their Spark JVMs and Python workers: sampled every 0.2 s, so a process living less than that
is missed; the databases and the broker are not counted) and their peak RSS together.

Writes ``benchmarks/results/<date>.json``, ``<date>.md`` (the table) and ``<date>.png`` (each case's ratio to
its baselines). ``--tiny`` runs every case at a toy scale once (the test suite does, so that no case rots; its
full load is of ``orders`` alone, the incremental case loads ``lineitem``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import psutil  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
TRACKED: set[str] = set()  # the pipeline files of this run: processes started with one are Seam's (the stream)


# ------------------------------------------------------------------ measuring ----


class Usage:
    """CPU seconds and peak RSS of Seam's processes while it runs (a thread samples them every 0.2 s). With
    ``stream=False`` only this process and its children count: a baseline does not pay for an idle stream."""

    def __init__(self, every: float = 0.2, stream: bool = True):
        self.every, self.stream = every, stream
        self.start: dict[int, float] = {}  # pid -> CPU seconds when first seen (0 for processes started since)
        self.last: dict[int, float] = {}
        self.peak_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _processes(self) -> dict[int, psutil.Process]:
        me = psutil.Process()
        roots = [me]
        # the stream and the shared Spark driver (seam.spark_driver) are not children of this one
        for p in psutil.process_iter(["cmdline"]) if self.stream else ():
            cmdline = " ".join(p.info["cmdline"] or [])
            if p.pid != me.pid and (any(path in cmdline for path in TRACKED) or "spark_driver.py" in cmdline):
                roots.append(p)
        found = {}
        for root in roots:
            found[root.pid] = root
            try:
                for child in root.children(recursive=True):
                    found[child.pid] = child
            except psutil.Error:
                pass
        return found

    def _sample(self, first: bool = False) -> None:
        rss = 0
        for pid, p in self._processes().items():
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    cpu = t.user + t.system
                    rss += p.memory_info().rss
            except psutil.Error:
                continue
            if pid not in self.start:
                self.start[pid] = cpu if first else 0.0
            self.last[pid] = cpu
        self.peak_rss = max(self.peak_rss, rss)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def __enter__(self) -> Usage:
        self._sample(first=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    @property
    def cpu_seconds(self) -> float:
        return sum(self.last[pid] - self.start[pid] for pid in self.last)


@dataclass
class Run:
    rows: int
    seconds: float
    cpu_seconds: float = 0.0
    peak_rss_mb: float = 0.0
    note: str = ""

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


@dataclass
class Result:
    case: str
    variant: str
    runs: list[Run] = field(default_factory=list)
    baselines: list[str] = field(default_factory=list)  # variants of the same case this one is compared with
    extra: dict = field(default_factory=dict)
    counts_cpu: bool = True  # False where the work is the server's (its CPU is not sampled)

    @property
    def median(self) -> float:
        return statistics.median(r.rate for r in self.runs)

    def summary(self) -> dict:
        rates = [r.rate for r in self.runs]
        cpu = statistics.median(r.cpu_seconds for r in self.runs)
        rows = self.runs[0].rows
        return {
            "case": self.case,
            "variant": self.variant,
            "rows": rows,
            "seconds": statistics.median(r.seconds for r in self.runs),
            "rows_per_s": statistics.median(rates),
            "spread": [min(rates), max(rates)],
            "rows_per_cpu_s": rows / cpu if cpu and self.counts_cpu else None,
            "peak_rss_mb": max(r.peak_rss_mb for r in self.runs),
            "runs": [asdict(r) for r in self.runs],
            **self.extra,
        }


def measured(action: Callable[..., Run], *args) -> Run:
    """A run of Seam: its processes' CPU and memory, the stream's included."""
    return _measured(Usage(), action, *args)


def baseline_measured(action: Callable[..., Run], *args) -> Run:
    """A run of a baseline: this process and its children only."""
    return _measured(Usage(stream=False), action, *args)


def _measured(usage: Usage, action: Callable[..., Run], *args) -> Run:
    with usage:
        run = action(*args)
    run.cpu_seconds, run.peak_rss_mb = usage.cpu_seconds, usage.peak_rss / 2**20
    return run


def say(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", flush=True)


# ------------------------------------------------------------------ cases ----


def full_load_case(name: str, scale: float, repeats: int, results: list[Result]) -> None:
    from common import bench_pipeline
    from full_load_tpch import TABLES, baseline, ensure_table, seam_full_load

    from seam.config import load_pipeline

    key = TABLES[name][2]
    # topics of the run's own (benchmarks/common.py: RUN), as every case: a grown topic slows the broker down
    native = bench_pipeline([{"name": f"tpch.{name}", "key": key}], topic_prefix="seam.bench_full")
    portable = bench_pipeline([{"name": f"tpch.{name}", "key": key}], "seam.bench_portable", snapshot="portable")
    TRACKED.update((native, portable))
    rows = ensure_table(name, scale)
    pipeline = load_pipeline(native)
    case = f"full load {name}"
    seam = Result(case, "seam", baselines=["raw JDBC->Parquet, cold", "raw JDBC->Parquet, warm", "SELECT INTO OUTFILE"])
    seam_portable = Result(case, "seam, portable snapshot", baselines=["raw JDBC->Parquet, cold", "seam"])
    cold, warm = Result(case, "raw JDBC->Parquet, cold"), Result(case, "raw JDBC->Parquet, warm")
    outfile = Result(case, "SELECT INTO OUTFILE", counts_cpu=False)
    for i in range(repeats):
        say(f"{case}, run {i + 1} of {repeats} ({rows:,} rows)")
        cold.runs.append(baseline_measured(lambda: Run(rows, rows / baseline(pipeline, name, rows, warm=False)[0])))
        warm.runs.append(baseline_measured(lambda: Run(rows, rows / baseline(pipeline, name, rows, warm=True)[0])))
        seam.runs.append(measured(lambda: Run(rows, rows / seam_full_load(native, name, rows)[0])))
        seam_portable.runs.append(measured(lambda: Run(rows, rows / seam_full_load(portable, name, rows)[0])))
        floor = baseline_measured(lambda: select_into_outfile(name, rows))  # the server's CPU: not counted
        if floor.seconds:
            outfile.runs.append(floor)
    results += [seam, seam_portable, cold, warm] + ([outfile] if outfile.runs else [])
    if not outfile.runs:
        seam.baselines.remove("SELECT INTO OUTFILE")
    for path in (native, portable):
        os.unlink(path)


def peers_case(name: str, scale: float, repeats: int, results: list[Result]) -> None:
    """``seam load full`` against the tools users would pick instead (``benchmarks/peers.py``), wall time of
    each whole command, in interleaved rounds; every copy is counted against the source."""
    import peers
    from common import bench_pipeline
    from full_load_tpch import TABLES, ensure_table, seam_full_load

    from seam.config import load_pipeline

    path = bench_pipeline([{"name": f"tpch.{name}", "key": TABLES[name][2]}], topic_prefix="seam.bench_peers")
    TRACKED.add(path)
    rows = ensure_table(name, scale)
    pipeline = load_pipeline(path)
    case = f"full load {name}, whole command"
    seam = Result(case, "seam load full")
    others = {"pgloader": peers.pgloader_load, "sling": peers.sling_load, "pg_chameleon": peers.chameleon_load}
    runs: dict[str, Result] = {label: Result(case, label) for label in others}
    gone: set[str] = set()
    for i in range(repeats):
        say(f"{case} against pgloader, sling and pg_chameleon, round {i + 1} of {repeats} ({rows:,} rows)")
        seam.runs.append(measured(lambda: Run(rows, rows / seam_full_load(path, name, rows)[1])))
        for label, load in others.items():
            if label in gone:
                continue
            try:
                runs[label].runs.append(
                    baseline_measured(lambda load=load: Run(rows, load(pipeline, "tpch", name, rows)))
                )
                say(f"{label}: {rows:,} rows in {runs[label].runs[-1].seconds:.1f}s, count checked")
            except (peers.PeerMissing, peers.PeerFailed) as exc:
                say(f"{label}: not measured: {exc}")
                gone.add(label)
    measured_peers = [r for label, r in runs.items() if r.runs and label not in gone]
    seam.baselines = [r.variant for r in measured_peers]
    results += [seam, *measured_peers]
    for schema in ("peer_pgloader", "peer_sling", "peer_chameleon", "sch_chameleon"):
        peers.drop_schema(pipeline, schema)
    os.unlink(path)


def select_into_outfile(name: str, rows: int) -> Run:
    """The server writing the table to a file: what no reader of it can beat (server CPU, not counted)."""
    from seam_dev import demo

    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@secure_file_priv")
            allowed = cur.fetchone()[0]
            if allowed is None:  # NULL: the server writes no files
                say("SELECT INTO OUTFILE skipped: the server's secure_file_priv is NULL (`seam down; seam up` sets it)")
                return Run(rows, 0.0)
            target = Path(allowed or tempfile.gettempdir()) / f"seam-bench-{name}-{time.time_ns()}.tsv"
            began = time.perf_counter()
            cur.execute(f"SELECT * INTO OUTFILE %s FROM `tpch`.`{name}`", (str(target),))
            seconds = time.perf_counter() - began
        target.unlink(missing_ok=True)
    finally:
        conn.close()
    say(f"SELECT INTO OUTFILE: {rows:,} rows in {seconds:.1f}s = {rows / seconds:,.0f} rows/s")
    return Run(rows, seconds)


def incremental_case(scale: float, repeats: int, results: list[Result]) -> None:
    """A 1% window of lineitem by ship date (TPC-H ship dates span 1992-01-02 to 1998-12-01: 25 days)."""
    from common import bench_pipeline
    from full_load_tpch import TABLES, ensure_table, raw_window

    from seam.config import load_pipeline

    start, end = "1995-03-01", "1995-03-26"
    entry = {"name": "tpch.lineitem", "key": TABLES["lineitem"][2], "cursor": "l_shipdate", "safety_delay": "0s"}
    path = bench_pipeline([entry], topic_prefix="seam.bench_incremental")
    ensure_table("lineitem", scale)
    pipeline = load_pipeline(path)
    rows = window_rows(start, end)
    seam, raw = Result("incremental lineitem 1%", "seam", baselines=["raw JDBC window read"]), None
    raw = Result("incremental lineitem 1%", "raw JDBC window read")
    subprocess.run([sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", "tpch.lineitem"], check=True)
    for i in range(repeats):
        say(f"incremental lineitem 1%, run {i + 1} of {repeats} ({rows:,} rows)")
        raw.runs.append(baseline_measured(lambda: Run(rows, raw_window(pipeline, start, end, rows))))
        seam.runs.append(measured(seam_window, path, start, end, rows))
    results += [seam, raw]
    os.unlink(path)


def window_rows(start: str, end: str) -> int:
    from seam_dev import demo

    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM tpch.lineitem WHERE l_shipdate > %s AND l_shipdate <= %s", (start, end))
        rows = int(cur.fetchone()[0])
    conn.close()
    return rows


def seam_window(path: str, start: str, end: str, rows: int) -> Run:
    from full_load_tpch import seam_load

    seconds, wall = seam_load(
        path,
        *("incremental", "tpch.lineitem", "--start", start, "--end", end),
        done_marker="committed window",
        seconds_after=" rows merged in ",
    )
    say(f"seam incremental: {rows:,} rows BEGIN->commit {seconds:.1f}s, wall {wall:.1f}s")
    return Run(rows, seconds, note=f"wall incl. spark-submit {wall:.1f}s")


def stream_case(
    changes: int, latency_s: float, repeats: int, results: list[Result], rates: tuple[int, ...] = (500, 1000, 2000)
) -> None:
    import stream_cdc as sc

    flat = Result("stream, flat out", "seam", baselines=["python-mysql-replication decode", "mariadb-binlog --verbose"])
    pmr, cfloor = (
        Result("stream, flat out", "python-mysql-replication decode"),
        Result("stream, flat out", "mariadb-binlog --verbose"),
    )
    latencies = {rate: Result(f"stream at {rate:,} changes/s", "seam") for rate in rates}
    with sc.BenchStream() as bench:
        TRACKED.add(bench.path)
        say(f"stream warm-up: a backlog of {changes:,} changes, not measured")
        bench.apply_backlog(bench.backlog(changes)[1])  # the parts' connections and caches at speed
        for i in range(repeats):
            say(f"stream backlog, run {i + 1} of {repeats} ({changes:,} changes)")
            start, end = bench.backlog(changes)
            pmr.runs.append(baseline_measured(lambda s, e: Run(*bench.raw_decode(s, e)), start, end))
            cfloor.runs.append(baseline_measured(lambda s, e: Run(*bench.mariadb_binlog(s, e)), start, end))
            flat.runs.append(measured(lambda e: Run(changes, bench.apply_backlog(e)), end))
        chameleon_case(bench, changes, repeats, flat, results)
        for rate, result in latencies.items():
            for i in range(repeats):
                say(f"stream latency at {rate:,} changes/s, run {i + 1} of {repeats} ({latency_s:g}s)")
                run = measured(bench.steady, rate, latency_s)
                result.runs.append(run)
            lat = sorted(x for r in result.runs for x in json.loads(r.note)["latencies"])
            result.extra = {f"p{p}": _pct(lat, p / 100) for p in (50, 95, 99)}
            for r in result.runs:
                r.note = ""
    results += [flat, pmr, cfloor, *latencies.values()]
    spark_sink_case(changes, latency_s, repeats, results)


def spark_sink_case(changes: int, latency_s: float, repeats: int, results: list[Result]) -> None:
    """The same backlog and the 1,000 changes/s latency with ``stream.sink: spark`` (the Structured Streaming
    query instead of the default, direct Kafka consumer)."""
    import stream_cdc as sc

    variant = "seam, Spark sink"
    flat = Result("stream, flat out", variant, baselines=["seam", "mariadb-binlog --verbose"])
    latency = Result("stream at 1,000 changes/s", variant, baselines=[])
    with sc.BenchStream(sink="spark", fresh=False) as bench:  # the tables as the direct sink left them
        TRACKED.add(bench.path)
        bench.apply_backlog(bench.backlog(changes)[1])
        for i in range(repeats):
            say(f"stream backlog, Spark sink, run {i + 1} of {repeats} ({changes:,} changes)")
            end = bench.backlog(changes)[1]
            flat.runs.append(measured(lambda e: Run(changes, bench.apply_backlog(e)), end))
        for i in range(repeats):
            say(f"stream latency at 1,000 changes/s, Spark sink, run {i + 1} of {repeats} ({latency_s:g}s)")
            latency.runs.append(measured(bench.steady, 1000, latency_s))
        lat = sorted(x for r in latency.runs for x in json.loads(r.note)["latencies"])
        latency.extra = {f"p{p}": _pct(lat, p / 100) for p in (50, 95, 99)}
        for r in latency.runs:
            r.note = ""
    results += [flat, latency]


def big_transaction_case(rows: int, repeats: int, results: list[Result]) -> None:
    """One UPDATE of every row of a table in one transaction: time from its commit to applied, and the RSS
    growth of the change reader's and the sink's process trees over idle (issue 34: under 300 MB each)."""
    import big_transaction as bt

    backlog = min(100_000, max(rows // 10, 1_000))
    big = Result(f"stream, one transaction of {rows:,} rows", "seam", baselines=["10-row transactions"])
    small = Result(f"stream, one transaction of {rows:,} rows", "10-row transactions")
    growth: dict[str, list[float]] = {}
    for i in range(repeats):
        say(f"big transaction, run {i + 1} of {repeats}")
        f = bt.run(rows, backlog, say)
        peak = sum(f["peak_rss_mb"].values())
        big.runs.append(Run(rows, f["seconds"], peak_rss_mb=peak, note=json.dumps(f)))
        small.runs.append(Run(backlog, f["baseline_seconds"], peak_rss_mb=sum(f["baseline_peak_rss_mb"].values())))
        for part, mb in f["growth_mb"].items():
            growth.setdefault(f"{part}_pss_growth_mb", []).append(mb)
        for part, mb in f["rss_growth_mb"].items():
            growth.setdefault(f"{part}_rss_growth_mb", []).append(mb)
    big.extra = {name: max(v) for name, v in growth.items()}
    big.counts_cpu = small.counts_cpu = False
    results += [big, small]


def many_tables_case(
    tables: int, low: int, high: int, rate: int, seconds: float, repeats: int, results: list[Result]
) -> None:
    """``tables`` tables full-loaded by one command against the same rows in one table, then streamed under a
    writer that touches each in turn (issue 34: the load under 3x the one table's time)."""
    import many_tables as mt

    case = f"full load of {tables} tables"
    many = Result(case, f"seam, {tables} tables in one command", baselines=["seam, the same rows in one table"])
    one = Result(case, "seam, the same rows in one table")
    stream = Result(f"stream over {tables} tables at {rate:,} changes/s", "seam")
    lat: list[float] = []
    status: list[float] = []
    with mt.ManyTables(tables, low, high, say) as bench:
        TRACKED.update((bench.path, bench.one))
        rows = sum(bench.rows)
        for i in range(repeats):
            say(f"many tables, run {i + 1} of {repeats}: seam load full of one table of {rows:,} rows")
            one.runs.append(measured(lambda: Run(rows, bench.load_one())))
            say(f"many tables, run {i + 1} of {repeats}: seam load full of {tables} tables of {rows:,} rows in all")
            many.runs.append(measured(lambda: Run(rows, bench.load_many())))
            say(f"many tables: {many.runs[-1].seconds:.1f}s against {one.runs[-1].seconds:.1f}s for the one table")
        say(f"many tables: the stream over {tables} tables at {rate:,} changes/s for {seconds:g}s")

        def streamed() -> Run:
            got, status_s = bench.stream(rate, seconds)
            lat.extend(got)
            status.append(status_s)
            return Run(len(got) * 10, seconds + (max(got) if got else 0.0))

        stream.runs.append(measured(streamed))
    lat.sort()
    stream.extra = {f"p{p}": _pct(lat, p / 100) for p in (50, 95, 99)} | {"status_s": max(status)}
    say(
        f"many tables: commit to visible p50/p95/p99 {stream.extra['p50']:.2f}/{stream.extra['p95']:.2f}/"
        f"{stream.extra['p99']:.2f}s; seam stream status took {max(status):.1f}s"
    )
    results += [many, one, stream]


def chameleon_case(bench, changes: int, repeats: int, flat: Result, results: list[Result]) -> None:
    """pg_chameleon's replica of the stream's tables catching up the same kind of backlog, one tool at a time
    (``stream_cdc.chameleon_catch_up``); its copy is checked equal to the source after each run."""
    import peers
    import stream_cdc as sc

    peer = Result("stream, flat out", "pg_chameleon")
    try:
        with peers.Chameleon(bench.pipeline, sc.DB, ["events", "ticks"]) as chameleon:
            done = chameleon.run("init_replica", "--source", "mysql")
            if done.returncode != 0:
                raise peers.PeerFailed(f"pg_chameleon init_replica failed: {(done.stdout + done.stderr)[-500:]}")
            for i in range(repeats):
                say(f"stream backlog, pg_chameleon, run {i + 1} of {repeats} ({changes:,} changes)")
                peer.runs.append(
                    baseline_measured(lambda: Run(changes, sc.chameleon_catch_up(bench, chameleon, changes)))
                )
                say(f"pg_chameleon: {changes:,} changes in {peer.runs[-1].seconds:.1f}s, its copy equal to the source")
                bench.apply_backlog(sc.source_head(bench.conn))  # Seam's stream caught up again, untimed
    except (peers.PeerMissing, peers.PeerFailed, RuntimeError) as exc:
        say(f"pg_chameleon: not measured: {exc}")
        bench.apply_backlog(sc.source_head(bench.conn))
        return
    finally:
        peers.drop_schema(bench.pipeline, "peer_chameleon")
    flat.baselines.append(peer.variant)
    results.append(peer)


def _pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, int(p * len(values)))] if values else float("nan")


def validation_case(scale: float, repeats: int, results: list[Result], fresh_load: bool = True) -> None:
    from common import bench_pipeline
    from full_load_tpch import ensure_table
    from validate_tpch import load, run_reladiff, run_seam, scatter_differences

    from seam.config import load_pipeline

    path = bench_pipeline([{"name": "tpch.orders", "key": ["o_orderkey"]}], topic_prefix="seam.bench_validation")
    pipeline = load_pipeline(path)
    rows = ensure_table("orders", scale)
    if fresh_load:  # else the full-load case has just loaded it
        load(path, rows)
    for label in ("equal", "10 differences"):
        case = f"validation orders, {label}"
        seam, reladiff = Result(case, "seam", baselines=["reladiff"]), Result(case, "reladiff")
        expected, undo = scatter_differences(pipeline) if label != "equal" else (set(), lambda: None)
        try:
            for i in range(repeats):
                say(f"{case}, run {i + 1} of {repeats}")
                for result, run in ((seam, run_seam), (reladiff, run_reladiff)):
                    found: dict = {}

                    def once(run=run, found=found) -> Run:
                        seconds, found["keys"] = run(pipeline, rows)
                        return Run(rows, seconds)

                    result.runs.append((measured if result is seam else baseline_measured)(once))
                    if found["keys"] != expected:
                        sys.exit(f"{result.variant} found {sorted(found['keys'])}, not {sorted(expected)}")
        finally:
            undo()
        results += [seam, reladiff]
    os.unlink(path)


def repair_case(rows: int, repeats: int, results: list[Result]) -> None:
    """10 differing rows of a ``rows``-row table: `seam repair` against `seam load full` of it."""
    from common import bench_pipeline
    from repair_resume import DB, ensure_table, repair_run, seam

    from seam.config import load_pipeline

    path = bench_pipeline([{"name": f"{DB}.repaired", "key": ["id"]}], topic_prefix="seam.bench_repair")
    pipeline = load_pipeline(path)
    TRACKED.add(path)
    ensure_table("repaired", rows)
    spread = min(1000, rows // 20)  # and differences all over the table: one in about 3,000 keys
    case, scattered = f"10 differing rows of {rows:,}", f"{spread:,} differing rows scattered over {rows:,}"
    repair = Result(case, "seam repair", baselines=["seam load full"])
    reload = Result(case, "seam load full")
    repair_spread = Result(scattered, "seam repair", baselines=["seam load full"])
    reload_spread = Result(scattered, "seam load full", runs=reload.runs)  # the same loads
    warm_up(path, f"{DB}.repaired")
    for i in range(repeats):
        say(f"{case}, run {i + 1} of {repeats}")
        reload.runs.append(measured(lambda: Run(rows, seam(path, "load", "full", f"{DB}.repaired")[0])))
        for result, made, scatter in ((repair, 10, 0), (repair_spread, spread, spread)):
            found: dict = {}

            def once(found=found, scatter=scatter) -> Run:
                seconds, found["rows"] = repair_run(path, pipeline, "repaired", rows, scatter)
                return Run(rows, seconds)

            result.runs.append(measured(once))
            if found["rows"] != made:
                sys.exit(f"seam repair found {found['rows']} differing rows, not the {made} made")
            check, out = seam(path, "validate", f"{DB}.repaired")
            if ": EQUAL:" not in out:
                sys.exit(f"after the repair the table is not EQUAL: {out[-1000:]}")
    results += [repair, reload, repair_spread, reload_spread]
    os.unlink(path)


def warm_up(path: str, table: str) -> None:
    """One load of ``table``, not measured: the loads measured next find the shared Spark driver started (a
    load that starts it pays 5 - 10 s more, which made a first reload look slower than the repair's baseline
    is)."""
    from repair_resume import seam

    say(f"warm-up: seam load full {table}, not measured")
    seam(path, "load", "full", table, "--restart")


def resume_case(rows: int, repeats: int, results: list[Result]) -> None:
    """A full load killed at about 60% and started again, against a clean full load of the same table."""
    from common import bench_pipeline, stack_up
    from repair_resume import DB, ensure_table, killed_then_resumed, seam

    from seam.config import load_pipeline

    stack_up()  # the case may run alone: its table is made before its first pipeline
    ensure_table("resumed", rows)
    case = f"full load of {rows:,} rows, killed at 60%"
    resumed = Result(case, "seam load full again (resumes)", baselines=["seam load full, clean"])
    clean = Result(case, "seam load full, clean")
    for i in range(repeats):
        say(f"{case}, run {i + 1} of {repeats}")
        # a topic of its own per run: three loads of 5,000,000 rows each would grow the next run's
        path = bench_pipeline([{"name": f"{DB}.resumed", "key": ["id"]}], topic_prefix=f"seam.bench_resume.{i}")
        pipeline = load_pipeline(path)
        TRACKED.add(path)
        if i == 0:
            warm_up(path, f"{DB}.resumed")
        clean.runs.append(
            measured(lambda path=path: Run(rows, seam(path, "load", "full", f"{DB}.resumed", "--restart")[0]))
        )
        kept: dict = {}

        def once(kept=kept, path=path, pipeline=pipeline) -> Run:
            seconds, kept["line"] = killed_then_resumed(path, pipeline, "resumed", rows)
            return Run(rows, seconds, note=kept["line"])

        resumed.runs.append(measured(once))
        say(f"  {kept['line']}")
        if not kept["line"].startswith("resumed"):
            sys.exit(f"the load started again did not resume: {kept['line']}")
        os.unlink(path)
    results += [resumed, clean]


# ------------------------------------------------------------------ reporting ----


def ratios(results: list[Result]) -> list[tuple[str, str, float]]:
    by = {(r.case, r.variant): r for r in results}
    out = []
    for r in results:
        for b in r.baselines:
            if (r.case, b) in by and by[(r.case, b)].median:
                out.append((r.case, f"{r.variant} / {b}", r.median / by[(r.case, b)].median))
    return out


def what_runs_beside() -> dict:
    """The machine as the run begins: its CPUs' busy share over one second, and Airflow's processes (`seam up`
    starts them, `make bench` leaves them running; their idle components probably cost session 67's stream run
    its 10%: 31,381 changes/s against 34,853 on the quiet machine of session 68). Said before the run and in its
    results; nothing is stopped."""
    busy = psutil.cpu_percent(interval=1.0)
    airflow = []
    for proc in psutil.process_iter(["cmdline"]):
        if any(Path(arg).name == "airflow" for arg in (proc.info["cmdline"] or [])[:2]):
            airflow.append(proc.pid)
    if airflow:
        say(
            f"Airflow runs beside this benchmark (pids {', '.join(map(str, airflow))}): its idle components take "
            "CPU from the cases; `seam down` before `make bench` for the figures of a quiet machine"
        )
    return {"busy_percent_before": busy, "airflow_pids": airflow}


def markdown(results: list[Result], meta: dict) -> str:
    lines = [
        f"# Seam benchmarks, {meta['date']}",
        "",
        f"{meta['cores']} cores, {meta['ram_gb']:.0f} GB RAM; TPC-H scale {meta['scale']}; {meta['repeats']} runs "
        "each (median, and min-max of rows/s).",
        f"Before the run {meta['busy_percent_before']:.0f}% of the CPUs were busy; Airflow "
        + (f"ran beside it ({len(meta['airflow_pids'])} processes)." if meta["airflow_pids"] else "did not run."),
        "",
        "| case | variant | rows | seconds | rows/s (min-max) | rows per CPU-s | peak RSS MB | latency p50/p95/p99 |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        s = r.summary()
        cpu = f"{s['rows_per_cpu_s']:,.0f}" if s["rows_per_cpu_s"] else "-"
        lat = "/".join(f"{s[p]:.2f}s" for p in ("p50", "p95", "p99")) if "p50" in s else ""
        lines.append(
            f"| {r.case} | {r.variant} | {s['rows']:,} | {s['seconds']:.2f} | {s['rows_per_s']:,.0f} "
            f"({s['spread'][0]:,.0f}-{s['spread'][1]:,.0f}) | {cpu} | {s['peak_rss_mb']:,.0f} | {lat} |"
        )
    lines += ["", "| case | ratio | x |", "|---|---|---:|"]
    lines += [f"| {case} | {label} | {x:.2f} |" for case, label, x in ratios(results)]
    return "\n".join(lines) + "\n"


def chart(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = ratios(results)
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(rows) + 1.5))
    labels = [f"{case}: {label}" for case, label, _ in rows]
    values = [x for _, _, x in rows]
    ax.barh(labels, values, color=["#2a7ab0" if x >= 1 else "#c0504d" for x in values])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.invert_yaxis()
    ax.set_xlabel("rows/s of the first over the second (1 = as fast)")
    for i, x in enumerate(values):
        ax.text(x, i, f" {x:.2f}", va="center", fontsize=8)
    ax.set_title("Seam vs its baselines, measured in the same run")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.2, help="TPC-H scale factor (SF 1 = 1.5M orders, 6M lines)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--changes", type=int, default=100_000, help="stream: the backlog's row changes")
    parser.add_argument("--latency-seconds", type=float, default=20, help="stream: each latency run's length")
    parser.add_argument("--repair-rows", type=int, default=2_000_000, help="repair: the table's rows")
    parser.add_argument("--resume-rows", type=int, default=5_000_000, help="resume: the table's rows")
    parser.add_argument("--big-rows", type=int, default=5_000_000, help="big transaction: the rows it updates")
    parser.add_argument("--many-tables", type=int, default=300, help="many tables: how many")
    parser.add_argument(
        "--cases",
        default="full,peers,incremental,stream,validation,repair,resume,big_transaction,many_tables",
        help="comma-separated subset",
    )
    parser.add_argument("--tiny", action="store_true", help="every case at a toy scale, once (the test suite)")
    parser.add_argument("--out", default=str(RESULTS), help="where the JSON, the table and the chart go")
    args = parser.parse_args()
    if args.tiny:
        args.scale, args.repeats, args.changes, args.latency_seconds = 0.002, 1, 2_000, 3
        args.repair_rows, args.resume_rows, args.big_rows, args.many_tables = 20_000, 400_000, 40_000, 8
    cases = set(args.cases.split(","))
    beside = what_runs_beside()
    began = time.perf_counter()
    results: list[Result] = []
    if "full" in cases:
        for name in ("orders",) if args.tiny else ("orders", "lineitem"):  # tiny: lineitem is the incremental's
            full_load_case(name, args.scale, args.repeats, results)
    if "peers" in cases:
        peers_case("orders" if args.tiny else "lineitem", args.scale, args.repeats, results)
    if "incremental" in cases:
        incremental_case(args.scale, args.repeats, results)
    if "stream" in cases:
        stream_case(
            args.changes, args.latency_seconds, args.repeats, results, (1000,) if args.tiny else (500, 1000, 2000)
        )
    if "validation" in cases:
        validation_case(args.scale, args.repeats, results, fresh_load=not (args.tiny and "full" in cases))
    if "repair" in cases:
        repair_case(args.repair_rows, args.repeats, results)
    if "resume" in cases:
        resume_case(args.resume_rows, args.repeats, results)
    if "big_transaction" in cases:
        big_transaction_case(args.big_rows, 1 if args.tiny else min(args.repeats, 2), results)
    if "many_tables" in cases:
        low, high = (100, 1_000) if args.tiny else (1_000, 100_000)
        many_tables_case(args.many_tables, low, high, 1_000, args.latency_seconds, 1, results)
    meta = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H-%M-%SZ"),
        "cores": os.cpu_count(),
        "ram_gb": psutil.virtual_memory().total / 2**30,
        "scale": args.scale,
        "repeats": args.repeats,
        "seconds": round(time.perf_counter() - began, 1),
        **beside,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / meta["date"]
    doc = {**meta, "results": [r.summary() for r in results], "ratios": ratios(results)}
    stem.with_suffix(".json").write_text(json.dumps(doc, indent=2))
    table = markdown(results, meta)
    stem.with_suffix(".md").write_text(table)
    chart(results, stem.with_suffix(".png"))
    print("\n" + table)
    say(f"done in {meta['seconds']:.0f}s: {stem}.json, .md and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
