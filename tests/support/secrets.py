"""Secrets where other users of the machine can read them: every process's command line (``ps``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path


def _command_lines() -> Iterator[tuple[str, str]]:
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                yield proc.name, (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:  # gone meanwhile
                continue


@contextlib.contextmanager
def watching_command_lines(secrets: list[str]) -> Iterator[list[str]]:
    """While the block runs, every process's command line is read every 0.1 s; yields the list of those that
    showed one of ``secrets`` (filled as they are seen; the caller asserts it is empty at the end)."""
    secrets = [s for s in secrets if s]
    assert secrets, "no secret to look for"
    seen: list[str] = []
    scans = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.1):
            for pid, line in _command_lines():
                if any(s in line for s in secrets):
                    seen.append(f"pid {pid}: {line[:300]}")
            scans[0] += 1

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        done.set()
        thread.join(10)
    assert scans[0] > 0, "the command lines were never read"
