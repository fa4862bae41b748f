"""The task's rendering of a snapshot row (``seam.source.row_json``) against the source's own (each column's
``codecs.snapshot_sql``, computed by MariaDB): the same JSON value for every character of every character set
the tables here use, every zero, partial and impossible date, every DATETIME and TIMESTAMP precision."""

from __future__ import annotations

import json
import os

import MySQLdb
import pytest

from seam.config import load_pipeline
from seam.core.identifiers import quote
from seam.source.row_json import JSON, RowJson
from seam.source.schema import read_schema
from seam.source.snapshot import Chunk, ChunkPlan, ChunkRead, chunk_sql, read_chunk
from seam.wire.codecs import codec
from seam_dev import demo
from tests.support.source import fresh_database

DB = "rowjson_test"
pytestmark = pytest.mark.stack

TEXTS = [
    "".join(map(chr, range(1, 0x80))),
    'é€😀\u2028\u2029 \\u0000 \\\\ "quoted" </script>',
    "\x00",
    "",
    "ÿ café",
]
DATES = ["2024-02-29", "2023-02-29", "1900-02-29", "2000-02-29", "2024-04-31", "0000-00-00", "2024-00-10",
         "2024-01-00", "0099-03-04", "9999-12-31", "1000-01-01"]  # fmt: skip
TIMES = ["", ".5", ".123456"]


def test_every_value_is_the_json_the_source_renders(stack):
    fresh_database(
        DB,
        f"""CREATE TABLE `{DB}`.t (id INT PRIMARY KEY, u VARCHAR(200) CHARACTER SET utf8mb4,
        l VARCHAR(200) CHARACTER SET latin1, a CHAR(10) CHARACTER SET ascii, m TEXT CHARACTER SET utf8mb3,
        e ENUM('a','Ü b','"q"') CHARACTER SET utf8mb4, s SET('x','y','Z z'), d DATE, dt0 DATETIME, dt3 DATETIME(3),
        dt6 DATETIME(6), ts TIMESTAMP(6) NULL, ts0 TIMESTAMP NULL, n BIGINT NOT NULL, un BIGINT UNSIGNED,
        dec6 DECIMAL(20,6), ti TINYINT(1))""",
    )
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    rows = []
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES', time_zone = '+00:00'")
        for i in range(max(len(TEXTS), len(DATES) * len(TIMES))):
            text = TEXTS[i % len(TEXTS)]
            day, fraction = DATES[i % len(DATES)], TIMES[i % len(TIMES)]
            at = f"{day} 23:59:59{fraction}"
            ascii_text = text.encode("ascii", "ignore").decode()[:10]
            latin = text.encode("latin-1", "ignore").decode("latin-1")
            rows.append(
                (i, text, latin, ascii_text, text.replace("😀", ""), ["a", "Ü b", '"q"'][i % 3], ["", "x", "y,Z z,x"][i % 3],
                 day, at, at, at, None if day.startswith("0") else at, "1970-01-01 00:00:01",
                 -(2**63) + i, 2**64 - 1 - i, f"-{i}.000001", i % 3 - 1)
            )  # fmt: skip
        cur.executemany(f"INSERT INTO t VALUES ({', '.join(['%s'] * 17)})", rows)
    conn.commit()
    conn.close()

    pipeline = load_pipeline()
    source = MySQLdb.connect(**pipeline.source.pymysql_kwargs())
    schema = read_schema(source, DB, "t")
    plan = RowJson.of(schema, ("id",))
    assert JSON not in plan.modes  # every column here is rendered by the task
    whole = Chunk(0, None, None)
    read = ChunkRead(0, chunk_sql(schema, ChunkPlan(None, (whole,)), whole, plan), plan, None, schema)
    by_task = {
        json.loads(a)["id"]: json.loads(a) for _, _, pairs in read_chunk(pipeline.source, read) for a, _ in pairs
    }

    by_source = {}
    with source.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        x = [
            f"CAST(IFNULL({codec(c).snapshot_sql(c, 'x.' + quote(c.name))}, 'null') AS BINARY)" for c in schema.columns
        ]
        cur.execute(f"SELECT {', '.join(x)} FROM `{DB}`.t x")
        for values in cur.fetchall():
            image = {c.name: json.loads(v) for c, v in zip(schema.columns, values)}
            by_source[image["id"]] = image
    source.close()
    assert len(by_task) == len(rows) and by_task == by_source
    assert by_task[1]["u"] == TEXTS[1] and by_task[1]["d"] is None and by_task[4]["d"] is None  # 2023-02-29, -04-31
