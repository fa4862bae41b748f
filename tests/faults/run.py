"""`make faults`: a pipeline's second week, one fault after another, under a running writer (issue 32, item 9).

The stream runs as users run it (`seam stream start`: the change reader and the default, direct sink) over
the demo tables, which a writer keeps changing, and three tables of its own: ``notes`` (the table the
message and row-image faults hit), ``blobs`` (large values) and ``bulk`` (the full load that is killed).
Each fault is injected while the writer writes; then the writer pauses, the way out Seam printed is taken
(`seam quarantine skip`, then the command a stopped table's reason names: `seam repair T --full` or
`seam load full T`, run as printed), the stream drains, and the independent comparer
(``tests/support/independent.py``, no Seam code) compares every table with its source.

A fault passes when exactly the tables it must stop stopped (the others went on), the way out worked, every
table is equal afterwards and neither part restarted more than twice. The last lines are the table of
faults and outcomes.

    python -m tests.faults.run             (make faults)
    python -m tests.faults.run --short     (the CI subset: tests/stack/test_faults.py)

Runs on the test stack (``scripts/test-env.sh``): it starts what is not running and stops what it started.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg
import yaml
from confluent_kafka import Producer

from seam.config import load_pipeline
from seam.state.connection import sink_session_name
from seam.wire.boundary import CONTROL_HEADER
from seam.wire.topics import table_topic
from seam_dev import demo
from seam_dev.stack import EmbeddedStack
from tests.support.commands import process_tree
from tests.support.independent import compare
from tests.support.services import stack_services

DEMO = ["accounts", "payments", "audit_log"]
OWN = ["notes", "blobs", "bulk"]
KEYS = {"audit_log": "none"}


class FaultsFailed(AssertionError):
    pass


@dataclass
class Outcome:
    fault: str
    must_stop: set[str]
    stopped: set[str] = field(default_factory=set)
    way_out: str = "-"
    equal: bool = False
    restarts: int = 0
    seconds: float = 0.0
    note: str = ""

    @property
    def passed(self) -> bool:
        return self.stopped == self.must_stop and self.equal and self.restarts <= 2


class Run:
    """One pipeline of its own (database, topics, target schema) with its stream running."""

    def __init__(self, workdir: str, say: Callable[[str], None]):
        self.say = say
        self.stack = EmbeddedStack()
        self.db = f"faults_{int(time.time())}"
        self.admin = os.environ["SEAM_MYSQL_URL"]
        demo.seed(load_pipeline(), rows=3000, admin_url=self.admin, database=self.db, log=lambda m: None)
        with contextlib.closing(demo.connect(self.admin, self.db)) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE notes (id INT PRIMARY KEY, n INT NOT NULL, body TEXT)")
            cur.execute(f"INSERT INTO notes SELECT seq, 0, CONCAT('note ', seq) FROM {self.db}.seq_1_to_200")
            cur.execute("CREATE TABLE blobs (id INT PRIMARY KEY, data LONGBLOB)")
            cur.execute("CREATE TABLE bulk (id INT PRIMARY KEY, v VARCHAR(60))")
            cur.execute(f"INSERT INTO bulk SELECT seq, REPEAT('v', 50) FROM {self.db}.seq_1_to_300000")
            conn.commit()
        doc = yaml.safe_load(open(load_pipeline().path))
        doc["tables"] = [{"name": f"{self.db}.{t}", "key": KEYS.get(t, ["id"])} for t in DEMO + OWN]
        doc["kafka"]["topic_prefix"] = f"seam.{self.db}"
        doc["load"] = {"abandon_after": "20s"}
        doc["stream"] = {**(doc.get("stream") or {}), "log_dir": workdir}
        self.path = os.path.join(workdir, "faults.yaml")
        with open(self.path, "w") as f:
            yaml.safe_dump(doc, f)
        self.pipeline = load_pipeline(self.path)
        self.topic = {t.table: table_topic(self.pipeline, t) for t in self.pipeline.tables}
        self.writing = threading.Event()
        self.burst = threading.Lock()
        self.done = threading.Event()
        self.writer = threading.Thread(target=self._write, name="faults-writer", daemon=True)

    # ----------------------------------------------------------------- plumbing

    def seam(self, *args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [sys.executable, "-m", "seam.cli", "--pipeline", self.path, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise FaultsFailed(
                f"seam {' '.join(args)} failed ({done.returncode}): {(done.stdout + done.stderr)[-2000:]}"
            )
        return done

    def _write(self) -> None:
        while not self.done.is_set():
            if not self.writing.wait(0.2):
                continue
            with self.burst:  # ``pause`` waits for a burst to end
                if self.writing.is_set():
                    demo.run_writer(self.admin, rate=100, seconds=1, threads=1, database=self.db)

    def pause(self) -> None:
        """Stop the writer, and wait for its last burst: the source does not move while a fault is judged."""
        self.writing.clear()
        with self.burst:
            pass

    def target(self):
        return psycopg.connect(**self.pipeline.target.conninfo(), autocommit=True)

    def source(self):
        conn = demo.connect(self.admin, self.db)
        conn.autocommit(True)
        return contextlib.closing(conn)

    def stopped(self) -> dict[str, str]:
        with self.target() as conn:
            rows = conn.execute(
                "SELECT tbl, stopped FROM seam.positions WHERE db = %s AND stopped IS NOT NULL", (self.db,)
            ).fetchall()
        return dict(rows)

    def part_restarts(self) -> dict[str, tuple[int, str]]:
        """The reader's and the sink's restarts since the stream started, with the last error of each."""
        with self.target() as conn:
            rows = conn.execute(
                "SELECT part, restarts, coalesce(last_error, '') FROM seam.stream_parts WHERE pipeline = %s "
                "AND part IN ('reader', 'sink')",
                (self.pipeline.name,),
            ).fetchall()
        return {part: (int(n), error) for part, n, error in rows}

    def sink_backends(self, waiting: bool = False) -> list[int]:
        """The target sessions of this run's Seam parts (``waiting``: those waiting on a lock)."""
        with self.target() as conn:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                    "AND datname = current_database() AND pid <> pg_backend_pid()"
                    + (" AND state = 'active' AND wait_event_type = 'Lock'" if waiting else ""),
                    (sink_session_name(self.pipeline),),
                )
            ]

    def dba(self, sql: str, pids: list[int]) -> int:
        with self.target() as conn:
            return sum(conn.execute(sql, (pid,)).fetchone()[0] for pid in pids)

    def wait_for(self, what: str, condition: Callable[[], bool], limit_s: float = 120) -> bool:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if condition():
                return True
            time.sleep(0.5)
        self.say(f"  gave up waiting for {what} after {limit_s:.0f} s")
        return False

    def produce(self, table: str, value: bytes, control: bool = False) -> None:
        """A message on the table's topic from a plain client, delivered (checked: after a broker restart a
        client may need a few tries)."""
        producer = Producer({"bootstrap.servers": self.pipeline.kafka.bootstrap})
        results: list = []
        for _ in range(10):
            producer.produce(
                self.topic[table],
                value,
                key=b"k",
                partition=0,  # the topic's one partition (one the broker auto-created after a restart has more)
                headers=[(CONTROL_HEADER, b"1")] if control else None,
                on_delivery=lambda error, message: results.append(error),
            )
            producer.flush(30)
            if results and results[-1] is None:
                return
            time.sleep(2)
        raise FaultsFailed(f"could not produce on {self.topic[table]}: {results[-1:]}")

    def skip_quarantined(self) -> str:
        listed = self.seam("quarantine", "list", check=False)
        ids = [line.split()[0].lstrip("#") for line in listed.stdout.splitlines() if line.startswith("#")]
        for id_ in ids:
            self.seam("quarantine", "skip", id_, "--note", "make faults")
        return f"seam quarantine skip {', '.join(ids)}"

    def take_way_out(self, table: str, why: str) -> str:
        """Run the command the table's stop names (``run `seam ...` ``), as printed."""
        printed = re.search(r"run `(seam [^`]+)`", why)
        if printed is None:
            raise FaultsFailed(f"{table} stopped naming no command to take it up again: {why}")
        self.seam(*shlex.split(printed.group(1))[1:])
        return printed.group(1)

    def equal(self) -> tuple[bool, str]:
        """After the stream drained: every table that is not stopped equal to its source."""
        waited = self.seam("stream", "wait", "--timeout", "180", check=False)
        if waited.returncode not in (0, 3):
            return False, waited.stderr.strip()[-300:]
        kwargs = self.pipeline.source.pymysql_kwargs()
        stopped = self.stopped()
        for table in DEMO + OWN:
            if table in stopped:
                continue
            why = compare(kwargs, self.pipeline.target.conninfo(), self.db, table)
            if why:
                return False, why[:300]
        return True, ""

    # ----------------------------------------------------------------- the run

    def start(self) -> None:
        self.seam("load", "full", *[f"{self.db}.{t}" for t in DEMO + OWN])
        self.seam("stream", "start", timeout=300)
        self.writer.start()

    def close(self) -> None:
        self.done.set()
        self.pause()
        self.writer.join(60)
        self.seam("stream", "stop", timeout=180, check=False)

    def fault(self, name: str, must_stop: set[str], inject: Callable[[Run], str | None]) -> Outcome:
        """Inject under the writer; take the way out for what stopped; drain; compare."""
        began, before = time.monotonic(), self.part_restarts()
        outcome = Outcome(name, must_stop)
        self.say(f"fault: {name}")
        self.writing.set()
        try:
            outcome.note = inject(self) or ""
            if must_stop:
                self.wait_for(f"{', '.join(sorted(must_stop))} to stop", lambda: set(self.stopped()) >= must_stop)
            time.sleep(1)  # the writer writes on after the fault
        finally:
            self.pause()
        outcome.stopped = set(self.stopped())
        ways = []
        if outcome.stopped:
            listed = self.seam("quarantine", "list", check=False)
            if listed.returncode == 1:
                ways.append(self.skip_quarantined())
            for table, why in sorted(self.stopped().items()):
                ways.append(self.take_way_out(table, why))
        outcome.way_out = "; ".join(ways) or "-"
        outcome.equal, why = self.equal()
        if why:
            outcome.note = (outcome.note + " " + why).strip()
        after = self.part_restarts()
        restarted = {p: after[p][0] - before.get(p, (0, ""))[0] for p in after}
        outcome.restarts = sum(restarted.values())
        for part, n in sorted(restarted.items()):
            if n:  # which part restarted, and why, so a failure here can be read without a re-run
                outcome.note += f"; {part} restarted {n}x, last error: {after[part][1][:300]}"
        outcome.seconds = time.monotonic() - began
        self.say(
            f"  {'ok' if outcome.passed else 'FAILED'}: stopped {sorted(outcome.stopped) or 'none'} "
            f"(must: {sorted(must_stop) or 'none'}); way out: {outcome.way_out}; equal: {outcome.equal}; "
            f"restarts: {outcome.restarts}; {outcome.seconds:.0f} s {outcome.note}"
        )
        return outcome


