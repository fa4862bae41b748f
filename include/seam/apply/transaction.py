"""The sink's unit of commit: one PostgreSQL transaction carries the rows it applies, the Kafka offsets it
consumed and the source positions it reached.

What the sink holds in memory about them (open batches, applied positions, the next offsets) moves while the
transaction runs and is worth something only if it commits. So after a transaction fails this sink applies
nothing more: a new one resumes from the target, where everything that committed is. And what the sink
tells its callers, that a batch is final, moves only once the commit has happened.

Delivery guarantee: exactly once into the target, as the sink's: nothing is applied on top of a failed
transaction's leftovers in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from seam.apply import SinkError


class TargetTransaction:
    def __init__(self, conn):
        self.conn = conn
        self.failed: str | None = None  # why an earlier transaction failed: this sink is done
        self._on_commit: list[Callable[[], None]] = []

    def on_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once the current transaction has committed (never if it fails)."""
        self._on_commit.append(action)

    @contextmanager
    def __call__(self) -> Iterator[None]:
        if self.failed is not None:
            raise SinkError(
                f"an earlier transaction of this sink failed ({self.failed}); start the sink again: it resumes "
                "from what the target committed"
            )
        try:
            with self.conn.transaction():
                yield
        except BaseException as exc:
            self.failed = f"{type(exc).__name__}: {exc}"[:300]
            self._on_commit.clear()
            raise
        actions, self._on_commit = self._on_commit, []
        for action in actions:
            action()
