"""The shared Spark driver: one long-running Spark application that the loads of this state dir run their
Spark jobs in, so that a load pays no JVM, SparkContext and Python-worker start (about 5 to 8 s on two cores).

The first load that finds none starts it (spark-submit of ``spark_jobs/spark_driver.py``, detached, logging
to ``<state dir>/logs/spark-driver-<id>.log``) and every later one sends its job there over a Unix socket
(``<state dir>/run/spark-driver-<id>.sock``, mode 0600): one JSON line asking for it, then the job's output
lines and its exit code back. ``<id>`` is the hash of what the application cannot change once started (Seam's
code, the Spark master, the JDBC jar, the JVM options, the Python): a load that differs gets a driver of its
own. The pipeline is read per job with the caller's environment (its connections' variables), so one driver
serves any pipeline. It runs one job at a time. A load that finds it busy goes to the next one, up to
``spark.shared_drivers`` (on a local master; a cluster's master keeps one: an idle application holds its
executors), starting it if none runs there (``<id>-<k>`` for the k-th); a load that finds them all busy (or no
way to start one) runs spark-submit as before. Each stops after ``spark.shared_driver_idle_s`` without a job
(0: never started, every load runs spark-submit), and with ``seam down``.

A caller that goes away (killed, stopped, its socket closed) cancels its job's Spark tasks, as a killed
spark-submit would: its batch gets no END and the next load resumes it.

Delivery guarantee: none by itself; the jobs keep theirs (a cancelled job is a failed one).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from seam.core.errors import SeamError
from seam.core.pipeline import Pipeline
from seam.files import open_private, private_dir
from seam.spark import spark_job_script, spark_master, submit_conf

# (spark, argv, env, say) -> exit code: ``run`` of a job module in spark_jobs
Job = Callable[[object, list, Mapping[str, str], Callable[[str], None]], int]
START_TIMEOUT_S = 180.0
SOCKET_PATH_MAX = 100  # AF_UNIX paths stop at 107 bytes; a longer state dir runs spark-submit


class DriverGone(SeamError):
    """The load that asked for a job went away while it ran: the job stops here (never shown: nobody listens)."""

    kind = "load"


def code_stamp() -> str:
    """What identifies the code a driver runs: each module file of ``seam`` and ``spark_jobs`` with its size and
    modification time (a driver started before a change must not run the new code's jobs)."""
    parts = []
    for top in (Path(__file__).parent, Path(spark_job_script("full_load")).parent):
        for path in sorted(top.rglob("*")):
            if path.suffix in (".py", ".so"):
                st = path.stat()
                parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def driver_identity(pipeline: Pipeline, env: Mapping[str, str]) -> str:
    """The hash of what a running Spark application cannot change: the code, master, jar, JVM and Python (and
    how long it stays idle)."""
    fixed = {
        "code": code_stamp(),
        "master": spark_master(pipeline),
        "jar": pipeline.spark.jdbc_jar,
        "idle_s": pipeline.spark.shared_driver_idle_s,
        "conf": submit_conf(),
        "python": env.get("PYSPARK_PYTHON", sys.executable),
        "env": {k: env.get(k) for k in ("JAVA_HOME", "SPARK_HOME", "SPARK_LOCAL_IP", "SEAM_STATE_DIR")},
    }
    return hashlib.sha256(json.dumps(fixed, sort_keys=True).encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ server --
class Server:
    """The driver's side: accepts one job at a time on ``socket_path`` until ``idle_s`` pass without one."""

    def __init__(self, spark, jobs: Mapping[str, Job], socket_path: Path, identity: str, idle_s: float):
        self.spark, self.jobs, self.path, self.identity, self.idle_s = spark, jobs, socket_path, identity, idle_s
        self.busy = threading.Lock()
        self.last_job = time.monotonic()
        self.cancelled = 0  # jobs whose caller went away
        self.log_path = _log_path(socket_path)

    def serve(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        fresh = self.path.with_name(self.path.name + ".new")
        fresh.unlink(missing_ok=True)
        listener.bind(str(fresh))
        os.chmod(fresh, 0o600)
        listener.listen(16)
        listener.settimeout(1.0)
        os.replace(fresh, self.path)  # there only once it listens: a caller that sees it can connect
        inode = self.path.stat().st_ino
        pid_file = self.path.with_suffix(".pid")  # in seam.processes' format: `seam down` stops it
        pid_file.write_text(json.dumps({"pid": os.getpid(), "exe": Path(sys.executable).name}))
        print(f"seam spark driver: ready on {self.path} (pid {os.getpid()})", flush=True)
        try:
            while self._wanted(inode):
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        finally:
            if self._ours(inode):
                self.path.unlink(missing_ok=True)
                pid_file.unlink(missing_ok=True)
            listener.close()

    def _ours(self, inode: int) -> bool:
        try:
            return self.path.stat().st_ino == inode
        except OSError:
            return False

    def _wanted(self, inode: int) -> bool:
        """Go on while the socket is still ours (a state dir removed or taken over ends it) and not idle."""
        idle = not self.busy.locked() and time.monotonic() - self.last_job > self.idle_s
        return self._ours(inode) and not idle

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                request = json.loads(conn.makefile("rb").readline() or b"{}")
            except ValueError:
                return
            if request.get("job") == "status":  # for `seam status` and tests: no job, no identity needed
                return _send(conn, {"pid": os.getpid(), "busy": self.busy.locked(), "cancelled": self.cancelled})
            if request.get("identity") != self.identity or request.get("job") not in self.jobs:
                return _send(conn, {"refused": "another Seam, Spark or job"})
            if not self.busy.acquire(blocking=False):
                return _send(conn, {"refused": "busy"})
            try:
                _send(conn, {"accepted": os.getpid()})
                code = self._run(conn, request)
                if code is not None:
                    _send(conn, {"exit": code})
            except OSError:
                pass
            finally:
                self.last_job = time.monotonic()
                self.busy.release()

    def _run(self, conn: socket.socket, request: dict) -> int | None:
        """Run the job in a thread while watching the socket; None if the caller went away (its job cancelled)."""
        gone = threading.Event()
        lock = threading.Lock()
        result: list[int] = []

        def went_away() -> None:
            with lock:
                if gone.is_set():
                    return
                gone.set()
            print("seam spark driver: the caller went away; cancelling its Spark jobs", flush=True)
            self.spark.sparkContext.cancelAllJobs()  # one job at a time: all of them are its own

        def say(line: str) -> None:
            with lock:
                if not gone.is_set():
                    try:
                        return _send(conn, {"line": line})
                    except OSError:
                        pass
            went_away()
            raise DriverGone("the load that asked for this job has gone")

        def work() -> None:
            try:
                result.append(self.jobs[request["job"]](self.spark, request["args"], request["env"], say))
            except DriverGone:
                result.append(1)
            except SystemExit as exc:  # the job's argparse refused its arguments (said in the driver's log)
                result.append(exc.code if isinstance(exc.code, int) else 2)
            except Exception as exc:  # noqa: BLE001 - its traceback to the driver's log, one line to the load
                result.append(1)
                if gone.is_set():  # cancelled: Spark's exception says only that
                    print(f"seam spark driver: the cancelled job ended ({type(exc).__name__})", flush=True)
                else:
                    traceback.print_exc()
                    say(
                        f"seam: spark: the job failed in the shared Spark driver ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else ''}); its log: {self.log_path}"
                    )

        job = threading.Thread(target=work, name="seam-job", daemon=True)
        job.start()
        while job.is_alive():
            job.join(0.2)
            if gone.is_set():  # again: a Spark job it started after the first cancel (it was planning then)
                self.spark.sparkContext.cancelAllJobs()
            elif _closed(conn):
                went_away()
        if gone.is_set():
            self.cancelled += 1
            return None
        return result[0]


def _send(conn: socket.socket, message: dict) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _closed(conn: socket.socket) -> bool:
    """The peer closed its end (a caller sends nothing after its request, so readable means EOF)."""
    readable, _, _ = select.select([conn], [], [], 0)
    if not readable:
        return False
    try:
        return conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


# ------------------------------------------------------------------------------------------------ client --
class SharedJob:
    """A job running in the shared driver, for ``seam.load_run.BatchRun`` as its Spark job: ``poll`` is None while
    it runs, then its exit code; ``stop`` closes the socket (the driver cancels the job); ``pid`` is the driver's.
    Its output lines go to ``lines``."""

    def __init__(self, conn: socket.socket, stream: BinaryIO, pid: int, lines: Callable[[str], None], log: Path):
        self.conn, self.pid = conn, pid
        self.code: int | None = None
        self._stopped = False
        self._reader = threading.Thread(target=self._read, args=(stream, lines, log), daemon=True)
        self._reader.start()

    def _read(self, stream, lines: Callable[[str], None], log: Path) -> None:
        code = None
        try:
            for raw in stream:
                message = json.loads(raw)
                if "line" in message:
                    lines(message["line"])
                elif "exit" in message:
                    code = message["exit"]
        except (OSError, ValueError):
            pass
        if code is None and not self._stopped:
            lines(f"seam: spark: the shared Spark driver (pid {self.pid}) ended during the job; its log: {log}")
        self.code = 1 if code is None else code

    def poll(self) -> int | None:
        return None if self._reader.is_alive() else self.code

    def stop(self, grace_s: float = 30.0) -> None:
        self._stopped = True
        try:
            self.conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
        self._reader.join(grace_s)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _ask(path: Path, request: dict) -> tuple[socket.socket, BinaryIO, dict] | None:
    """Send ``request`` to the driver at ``path``; (socket, what it sends next, its answer), or None if none
    listens there."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
        conn.sendall(json.dumps(request).encode() + b"\n")
        stream = conn.makefile("rb")  # one reader for the answer and all after it: it reads ahead
        return conn, stream, json.loads(stream.readline())
    except (OSError, ValueError):
        conn.close()
        return None


def driver_status(path: Path) -> dict | None:
    """The driver at ``path``: its pid, whether it runs a job, how many it cancelled; None if none listens."""
    asked = _ask(path, {"job": "status"})
    if asked is None:
        return None
    asked[0].close()
    return asked[2]


def run_shared(
    pipeline: Pipeline,
    job: str,
    args: list[str],
    env: Mapping[str, str],
    state: Path,
    submit_command: Callable[[list[str]], list[str]],
    lines: Callable[[str], None],
    say: Callable[[str], None],
) -> SharedJob | None:
    """``job`` in a shared driver of this state dir, the first of them that is not busy, started first if none
    runs in its place; None when none can take it (all busy, turned off, or one could not start: ``say`` tells
    why), and the caller runs spark-submit."""
    idle_s = pipeline.spark.shared_driver_idle_s
    if not idle_s:
        return None
    identity = driver_identity(pipeline, env)
    run_dir = state / "run"
    request = {"identity": identity, "job": job, "args": args, "env": dict(env)}
    private_dir(run_dir)
    slots = pipeline.spark.shared_drivers if spark_master(pipeline).startswith("local") else 1
    for slot in range(slots):
        path = _socket_path(run_dir, identity, slot)
        if len(str(path)) > SOCKET_PATH_MAX:
            return None
        with _locked(path.with_suffix(".lock")):
            asked = _ask(path, request)
            if asked is None:
                path.unlink(missing_ok=True)  # a killed driver's: under the lock no other one is starting
                started = _start(path, identity, idle_s, state, env, submit_command, say)
                asked = _ask(path, request) if started else None
        if asked is None:
            return None
        conn, stream, answer = asked
        if "accepted" in answer:
            return SharedJob(conn, stream, int(answer["accepted"]), lines, _log_path(path))
        conn.close()
        if answer.get("refused") != "busy":
            return None
    return None


def _socket_path(run_dir: Path, identity: str, slot: int) -> Path:
    """Where the ``slot``-th driver (from 0) listens: ``spark-driver-<id>.sock``, then ``spark-driver-<id>-<k>.sock``."""
    return run_dir / (f"spark-driver-{identity}.sock" if slot == 0 else f"spark-driver-{identity}-{slot}.sock")


def _log_path(socket_path: Path) -> Path:
    """``<state dir>/logs/<the socket's name>.log``"""
    return socket_path.parent.parent / "logs" / socket_path.with_suffix(".log").name


def _start(
    path: Path,
    identity: str,
    idle_s: float,
    state: Path,
    env: Mapping[str, str],
    submit_command: Callable[[list[str]], list[str]],
    say: Callable[[str], None],
) -> bool:
    """Start the driver (detached, its own session) and wait until it listens; False if it died or took too long."""
    log = _log_path(path)
    private_dir(log.parent)
    command = submit_command(["--socket", str(path), "--identity", identity, "--idle-s", str(idle_s)])
    with open_private(log) as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            start_new_session=True,
            cwd=state,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if path.exists():
            return True
        if proc.poll() is not None:
            say(f"the shared Spark driver did not start (exit {proc.returncode}, log {log}); running spark-submit")
            return False
        time.sleep(0.1)
    say(f"the shared Spark driver did not listen within {START_TIMEOUT_S:.0f}s (log {log}); running spark-submit")
    return False
