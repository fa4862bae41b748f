"""The test stack's services for a harness run from the command line (`make torture`, `make faults`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from seam_dev.settings import use_stack_env
from seam_dev.stack import EmbeddedStack


@contextlib.contextmanager
def stack_services() -> Iterator[EmbeddedStack]:
    """MariaDB, the broker and PostgreSQL of the test stack: starts those not running, puts their endpoints
    in the environment, and stops what it started (unless SEAM_TEST_KEEP_STACK=1)."""
    stack = EmbeddedStack()
    stack.settings(create=True)
    started = [name for name in ("mysql", "kafka", "postgres") if not stack._alive_pid(name)]
    for name in started:
        stack.up((name,), timeout=240, log=print)
    use_stack_env(stack.state)
    try:
        yield stack
    finally:
        if os.environ.get("SEAM_TEST_KEEP_STACK") != "1":
            for name in reversed(started):
                stack.stop(name)
