"""A Seam user without the privileges to read the binlog gets one line naming the grant, from every command that
reads it: a full load (BINLOG MONITOR / REPLICATION CLIENT for the position), validation and the change reader
(REPLICATION SLAVE for the events). Before: the reader retried forever on `Access denied for user` (MariaDB
answers a replica's registration so), validation printed the driver's error and a repair its traceback."""

from __future__ import annotations

import os

import pytest
import yaml

from seam.config import load_pipeline
from seam.source.head import BinlogAccessError
from seam_dev import demo
from tests.support.commands import seam_command
from tests.support.pipelines import pipeline_file, read_once
from tests.support.source import fresh_database

DB = "grants_test"
USER = "seam_grants_test"
pytestmark = pytest.mark.stack


def _user(*grants: str) -> None:
    admin = demo.connect(os.environ["SEAM_MYSQL_URL"])
    with admin.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{USER}'@'%'")
        cur.execute(f"CREATE USER '{USER}'@'%' IDENTIFIED BY 'grants-pw'")
        for grant in grants:
            cur.execute(f"GRANT {grant} TO '{USER}'@'%'")
    admin.close()


def _as_the_user(tmp_path_factory, monkeypatch, name: str, **source) -> str:
    """A fresh ``t`` and a pipeline file that reads it as ``USER`` (its password from the environment)."""
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {DB}.t SELECT seq, seq FROM {DB}.seq_1_to_20",
    )
    monkeypatch.setenv("SEAM_GRANTS_TEST_PW", "grants-pw")
    config = yaml.safe_load(open(load_pipeline().path))["source"]
    config.update(user=USER, password="${SEAM_GRANTS_TEST_PW}", **source)
    return pipeline_file(
        tmp_path_factory, name, [{"name": f"{DB}.t", "key": ["id"]}], pipeline_name=name, source=config
    )


def test_a_missing_binlog_privilege_is_named_by_each_command(stack, tmp_path_factory, monkeypatch):
    path = _as_the_user(tmp_path_factory, monkeypatch, "grants")
    grant = "GRANT REPLICATION CLIENT, REPLICATION SLAVE ON *.* TO the Seam user (on MariaDB: BINLOG MONITOR"

    _user(f"SELECT ON {DB}.*")
    refused = seam_command(path, "load", "full", f"{DB}.t")
    out = refused.stdout + refused.stderr
    assert refused.returncode == 2 and grant in out and "Traceback" not in out, out

    _user(f"SELECT ON {DB}.*", "BINLOG MONITOR ON *.*")
    loaded = seam_command(path, "load", "full", f"{DB}.t")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with writer.cursor() as cur:
        cur.execute("UPDATE t SET v = 0 WHERE id < 5")
    writer.close()
    checked = seam_command(path, "validate", f"{DB}.t")  # it reads the changes since the target's position
    out = checked.stdout + checked.stderr
    assert checked.returncode == 2 and grant in out and "REPLICATION SLAVE privilege" in out, out
    assert "Traceback" not in out, out
    with pytest.raises(BinlogAccessError, match="may not read the source's binlog"):
        read_once(load_pipeline(path))


def test_a_privilege_a_spark_task_misses_is_shown_in_one_line(stack, tmp_path_factory, monkeypatch):
    """The portable snapshot's LOCK TABLES runs in the Spark task that reads a chunk: its error reached the
    user as `the Spark job failed (exit 1) ... fix the cause above` with no cause above (it was in the log)."""
    path = _as_the_user(tmp_path_factory, monkeypatch, "grants_task", snapshot="portable")
    _user(f"SELECT ON {DB}.*", "BINLOG MONITOR ON *.*", "REPLICATION SLAVE ON *.*")
    refused = seam_command(path, "load", "full", f"{DB}.t")
    out = refused.stdout + refused.stderr
    assert refused.returncode == 2, out
    assert "seam: source: chunk 0: the portable snapshot needs the LOCK TABLES privilege: GRANT LOCK TABLES" in out


def test_a_cascade_from_a_table_the_user_cannot_read_is_named_by_validation(stack, tmp_path_factory, monkeypatch):
    """A table whose rows a foreign-key cascade from another database changes, read by a user granted only
    the table's database: validating it after the parent changed names the parent and the grant (it cannot
    tell the cascade's rows from differences without the parent), not a MISMATCH and not a traceback."""
    fresh_database(
        f"{DB}_parent",
        f"CREATE TABLE {DB}_parent.owners (id INT PRIMARY KEY) ENGINE=InnoDB",
        f"INSERT INTO {DB}_parent.owners SELECT seq FROM {DB}_parent.seq_1_to_5",
    )
    path = _as_the_user(tmp_path_factory, monkeypatch, "grants_cascade")
    admin = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    admin.autocommit(True)
    with admin.cursor() as cur:
        cur.execute("UPDATE t SET v = 1 + id % 5")
        cur.execute(f"ALTER TABLE t ADD FOREIGN KEY (v) REFERENCES {DB}_parent.owners (id) ON DELETE CASCADE")
    _user(f"SELECT ON {DB}.*", "BINLOG MONITOR ON *.*", "REPLICATION SLAVE ON *.*")
    loaded = seam_command(path, "load", "full", f"{DB}.t")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    with admin.cursor() as cur:
        cur.execute(f"DELETE FROM {DB}_parent.owners WHERE id = 3")  # 4 rows of t go, with no row in the binlog
    admin.close()
    checked = seam_command(path, "validate", f"{DB}.t")
    out = checked.stdout + checked.stderr
    assert checked.returncode == 2 and "Traceback" not in out and "MISMATCH" not in out, out
    assert f"a foreign-key cascade from {DB}_parent.owners changes its rows, and table {DB}_parent.owners" in out, out
    assert f"GRANT SELECT ON `{DB}_parent`.* TO the Seam user" in out, out
