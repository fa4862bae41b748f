"""The GTID set at a binlog position (``seam.source.gtid_positions.gtids_at``) on MariaDB: answered from a recent
answer (the same position, or a nearby earlier one plus the GTIDs logged in between) it must equal the
server's own BINLOG_GTID_POS, with transactions in two replication domains; a later position that is far
off is the server's to read."""

from __future__ import annotations

import dataclasses
import os

import pytest

from seam.config import load_pipeline
from seam.core.pipeline import Secret
from seam.core.position import Position
from seam.source import gtid_positions as binlog
from seam.source.gtid import GtidSet
from seam_dev import demo
from tests.support.source import fresh_database

DB = "gtid_positions"
pytestmark = pytest.mark.stack


def _head(conn) -> Position:
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
    return Position.through(row[0], int(row[1]))


def _server_says(conn, at: Position) -> GtidSet:
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (at.file, at.pos))
        return GtidSet(cur.fetchone()[0])


def test_recent_answers_equal_the_servers_in_two_domains(stack, monkeypatch):
    fresh_database(DB, f"CREATE TABLE `{DB}`.t (id INT PRIMARY KEY, v INT)")
    pipeline = load_pipeline()
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    conn.autocommit(True)
    asked = []
    real_between = binlog.gtids_between
    monkeypatch.setattr(binlog, "gtids_between", lambda *a: asked.append(a[1:]) or real_between(*a))
    monkeypatch.setattr(binlog, "_RECENT", binlog._Recent())
    monkeypatch.setattr(binlog._Recent, "SMALL", 1.0)  # any earlier answer in the file is near enough
    try:
        with conn.cursor() as cur:
            cur.execute("FLUSH BINARY LOGS")  # a file of its own: the range between positions stays small
            cur.execute("INSERT INTO t VALUES (0, 0)")
            start = _head(conn)
            assert binlog.gtids_at(conn, start, pipeline.source) == _server_says(conn, start)
            assert asked == []  # the first answer is the server's
            positions = []
            for i in range(1, 41):
                cur.execute(f"SET SESSION gtid_domain_id = {7 if i % 3 == 0 else 0}")
                cur.execute("INSERT INTO t VALUES (%s, %s)", (i, i))
                positions.append(_head(conn))
            cur.execute("SET SESSION gtid_domain_id = 0")
        # same position: no read; later ones: from the nearest earlier answer, equal to the server's
        assert binlog.gtids_at(conn, start, pipeline.source) == _server_says(conn, start) and asked == []
        for at in positions[::7]:
            mine = binlog.gtids_at(conn, at, pipeline.source)
            assert mine == _server_says(conn, at), (at, str(mine), str(_server_says(conn, at)))
            assert 7 in mine.mariadb or at == positions[0]
        assert len(asked) == len(positions[::7])
        # an earlier position than any kept, and the same one again from the keep
        assert binlog.gtids_at(conn, positions[1], pipeline.source) == _server_says(conn, positions[1])
        # far beyond the nearest (most of the file): the server reads it
        monkeypatch.setattr(binlog._Recent, "SMALL", 0.25)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO t SELECT seq + 1000, seq FROM seq_1_to_200000")
        far = _head(conn)
        before = len(asked)
        assert binlog.gtids_at(conn, far, pipeline.source) == _server_says(conn, far)
        assert len(asked) == before
    finally:
        conn.close()


def test_an_account_that_may_not_read_the_binlog_is_answered_by_the_server(stack, monkeypatch):
    """A load needs no REPLICATION SLAVE: when reading the range between is refused, the server answers."""
    fresh_database(f"{DB}_refused", f"CREATE TABLE `{DB}_refused`.t (id INT PRIMARY KEY, v INT)")
    pipeline = load_pipeline()
    refused = dataclasses.replace(pipeline.source, password=Secret("not the password"))
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], f"{DB}_refused")
    conn.autocommit(True)
    monkeypatch.setattr(binlog, "_RECENT", binlog._Recent())
    monkeypatch.setattr(binlog._Recent, "SMALL", 1.0)
    try:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO t VALUES (-1, 0) ON DUPLICATE KEY UPDATE v = v + 1")
            first = _head(conn)
            binlog.gtids_at(conn, first, refused)
            cur.execute("INSERT INTO t VALUES (-2, 0) ON DUPLICATE KEY UPDATE v = v + 1")
        later = _head(conn)
        assert later.after(first)
        assert binlog.gtids_at(conn, later, refused) == _server_says(conn, later)
    finally:
        conn.close()
