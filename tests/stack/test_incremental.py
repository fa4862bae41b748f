"""Safe-window incremental loads on the embedded stack: a late-committed row is caught by the safety delay
(and missed without it, which proves the delay matters), equal timestamps on a window edge land once, a
re-run window changes nothing, soft deletes are applied, and bad windows or cursors are refused before
anything is staged."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time

import psycopg
import pytest
import yaml

from seam.config import load_pipeline
from seam_dev import demo
from tests.support.commands import run_command

DB = "incr_test"
pytestmark = pytest.mark.stack


def _pipeline_file(tmp_path_factory, name: str, tables: list[dict]) -> str:
    doc = yaml.safe_load(open(load_pipeline().path))
    doc["tables"] = tables
    doc["kafka"]["topic_prefix"] = f"seam.{name}"
    path = tmp_path_factory.mktemp(name) / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _seam(path: str, *args) -> subprocess.CompletedProcess:
    return run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True, timeout=600
    )


def _admin():
    return demo.connect(os.environ["SEAM_MYSQL_URL"], DB)


def _target(pipeline, sql: str, *params):
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        return conn.execute(sql, params).fetchall()


@pytest.fixture(scope="module")
def database(stack):
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
        cur.execute(f"CREATE DATABASE `{DB}`")
        for table in ("late", "late_nodelay"):
            cur.execute(
                f"CREATE TABLE `{DB}`.`{table}` (id INT PRIMARY KEY, v INT NOT NULL, updated_at DATETIME(6) NOT NULL)"
            )
            cur.execute(
                f"INSERT INTO `{DB}`.`{table}` VALUES (1, 1, NOW(6) - INTERVAL 1 HOUR), "
                "(2, 2, NOW(6) - INTERVAL 1 HOUR)"
            )
        cur.execute(
            f"CREATE TABLE `{DB}`.`edge` (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL, "
            "updated_at DATETIME(6) NOT NULL, is_deleted TINYINT(1) NOT NULL DEFAULT 0, label VARCHAR(5))"
        )
        rows = (
            [(i, f"before {i}", "2026-01-01 23:59:59.999999") for i in range(1, 101)]
            + [(i, f"edge {i}", "2026-01-02 00:00:00.000000") for i in range(101, 1101)]
            + [(i, f"after {i}", "2026-01-02 00:00:00.000001") for i in range(1101, 1201)]
        )
        cur.executemany(f"INSERT INTO `{DB}`.`edge` (id, v, updated_at) VALUES (%s, %s, %s)", rows)
    conn.close()


def _late_commit(path: str, table: str) -> bool:
    """Insert a row with updated_at = now in a transaction, run a load while it is uncommitted, commit,
    wait out the safety delay, load again; True if the row reached the target."""
    pipeline = load_pipeline(path)
    first = _seam(path, "load", "incremental", f"{DB}.{table}")  # the initial window: the old rows
    assert first.returncode == 0, first.stderr + first.stdout
    writer = _admin()
    writer.autocommit(False)
    with writer.cursor() as cur:
        cur.execute(f"INSERT INTO `{table}` VALUES (100, 100, NOW(6))")  # T, committed later
    started = time.monotonic()
    during = _seam(path, "load", "incremental", f"{DB}.{table}")
    assert during.returncode == 0, during.stderr + during.stdout
    writer.commit()
    late_by = time.monotonic() - started
    writer.close()
    delay = pipeline.table(f"{DB}.{table}").safety_delay_s
    assert late_by < delay or delay == 0, f"the commit came {late_by:.0f}s late, more than the {delay}s delay"
    time.sleep(max(0.0, delay - late_by + 1))
    after = _seam(path, "load", "incremental", f"{DB}.{table}")
    assert after.returncode == 0, after.stderr + after.stdout
    print(during.stdout, after.stdout)
    rows = _target(pipeline, f'SELECT id, count(*) FROM "{DB}"."{table}" GROUP BY id ORDER BY id')
    assert all(n == 1 for _, n in rows)
    return (100, 1) in rows


def test_late_commit_is_caught_by_the_safety_delay(database, tmp_path_factory):
    path = _pipeline_file(
        tmp_path_factory, "late", [{"name": f"{DB}.late", "key": ["id"], "cursor": "updated_at", "safety_delay": "30s"}]
    )
    assert _late_commit(path, "late"), "the late-committed row did not reach the target"


def test_without_a_delay_the_late_commit_is_missed(database, tmp_path_factory):
    path = _pipeline_file(
        tmp_path_factory,
        "late0",
        [{"name": f"{DB}.late_nodelay", "key": ["id"], "cursor": "updated_at", "safety_delay": "0s"}],
    )
    assert not _late_commit(path, "late_nodelay"), "with no delay the late row should be missed (the delay matters)"


def test_equal_timestamps_on_the_window_edge_land_once_and_reruns_change_nothing(database, tmp_path_factory):
    path = _pipeline_file(
        tmp_path_factory,
        "edge",
        [
            {
                "name": f"{DB}.edge",
                "key": ["id"],
                "cursor": "updated_at",
                "soft_delete": "is_deleted",
                "safety_delay": "5s",
            }
        ],
    )
    pipeline = load_pipeline(path)

    def window(start, end):
        result = _seam(path, "load", "incremental", f"{DB}.edge", "--start", start, "--end", end)
        assert result.returncode == 0, result.stderr + result.stdout
        return result.stdout

    first = window("2026-01-01", "2026-01-02T00:00:00")  # the edge rows share the window's end exactly
    second = window("2026-01-02T00:00:00", "2026-01-03")
    assert "1,100 rows merged" in first and "100 rows merged" in second, first + second
    count = _target(pipeline, f'SELECT count(*), count(DISTINCT id) FROM "{DB}"."edge"')[0]
    assert count == (1200, 1200)
    assert _target(pipeline, f'SELECT count(*) FROM "{DB}"."edge" WHERE v LIKE %s', "edge %")[0][0] == 1000

    conn = _admin()
    with conn.cursor() as cur:  # changes inside the second window: an update and a soft delete
        cur.execute("UPDATE edge SET v = 'changed', updated_at = '2026-01-02 12:00:00' WHERE id = 5")
        cur.execute("UPDATE edge SET is_deleted = 1, updated_at = '2026-01-02 12:00:00' WHERE id = 6")
    conn.close()
    window("2026-01-01", "2026-01-02T00:00:00")  # a backfill of the first window: nothing changes
    before = _target(pipeline, f'SELECT id, v FROM "{DB}"."edge" ORDER BY id')
    assert len(before) == 1200 and before[4] == (5, "before 5")
    window("2026-01-02T00:00:00", "2026-01-03")  # the second window again: picks up the update and delete
    after = dict(_target(pipeline, f'SELECT id, v FROM "{DB}"."edge" ORDER BY id'))
    assert after[5] == "changed" and 6 not in after and len(after) == 1199
    status = _seam(path, "status", f"{DB}.edge")
    assert "watermark updated_at = 2026-01-03 00:00:00.000000" in status.stdout, status.stdout
    assert status.stdout.count("incremental committed") >= 4


@pytest.mark.parametrize(
    "case, table, args, message",
    [
        ("cursor missing", {"cursor": "changed_on"}, [], "cursor column 'changed_on' is not in the table"),
        ("cursor not a time", {"cursor": "v"}, [], "it must be a date/time"),
        ("end before start", {}, ["--start", "2026-01-05", "--end", "2026-01-04"], "is not after its start"),
        ("start in the future", {}, ["--start", "2999-01-01", "--end", "2999-01-02"], "is in the future"),
    ],
)
def test_bad_windows_and_cursors_are_refused_before_staging(database, tmp_path_factory, case, table, args, message):
    config = {"name": f"{DB}.edge", "key": ["id"], "cursor": "updated_at", **table}
    path = _pipeline_file(tmp_path_factory, "bad", [config])
    pipeline = load_pipeline(path)
    before = _target(pipeline, "SELECT count(*) FROM seam.batches WHERE db = %s AND tbl = 'edge'", DB)[0][0]
    result = _seam(path, "load", "incremental", f"{DB}.edge", *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr + result.stdout
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert _target(pipeline, "SELECT count(*) FROM seam.batches WHERE db = %s AND tbl = 'edge'", DB)[0][0] == before


def test_clamp_is_reported(database, tmp_path_factory):
    path = _pipeline_file(
        tmp_path_factory, "clamp", [{"name": f"{DB}.late", "key": ["id"], "cursor": "updated_at", "safety_delay": "1h"}]
    )
    end = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S")
    result = _seam(path, "load", "incremental", f"{DB}.late", "--start", "2020-01-01", "--end", end)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "CLAMPED" in result.stdout and "(clamped)" in result.stdout


def _windows_table(tmp_path_factory, table: str, columns: str, value: str):
    """A fresh ``table`` of 20 rows (id, ``value``, an hour-old ``updated_at``) and a pipeline file that syncs
    it by windows with no delay: (an admin connection to the source, the file)."""
    conn = _admin()
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(f"CREATE TABLE {table} ({columns})")
        cur.execute(f"INSERT INTO {table} SELECT seq, {value}, NOW(6) - INTERVAL 1 HOUR FROM seq_1_to_20")
    config = {"name": f"{DB}.{table}", "key": ["id"], "cursor": "updated_at", "safety_delay": 0}
    return conn, _pipeline_file(tmp_path_factory, table, [config])


def test_a_null_cursor_is_refused_before_a_window_and_validation_reports_it(database, tmp_path_factory):
    """A row whose cursor is NULL is in no window: inserted so, or its cursor set to NULL, it never reached
    the target while every window committed, and validation crashed on it (an assertion in its window
    scope). Each window now refuses in one line while such a row exists, and validation reports the row."""
    conn, path = _windows_table(
        tmp_path_factory, "nullable", "id INT PRIMARY KEY, v INT NOT NULL, updated_at DATETIME(6) NULL", "seq"
    )
    first = _seam(path, "load", "incremental", f"{DB}.nullable")
    assert first.returncode == 0, first.stderr + first.stdout
    with conn.cursor() as cur:
        cur.execute("UPDATE nullable SET v = -1, updated_at = NULL WHERE id = 3")
        cur.execute("INSERT INTO nullable VALUES (100, 100, NULL)")
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute("INSERT INTO nullable VALUES (101, 101, '0000-00-00')")
    conn.close()
    checked = _seam(path, "validate", f"{DB}.nullable")
    assert checked.returncode == 1 and "Traceback" not in checked.stderr, checked.stderr + checked.stdout
    assert f"{DB}.nullable: MISMATCH" in checked.stdout, checked.stdout
    refused = _seam(path, "load", "incremental", f"{DB}.nullable")
    assert (
        refused.returncode == 2
        and "rows whose cursor (updated_at) is NULL or a zero date are in no window" in refused.stderr
    ), refused.stderr + refused.stdout
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr


def test_ddl_between_windows_refuses_the_window_naming_the_change_and_a_full_load_takes_it_up(
    database, tmp_path_factory
):
    """A window merges rows into the table as it is: a column added or dropped at the source since its last
    load made every window rejected at the sink (`column "added" ... does not exist`), with no way out
    printed. A retyped column is said, and the window goes on: a narrower one fits, a wider one's longer
    value rejects the window."""
    conn, path = _windows_table(
        tmp_path_factory, "altered", "id INT PRIMARY KEY, s VARCHAR(5), updated_at DATETIME(6) NOT NULL", "'x'"
    )
    pipeline = load_pipeline(path)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as target:  # a run before left one
        target.execute(f'DROP TABLE IF EXISTS "{DB}"."altered"')
    assert _seam(path, "load", "incremental", f"{DB}.altered").returncode == 0
    with conn.cursor() as cur:
        cur.execute("ALTER TABLE altered MODIFY s VARCHAR(50)")
        cur.execute("UPDATE altered SET s = 'short', updated_at = NOW(6) WHERE id = 2")
    time.sleep(0.1)
    widened = _seam(path, "load", "incremental", f"{DB}.altered")
    assert widened.returncode == 0, widened.stderr + widened.stdout
    assert "the definition of s varchar(5) -> varchar(50) changed at the source" in widened.stdout, widened.stdout
    with conn.cursor() as cur:
        cur.execute("ALTER TABLE altered ADD COLUMN added INT DEFAULT 7")
        cur.execute("UPDATE altered SET s = 'longer than five', updated_at = NOW(6) WHERE id = 3")
    refused = _seam(path, "load", "incremental", f"{DB}.altered")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr + refused.stdout
    assert "its columns changed at the source since its last load (added: added)" in refused.stderr, refused.stderr
    assert f"run `seam load full {DB}.altered`" in refused.stderr, refused.stderr
    assert _seam(path, "load", "full", f"{DB}.altered").returncode == 0
    with conn.cursor() as cur:
        cur.execute("UPDATE altered SET added = 8, updated_at = NOW(6) WHERE id = 4")
    conn.close()
    time.sleep(0.1)
    window = _seam(path, "load", "incremental", f"{DB}.altered")
    assert window.returncode == 0, window.stderr + window.stdout
    rows = dict(_target(pipeline, f'SELECT id, (s, added)::text FROM "{DB}"."altered" WHERE id IN (2, 3, 4)'))
    assert rows == {2: "(short,7)", 3: '("longer than five",7)', 4: "(x,8)"}, rows