# --------------------------------------------------------------------- faults


def cancel_storm(seconds: float) -> Callable[[Run], str]:
    def inject(run: Run) -> str:
        cancelled, deadline = 0, time.monotonic() + seconds
        while time.monotonic() < deadline:
            cancelled += run.dba("SELECT pg_cancel_backend(%s)", run.sink_backends())
            time.sleep(0.05)
        return f"{cancelled} cancel signals"

    return inject


def held_row_cancelled(run: Run) -> str:
    with run.target() as report:
        report.autocommit = False
        report.execute(f'SELECT * FROM "{run.db}".accounts WHERE id = 1 FOR UPDATE')
        with run.source() as src, src.cursor() as cur:
            cur.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 1")
        cancelled = 0
        deadline = time.monotonic() + 60
        while cancelled < 2 and time.monotonic() < deadline:
            cancelled += run.dba("SELECT pg_cancel_backend(%s)", run.sink_backends(waiting=True))
            time.sleep(0.05)
        report.rollback()
    return f"the sink's wait cancelled {cancelled} times"


def deadlock(run: Run) -> str:
    with run.target() as other:
        other.autocommit = False
        other.execute(f'SELECT * FROM "{run.db}".accounts WHERE id = 2 FOR UPDATE')
        with run.source() as src, src.cursor() as cur:
            cur.execute("UPDATE accounts SET balance = balance + 1 WHERE id IN (1, 2)")
        if not run.wait_for("the sink to wait on row 2", lambda: bool(run.sink_backends(waiting=True)), 60):
            other.rollback()
            return "the sink never waited"
        try:  # row 1 is the sink's now: one of the two is chosen as the deadlock's victim
            other.execute(f'UPDATE "{run.db}".accounts SET balance = balance WHERE id = 1')
            result = "the sink was the victim (retried)"
        except psycopg.errors.DeadlockDetected:
            result = "the other session was the victim"
        other.rollback()
    return result


