"""The source checks and chunk planning of the snapshot, on server answers given by hand (the server's
binlog settings are what is under test, and the shared MariaDB cannot be switched to STATEMENT mid-suite)."""

from __future__ import annotations

import pytest

from seam.core.position import Position
from seam.core.schema import Column, TableSchema
from seam.source.checks import check_source
from seam.source.row_json import RowJson
from seam.source.snapshot import Chunk, ChunkPlan, SnapshotError, chunk_sql, source_head

SCHEMA = TableSchema(
    "shop",
    "orders",
    (Column("id", "bigint", "bigint(20)", False), Column("note", "varchar", "varchar(10)", True)),
    ("id",),
)


class FakeServer:
    def __init__(
        self,
        log_bin=1,
        fmt="ROW",
        image="FULL",
        readable=("id", "note"),
        metadata="FULL",
        do_db="",
        ignore_db="",
        invisible=(),
        columns=("id", "note"),
    ):
        self.answers = (log_bin, fmt, image)
        self.columns = columns  # what information_schema has now
        self.readable = readable  # what SELECT * shows
        self.invisible = invisible  # columns SELECT * does not show to anyone
        self.metadata = metadata  # None: a server without binlog_row_metadata (MariaDB before 10.5)
        self.head = ("mysql-bin.000007", 4242, do_db, ignore_db)  # SHOW MASTER STATUS, with its filters
        self.sql = ""

    def cursor(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args=None):
        if sql == "SHOW BINARY LOG STATUS":  # MariaDB's answer
            raise ValueError("1064: You have an error in your SQL syntax")
        self.sql, self.args = sql, args
        self.description = [(c,) for c in self.readable]

    def fetchone(self):
        if self.sql.startswith("SHOW VARIABLES"):
            return None if self.metadata is None else ("binlog_row_metadata", self.metadata)
        if self.sql == "SHOW MASTER STATUS":
            return self.head
        return self.answers

    def fetchall(self):
        if "ORDINAL_POSITION" in self.sql:  # seam.source.schema.read_columns
            return [(name, "int", "int(11)", "YES", None, None, None, *self.args) for name in self.columns]
        assert "INVISIBLE" in self.sql or "INVISIBLE" in str(self.args), self.sql
        return [(name,) for name in self.invisible]


@pytest.mark.parametrize(
    "server, message",
    [
        (FakeServer(log_bin=0), "binary log is off: start MySQL/MariaDB with --log-bin"),
        (FakeServer(fmt="MIXED"), "binlog_format=MIXED, binlog_row_image=FULL: Seam needs ROW and FULL"),
        (FakeServer(image="MINIMAL"), "binlog_row_image=MINIMAL"),
        (FakeServer(readable=("id",)), "the Seam user sees columns ('id',)"),
        (  # not a grant: an ALTER since the columns were read for the plan
            FakeServer(readable=("id", "note", "w"), columns=("id", "note", "w")),
            "shop.orders changed shape while the load was planned (it has columns ('id', 'note', 'w') now",
        ),
        (FakeServer(metadata="MINIMAL"), "binlog_row_metadata=MINIMAL: Seam needs FULL"),
        (
            FakeServer(do_db="billing,hr"),
            "the source logs only the changes of databases billing, hr (binlog-do-db), not of shop: no stream "
            "could follow shop.orders. Remove the filter",
        ),
        (FakeServer(ignore_db="tmp,shop"), "the source does not log the changes of database shop (binlog-ignore-db)"),
    ],
)
def test_source_settings_that_break_exactness_are_refused(server, message):
    with pytest.raises(SnapshotError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_source(server, SCHEMA)


def test_a_good_source_passes():
    check_source(FakeServer(), SCHEMA)
    check_source(FakeServer(metadata=None), SCHEMA)  # no such variable: nothing to check
    check_source(FakeServer(do_db="shop,hr", ignore_db="tmp"), SCHEMA)  # filters that keep the table's database
    check_source(FakeServer(readable=("id",), invisible=("note",)), SCHEMA)  # not in SELECT *, yet readable
    assert source_head(FakeServer()) == Position.through("mysql-bin.000007", 4242)


def test_chunks_cover_every_key_once_and_names_are_quoted():
    plan = ChunkPlan("id", (Chunk(0, None, 100), Chunk(1, 100, 200), Chunk(2, 200, None)))
    assert [plan.chunk_of(v) for v in (-5, 99, 100, 199, 200, 10**12)] == [0, 0, 1, 1, 2, 2]
    odd = TableSchema("we`ird db", "t", (Column("a`b", "int", "int(11)", False),), ("a`b",))
    rows = RowJson.of(odd, ("a`b",))
    sql = chunk_sql(odd, ChunkPlan("a`b", (Chunk(0, None, 5), Chunk(1, 5, None))), Chunk(1, 5, None), rows)
    assert sql == "SELECT x.`a``b` FROM `we``ird db`.`t` x WHERE x.`a``b` >= 5"
    assert rows.labels == (b'{"a`b":',) and rows.render([(b"7",)]) == [(b'{"a`b":7}', b'{"a`b":7}')]
