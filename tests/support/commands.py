"""``run_command``: ``subprocess.run`` for the suite's commands, in a session of their own.

A ``seam`` command starts a sink and a spark-submit that inherit its stdout and stderr. ``subprocess.run``
with a timeout kills only the command, then reads its pipes until they close: the children keep them
open, and the test (and its lane, and CI) waits for ever. Here a command that outlives its timeout is
killed with its whole session, and the test fails with the tail of what it printed.
"""

from __future__ import annotations

import os
import signal
import subprocess
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
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            pytest.fail(
                f"{' '.join(map(str, args))[:300]} did not end within {timeout:.0f} s (killed with its "
                f"children):\n{_tail(stdout, 3000)}\n{_tail(stderr, 5000)}"
            )
    done = subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done


def _tail(out: str | bytes | None, size: int) -> str:
    if out is None:
        return ""
    return (out.decode(errors="replace") if isinstance(out, bytes) else out)[-size:]
