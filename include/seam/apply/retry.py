"""Target errors by SQLSTATE: a transient one is retried, never turned into a stopped table or a rejected batch.

Transient: what a moment later may not happen again. A statement cancelled (a DBA's ``pg_cancel_backend``, a
``statement_timeout`` while a reporting query held a lock: 57014), a lock not available (55P03), a deadlock or
serialization failure (40P01, 40001, 40003), the server shutting down or restarting (57P01-57P03), the
connection lost (class 08, or no SQLSTATE at all), a target that takes no writes for now (25006), resources
short (class 53: a full disk, memory, connections) and system errors (class 58). Everything else (a value the
target refuses, a constraint, a missing table) is deterministic: the same statement fails the same way again.
So is a limit a DBA set (53400: ``temp_file_limit``, which a large table's key index built in parallel
exceeds again on every try): retried, it held a load forever under warnings that called it transient.

A step retried here runs in a savepoint of the caller's transaction, so a failed attempt leaves nothing
behind.

Locks held by others. The sink's session waits at most ``LOCK_WAIT`` for a row or table lock (``lock_timeout``):
a reporting query that holds one table's rows for minutes must not hold every table. A table's change
statements that hit it are not retried in place (``LockWait``): the sink leaves that table's changes unapplied
in this transaction, the other tables go on, and the change reader publishes that table's changes again
(``seam.apply.changes``: deferred tables). When the connection itself is gone there is nothing to retry on: the error goes up as it is, and the
part that owns the connection starts again from what the target committed.

Delivery guarantee: none of its own; a retried step is applied once (its failed attempts rolled back).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

import psycopg

from seam.core.errors import CONFIGURATION_LIMIT, first_line, target_limit

log = logging.getLogger("seam.sink")

T = TypeVar("T")

LOCK_WAIT = "5s"  # the sink session's lock_timeout
LOCK_NOT_AVAILABLE = "55P03"

# 25006: the target takes no writes for now (a DBA's default_transaction_read_only for a maintenance window, a
# standby that a failover is about to promote): the stream waits for it, as for a restart
_TRANSIENT_CODES = {"55P03", "57014", "57P01", "57P02", "57P03", "40001", "40P01", "40003", "25006"}
_TRANSIENT_CLASSES = ("08", "53", "58")  # 40002 (a deferred constraint at commit) is the data's, not transient


def transient(exc: BaseException) -> bool:
    """Whether a target error may not happen again when the same work is retried."""
    if not isinstance(exc, psycopg.Error):
        return False
    state = exc.sqlstate
    if state is None:  # no answer from the server at all: the connection broke
        return isinstance(exc, psycopg.OperationalError)
    if state == CONFIGURATION_LIMIT:  # in class 53, but the same work meets the same limit
        return False
    return state in _TRANSIENT_CODES or state.startswith(_TRANSIENT_CLASSES)


def target_addition(exc: BaseException) -> str | None:
    """What someone added to the target's table that refused the rows (a unique index, a CHECK or foreign key
    constraint, a trigger that raises, a NOT NULL column the rows give no value), or None: the table's load
    or repair would meet it again."""
    diag = getattr(exc, "diag", None)
    if diag is None:
        return None
    if isinstance(exc, psycopg.errors.NotNullViolation) and diag.column_name:
        # the load makes a source column NOT NULL only where the source has it so: a column of the users'
        return f"NOT NULL on column {diag.column_name!r}"
    if isinstance(exc, psycopg.errors.IntegrityError) and diag.constraint_name:
        # ``_pkey``: the key Seam made, so the rows' own doing
        return None if diag.constraint_name.endswith("_pkey") else f"constraint or index {diag.constraint_name!r}"
    return "trigger (or rule)" if isinstance(exc, psycopg.errors.RaiseException) else None


def changed_in_target(exc: BaseException) -> str | None:
    """What someone changed in or built on a table Seam made, so that it cannot take the source's rows or DDL
    (Seam gives every column a type that holds every source value): the table or a column gone, dropped or
    renamed in the target, a column's type narrowed there, or views on a column the source drops or retypes.
    A repair would meet it again; a full load makes the table anew."""
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return "the target table is gone (dropped or renamed in the target)"
    if isinstance(exc, psycopg.errors.UndefinedColumn):
        return "a column of the target table is gone (dropped or renamed in the target)"
    if isinstance(exc, (psycopg.errors.NumericValueOutOfRange, psycopg.errors.StringDataRightTruncation)):
        return "a column of the target table was given a narrower type in the target"
    if isinstance(exc, psycopg.errors.DuplicateColumn):
        return "the target table has a column of that name already (added in the target): rename or drop it first"
    if isinstance(exc, psycopg.errors.DependentObjectsStillExist) or (
        isinstance(exc, psycopg.errors.FeatureNotSupported) and "view or rule" in str(exc)
    ):
        return "views or rules in the target depend on the column: drop them first, and create them again after"
    return None


def refused(exc: BaseException) -> str:
    """A deterministic target error's first line, and what of the target's own refused the rows, if anything,
    with the way out."""
    added, changed = target_addition(exc), changed_in_target(exc) or target_limit(exc)
    if changed is not None:
        return f"{first_line(exc)}; {changed}"
    if added is None:
        return first_line(exc)
    return f"{first_line(exc)}; the target table's {added} is not the source's: remove it (or make it agree with the source) first"


def transaction_failed(conn) -> bool:
    """The session's transaction is failed: it ignores every command until its end."""
    return conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR


