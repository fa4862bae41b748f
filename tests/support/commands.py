"""``run_command``: ``subprocess.run`` for the suite's commands, in a session of their own.

A ``seam`` command starts a sink and a spark-submit that inherit its stdout and stderr. ``subprocess.run``
with a timeout kills only the command, then reads its pipes until they close: the children keep them
open, and the test (and its lane, and CI) waits for ever. Here a command that outlives its timeout is
stopped with what it started, and the test fails with the tail of what it printed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import Any

import pytest


def run_command(
    args,
    *,
    timeout: float,
    check: bool = False,
    capture_output: bool = False,
    input: str | bytes | None = None,
    **popen: Any,
) -> subprocess.CompletedProcess:
    if capture_output:
        popen.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if input is not None:
        popen["stdin"] = subprocess.PIPE
    with subprocess.Popen(args, start_new_session=True, **popen) as proc:
        try:
            stdout, stderr = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            stdout, stderr = _stop(proc)
            pytest.fail(
                f"{' '.join(map(str, args))[:300]} did not end within {timeout:.0f} s (stopped with its "
                f"children):\n{_tail(stdout, 3000)}\n{_tail(stderr, 5000)}"
            )
    done = subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done


def _stop(proc: subprocess.Popen) -> tuple:
    """SIGTERM to the command's session (``seam`` stops the Spark job and sink it started, in sessions of
    their own), SIGKILL to it a minute later; then what it printed, unless its pipes are still held open."""
    for sig, grace in ((signal.SIGTERM, 60), (signal.SIGKILL, 30)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            return proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    return None, "(its output is still held open by a process it started)"


def _tail(out: str | bytes | None, size: int) -> str:
    if out is None:
        return ""
    return (out.decode(errors="replace") if isinstance(out, bytes) else out)[-size:]


def seam_command(path: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``seam --pipeline PATH ARGS`` in this interpreter, its output captured as text."""
    return run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True, timeout=timeout
    )


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it, whatever session or group they run in."""
    children: dict[int, list[int]] = {}
    for proc in os.listdir("/proc"):
        if proc.isdigit():
            try:
                with open(f"/proc/{proc}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(proc))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found
