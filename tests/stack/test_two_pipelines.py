"""Two pipelines that list the same source table against one target share its state (``seam.positions`` is
keyed by the table) but not their topics when their prefixes differ: each pipeline's sink applies the
table's changes from its own topic. A sink holds a table's applied position in memory; when the other
pipeline's sink had applied and moved it meanwhile, it applied those changes again: a keyless table's rows
doubled, with nothing stopped. Now a sink stores a position only over the one it read (else it rolls back and
reads again from the target), and does not stop a table on a change that another process applied."""

from __future__ import annotations

import logging
import os
import threading

import pytest

from seam.apply.sink import Sink
from seam.config import load_pipeline
from seam_dev import demo
from tests.support.commands import seam_command
from tests.support.independent import compare_pipeline
from tests.support.pipelines import loaded, pipeline_file, read_once, stopped_tables
from tests.support.source import fresh_database

DB = "two_pipelines"
pytestmark = pytest.mark.stack


TABLES = [{"name": f"{DB}.log"}, {"name": f"{DB}.keyed", "key": ["id"]}]


def _fresh_tables() -> None:
    """A keyless and a keyed table afresh (and a database no pipeline here follows)."""
    fresh_database(f"{DB}_elsewhere")
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.log (n INT, v VARCHAR(10))",
        f"CREATE TABLE {DB}.keyed (id INT PRIMARY KEY, v INT)",
    )


def _tables_and_pipelines(tmp_path_factory, name: str):
    """The tables afresh (``_fresh_tables``), loaded through pipeline one; and pipeline other's file (same tables,
    its own name and topics): pipeline one and the other's path."""
    _fresh_tables()
    _, one = loaded(tmp_path_factory, f"{name}_one", TABLES)
    return one, pipeline_file(tmp_path_factory, f"{name}_other", TABLES, pipeline_name="other")


def _write(first: int, transactions: int) -> None:
    """Inserts into the keyless table, and every kind of change to the keyed one."""
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB, autocommit=True)
    try:
        with conn.cursor() as cur:
            for i in range(first, first + transactions):
                cur.execute("INSERT INTO log VALUES (%s, %s)", (i, f"v{i}"))
                cur.execute("INSERT INTO keyed VALUES (%s, %s)", (i, i))
                cur.execute("UPDATE keyed SET v = v + 1 WHERE id = %s", (i - 1,))
                cur.execute("DELETE FROM keyed WHERE id = %s", (i - 2,))
    finally:
        conn.close()


def _write_elsewhere() -> None:
    """A change to a table no pipeline here follows: the binlog moves on past the tables' changes."""
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE IF NOT EXISTS {DB}_elsewhere.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {DB}_elsewhere.t (v) VALUES (1)")
    finally:
        conn.close()


def _both(sinks: list[Sink], at_once: bool) -> None:
    """Each sink to the end of its topics: one after the other, or both at the same time."""
    if not at_once:
        for sink in sinks:
            sink.run(caught_up=True)
        return
    failed: list[BaseException] = []

    def run(sink: Sink) -> None:
        try:
            sink.run(caught_up=True)
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            failed.append(exc)

    threads = [threading.Thread(target=run, args=(sink,)) for sink in sinks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failed, failed


def test_two_pipelines_sinks_of_one_table_apply_each_change_once(stack, tmp_path_factory, caplog):
    one, other_path = _tables_and_pipelines(tmp_path_factory, "two_pipelines")
    result = seam_command(other_path, "load", "full", *[t["name"] for t in TABLES])
    assert result.returncode == 0, result.stderr[-3000:]
    other = load_pipeline(other_path)
    sinks = [Sink(one), Sink(other)]
    caplog.set_level(logging.WARNING, logger="seam.sink")
    try:
        for first, transactions, at_once in ((1, 5, False), (100, 5, False), (1000, 300, True)):
            _write(first, transactions)
            read_once(one)
            _write_elsewhere()  # each reader's heartbeat then lands at another position (CI: other tests' writes)
            read_once(other)
            _both(sinks, at_once)  # the first round: each sink holds the tables' positions from then on
    finally:
        for sink in sinks:
            sink.close()
    assert stopped_tables(one, DB) == {"log": None, "keyed": None}
    for table in ("log", "keyed"):
        assert compare_pipeline(one, DB, table) is None, table
    assert "another process moved its applied position" in caplog.text
    # a reader restarts from the position the other pipeline's sink stored: read again, not a gap
    assert "lost by Kafka" not in caplog.text, caplog.text


def test_a_load_by_another_pipeline_under_a_sink_that_holds_the_table(stack, tmp_path_factory, caplog):
    """The other pipeline loads the table (its own sink commits the batch) while this pipeline's sink holds the
    table's position from before, with changes published on this pipeline's topic that the load's snapshot
    already holds: this sink applied them again (the keyless table's 20 rows doubled); now it reads the load's
    position and applies only what came after it."""
    one, other_path = _tables_and_pipelines(tmp_path_factory, "two_pipelines_load")
    caplog.set_level(logging.WARNING, logger="seam.sink")
    sink = Sink(one)
    try:
        _write(1, 5)
        read_once(one)
        sink.run(caught_up=True)  # holds the tables' positions from here on
        _write(100, 20)
        read_once(one)  # published on this pipeline's topic, not applied yet
        result = seam_command(other_path, "load", "full", *[t["name"] for t in TABLES])
        assert result.returncode == 0, result.stderr[-3000:]
        _write(1000, 20)
        read_once(one)
        sink.run(caught_up=True)
    finally:
        sink.close()
    assert stopped_tables(one, DB) == {"log": None, "keyed": None}
    for table in ("log", "keyed"):
        assert compare_pipeline(one, DB, table) is None, table
    assert "another process moved its applied position" in caplog.text


def test_a_pipeline_whose_topic_prefix_changed_after_its_load_streams_on(stack, tmp_path_factory):
    """A pipeline's kafka.topic_prefix edited after its tables were loaded: the change reader publishes on the new
    topics, from the table's position. The sink looked up the table's load by the topic it came through, found
    none on the new ones, and passed over every change, with the stream RUNNING and its lag growing. Now it takes
    the table's last committed load, as the reader does, and applies them."""
    _fresh_tables()
    loaded(tmp_path_factory, "prefix_before", TABLES)
    renamed = load_pipeline(pipeline_file(tmp_path_factory, "prefix_after", TABLES))
    _write(1, 20)
    assert read_once(renamed)["changes"] > 0
    sink = Sink(renamed)
    try:
        sink.run(caught_up=True)
    finally:
        sink.close()
    assert stopped_tables(renamed, DB) == {"log": None, "keyed": None}
    for table in ("log", "keyed"):
        assert compare_pipeline(renamed, DB, table) is None, table
