"""Back-pressure of a load's publishers (``seam.wire.sink_pace``): the sink reports how far an open batch is
staged, a publisher stays within ``kafka.max_unapplied_events`` of it, and goes on at full speed when the
report stalls. On the real broker; the end-to-end case measures the lag from the offsets the sink stored
with the data (not from the report) while a real load runs, and compares the result independently."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
import time
import uuid

import psycopg
import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition

from seam.config import load_pipeline
from seam.load_run import sink_through
from seam.state.connection import connect_state
from seam.state.positions import applied_through, store_offset
from seam.wire import sink_pace
from seam.wire.sink_pace import SinkPace, StagedOffsets, StagedReport
from seam.wire.topics import consumer_config, ensure_topics, table_topic
from seam_dev.topic_rows import rows_per_message
from tests.support.independent import compare
from tests.support.pipelines import pipeline_file
from tests.support.source import numbered_table

pytestmark = pytest.mark.stack
DB = "pace_test"


def _bounded(pipeline, events: int):
    return dataclasses.replace(pipeline, kafka=dataclasses.replace(pipeline.kafka, max_unapplied_events=events))


def _topic_with(pipeline, messages: int) -> str:
    topic = f"seam.pace-test.{uuid.uuid4().hex[:8]}"
    ensure_topics(pipeline, [topic])
    producer = Producer({"bootstrap.servers": pipeline.kafka.bootstrap})
    for i in range(messages):
        producer.produce(topic, b"%d" % i, partition=0)
        producer.poll(0)  # one message per request: the embedded broker reports its end by batch
        producer.flush()
    return topic


def test_what_a_running_sink_is_through_counts_its_report_of_an_open_batch(stack):
    """A resumed load waits for the running sink by ``load_run.sink_through``: the offset it stored with the
    data, or its report of an open batch's staging where that is further. (A stream transaction that the
    batch's BEGIN cut in two keeps the stored offset before the BEGIN until the END: a resumed load under a
    writer of another table waited its catch-up's whole 300 s for it, the killed-load probe of session 70.)"""
    pipeline = load_pipeline()
    pinned, reported, stored_only = (_topic_with(pipeline, 1) for _ in range(3))
    conn = connect_state(pipeline)
    try:
        for topic, offset in ((pinned, 5), (reported, 3), (stored_only, 7)):
            store_offset(conn, pipeline.target.state_schema, topic, offset, None)
        report = StagedReport(pipeline)
        report.staged({pinned: 9, reported: 2})  # (asynchronous: read below until it is there)
        reports = StagedOffsets(pipeline)
        deadline = time.time() + 10
        while (through := sink_through(conn, pipeline, reports, [pinned, reported, stored_only]))[pinned] != 9:
            assert time.time() < deadline, through
            time.sleep(0.2)
        reports.close()
        report.close()
    finally:
        conn.close()
    assert through == {pinned: 9, reported: 3, stored_only: 7}
    assert applied_through(through, {pinned: 9, reported: 3}) and not applied_through(through, {stored_only: 8})


def test_a_publisher_waits_for_the_sinks_report_and_not_for_a_stalled_one(stack, monkeypatch):
    pipeline = _bounded(load_pipeline(), 100)
    topic = _topic_with(pipeline, 300)
    report = StagedReport(pipeline)
    pace = SinkPace(pipeline, topic)
    try:
        report.staged({topic: 50})
        deadline = time.monotonic() + 10
        while pace._staged() != 50 and time.monotonic() < deadline:  # the commit is asynchronous
            time.sleep(0.05)
        later = threading.Timer(1.0, lambda: report.staged({topic: 250}))
        later.start()
        pace.wait(queued=50)  # 300 + 50 - 50 is past 100: waits until the sink reports 250
        later.join()
        assert 0.9 <= pace.waited_s < 3.0 and not pace.off

        waited = pace.waited_s
        pace.wait(queued=0)  # 300 - 250 is within 100: at once
        assert pace.waited_s - waited < 0.5

        monkeypatch.setattr(sink_pace, "STALL_S", 1.0)
        pace.wait(queued=100)  # 300 + 100 - 250 is past 100, and the report does not move: given up
        assert pace.off and pace.waited_s - waited >= 1.0
        started = time.monotonic()
        pace.wait(queued=100)
        assert time.monotonic() - started < 0.05  # for good: full speed
    finally:
        pace.close()
        report.close()


def test_no_report_at_all_costs_a_publisher_one_stall(stack, monkeypatch):
    """A topic no sink reports on (a sink of an older Seam): one FIRST_REPORT_S, then full speed."""
    monkeypatch.setattr(sink_pace, "FIRST_REPORT_S", 0.5)
    pipeline = _bounded(load_pipeline(), 100)
    topic = _topic_with(pipeline, 200)
    pace = SinkPace(pipeline, topic)
    try:
        started = time.monotonic()
        for _ in range(5):
            pace.wait(queued=0)
            time.sleep(sink_pace.CHECK_EVERY_S)
        assert pace.off and time.monotonic() - started < 0.5 + 2.0
    finally:
        pace.close()


def test_a_full_load_stays_within_the_bound_of_what_its_sink_staged(stack, tmp_path_factory):
    rows, bound = 400_000, 20_000
    numbered_table(DB, "paced", rows)
    path = pipeline_file(tmp_path_factory, "pace", [{"name": f"{DB}.paced", "key": ["id"]}])
    doc = yaml.safe_load(open(path))
    doc["kafka"]["max_unapplied_events"] = bound
    open(path, "w").write(yaml.safe_dump(doc))
    pipeline = load_pipeline(path)
    topic = table_topic(pipeline, pipeline.table(f"{DB}.paced"))
    ensure_topics(pipeline, [topic])

    load = subprocess.Popen(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{DB}.paced", "--restart"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    consumer = Consumer({**consumer_config(pipeline), "group.id": "seam-test-pace"})
    lags = []  # rows published, less what the sink stored with the data
    try:
        with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
            while load.poll() is None:
                end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
                stored = (
                    conn.execute(
                        "SELECT next_offset FROM seam.offsets WHERE topic = %s AND partition = 0", (topic,)
                    ).fetchone()
                    if conn.execute("SELECT to_regclass('seam.offsets')").fetchone()[0]
                    else None
                )
                behind = end - (stored[0] if stored else 0)  # messages: blocks of rows
                lags.append(behind * rows_per_message(pipeline, topic, end) if behind > 0 else 0)
                time.sleep(0.05)
    finally:
        consumer.close()
    out = load.stdout.read()
    assert load.returncode == 0, out
    print(f"{len(lags)} samples, largest lag about {max(lags):,} rows (bound {bound:,})")
    # each of the loads' two tasks looks before it sends the next 10,000 rows; the embedded broker reports its
    # end up to a producer batch late
    assert max(lags) <= bound + 2 * 10_000 + 10_000, lags
    assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "paced") is None
