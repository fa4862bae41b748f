"""Files Seam writes (logs, reports): readable by their owner and group only.

Logs carry table names, values of rows that failed and errors from the servers; reports carry rows that
differ. Neither is for every user of the machine: files are 0640 and their folders 0750, whatever the
umask, and a file that exists already is narrowed too.

Delivery guarantee: none (local files).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

FILE_MODE = 0o640
DIR_MODE = 0o750


def private_dir(path: Path) -> Path:
    """``path`` and missing parents created 0750; ``path`` itself narrowed to 0750 if it exists."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(path, DIR_MODE)
    return path


def _private_fd(path: Path, append: bool) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC), FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd


def open_private(path: Path) -> IO[bytes]:
    """A log file (appended to, in bytes) that is, or is made, 0640."""
    return os.fdopen(_private_fd(path, append=True), "ab")


def write_private(path: Path, text: str) -> None:
    """``path`` replaced by ``text`` (UTF-8), 0640."""
    with os.fdopen(_private_fd(path, append=False), "w", encoding="utf-8") as out:
        out.write(text)