def terminate_sink(run: Run) -> str:
    return f"{run.dba('SELECT pg_terminate_backend(%s)', run.sink_backends())} sink sessions terminated"


def restart(service: str) -> Callable[[Run], str]:
    def inject(run: Run) -> str:
        run.stack.stop(service)
        run.stack.up((service,), timeout=240, log=lambda m: None)
        return f"{service} stopped and started"

    return inject


def garbage(run: Run) -> str:
    run.produce("notes", b"\x00not a seam record at all")
    return "20 bytes of garbage on notes' topic"


def truncated(run: Run) -> str:
    run.produce("notes", b'{"op":"u","before":{"id":1,"n":0},"after":{"id":1,"n":')
    return "a record cut short on notes' topic"


def forged_begin(run: Run) -> str:
    begin = (
        b'{"v":1,"control":"BEGIN","batch":"forged","db":"%s","table":"accounts","mode":"full","columns":[],"key":[]}'
    )
    run.produce("notes", begin % run.db.encode(), control=True)
    return "a BEGIN naming accounts on notes' topic"


def row_image(image: str) -> Callable[[Run], str]:
    def inject(run: Run) -> str:
        with run.source() as src, src.cursor() as cur:
            cur.execute(f"SET SESSION binlog_row_image = '{image}'")
            cur.execute("UPDATE notes SET n = n + 1 WHERE id <= 5")  # body (TEXT) unchanged: not logged
        return f"an UPDATE of notes logged with binlog_row_image {image}"

    return inject


