"""A load whose caller stops it (an Airflow task's on_kill, ``Runner.stopped``) starts no process afterwards, and a
process it started while being stopped is stopped at once: nothing outlives a killed task (seen in CI: a task
marked failed while its sink waited on a lock; the load's watch started a new sink after on_kill had stopped the
first, and that sink outlived the task)."""

from __future__ import annotations

import subprocess

import pytest

from seam.config import DEFAULT_PIPELINE, load_pipeline
from seam.load_run import BatchRun, Child, LoadError, Runner


def _run(runner: Runner) -> BatchRun:
    pipeline = load_pipeline(DEFAULT_PIPELINE, env={"SEAM_MYSQL_PASSWORD": "x", "SEAM_TARGET_PASSWORD": "y"})
    return BatchRun(pipeline, pipeline.tables[:1], {}, runner, stall_after=60)


def test_a_stopped_load_starts_no_sink():
    runner = Runner(say=lambda line: None)
    runner.stopped.set()
    with pytest.raises(LoadError, match="stopped"):
        _run(runner)._start_sink()
    assert runner.children == []


def test_a_process_started_as_the_load_is_stopped_is_stopped_at_once():
    runner = Runner(say=lambda line: None)
    run = _run(runner)
    child = Child(subprocess.Popen(["sleep", "60"], start_new_session=True))
    with runner.lock:  # what on_kill does: from here on, no process may be left running
        runner.stopped.set()
        seen = list(runner.children)
    assert seen == []
    with pytest.raises(LoadError, match="stopped"):
        run._keep(child)
    assert child.poll() is not None and runner.children == [child]


def test_a_running_load_keeps_what_it_starts():
    runner = Runner(say=lambda line: None)
    child = Child(subprocess.Popen(["sleep", "60"], start_new_session=True))
    try:
        _run(runner)._keep(child)
        assert runner.children == [child] and child.poll() is None
    finally:
        child.stop()
