"""The shared Spark driver's socket protocol (seam.spark_driver.Server and SharedJob), with Spark faked: the jobs
here are plain functions and ``cancelAllJobs`` an event. What runs on real Spark is tests/stack/test_spark_driver."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from seam.config import load_pipeline
from seam.spark_driver import Server, SharedJob, _ask, driver_identity


class FakeContext:
    def __init__(self):
        self.cancelled = threading.Event()

    def cancelAllJobs(self):
        self.cancelled.set()


class FakeSpark:
    def __init__(self):
        self.sparkContext = FakeContext()


@pytest.fixture
def driver(tmp_path: Path):
    spark = FakeSpark()
    release = threading.Event()

    def echo(spark_, args, env, say):
        for a in args:
            say(f"{a} {env.get('WHO')}")
        return int(args[-1]) if args and args[-1].isdigit() else 0

    def blocks(spark_, args, env, say):
        say("started")
        while not (spark.sparkContext.cancelled.is_set() or release.is_set()):
            time.sleep(0.01)
        if spark.sparkContext.cancelled.is_set():
            raise RuntimeError("Job cancelled")  # what a cancelled collect() raises
        say("released")
        return 0

    def refuses(spark_, args, env, say):
        raise SystemExit(2)  # what argparse does with arguments it refuses

    path = tmp_path / "run" / "spark-driver-x.sock"
    path.parent.mkdir()
    server = Server(spark, {"echo": echo, "blocks": blocks, "refuses": refuses}, path, "x", idle_s=1.5)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not path.exists() and time.time() < deadline:
        time.sleep(0.01)
    yield path, spark, release, thread
    release.set()


def _job(path: Path, job: str, args: list[str], identity: str = "x") -> tuple[dict, SharedJob | None, list[str]]:
    asked = _ask(path, {"identity": identity, "job": job, "args": args, "env": {"WHO": "me"}})
    assert asked is not None
    conn, stream, answer = asked
    lines: list[str] = []
    if "accepted" not in answer:
        conn.close()
        return answer, None, lines
    return answer, SharedJob(conn, stream, answer["accepted"], lines.append, path.with_suffix(".log")), lines


def _wait(job: SharedJob) -> int:
    deadline = time.time() + 10
    while job.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    code = job.poll()
    assert code is not None
    return code


def test_a_job_says_its_lines_with_the_callers_environment_and_ends_with_its_code(driver):
    path, _, _, _ = driver
    answer, job, lines = _job(path, "echo", ["a", "b", "3"])
    assert job is not None and _wait(job) == 3
    assert lines == ["a me", "b me", "3 me"]
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert path.with_suffix(".pid").exists()


def test_a_job_that_exits_ends_with_its_code_and_the_driver_goes_on(driver):
    path, _, _, _ = driver
    _, job, _ = _job(path, "refuses", [])
    assert job is not None and _wait(job) == 2
    _, job, lines = _job(path, "echo", ["a"])
    assert job is not None and _wait(job) == 0 and lines == ["a me"]


def test_another_identity_or_an_unknown_job_is_refused(driver):
    path, _, _, _ = driver
    assert "refused" in _job(path, "echo", [], identity="y")[0]
    assert "refused" in _job(path, "nope", [])[0]


def test_a_busy_driver_refuses_and_a_caller_that_goes_away_cancels_its_job(driver):
    path, spark, _, _ = driver
    _, running, lines = _job(path, "blocks", [])
    assert running is not None
    deadline = time.time() + 10
    while lines != ["started"] and time.time() < deadline:
        time.sleep(0.01)
    assert _job(path, "echo", ["x"])[0] == {"refused": "busy"}
    running.stop()
    assert spark.sparkContext.cancelled.wait(10), "the job of a caller that went away was not cancelled"
    deadline = time.time() + 10
    answer: dict = {}
    while time.time() < deadline:
        answer, job, _ = _job(path, "echo", ["0"])
        if job is not None:
            assert _wait(job) == 0
            break
        time.sleep(0.05)
    assert "accepted" in answer, answer  # free again once the cancelled job ended


def test_an_idle_driver_stops_and_takes_its_socket_with_it(driver):
    path, _, _, thread = driver
    _, job, _ = _job(path, "echo", ["0"])
    assert job is not None and _wait(job) == 0
    thread.join(10)
    assert not thread.is_alive()
    assert not path.exists() and not path.with_suffix(".pid").exists()


def test_a_driver_whose_socket_was_taken_over_stops_and_leaves_it(driver):
    path, _, _, thread = driver
    path.unlink()
    path.write_text("another driver's")
    thread.join(10)
    assert not thread.is_alive() and path.read_text() == "another driver's"


def test_a_driver_is_shared_only_by_loads_that_need_the_same_application():
    pipeline = load_pipeline(env={"SEAM_MYSQL_PASSWORD": "s", "SEAM_TARGET_PASSWORD": "t"})
    env = {"PYSPARK_PYTHON": "/usr/bin/python3", "SEAM_STATE_DIR": "/tmp/a"}
    same = driver_identity(pipeline, env)
    assert driver_identity(replace(pipeline, path="/elsewhere.yaml"), env) == same  # any pipeline, same Spark
    others = [
        driver_identity(replace(pipeline, spark=replace(pipeline.spark, master="local[1]")), env),
        driver_identity(replace(pipeline, spark=replace(pipeline.spark, jdbc_jar="/other.jar")), env),
        driver_identity(replace(pipeline, spark=replace(pipeline.spark, shared_driver_idle_s=5)), env),
        driver_identity(pipeline, {**env, "PYSPARK_PYTHON": "/other/python"}),
        driver_identity(pipeline, {**env, "SEAM_STATE_DIR": "/tmp/b"}),
    ]
    assert same not in others and len(set(others)) == len(others)