def compressed_binlog(run: Run) -> str:
    """A DBA turns MariaDB's log_bin_compress on under the writer (server-wide: the full list only)."""
    with run.source() as src, src.cursor() as cur:
        cur.execute("SELECT @@global.log_bin_compress_min_len")
        was = cur.fetchone()[0]
        cur.execute("SET GLOBAL log_bin_compress = ON, GLOBAL log_bin_compress_min_len = 10")
        try:
            time.sleep(5)  # the writer's transactions of these seconds are logged compressed
        finally:
            cur.execute("SET GLOBAL log_bin_compress = OFF, GLOBAL log_bin_compress_min_len = %s", (was,))
    return "log_bin_compress ON for 5 s under the writer"


def large_value(run: Run) -> str:
    with run.source() as src, src.cursor() as cur:
        cur.execute(
            "INSERT INTO blobs VALUES (1, REPEAT('x', 5 * 1024 * 1024)) ON DUPLICATE KEY UPDATE data = VALUES(data)"
        )
    return "a 5 MiB LONGBLOB"


def nul(run: Run) -> str:
    with run.source() as src, src.cursor() as cur:
        cur.execute("UPDATE notes SET body = 'nul\\0inside' WHERE id = 7")
    return "a NUL in notes.body"


def second_reader(run: Run) -> str:
    done = run.seam("stream", "reader", timeout=120, check=False)
    line = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    if done.returncode != 2 or "already runs" not in line:
        raise FaultsFailed(f"a second reader was not refused: {done.returncode} {line}")
    return f"refused: {line[:120]}"


