"""Where the output of the processes a load starts from the command line goes: every line to a log file,
and to the terminal only Seam's own (its progress lines for the loaded tables, its one-line errors, and the
warnings and errors of Seam's loggers). Spark's start-up chatter and warnings stay in the file.

Delivery guarantee: none (output only).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from seam.core.errors import ONE_LINE
from seam.files import open_private, private_dir


class LoadOutput:
    """A ``seam.load_run.LineLog`` for ``seam load``: the whole output in ``path``, Seam's lines through ``echo``."""

    def __init__(self, path: Path, tables: list[str], echo: Callable[[str], None] = print):
        private_dir(path.parent)
        self.path = path
        self._file = open_private(path)
        self._lock = threading.Lock()  # the Spark job's and the sink's relays write at once
        self._ours = (*(f"{t}: " for t in tables), "SEAM_RESULT ")
        self._echo = echo

    def log(self, level: int, msg, *args) -> None:
        line = str(msg) % args if args else str(msg)
        with self._lock:
            self._file.write(line.encode() + b"\n")
            self._file.flush()
            if self._shown(level, line):
                self._echo(line)

    def _shown(self, level: int, line: str) -> bool:
        if line.startswith(self._ours) or ONE_LINE.match(line):
            return True
        # Seam's logging format: "<date> <time> seam.<part> <LEVEL> <message>"
        fields = line.split(" ", 4)
        return level >= logging.WARNING and len(fields) > 3 and fields[2].startswith("seam.")

    def close(self) -> None:
        self._file.close()
