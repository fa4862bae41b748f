"""Fixtures that run the real embedded services, once per test session.

A stack already started with `seam up` is reused as it is; otherwise the
fixtures start what they need and stop, at the end, only what they started.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))  # as Airflow puts its plugins folder on sys.path

from seam.config import load_pipeline  # noqa: E402
from seam_dev.stack import EmbeddedStack, use_stack_env  # noqa: E402

pytest_plugins = ["tests.support.airflow"]  # the webhook fixture


logging.getLogger("py4j").setLevel(logging.WARNING)  # quiet its close() at interpreter exit


class _Services:
    def __init__(self):
        self.stack = EmbeddedStack()
        self.started: list[str] = []

    def ensure(self, *names: str) -> EmbeddedStack:
        self.stack.settings(create=True)
        for name in names:
            if not self.stack._alive_pid(name):
                self.stack.up((name,), timeout=240, log=lambda m: print(f"[fixture] {m}"))
                self.started.append(name)
        use_stack_env(self.stack)
        return self.stack

    def stop_started(self):
        for name in reversed(self.started):
            self.stack.stop(name)


@pytest.fixture(scope="session")
def services():
    s = _Services()
    yield s
    if os.environ.get("SEAM_TEST_KEEP_STACK") != "1":
        s.stop_started()


@pytest.fixture(scope="session")
def stack(services) -> EmbeddedStack:
    """MariaDB, the broker and PostgreSQL, up and healthy."""
    return services.ensure("mysql", "kafka", "postgres")


@pytest.fixture(scope="session")
def airflow_stack(services) -> EmbeddedStack:
    """The whole stack including Airflow standalone."""
    return services.ensure("mysql", "kafka", "postgres", "airflow")


@pytest.fixture(scope="session")
def pipeline(stack):
    return load_pipeline()


@pytest.fixture(scope="session")
def seeded(stack, pipeline):
    """The demo schema with a small, repeatable data set."""
    from seam_dev import demo

    counts = demo.seed(pipeline, rows=2000, admin_url=os.environ["SEAM_MYSQL_URL"], log=lambda m: None)
    return counts