def killed_full_load(run: Run) -> str:
    """The load's whole process tree SIGKILLed as soon as the sink has opened its batch (read its BEGIN). Its Spark
    job runs in the tree (spark-submit: a shared driver outside it would publish on to END before it saw its
    caller gone), and the batch is looked for every 20 ms: waiting for 2,000 rows on the topic, looked at every
    0.5 s, missed a warm load that published its 300,000 rows in 0.7 s, whose batch then committed."""
    with open(run.path) as f:
        doc = yaml.safe_load(f)
    doc["spark"] = {**(doc.get("spark") or {}), "shared_driver_idle_s": 0}
    path = os.path.join(os.path.dirname(run.path), "faults-spark-submit.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    with run.target() as watch:  # one session for the looks every 20 ms
        return _kill_in_batch(run, watch, path)


def _kill_in_batch(run: Run, watch, path: str) -> str:
    """``killed_full_load``'s load, started from ``path``, killed once its batch is open; ``watch``: a target session."""
    earlier = [r[0] for r in watch.execute("SELECT batch_id FROM seam.batches WHERE db = %s", (run.db,))]

    def batch_state() -> str | None:  # of the killed load's batch (the sink opens it when it reads the BEGIN)
        row = watch.execute(
            "SELECT state FROM seam.batches WHERE db = %s AND tbl = 'bulk' AND NOT batch_id = ANY(%s) "
            "ORDER BY opened_at DESC LIMIT 1",
            (run.db, earlier),
        ).fetchone()
        return row[0] if row else None

    load = subprocess.Popen(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{run.db}.bulk"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while batch_state() is None and load.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    caught = load.poll() is None and batch_state() == "open"
    for pid in process_tree(load.pid):  # the whole tree (Spark runs in sessions of its own): no on_kill, no cleanup
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    load.wait(60)
    if not caught:
        raise FaultsFailed(f"the full load was not caught between BEGIN and END (its batch: {batch_state()})")

    if not run.wait_for("the batch to be abandoned", lambda: batch_state() in ("abandoned", "committed"), 180):
        raise FaultsFailed(f"the killed load's batch was not abandoned within 180 s (it is {batch_state()})")
    if batch_state() == "committed":
        raise FaultsFailed("the killed load's batch committed: the kill came after its END")
    return "killed between BEGIN and END; abandoned"


def faults(short: bool) -> list[tuple[str, set[str], Callable[[Run], str | None]]]:
    every = [
        ("pg_cancel_backend on the sink every 50 ms", set(), cancel_storm(5 if short else 30)),
        ("a target row held, the sink's wait cancelled", set(), held_row_cancelled),
        ("a deadlock with the sink", set(), deadlock),
        ("pg_terminate_backend of the sink", set(), terminate_sink),
        ("PostgreSQL restarted", set(), restart("postgres")),
        ("the broker restarted", set(), restart("kafka")),
        ("a garbage message", {"notes"}, garbage),
        ("a truncated record", {"notes"}, truncated),
        ("a BEGIN naming another table", {"notes"}, forged_begin),
        ("a full load SIGKILLed between BEGIN and END", set(), killed_full_load),
        ("binlog_row_image NOBLOB", {"notes"}, row_image("NOBLOB")),
        ("binlog_row_image MINIMAL", {"notes"}, row_image("MINIMAL")),
        ("log_bin_compress ON (compressed events)", set(), compressed_binlog),
        ("a 5 MiB value", set(), large_value),
        ("a NUL character", set(), nul),
        ("a second change reader", set(), second_reader),
    ]
    if short:  # CI: one of each kind
        keep = {0, 3, 6, 8, 9, 10, 14, 15}
        return [f for i, f in enumerate(every) if i in keep]
    return every


def table(outcomes: list[Outcome]) -> str:
    rows = [("fault", "must stop", "stopped", "way out", "equal", "restarts", "s", "")]
    for o in outcomes:
        rows.append(
            (
                o.fault,
                ",".join(sorted(o.must_stop)) or "-",
                ",".join(sorted(o.stopped)) or "-",
                o.way_out[:60],
                "yes" if o.equal else "NO",
                str(o.restarts),
                f"{o.seconds:.0f}",
                "ok" if o.passed else "FAILED",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def run_faults(short: bool, say: Callable[[str], None] = print, only: str = "") -> list[Outcome]:
    workdir = tempfile.mkdtemp(prefix="seam-faults-")
    run = Run(workdir, say)
    say(f"faults: database {run.db}, pipeline {run.path}")
    run.start()
    outcomes = []
    try:
        for name, must_stop, inject in faults(short):
            if only.lower() not in name.lower():
                continue
            outcomes.append(run.fault(name, must_stop, inject))
    finally:
        run.close()
    say("\n" + table(outcomes))
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="the CI subset")
    parser.add_argument("--only", default="", help="only the faults whose name contains this (e.g. restarted)")
    args = parser.parse_args(argv)
    try:
        with stack_services():
            outcomes = run_faults(args.short, say=lambda m: print(m, flush=True), only=args.only)
    except FaultsFailed as exc:
        print(f"faults FAILED: {exc}", file=sys.stderr)
        return 1
    failed = [o.fault for o in outcomes if not o.passed]
    print(
        f"faults: {len(outcomes) - len(failed)} of {len(outcomes)} passed" + (f"; FAILED: {failed}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
