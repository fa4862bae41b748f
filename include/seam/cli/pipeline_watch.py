"""A stream part's watch on its pipeline file. A part reads its tables and settings once, at its start; when
the file then changes to a valid pipeline of the same name (a table added, a setting changed), the part stops
at a safe point and starts again as the same process (``exec``: the same pid, so PID files and the
supervisor's records stay right), and the stream follows the file as it now is within seconds. A change the
part cannot start with (invalid YAML, an unknown key, its own ``--table`` gone, another pipeline name) is
logged once, in one line, and the part goes on with the file as it was.

Delivery guarantee: none of its own; a part stopped and started at any moment loses and doubles nothing
(``seam.source.streaming``, ``seam.apply.sink``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import time

from seam.config import load_pipeline
from seam.core.errors import SeamError

log = logging.getLogger("seam.stream")

CHECK_EVERY_S = 2.0


class PipelineWatch:
    """``changed()`` is the part's extra stop condition; ``restart()`` runs once the part has stopped."""

    def __init__(self, pipeline, tables: list[str]):
        self.path, self.name, self.tables = pipeline.path, pipeline.name, tables
        self._stat = self._stat_now()
        self._digest = self._digest_now()
        self._refused: bytes | None = None  # the digest of a version already logged as refused
        self._next = time.monotonic() + CHECK_EVERY_S
        self.changed_to_valid = False

    def changed(self) -> bool:
        """True once the file has changed to a pipeline this part can start with (checked every few seconds:
        a stat, and the file read only when the stat changed)."""
        if self.changed_to_valid or time.monotonic() < self._next:
            return self.changed_to_valid
        self._next = time.monotonic() + CHECK_EVERY_S
        stat = self._stat_now()
        if stat == self._stat:
            return False
        self._stat = stat
        digest = self._digest_now()
        if digest in (None, self._digest, self._refused):
            return False
        problem = self._problem()
        if problem:
            self._refused = digest
            log.error("the pipeline file %s changed, but this part goes on as it was: %s", self.path, problem)
            return False
        log.info("the pipeline file %s changed: this part stops and starts again with it", self.path)
        self.changed_to_valid = True
        return True

    def restart(self) -> None:
        """Replace this process with the same command (it reads the file again)."""
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])

    def _problem(self) -> str | None:
        try:
            pipeline = load_pipeline(self.path)
            for table in self.tables:
                pipeline.table(table)
        except SeamError as exc:
            return f"{exc}; fix the file (the part takes it up within seconds)"
        if pipeline.name != self.name:
            return (
                f"its name changed from {self.name!r} to {pipeline.name!r}; stop this stream under its old name "
                "(put the old name back, `seam stream stop`), then start it with the new one"
            )
        return None

    def _stat_now(self) -> tuple[int, int] | None:
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def _digest_now(self) -> bytes | None:
        try:
            with open(self.path, "rb") as f:
                return hashlib.sha256(f.read()).digest()
        except OSError:
            return None
