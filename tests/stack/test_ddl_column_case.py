"""DDL that names a column in another case than the table's (`DROP COLUMN NOTE` of a column `note`): MySQL's
column names are not case-sensitive, and ``MODIFY V ...`` also renames `v` to `V`. Each used to stop its table
(`column NOTE is not one the stream knows`) and cost a full reload for a change the stream follows."""

from __future__ import annotations

import os

import psycopg
import pytest

from seam_dev import demo
from tests.support.independent import compare_pipeline
from tests.support.pipelines import loaded, stopped_tables, stream_once
from tests.support.source import fresh_database

DB = "ddl_column_case_test"
pytestmark = pytest.mark.stack

ALTERS = {
    "dropped": "DROP COLUMN NOTE",
    "renamed": "RENAME COLUMN Amount TO amt",
    "recased": "CHANGE note NOTE VARCHAR(40)",
    "widened": "MODIFY COLUMN V BIGINT",
    "defaulted": "ALTER COLUMN V SET DEFAULT 7",
    "added": "ADD COLUMN x INT DEFAULT 3 AFTER AMOUNT",
}
# the target's columns after each, as the source names them now
COLUMNS = {
    "dropped": ["id", "amount", "v"],
    "renamed": ["id", "amt", "note", "v"],
    "recased": ["id", "amount", "NOTE", "v"],
    "widened": ["id", "amount", "note", "V"],
    "defaulted": ["id", "amount", "note", "v"],
    "added": ["id", "amount", "note", "v", "x"],  # an added column lands last in the target
}


def test_ddl_naming_a_column_in_another_case_is_followed(stack, tmp_path_factory):
    fresh_database(
        DB,
        *[f"CREATE TABLE {DB}.{t} (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(20), v INT)" for t in ALTERS],
        *[f"INSERT INTO {DB}.{t} SELECT seq, seq / 3, 'n', seq FROM {DB}.seq_1_to_20" for t in ALTERS],
    )
    _, pipeline = loaded(tmp_path_factory, "ddl_column_case", [{"name": f"{DB}.{t}", "key": ["id"]} for t in ALTERS])
    stream_once(pipeline)
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with writer.cursor() as cur:
        for table, alter in ALTERS.items():
            cur.execute(f"ALTER TABLE {table} {alter}")
            cur.execute(f"UPDATE {table} SET id = id + 100 WHERE id <= 3")
            cur.execute(f"INSERT INTO {table} (id) VALUES (500)")
    writer.close()
    stream_once(pipeline)
    stopped = stopped_tables(pipeline, DB)
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        columns = {
            t: [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
                    "ORDER BY ordinal_position",
                    (DB, t),
                )
            ]
            for t in ALTERS
        }
    assert all(s is None for s in stopped.values()), stopped
    assert columns == COLUMNS
    for table in ALTERS:
        assert compare_pipeline(pipeline, DB, table) is None, table
