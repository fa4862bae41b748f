"""Long-running Seam processes (the stream's reader and sink parts) under PID files in the state dir.

Each process gets its own session (process group), so that stopping it stops its children too (the sink's
JVM), and a PID file naming its binary, so that a recycled PID is never mistaken for it.

Delivery guarantee: none (process management); the parts' own guarantees hold however they are stopped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from seam.config import state_dir
from seam.files import open_private, private_dir


class Processes:
    """Processes started under names, with PID files in ``<state dir>/run`` and logs in ``<state dir>/logs``."""

    def __init__(self, state: Path | None = None):
        self.state = state or state_dir()
        self.run_dir = self.state / "run"
        self.log_dir = self.state / "logs"
        self._procs: dict[str, subprocess.Popen] = {}

    def start_process(self, name: str, cmd: list[str]) -> int:
        """Start a long-running process under a PID file, logging to logs/<name>.log."""
        private_dir(self.log_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._spawn(name, cmd, self.log_dir / f"{name}.log", env=dict(os.environ))
        return self._procs[name].pid

    def running(self, name: str) -> int | None:
        """PID of a live process started under ``name``, else None."""
        return self._alive_pid(name)

    def argument(self, name: str, option: str) -> str | None:
        """The value of ``option`` on the command line of the live process started under ``name``, if any."""
        pid = self._alive_pid(name)
        if pid is None:
            return None
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            return None
        return argv[argv.index(option) + 1] if option in argv[:-1] else None

    def stop(self, name: str, sig: int = signal.SIGTERM, leader_first: bool = False) -> int | None:
        """Stop the process group our PID file names, if it still runs; return its PID. ``leader_first``: the
        signal goes to the process we started alone, which stops its children in order (see ``stop_group``)."""
        pid = self._alive_pid(name)
        if pid is not None:
            stop_group(pid, sig, leader_first=leader_first)
        self._pidfile(name).unlink(missing_ok=True)
        return pid

    def _pidfile(self, name: str) -> Path:
        return self.run_dir / f"{name}.pid"

    def _spawn(
        self, name: str, cmd: list[str], logfile: Path, env: dict | None = None, user: str | None = None
    ) -> None:
        with open_private(logfile) as out:
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
                user=user,
                cwd=self.state,
            )
        self._pidfile(name).write_text(json.dumps({"pid": proc.pid, "exe": Path(cmd[0]).name}))
        self._procs[name] = proc

    def _alive_pid(self, name: str) -> int | None:
        """PID from our PID file, only if that process still runs our binary."""
        try:
            info = json.loads(self._pidfile(name).read_text())
        except (OSError, ValueError):
            return None
        pid, exe = int(info["pid"]), info["exe"]
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z"):
                return None  # a zombie is not running
        except OSError:
            return None
        return pid if any(exe.encode() in part for part in cmdline[:2]) else None


def stop_group(pid: int, sig: int, grace: float = 30.0, leader_first: bool = False) -> None:
    """Signal a process group, and SIGKILL it if it is still there after ``grace`` seconds. ``leader_first``:
    signal its leader alone and give it ``grace`` to stop its children in order (a stream sink stops its
    query before Spark; signalled together, Spark's Python workers die under a running micro-batch), then
    the group as above."""
    try:
        pgid = os.getpgid(pid)
        if leader_first:
            os.kill(pid, sig)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and _group_alive(pgid):
                _reap(pid)
                time.sleep(0.2)
            grace = 10.0
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        _reap(pid)
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _reap(pid)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
