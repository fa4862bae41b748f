"""Fixtures that run the real embedded services, once per test session.

A stack already started with `seam up` is reused as it is; otherwise the
fixtures start what they need and stop, at the end, only what they started.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import resource
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))  # as Airflow puts its plugins folder on sys.path

from seam.config import load_pipeline  # noqa: E402
from seam_dev.settings import use_stack_env  # noqa: E402
from seam_dev.stack import EmbeddedStack  # noqa: E402

pytest_plugins = ["tests.support.airflow"]  # the webhook fixture


logging.getLogger("py4j").setLevel(logging.WARNING)  # quiet its close() at interpreter exit


# ------------------------------------------------------------------ lanes --
# scripts/test.sh runs the suite in three lanes (pytest-xdist workers, one file at a time each). In each lane the
# demo pipeline (and the copies tests make of it) has a name of its own, which keys the stream's parts and
# locks, and its change readers connect to the source with server ids of their own.
LANE = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ...; None in a one-process run
if LANE:
    os.environ["SEAM_PIPELINE_NAME"] = f"demo-{LANE}"
    os.environ["SEAM_SERVER_ID"] = str(5401 + 1000 * (int(LANE.removeprefix("gw")) + 1))

# The files that run alone first (ALONE_FILES), then the longest, so that the lanes end together; all Airflow tests
# share one lane (one Airflow).
FIRST = [
    "tests/alone",
    "tests/airflow",
    "tests/stack/test_stream_faults.py",
    "tests/stack/test_full_load.py",
    "tests/stack/test_repair.py",
    "tests/stack/test_benchmarks.py",
    "tests/stack/test_faults.py",
    "tests/stack/test_incremental.py",
    "tests/stack/test_handoff.py",
    "tests/stack/test_resume.py",
    "tests/stack/test_torture.py",
    "tests/stack/test_sink.py",  # mostly waits (brokers restarted, topics lost): run last, the lanes idled behind it
    "tests/stack/test_failover.py",
]


# The files whose every test runs ``alone``, one unit of work run first: each entry into ``alone`` waits for the
# other lanes' running tests to end while the third lane, held at the turnstile, idles too (CI, one run: 62 s
# of two lanes behind one long test for a 4 s test of binlog checksums); in a row they wait once, at the start.
ALONE_FILES = (
    "tests/stack/test_spark_driver.py",
    "tests/stack/test_binlog_checksum.py",
    "tests/stack/test_dba_settings.py",
)


def _lane_group(nodeid: str) -> str:
    path = nodeid.split("::")[0]
    if path in ALONE_FILES:
        return "tests/alone"
    return "tests/airflow" if path.startswith(("tests/airflow/", "tests/ui/")) else path


class _LaneScheduling(LoadScopeScheduling):
    """A file (all of Airflow's tests together) is one unit of work, given whole to the next free lane: only
    once the lane's last test is all it has left (xdist's own gives a lane its next unit with two tests left,
    which queued a unit behind a lane's last long test while another lane stood idle)."""

    def _split_scope(self, nodeid: str) -> str:
        return _lane_group(nodeid)

    def _reschedule(self, node) -> None:
        if not node.shutting_down and self.workqueue and self._pending_of(self.assigned_work[node]) > 1:
            return
        super()._reschedule(node)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return _LaneScheduling(config, log) if config.getvalue("dist") == "loadscope" else None


def pytest_collection_modifyitems(config, items):
    if LANE:
        rank = {group: i for i, group in enumerate(FIRST)}
        rank.update({_lane_group(item.nodeid): 0.5 for item in items if _needs_no_services(item)})
        items.sort(key=lambda item: rank.get(_lane_group(item.nodeid), len(FIRST)))  # stable: files stay whole


def _needs_no_services(item) -> bool:
    """The unit tests: they run beside ``alone`` tests, next in line after them (the other lanes idled there)."""
    return item.nodeid.startswith("tests/unit/")


@contextlib.contextmanager
def _flock(path: Path, mode: int = fcntl.LOCK_EX) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@functools.cache
def _locks_dir() -> Path:
    return EmbeddedStack().state / "test-lanes"


# --------------------------------------------------------------- CPU report --
# Two cores, shared by the lanes and the services: SEAM_TEST_CPU_REPORT=1 says, at the end, which tests used the most.
# Every run says how its lanes were used (where the wall time went that the lanes' work does not explain).
# Per test: the CPU of the test's own process (its threads: in-process readers, sinks, comparers) and of the
# child processes it waited for (the seam commands it ran); not the shared services' (MariaDB, PostgreSQL,
# the broker, Airflow, the shared Spark driver).
CPU_REPORT = os.environ.get("SEAM_TEST_CPU_REPORT") == "1"


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


@contextlib.contextmanager
def _cpu_measured(item) -> Iterator[None]:
    own, children, began = time.process_time(), _children_cpu(), time.monotonic()
    yield
    line = [
        f"{time.process_time() - own:.2f}",
        f"{_children_cpu() - children:.2f}",
        f"{time.monotonic() - began:.2f}",
        item.nodeid,
        LANE or "-",
        f"{time.time():.0f}",  # when it ended: the lanes' timelines
    ]
    with _flock(_locks_dir() / "cpu.lock"), open(_locks_dir() / "cpu.tsv", "a") as f:
        f.write("\t".join(line) + "\n")


def pytest_terminal_summary(terminalreporter):
    report = _locks_dir() / "cpu.tsv"
    if hasattr(terminalreporter.config, "workerinput") or not report.exists():
        return
    rows = [line.split("\t") for line in report.read_text().splitlines()]
    _lanes_summary(terminalreporter, rows)
    if not CPU_REPORT:
        return
    rows.sort(key=lambda r: -(float(r[0]) + float(r[1])))
    total = sum(float(r[0]) + float(r[1]) for r in rows)
    terminalreporter.section(f"CPU seconds per test (own + children), {total:,.0f} in all; the top 40")
    for own, children, wall, nodeid, *_ in rows[:40]:
        terminalreporter.write_line(f"{float(own) + float(children):8.1f} {own:>8} {children:>8} {wall:>8}s  {nodeid}")


def _lanes_summary(terminalreporter, rows: list[list[str]]) -> None:
    """Per lane: its tests' time, when its last test ended (from the first test's start) and its last files."""
    ends = [float(r[5]) for r in rows]
    began = min(end - float(r[2]) for end, r in zip(ends, rows))
    terminalreporter.section(f"lanes: {max(ends) - began:,.0f} s from the first test's start to the last's end")
    for lane in sorted({r[4] for r in rows}):
        mine = sorted((float(r[5]) - began, float(r[2]), r[3].split("::")[0]) for r in rows if r[4] == lane)
        files: dict[str, float] = {}
        for end, _, path in mine:
            files[path] = end
        last = ", ".join(f"{path.removeprefix('tests/')} {end:.0f}" for path, end in list(files.items())[-3:])
        busy = sum(wall for _, wall, _ in mine)
        terminalreporter.write_line(
            f"{lane}: {len(mine)} tests, {busy:,.0f} s in them, the last ended at {mine[-1][0]:,.0f} s; last: {last}"
        )


_others_held: contextlib.ExitStack | None = None  # the lanes' lock, held from an ``alone`` test through the next


def _enter_lanes(stack: contextlib.ExitStack, mode: int) -> None:
    with _flock(_locks_dir() / "turnstile.lock"):
        stack.enter_context(_flock(_locks_dir() / "lanes.lock", mode))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test marked ``alone`` (it restarts a service, changes a server-wide setting, ends other sessions)
    runs while the other lanes wait between their tests; the others share the lanes. The turnstile keeps a
    waiting ``alone`` test from being starved by the other lanes' next tests. ``alone`` tests in a row keep
    the other lanes held: let go in between, each would wait again for the longest of their tests to end."""
    global _others_held
    with _cpu_measured(item):
        if not LANE:
            yield
            return
        alone = item.get_closest_marker("alone") is not None
        with contextlib.ExitStack() as held:
            if alone and _others_held is None:
                _others_held = contextlib.ExitStack()
                _enter_lanes(_others_held, fcntl.LOCK_EX)
            elif not alone and not _needs_no_services(item):
                _enter_lanes(held, fcntl.LOCK_SH)
            yield
        if _others_held is not None and not (nextitem and nextitem.get_closest_marker("alone")):
            _others_held.close()
            _others_held = None
        airflow_tests_done = _lane_group(item.nodeid) == "tests/airflow" and (
            nextitem is None or _lane_group(nextitem.nodeid) != "tests/airflow"
        )
        if airflow_tests_done:
            _stop_airflow_if_started()


# --------------------------------------------------------------- services --
def _started_file() -> Path:
    return _locks_dir() / "started"


def _stop_airflow_if_started() -> None:
    """Airflow's tests are one lane's unit of work (they share one Airflow): once they are done, an
    Airflow the suite started would only idle (a scheduler, a DAG processor, an API server and a
    triggerer polling), taking CPU from the other tests for the rest of the run."""
    with _flock(_locks_dir() / "services.lock"):
        if "airflow" in _started_file().read_text().split():
            EmbeddedStack().stop("airflow")


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # the run's own process: the lanes' record starts empty
        _locks_dir().mkdir(parents=True, exist_ok=True)
        _started_file().write_text("")
        (_locks_dir() / "cpu.tsv").unlink(missing_ok=True)


def pytest_sessionfinish(session):
    """The run's own process stops, at the end, what any lane started (unless SEAM_TEST_KEEP_STACK=1)."""
    if hasattr(session.config, "workerinput") or os.environ.get("SEAM_TEST_KEEP_STACK") == "1":
        return
    stack = EmbeddedStack()
    for name in reversed(_started_file().read_text().split()):
        stack.stop(name)
    for driver in stack.run_dir.glob("spark-driver-*.pid"):  # the shared Spark drivers the loads started
        stack.stop(driver.stem)


class _Services:
    def __init__(self):
        self.stack = EmbeddedStack()

    def ensure(self, *names: str) -> EmbeddedStack:
        with _flock(_locks_dir() / "services.lock"):  # one lane starts a service, the other finds it up
            self.stack.settings(create=True)
            for name in names:
                if not self.stack._alive_pid(name):
                    self.stack.up((name,), timeout=240, log=lambda m: print(f"[fixture] {m}"))
                    with open(_started_file(), "a") as f:
                        f.write(name + "\n")
        use_stack_env(self.stack.state)
        return self.stack


@pytest.fixture(scope="session")
def services():
    return _Services()


@pytest.fixture(scope="session")
def stack(services) -> EmbeddedStack:
    """MariaDB, the broker and PostgreSQL, up and healthy."""
    return services.ensure("mysql", "kafka", "postgres")


@pytest.fixture(scope="session")
def airflow_stack(services) -> EmbeddedStack:
    """The whole stack including Airflow standalone."""
    return services.ensure("mysql", "kafka", "postgres", "airflow")


@pytest.fixture
def private_broker(tmp_path) -> Iterator[EmbeddedStack]:
    """A broker of the test's own, for a test that kills or restarts it: the tests beside it keep the stack's."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SEAM_KAFKA_PORT", str(port))
        broker = EmbeddedStack(tmp_path / "broker")
        broker.settings(create=True)
    broker.up(("kafka",), timeout=240, log=lambda m: None)
    yield broker
    broker.stop("kafka")


@pytest.fixture(scope="session")
def pipeline(stack):
    return load_pipeline()


@pytest.fixture(scope="session")
def seeded(stack, pipeline, testrun_uid):
    """The demo schema with a small, repeatable data set, seeded once per run whichever lane asks first."""
    from seam_dev import demo

    stamp = _locks_dir() / "seeded.json"
    with _flock(_locks_dir() / "seed.lock"):
        done = json.loads(stamp.read_text()) if stamp.exists() else {}
        if done.get("run") == testrun_uid:
            return done["counts"]
        counts = demo.seed(pipeline, rows=2000, admin_url=os.environ["SEAM_MYSQL_URL"], log=lambda m: None)
        stamp.write_text(json.dumps({"run": testrun_uid, "counts": counts}))
        return counts
