"""DDL sent by a client whose character set is not UTF-8. The binlog keeps a statement in the bytes its client
sent, with the client's character set beside it; a table named `café` by a latin1 client is ``caf\\xe9`` there.
Read as UTF-8, ``TRUNCATE TABLE café`` named no table Seam follows: the target kept every row, silently."""

from __future__ import annotations

import os

import pymysql
import pytest
from sqlalchemy.engine import make_url

from tests.support.independent import compare_pipeline
from tests.support.pipelines import loaded, stopped_tables, stream_once
from tests.support.source import fresh_database

DB = "client_charset_ddl_test"
pytestmark = pytest.mark.stack

# table: the client's character set that names it in its DDL
TABLES = {"café": "latin1", "заказы": "cp1251", "订单": "gbk", "ölfässer": "utf8mb4"}


def _client(charset: str) -> pymysql.Connection:
    url = make_url(os.environ["SEAM_MYSQL_URL"])
    return pymysql.connect(
        host=url.host,
        port=url.port,
        user=url.username,
        password=url.password or "",
        database=DB,
        charset=charset,
        autocommit=True,
    )


def test_ddl_from_a_client_in_another_character_set_names_the_table_it_names(stack, tmp_path_factory):
    fresh_database(
        DB,
        *[f"CREATE TABLE {DB}.`{t}` (id INT PRIMARY KEY, v VARCHAR(20))" for t in TABLES],
        *[f"INSERT INTO {DB}.`{t}` SELECT seq, 'ß-{t}' FROM {DB}.seq_1_to_20" for t in TABLES],
    )
    _, pipeline = loaded(tmp_path_factory, "client_charset", [{"name": f"{DB}.{t}", "key": ["id"]} for t in TABLES])
    stream_once(pipeline)
    for table, charset in TABLES.items():
        client = _client(charset)
        with client.cursor() as cur:
            cur.execute(f"TRUNCATE TABLE `{table}`")  # no rows in the binlog: only the statement says so
            cur.execute(f"INSERT INTO `{table}` VALUES (7, '{table}')")
        client.close()
    stream_once(pipeline)
    stopped = stopped_tables(pipeline, DB)
    for table in TABLES:
        assert stopped[table] is None, stopped
        assert compare_pipeline(pipeline, DB, table) is None, table
