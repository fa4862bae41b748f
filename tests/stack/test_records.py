"""The record shape: a row read by a snapshot SELECT and the same row decoded
from the binlog normalise to identical values, for every awkward type."""

from __future__ import annotations

import os

import pymysql
import pytest

from seam.core.position import Position
from seam.core.schema import SchemaError
from seam.source.binlog import BinlogReader, Transaction
from seam.source.schema import read_schema
from seam.wire.records import Record, key_of, normalize_row
from seam_dev import demo

pytestmark = pytest.mark.stack

ZERO_DATES = """CREATE TABLE `zero dates` (`id` INT PRIMARY KEY, `d` DATE NULL, `dt` DATETIME(6) NULL,
                `ts` TIMESTAMP NULL DEFAULT NULL)"""


@pytest.fixture(scope="module")
def written(stack, pipeline):
    """Fresh tables, the binlog position before writing them, and the rows written."""
    admin = demo.connect(os.environ["SEAM_MYSQL_URL"])
    with admin.cursor() as cur:
        cur.execute("DROP DATABASE IF EXISTS records_test")
        cur.execute("CREATE DATABASE records_test")
        cur.execute("USE records_test")
        cur.execute(demo.SCHEMA[3])  # type_zoo
        cur.execute(ZERO_DATES)
        cur.execute("SHOW MASTER STATUS")
        start = cur.fetchone()[:2]
        import random

        rng = random.Random(3)
        rows = [demo._zoo_row(rng, i) for i in range(1, 41)]
        cols = ", ".join(f"`{c}`" for c in rows[0])
        cur.executemany(
            f"INSERT INTO type_zoo ({cols}) VALUES ({', '.join(['%s'] * len(rows[0]))})",
            [tuple(r.values()) for r in rows],
        )
        cur.execute("SET SESSION sql_mode = ''")  # allow zero dates, as legacy schemas do
        cur.execute(
            "INSERT INTO `zero dates` VALUES (1, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00'),"
            " (2, '2024-00-10', '2024-02-29 23:59:59.5', '2038-01-19 03:14:07'), (3, NULL, NULL, NULL)"
        )
    admin.close()
    return start


def _select(pipeline, table):
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs(utc=True))
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(f"SELECT * FROM records_test.`{table}`")
        rows = cur.fetchall()
    schema = read_schema(conn, "records_test", table)
    conn.close()
    return schema, rows


def _binlog(pipeline, start, table):
    """The rows inserted into ``table`` since ``start``, decoded by the stream's reader."""
    reader = BinlogReader(pipeline.source, Position.through(*start), {"records_test"}, tables={("records_test", table)})
    try:
        return [
            (c.position, c.after)
            for item in reader
            if isinstance(item, Transaction)
            for c in item.changes
            if c.op == "c"
        ]
    finally:
        reader.close()


@pytest.mark.parametrize("table", ["type_zoo", "zero dates"])
def test_snapshot_and_binlog_values_normalise_identically(pipeline, written, table):
    schema, selected = _select(pipeline, table)
    from_select = {r["id"]: normalize_row(schema, r) for r in selected}
    from_binlog = {v["id"]: normalize_row(schema, v) for _, v in _binlog(pipeline, written, table)}
    assert from_select and from_select.keys() == from_binlog.keys()
    for key in from_select:
        assert from_binlog[key] == from_select[key], key


def test_normalised_edge_values(pipeline, written):
    schema, selected = _select(pipeline, "type_zoo")
    row = {r["id"]: normalize_row(schema, r) for r in selected}
    edge = row[1]
    assert edge["amount"] == "99999999999999.999999" and edge["big_unsigned"] == "18446744073709551615"
    assert edge["happened_at"] == "9999-12-31T23:59:59.999999"
    assert edge["clock"] == "-838:59:59.000000" and edge["flags"] == 4095 and edge["vintage"] == 1901
    low = row[2]
    assert low["amount"] == "-0.000001" and low["big_unsigned"] == "0" and low["tags"] == ""
    assert low["stamped_at"] == "1970-01-01T00:00:01.000000Z" and low["payload"] == ""
    assert all(v is None for k, v in row[3].items() if k not in ("id", "updated_at"))
    zero_schema, zero_rows = _select(pipeline, "zero dates")
    zeros = {r["id"]: normalize_row(zero_schema, r) for r in zero_rows}
    assert zeros[1] == {"id": 1, "d": None, "dt": None, "ts": None}  # zero dates: null, by rule
    assert zeros[2] == {"id": 2, "d": None, "dt": "2024-02-29T23:59:59.500000", "ts": "2038-01-19T03:14:07.000000Z"}


def test_record_json_round_trip_and_key(pipeline, written):
    schema, selected = _select(pipeline, "type_zoo")
    after = normalize_row(schema, selected[0])
    record = Record(
        op="r",
        db="records_test",
        table="type_zoo",
        key=key_of(schema, ("id",), after),
        before=None,
        after=after,
        position=Position("mysql-bin.000002", 1234, 3),
        snapshot=True,
        batch="b-1",
    )
    assert Record.from_json(record.to_json()) == record
    assert record.kafka_key() == b'{"id":%d}' % after["id"]
    keyless = key_of(schema, (), after)
    assert keyless == after


def test_positions_order_by_file_number_then_offset():
    assert Position("mysql-bin.000009", 900) < Position("mysql-bin.000010", 4)
    assert Position("b.000001", 5, 0) < Position("b.000001", 5, 1) < Position("b.000001", 6, 0)
    assert str(Position("mysql-bin.000003", 1234, 2)) == "mysql-bin.000003:1234#2"


def test_missing_table_is_a_clear_error(pipeline, written):
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs())
    with pytest.raises(SchemaError, match="records_test.nope does not exist.*GRANT SELECT"):
        read_schema(conn, "records_test", "nope")
    conn.close()
