"""The streaming sink reading its topics again from the target's offsets (a broker's answer skipped offsets
in the middle of a source transaction, read in answers of 4 messages) while it holds the transaction's first
records in memory: they come again, the sink starts the transaction anew (it says so), and the transaction,
with key moves, an insert and a delete in it, is applied once, equal to the source by the independent
comparer."""

from __future__ import annotations

import logging
import os
import sys
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from seam.apply.sink import Sink
from seam.config import load_pipeline
from seam.wire.topics import consumer_config, table_topic
from seam_dev import demo
from tests.support.commands import run_command
from tests.support.independent import compare
from tests.support.pipelines import pipeline_file, read_once

DB = "reread_test"
pytestmark = pytest.mark.stack


class _SkipsOnce(Consumer):
    """The real client in answers of 4 messages; the first answer that holds ``offsets`` leaves them out."""

    offsets, times = range(0), 0

    def consume(self, num_messages=1, timeout=-1):
        taken = super().consume(min(num_messages, 4), timeout)
        cls = type(self)
        if cls.times and any(m.offset() in cls.offsets for m in taken if m.error() is None):
            cls.times -= 1
            taken = [m for m in taken if m.error() is not None or m.offset() not in cls.offsets]
        return taken


def _change_offsets(pipeline, topic: str) -> list[int]:
    """The offsets of the topic's change events (op c, u or d), read with a plain client."""
    consumer = Consumer({**consumer_config(pipeline), "group.id": "reread-test", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    found = []
    try:
        while True:
            m = consumer.poll(10)
            assert m is not None, "the topic's end was not reached"
            if m.error() is not None:
                break
            if not m.headers() and b'"op":"' in m.value() and b'"op":"r"' not in m.value():
                found.append(m.offset())
    finally:
        consumer.close()
    return found


def test_a_transaction_read_again_from_its_middle_is_applied_once(stack, tmp_path_factory, monkeypatch, caplog):
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], None)
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {DB}")
            cur.execute(f"CREATE DATABASE {DB}")
            cur.execute(f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL) ENGINE=InnoDB")
            cur.execute(f"INSERT INTO {DB}.t VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(1, 21)))
        conn.commit()
        path = pipeline_file(
            tmp_path_factory, f"reread{time.time_ns()}", [{"name": f"{DB}.t", "key": ["id"], "sync": "stream"}]
        )
        pipeline = load_pipeline(path)
        load = run_command(
            [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{DB}.t"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert load.returncode == 0, load.stdout + load.stderr
        conn.begin()
        with conn.cursor() as cur:  # one transaction: updates, key moves, an insert and a delete
            for i in range(1, 11):
                cur.execute(f"UPDATE {DB}.t SET v = 'u{i}' WHERE id = %s", (i,))
            for i in range(11, 16):
                cur.execute(f"UPDATE {DB}.t SET id = id + 100 WHERE id = %s", (i,))
            cur.execute(f"INSERT INTO {DB}.t VALUES (500, 'new')")
            cur.execute(f"DELETE FROM {DB}.t WHERE id = 20")
        conn.commit()
    finally:
        conn.close()

    read_once(pipeline)
    changes = _change_offsets(pipeline, table_topic(pipeline, pipeline.tables[0]))
    assert len(changes) == 17, changes
    _SkipsOnce.offsets, _SkipsOnce.times = range(changes[12], changes[13] + 1), 1  # the transaction's middle
    monkeypatch.setattr("seam.apply.sink.Consumer", _SkipsOnce)
    caplog.set_level(logging.INFO, logger="seam.sink")
    sink = Sink(pipeline)
    try:
        sink.run(caught_up=True)
    finally:
        sink.close()
    assert _SkipsOnce.times == 0, "no answer left the messages out: the test proved nothing"
    assert "the broker's answer skipped offsets" in caplog.text
    assert "incomplete transaction" in caplog.text, "the sink held no part of the transaction when it read again"
    assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "t") is None
