"""What differs on MySQL 8.0/8.4 and cannot run here (issue 15): the statements Seam picks by server, checked
against a scripted server that answers like each version does. The methods themselves run on MariaDB in the
stack tests (``source.snapshot: portable`` forced)."""

from __future__ import annotations

import pytest

from seam.config import ConfigError, parse_pipeline
from seam.core.position import Position
from seam.source.snapshot import SnapshotError, snapshot_method, source_head


class SyntaxError_(Exception):
    pass


class Server:
    """Answers statements from a table of ``{statement prefix: rows}``; a statement it lacks is a syntax
    error, as an older or newer server raises for a statement it does not know."""

    def __init__(self, answers: dict[str, list[tuple]]):
        self.answers, self.seen = answers, []

    def cursor(self):
        return Cursor(self)


class Cursor:
    def __init__(self, server: Server):
        self.server, self.rows = server, []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql: str, params=None):
        self.server.seen.append(sql if params is None else (sql, params))
        text = sql if params is None else f"{sql} {params[0]}"
        for prefix, rows in self.server.answers.items():
            if text.startswith(prefix):
                self.rows = list(rows)
                return
        raise SyntaxError_(1064, f"You have an error in your SQL syntax near {sql!r}")

    def fetchone(self):
        return self.rows.pop(0) if self.rows else None

    def fetchall(self):
        rows, self.rows = self.rows, []
        return rows


def test_mysql_84_head_comes_from_show_binary_log_status():
    server = Server({"SHOW BINARY LOG STATUS": [("binlog.000042", 1234, "", "", "3e11fa47-71ca-11e1-9e33:1-77")]})
    assert source_head(server) == Position.through("binlog.000042", 1234)
    assert server.seen == ["SHOW BINARY LOG STATUS"]


def test_mariadb_and_mysql_80_fall_back_to_show_master_status():
    server = Server({"SHOW MASTER STATUS": [("mysql-bin.000007", 99, "", "")]})
    assert source_head(server) == Position.through("mysql-bin.000007", 99)
    assert server.seen == ["SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"]


def test_binlog_off_is_one_clear_error():
    with pytest.raises(SnapshotError, match="binary log is off"):
        source_head(Server({"SHOW BINARY LOG STATUS": []}))


@pytest.mark.parametrize(
    "version, method",
    [("10.11.14-MariaDB-0+deb12u2-log", "mariadb"), ("8.4.6", "portable"), ("8.0.43-0ubuntu0.22.04.1", "portable")],
)
def test_auto_picks_the_method_by_server(version, method):
    assert snapshot_method(Server({"SELECT VERSION()": [(version,)]}), "auto") == method
    assert snapshot_method(Server({}), "portable") == "portable"  # forced: the server is not asked


def test_snapshot_method_is_checked_in_the_pipeline():
    raw = {
        "source": {"host": "h", "user": "u", "snapshot": "portible"},
        "kafka": {"bootstrap": "k:9092"},
        "target": {"host": "p", "database": "d", "user": "u"},
        "tables": [{"name": "a.b", "key": ["id"]}],
    }
    with pytest.raises(ConfigError, match="source.snapshot.*'portible' is not one of auto, mariadb, portable"):
        parse_pipeline(raw)
    raw["source"]["snapshot"] = "portable"
    assert parse_pipeline(raw).source.snapshot == "portable"
