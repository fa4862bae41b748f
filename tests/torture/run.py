"""`make torture`: the randomized differential test (issue 14, item 5).

While the seeded workload (``tests/torture/workload.py``) writes from before the first full load until
``--duration`` seconds after it and then commits one transaction of ``--big-rows`` rows, Seam runs as a user runs it: the stream is started before the first
full load, all tables are loaded, one table is loaded again mid-run (that load SIGKILLed at a moment drawn
from the seed, then run again: it resumes), rows of one table are deleted, changed and added in the target
behind Seam's back and ``seam repair`` mends them, and the change reader, the sink and the broker are SIGKILLed at moments drawn from the seed and started again; between the kills a DBA changes how the
source logs (``binlog_checksum`` flipped, ``log_bin_compress`` on or off; ``--no-dba``: not). When the workload is done and the
stream has drained, the independent comparer (``tests/support/independent.py``, no Seam code) must find
every table equal to its source, row by row. A table the stream stopped fails the run with its reason.

    python -m tests.torture.run --seed 7 --duration 600      (make torture SEED=7 DURATION=600)

Runs on the test stack (``scripts/test-env.sh``): it starts what is not running and stops what it started.
The last lines are the report: seed, transactions by shape, row changes applied, kills, loads, result.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import psycopg
import pymysql
import yaml

from seam.cli.stream_start import stream_processes
from seam.config import load_pipeline
from seam.core.pipeline import STREAM_SINKS
from seam_dev.stack import EmbeddedStack
from tests.support.commands import process_tree
from tests.support.independent import compare
from tests.support.services import stack_services
from tests.torture.workload import BELOW, TABLES, Workload

KEYS = {"owners": ["id"], "entries": ["id"], "notes": ["id"], "events": "none", "postings": ["id"]}


def _pipeline_file(workdir: str, db: str, bootstrap: str, sink: str | None) -> str:
    doc = yaml.safe_load(open(load_pipeline().path))
    doc["tables"] = [{"name": f"{db}.{t}", "key": KEYS[t], "sync": "stream"} for t in TABLES]
    doc["kafka"]["topic_prefix"] = f"seam.{db}"
    doc["kafka"]["bootstrap"] = bootstrap
    # the least memory per transaction: every transaction of more than a few thousand rows (the big one, a
    # cascade) spills in the reader and is staged in the sink, under the kills
    doc["stream"] = {**(doc.get("stream") or {}), "max_transaction_memory": 2**20}
    if sink:  # stream.sink: which streaming sink is killed (the pipeline's default otherwise)
        doc["stream"]["sink"] = sink
    # small tables in several chunks all the same: chunks at different positions, reconciled, under the kills
    doc["spark"] = {**(doc.get("spark") or {}), "min_chunk_rows": 1}
    path = os.path.join(workdir, "torture.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    return path


def _seam(path: str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        output = done.stdout + done.stderr
        saved = os.path.join(os.path.dirname(path), f"seam-{int(time.time())}.log")
        with open(saved, "w") as f:
            f.write(output)
        # the Python error, not the JVM's stack under it
        lines = [line for line in output.splitlines() if not line.startswith(("\tat ", "\t... "))]
        raise TortureFailed(
            f"seam {' '.join(args)} failed ({done.returncode}; all of its output in {saved}): "
            + "\n".join(lines)[-2500:]
        )
    return done


def _kill_group(pid: int | None) -> None:
    if pid:
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _kill(broker: EmbeddedStack, path: str, victim: str, rng: random.Random) -> None:
    """SIGKILL one part (the broker: ``broker``'s) and start it again as a user (or a supervisor) would."""
    name = "kafka" if victim == "broker" else stream_processes(load_pipeline(path))[victim]
    pid = (broker if victim == "broker" else EmbeddedStack()).running(name)
    if pid is None:
        raise TortureFailed(f"the {victim} ({name}) was not running when it was to be killed")
    _kill_group(pid)
    time.sleep(rng.uniform(0, 2))
    if victim == "broker":
        broker.up(("kafka",), timeout=120, log=lambda m: None)
    _seam(path, "stream", "start", timeout=180)  # idempotent: starts what is down


def _killed_then_loaded(path: str, tables: list[str], after_s: float) -> str:
    """A full load SIGKILLed ``after_s`` seconds in (its whole process tree, as a killed Airflow task or a lost
    host leaves it: no cleanup), then run again as a user would; what the second load said of the first."""
    load = subprocess.Popen(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", *tables],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(after_s)
    finished = load.poll() is not None
    for pid in process_tree(load.pid):  # Spark's processes run in sessions of their own
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    load.wait(60)
    began = time.monotonic()
    again = _seam(path, "load", "full", *tables).stdout
    with open(os.path.join(os.path.dirname(path), "load-again.log"), "w") as f:
        f.write(again)
    kept = re.findall(r"resumed: \d+ of \d+ chunks kept", again)
    killed = "finished before its kill" if finished else f"killed after {after_s:.1f} s"
    return f"{killed}; run again in {time.monotonic() - began:.0f} s: {', '.join(kept) or 'not resumed'}"


# tables whose target rows a run changes behind Seam's back: how it changes a row, and the columns a copy
# under another key must not share with its row (a UNIQUE key). Children of cascades among them (notes, and
# postings with its replies): the rows a cascade changes while the repair runs are copied again too. Not
# entries, a middle level: the cascades through it that postings had not applied yet are not recorded for
# postings by a repair, which then stops postings with its remedy (README, "Repair, not reload")
TAMPERED = {
    "owners": ("balance = balance + 1", {"code": "code || '-copy'"}),
    "notes": ("body = 'tampered'", {}),
    "postings": ("amount = amount + 1", {}),
}


def _tampered_then_repaired(path: str, pipeline, db: str, table: str, rng: random.Random) -> str:
    """Rows of ``table`` deleted, changed and added in the target, as a person or another job might, then
    ``seam repair``, under the running stream and workload: the comparison at the end must find it equal."""
    change, unique = TAMPERED[table]
    target = f'"{db}"."{table}"'
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        ids = [r[0] for r in conn.execute(f"SELECT id FROM {target} ORDER BY id").fetchall()]
        picked = rng.sample(ids, min(len(ids), 9))
        gone, changed, copied = picked[:3], picked[3:6], picked[6:]
        conn.execute(f"DELETE FROM {target} WHERE id = ANY(%s)", (gone,))
        conn.execute(f"UPDATE {target} SET {change} WHERE id = ANY(%s)", (changed,))
        columns = [r[0] for r in conn.execute(f"SELECT * FROM {target} LIMIT 0").description or []]
        others = [c for c in columns if c != "id"]
        names = ", ".join(f'"{c}"' for c in others)
        values = ", ".join(unique.get(c, f'"{c}"') for c in others)
        for key in copied:  # keys the source never had
            conn.execute(
                f"INSERT INTO {target} (id, {names}) SELECT id + 1000000000, {values} FROM {target} WHERE id = %s",
                (key,),
            )
    done = _seam(path, "repair", f"{db}.{table}").stdout
    found = re.search(r"([\d,]+) differing row\(s\) found", done)
    return f"{len(picked)} rows tampered with; {found.group(0) if found else 'no count printed'}"


class TortureFailed(AssertionError):
    pass


_SETTINGS = "@@global.binlog_checksum, @@global.log_bin_compress, @@global.log_bin_compress_min_len"


def _binlog_settings(mysql_kwargs: dict) -> tuple:
    conn = pymysql.connect(**mysql_kwargs, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT {_SETTINGS}")
            return cur.fetchone()
    finally:
        conn.close()


def _set_binlog(mysql_kwargs: dict, checksum: str, compress: int, min_len: int) -> None:
    conn = pymysql.connect(**mysql_kwargs, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"SET GLOBAL binlog_checksum = {checksum}, GLOBAL log_bin_compress = {int(compress)}, "
                f"GLOBAL log_bin_compress_min_len = {int(min_len)}"
            )
    finally:
        conn.close()


def _dba(mysql_kwargs: dict, rng: random.Random) -> str:
    """A DBA's change of how the source logs, under the stream: binlog_checksum flipped (a new binlog file, read
    with or without checksums), MariaDB's log_bin_compress on or off (events over 10 bytes compressed)."""
    checksum, _, _ = _binlog_settings(mysql_kwargs)
    checksum, compress = ("NONE" if checksum == "CRC32" else "CRC32"), rng.choice((0, 1))
    _set_binlog(mysql_kwargs, checksum, compress, 10)
    return f"binlog_checksum {checksum}, log_bin_compress {'ON' if compress else 'OFF'}"


def _stopped(pipeline, db: str) -> dict[str, str]:
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT tbl, stopped FROM seam.positions WHERE db = %s AND stopped IS NOT NULL", (db,)
        ).fetchall()
    return dict(rows)


def _applied(pipeline, db: str) -> int:
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        return int(
            conn.execute("SELECT coalesce(sum(changes), 0) FROM seam.positions WHERE db = %s", (db,)).fetchone()[0]
        )


def _converge(pipeline, db: str, mysql_kwargs: dict, limit_s: float, say) -> dict[str, str | None]:
    """Compare every table until all are equal, a table stops, or ``limit_s`` passes in which neither more
    tables became equal nor more changes were applied."""
    started = last_progress = time.monotonic()
    best = (len(TABLES) + 1, -1)
    while True:
        stopped = _stopped(pipeline, db)
        if stopped:
            raise TortureFailed("the stream stopped " + "; ".join(f"{t}: {why}" for t, why in stopped.items()))
        differences = {t: compare(mysql_kwargs, pipeline.target.conninfo(), db, t) for t in TABLES}
        unequal = [t for t, d in differences.items() if d]
        if not unequal:
            say(f"all {len(TABLES)} tables equal after {time.monotonic() - started:.0f} s of draining")
            return differences
        applied = _applied(pipeline, db)
        if len(unequal) < best[0] or applied > best[1]:
            best, last_progress = (min(best[0], len(unequal)), max(best[1], applied)), time.monotonic()
        if time.monotonic() - last_progress > limit_s:
            return differences
        say(f"draining: {', '.join(unequal)} not equal yet ({applied:,} changes applied)")
        time.sleep(3)


def torture(
    seed: int,
    duration: float,
    big_rows: int = 100_000,
    owners: int = 300,
    say=print,
    broker: EmbeddedStack | None = None,
    sink: str | None = None,
    dba: bool = False,
) -> dict:
    """One run; returns the report, raises TortureFailed when a table differs or stopped. ``broker``: the
    stack whose broker the run uses and kills (the test stack's unless given); ``sink``: ``stream.sink``;
    ``dba``: change how the source logs (``_dba``) between the kills, server-wide (so not beside other tests)."""
    mysql_kwargs = _root_kwargs()
    logged_as = _binlog_settings(mysql_kwargs)
    broker = broker or EmbeddedStack()
    rng = random.Random(seed)
    db = f"torture_{seed}_{int(time.time())}"  # a run of its own: no target state or topic of an earlier run
    workload = Workload(mysql_kwargs, seed, db)
    workload.create(owners=owners)
    workdir = tempfile.mkdtemp(prefix="seam-torture-")
    path = _pipeline_file(workdir, db, f"127.0.0.1:{broker.port('kafka')}", sink)
    pipeline = load_pipeline(path)
    report: dict = {
        "seed": seed,
        "database": db,
        "duration_s": duration,
        "big_rows": big_rows,
        "kills": {"reader": 0, "sink": 0, "broker": 0},
        "dba": [],
        "loads": [],
        "repairs": [],
        "snapshot": os.environ.get("SEAM_SNAPSHOT", "auto"),
        "sink": pipeline.stream.sink,
    }
    began = time.monotonic()
    say(
        f"torture seed {seed}: workload from before the first load until {duration:.0f} s after it, then a "
        f"{big_rows:,}-row transaction; {pipeline.stream.sink} sink; pipeline {path}"
    )
    _seam(path, "stream", "start", timeout=180)  # before the first load: it waits for the tables
    failure: list[BaseException] = []
    stop_writing = threading.Event()

    def write() -> None:  # from before the first load until ``duration`` seconds after it
        try:
            workload.run(24 * 3600, should_stop=stop_writing.is_set)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failure.append(exc)

    writer = threading.Thread(target=write, name="torture-workload")
    writer.start()
    try:
        loading = time.monotonic()
        _seam(path, "load", "full", *[f"{db}.{t}" for t in TABLES])
        first_load_s = time.monotonic() - loading
        report["loads"].append(f"all tables at {time.monotonic() - began:.0f} s")
        say(f"full load of {', '.join(TABLES)} done at {time.monotonic() - began:.0f} s, under the workload")
        deadline = time.monotonic() + duration
        reload_at = time.monotonic() + duration * rng.uniform(0.3, 0.7)
        victims = ["reader", "sink", "broker"] + (["dba"] if dba else [])
        rng.shuffle(victims)
        reloaded = False
        for victim in itertools.cycle(victims):  # until the deadline: kills every few seconds, one reload
            time.sleep(rng.uniform(2, 8))
            if failure:
                break
            late = time.monotonic() > deadline  # a slow machine: the reload and one kill of each part still happen
            if not reloaded and (late or time.monotonic() > reload_at):
                table = rng.choice(TABLES)
                tables = (table, *BELOW.get(table, ()))
                how = _killed_then_loaded(
                    path,
                    [f"{db}.{t}" for t in tables],
                    first_load_s * len(tables) / len(TABLES) * rng.uniform(0.1, 1.0),
                )
                report["loads"].append(f"{' '.join(tables)} again at {time.monotonic() - began:.0f} s ({how})")
                say(
                    f"{', '.join(tables)} loaded again at {time.monotonic() - began:.0f} s, under the workload and "
                    f"the stream: {how}"
                )
                table = rng.choice(sorted(TAMPERED))
                how = _tampered_then_repaired(path, pipeline, db, table, rng)
                report["repairs"].append(f"{table} at {time.monotonic() - began:.0f} s ({how})")
                say(f"{table} tampered with in the target and repaired, under the workload and the stream: {how}")
                reloaded = True
            if late and min(report["kills"].values()) > 0:
                break
            if victim == "dba":
                report["dba"].append(f"{_dba(mysql_kwargs, rng)} at {time.monotonic() - began:.0f} s")
                say(f"the DBA set {report['dba'][-1]}")
                continue
            _kill(broker, path, victim, rng)
            report["kills"][victim] += 1
            say(f"killed the {victim} at {time.monotonic() - began:.0f} s and started it again")
        time.sleep(max(0.0, deadline - time.monotonic()))
        stop_writing.set()
        writer.join()
        if failure:
            raise TortureFailed(f"the workload failed: {failure[0]!r}")
        workload.big_transaction(big_rows)
        for victim in ("reader", "sink"):  # while the big transaction is on its way
            time.sleep(rng.uniform(0.5, 4))
            _kill(broker, path, victim, rng)
            report["kills"][victim] += 1
            say(f"killed the {victim} after the {big_rows:,}-row transaction and started it again")
        say(f"workload done at {time.monotonic() - began:.0f} s: {_shapes(workload.stats)}")
        differences = _converge(pipeline, db, mysql_kwargs, limit_s=max(300.0, big_rows / 500), say=say)
    finally:
        stop_writing.set()
        writer.join()
        _set_binlog(mysql_kwargs, *logged_as)
        subprocess.run(
            [sys.executable, "-m", "seam.cli", "--pipeline", path, "stream", "stop"], capture_output=True, timeout=180
        )
    report.update(
        # the source's own state, for a difference: a branch left prepared is in the binlog without its end
        xa_left_prepared=workload.prepared_left(),
        source_hidden_prepared=workload.hidden_prepared(),
        transactions=_shapes(workload.stats),
        workload=dict(workload.stats),
        changes_applied=_applied(pipeline, db),
        seconds=round(time.monotonic() - began),
        result="equal" if not any(differences.values()) else "DIFFERENT",
        differences={t: d for t, d in differences.items() if d},
    )
    say("report: " + json.dumps(report, sort_keys=True, default=str))
    if report["differences"]:
        hidden = report["source_hidden_prepared"]
        raise TortureFailed(
            "source and target differ:\n"
            + "\n".join(f"{t}: {d}" for t, d in report["differences"].items())
            + (
                f"\nthe source holds {hidden} InnoDB transaction(s) prepared without a session and hidden from XA "
                "RECOVER: its tables may differ from its binlog (tests/torture/workload.py, _resolve_xa)"
                if hidden
                else ""
            )
        )
    return report


def _shapes(stats) -> dict:
    shapes = ("plain", "savepoints", "rollback", "xa", "xa_rollback", "autocommit")
    return {s: stats[s] for s in shapes} | {"in all": sum(stats[s] for s in shapes)}


def _root_kwargs() -> dict:
    from sqlalchemy.engine import make_url

    url = make_url(os.environ["SEAM_MYSQL_URL"])
    return dict(
        host=url.host or "127.0.0.1",
        port=url.port or 3306,
        user=url.username,
        password=url.password or "",
        charset="utf8mb4",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--duration", type=float, default=120, help="seconds of workload after the first load (default 120)"
    )
    parser.add_argument("--big-rows", type=int, default=100_000, help="rows of the one big transaction")
    parser.add_argument("--sink", choices=STREAM_SINKS, help="stream.sink (default: the pipeline's)")
    parser.add_argument(
        "--no-dba", action="store_true", help="leave the source's binlog settings alone (they are server-wide)"
    )
    args = parser.parse_args(argv)
    try:
        with stack_services():
            torture(
                args.seed,
                args.duration,
                args.big_rows,
                say=lambda m: print(f"[torture] {m}", flush=True),
                sink=args.sink,
                dba=not args.no_dba,
            )
    except TortureFailed as exc:
        print(f"torture FAILED (seed {args.seed}): {exc}", file=sys.stderr)
        return 1
    print(f"torture passed (seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