def connection_lost(conn) -> bool:
    return bool(conn.closed or conn.broken)


class LockWait(Exception):
    """A step waited ``LOCK_WAIT`` on a lock another session holds; the caller leaves it for later."""

    def __init__(self, error: psycopg.Error):
        super().__init__(first_line(error))
        self.error = error


class Retrier:
    """Runs steps in savepoints, retrying transient errors with exponential backoff and jitter; counts them
    (``seam stream status`` shows the count and the last one)."""

    def __init__(self, first_delay: float = 0.2, max_delay: float = 30.0):
        self.first_delay, self.max_delay = first_delay, max_delay
        self.count = 0  # transient errors retried since the count was last taken
        self.last: str | None = None
        # the owner was asked to stop (SIGTERM): a transient error is raised, not retried, and a pause ends, so
        # that a step waiting on a lock a report holds (a load's swap) does not hold the stop for as long
        self.stopping: Callable[[], bool] = lambda: False

    def run(self, conn, step: Callable[[], T], what: str, lock_waits: bool = True) -> T:
        """``step()`` in a savepoint until it succeeds or fails for a reason that is not transient (raised),
        or the connection is lost (raised: the caller's transaction is gone). ``lock_waits`` False: a lock
        another session holds past ``LOCK_WAIT`` raises ``LockWait`` instead of waiting again."""
        delay = self.first_delay
        while True:
            try:
                with conn.transaction():
                    return step()
            except psycopg.Error as exc:
                # a cancel that lands on the savepoint's own ROLLBACK TO (psycopg logs it and raises the first
                # error) leaves the caller's transaction failed: retried there, every statement would fail
                if not transient(exc) or connection_lost(conn) or transaction_failed(conn) or self.stopping():
                    raise
                if not lock_waits and exc.sqlstate == LOCK_NOT_AVAILABLE:
                    self.note(what, exc)
                    raise LockWait(exc) from None
                self.note(what, exc)
                log.warning(
                    "%s: %s (SQLSTATE %s, transient): retrying in %.1f s", what, first_line(exc), exc.sqlstate, delay
                )
                delay = self.pause(delay)

    def pause(self, delay: float) -> float:
        """Sleep about ``delay`` (jittered, so that parts retrying together spread out), less when asked to stop;
        the next delay."""
        until = time.monotonic() + delay * random.uniform(0.5, 1.5)
        while not self.stopping() and (left := until - time.monotonic()) > 0:
            time.sleep(min(left, 0.1))
        return min(delay * 2, self.max_delay)

    def note(self, what: str, exc: BaseException) -> None:
        self.count += 1
        self.last = f"{what}: {first_line(exc)}"[:500]

    def take(self) -> tuple[int, str | None]:
        """The retries since the last call, and the last one's description."""
        count, self.count = self.count, 0
        return count, self.last
