"""Dates PostgreSQL has no value for, besides zero dates: a day past its month's end (2024-02-31), which MySQL and
MariaDB store under ``sql_mode = ALLOW_INVALID_DATES``. They land as zero dates do (``target.zero_dates``:
-infinity in a NOT NULL column, NULL in a nullable one), in a full load, in the stream by the compiled row
decoder and by the Python one, and validation counts them equal. Before: the full load was rejected twice
(``date/time field value out of range``) and the stream's Python decoder raised on them."""

from __future__ import annotations

import datetime as dt
import os

import psycopg
import pytest

from seam.source import record_images
from seam_dev import demo
from tests.support.commands import seam_command
from tests.support.independent import compare_pipeline
from tests.support.pipelines import loaded, stream_once
from tests.support.source import fresh_database

DB = "invalid_dates_test"
pytestmark = pytest.mark.stack

ROWS = (
    "({id}, '2024-02-31', '2023-04-31 10:00:00.5', '2024-02-30', '2023-02-29 23:59:59'), "
    "({id} + 1, '2024-02-29', '2024-02-29 23:59:59.999', '2024-02-29', '1000-01-01 00:00:00'), "
    "({id} + 2, '0000-00-00', '2024-00-10 00:00:00', '2023-06-31', '2023-11-31 00:00:01')"
)


def _insert(id_: int) -> str:
    return "INSERT INTO d VALUES " + ROWS.format(id=id_)


def test_a_day_past_its_months_end_lands_as_a_zero_date(stack, tmp_path_factory, monkeypatch):
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.d (id INT PRIMARY KEY, d DATE NULL, dt DATETIME(3) NULL, dn DATE NOT NULL, "
        "dtn DATETIME NOT NULL)",
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
        f"USE {DB}",
        _insert(1),
    )
    path, pipeline = loaded(tmp_path_factory, "invalid_dates", [{"name": f"{DB}.d", "key": ["id"]}])
    assert compare_pipeline(pipeline, DB, "d") is None
    stream_once(pipeline)
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with writer.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'")
        cur.execute(_insert(10))  # read by the compiled decoder
        cur.execute("UPDATE d SET d = '2025-09-31' WHERE id = 2")
    stream_once(pipeline)
    assert compare_pipeline(pipeline, DB, "d") is None
    monkeypatch.setattr(record_images, "native", None)  # the Python decoder
    with writer.cursor() as cur:
        cur.execute(_insert(20))
        cur.execute("UPDATE d SET dtn = '2021-02-29 08:00:00' WHERE id = 11")
    writer.close()
    stream_once(pipeline)
    assert compare_pipeline(pipeline, DB, "d") is None
    with psycopg.connect(**pipeline.target.conninfo()) as target:
        row = target.execute(f"SELECT d, dt, dn::text, dtn::text FROM {DB}.d WHERE id = 21").fetchone()
        assert row == (
            dt.date(2024, 2, 29),
            dt.datetime(2024, 2, 29, 23, 59, 59, 999000),
            "2024-02-29",
            "1000-01-01 00:00:00",
        )
        row = target.execute(f"SELECT d, dt, dn::text, dtn::text FROM {DB}.d WHERE id = 20").fetchone()
        assert row == (None, None, "-infinity", "-infinity"), row
    checked = seam_command(path, "validate", f"{DB}.d")
    assert checked.returncode == 0 and f"{DB}.d: EQUAL" in checked.stdout, checked.stdout + checked.stderr
