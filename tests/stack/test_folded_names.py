"""A source started with ``lower_case_table_names=1`` (MySQL on Windows or macOS, and Linux servers set up so
for applications that came from them): `TRUNCATE TABLE Orders` empties the table `orders`. Seam compared the
names in a statement as written, so a statement that spelled a followed table in another case was not its:
the TRUNCATE was missed (the target kept every row), the ALTER left to the unlogged-DDL check, the RENAME
unseen. Now the names are compared as the server compares them."""

from __future__ import annotations

import psycopg
import pytest
import yaml

from seam.config import load_pipeline
from tests.support.commands import seam_command
from tests.support.independent import compare_pipeline
from tests.support.pipelines import stopped_tables, stream_once
from tests.support.servers import MariaDB

DB = "folding"
TABLES = ["orders", "items", "stock"]
pytestmark = pytest.mark.stack


@pytest.fixture
def folding(stack, tmp_path):
    server = MariaDB(tmp_path / "folding", 21, "--lower-case-table-names=1")
    try:
        server.add_users()
        server.run(
            f"CREATE DATABASE {DB}",
            *[f"CREATE TABLE {DB}.{t} (id INT PRIMARY KEY, v INT)" for t in TABLES],
            *[f"INSERT INTO {DB}.{t} SELECT seq, seq FROM {DB}.seq_1_to_20" for t in TABLES],
        )
        yield server
    finally:
        server.stop()


def _pipeline(tmp_path, server: MariaDB, tables=TABLES):
    doc = yaml.safe_load(open(load_pipeline().path))
    doc.update(name="folded_names", tables=[{"name": f"{DB}.{t}", "key": ["id"]} for t in tables])
    doc["kafka"]["topic_prefix"] = "seam.folded_names"
    doc["source"]["port"] = server.port
    path = tmp_path / f"pipeline-{'-'.join(tables)}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_statements_name_tables_as_a_case_folding_server_reads_them(folding, tmp_path):
    path = _pipeline(tmp_path, folding)
    load = seam_command(path, "load", "full", *[f"{DB}.{t}" for t in TABLES])
    assert load.returncode == 0, load.stderr[-3000:]
    pipeline = load_pipeline(path)
    stream_once(pipeline)
    folding.run(
        "USE Folding",
        "TRUNCATE TABLE Orders",  # no rows in the binlog: only the statement says so
        "INSERT INTO ORDERS VALUES (7, 7)",
        "ALTER TABLE FOLDING.Items ADD COLUMN x INT DEFAULT 4",
        "UPDATE items SET v = v + 1 WHERE id < 3",
        "RENAME TABLE Stock TO stock_old",
    )
    stream_once(pipeline)
    stopped = stopped_tables(pipeline, DB)
    assert stopped["orders"] is None and compare_pipeline(pipeline, DB, "orders") is None, stopped
    assert stopped["items"] is None and compare_pipeline(pipeline, DB, "items") is None, stopped
    assert "RENAME" in (stopped["stock"] or ""), stopped

    # the pipeline must name a table as the source stores it: its binlog names it so, and a stream that
    # knew it as `Orders` would not know the rows of `orders` for its own
    misnamed = seam_command(_pipeline(tmp_path, folding, ["Orders"]), "load", "full", f"{DB}.Orders")
    assert misnamed.returncode != 0, misnamed.stdout
    assert "folding.Orders is stored as folding.orders on the source" in misnamed.stderr, misnamed.stderr
    assert "Traceback" not in misnamed.stderr and len(misnamed.stderr.strip().splitlines()) == 1, misnamed.stderr

    # a pipeline loaded under such a name before loads refused it: its stream stops the table with the way out,
    # rather than follow it and take none of its changes
    old = load_pipeline(_pipeline(tmp_path, folding, ["Orders"]))
    with psycopg.connect(**old.target.conninfo(), autocommit=True) as conn:
        conn.execute(f"DELETE FROM {old.target.state_schema}.positions WHERE db = %s AND tbl = 'Orders'", (DB,))
        for state in ("positions", "batches"):
            conn.execute(
                f"UPDATE {old.target.state_schema}.{state} SET tbl = 'Orders' WHERE db = %s AND tbl = 'orders'", (DB,)
            )
    folding.run(f"UPDATE {DB}.orders SET v = v + 1")
    stream_once(old)
    why = stopped_tables(old, DB)["Orders"] or ""
    assert "the source stores it as folding.orders" in why, why
    assert why.endswith(
        "name it folding.orders in the pipeline; run `seam load full folding.orders` to sync the table again"
    ), why
