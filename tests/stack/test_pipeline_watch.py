"""A running stream takes up its pipeline file's changes by itself (a table added is followed, as the same
processes); a file that does not load leaves it running as it was; a second file under the same pipeline name
is refused while the first one's stream runs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from seam.config import load_pipeline
from seam.processes import Processes
from seam_dev import demo
from tests.support.commands import seam_command
from tests.support.independent import compare
from tests.support.pipelines import pipeline_file
from tests.support.source import fresh_database

DB = "watch_test"
pytestmark = pytest.mark.stack


def _seam(path: str, *args: str) -> str:
    done = seam_command(path, *args)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def _tables(*names: str) -> list[dict]:
    return [{"name": f"{DB}.{n}", "key": ["id"]} for n in names]


def test_a_running_stream_follows_its_pipeline_file_as_it_changes(stack, tmp_path_factory):
    fresh_database(
        DB,
        *(
            s
            for t in ("a", "b")
            for s in (
                f"CREATE TABLE {DB}.{t} (id INT PRIMARY KEY, v INT)",
                f"INSERT INTO {DB}.{t} SELECT seq, seq FROM {DB}.seq_1_to_100",
            )
        ),
    )
    path = pipeline_file(tmp_path_factory, "watch", _tables("a"), pipeline_name="watch_test")
    other = pipeline_file(tmp_path_factory, "watch_other", _tables("a"), pipeline_name="watch_test")
    _seam(path, "load", "full", f"{DB}.a")
    _seam(path, "stream", "start")
    procs = Processes()
    pids = {n: procs.running(f"watch_test-stream-{n}") for n in ("reader", "sink")}
    source = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    try:
        refused = seam_command(other, "stream", "start", timeout=120)
        assert refused.returncode == 2 and f"already runs from {path}" in refused.stderr, refused.stderr
        doc = yaml.safe_load(Path(path).read_text())
        Path(path).write_text("tables: [\n")  # not YAML: logged, and the parts go on as they were
        time.sleep(5)
        assert {n: procs.running(f"watch_test-stream-{n}") for n in pids} == pids
        log = (procs.log_dir / "watch_test-stream-reader.log").read_text()
        assert "changed, but this part goes on as it was" in log, log[-2000:]
        doc["tables"] = _tables("a", "b")
        Path(path).write_text(yaml.safe_dump(doc))
        _seam(path, "load", "full", f"{DB}.b")
        with source.cursor() as cur:
            cur.execute(f"UPDATE {DB}.b SET v = v + 1 WHERE id % 3 = 0")
            cur.execute(f"INSERT INTO {DB}.a VALUES (1000, 1)")
        _seam(path, "stream", "wait", "--timeout", "120")
        pipeline = load_pipeline(path)
        for table in ("a", "b"):
            assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, table) is None
        assert {n: procs.running(f"watch_test-stream-{n}") for n in pids} == pids  # the same processes
        log = (procs.log_dir / "watch_test-stream-reader.log").read_text()
        assert "this part stops and starts again with it" in log, log[-2000:]
    finally:
        source.close()
        seam_command(path, "stream", "stop", timeout=120)
