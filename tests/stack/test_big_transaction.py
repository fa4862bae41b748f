"""A source transaction larger than ``stream.max_transaction_memory`` (issue 34): the change reader spills its
changes to a temporary file, the sink stages them in the target, and the transaction is still applied whole,
at its commit, in binlog order: a keyed table's updates, deletes and key moves, a keyless table's rows, and a
foreign-key cascade into a child table. A staged transaction that cannot be applied stops its table with
none of its changes applied. The budget is set to its least (1 MB) so that a few tens of thousands of rows
spill; ``benchmarks/`` measures millions against the default."""

from __future__ import annotations

import logging
import sys

import psycopg
import pytest

from seam.config import load_pipeline
from tests.support.commands import run_command
from tests.support.independent import compare
from tests.support.pipelines import pipeline_file, stream_once
from tests.support.source import fresh_database, in_one_transaction

DB = "bigtxn_test"
ROWS = 60_000
pytestmark = pytest.mark.stack

TABLES = [
    """CREATE TABLE ledger (id INT PRIMARY KEY, account INT NOT NULL, amount DECIMAL(14,2) NOT NULL,
        note VARCHAR(60) NOT NULL)""",
    "CREATE TABLE events (kind VARCHAR(20) NOT NULL, amount INT NULL)",
    "CREATE TABLE owners (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL)",
    """CREATE TABLE holdings (id INT PRIMARY KEY, owner_id INT NOT NULL, qty INT NOT NULL,
        FOREIGN KEY (owner_id) REFERENCES owners (id) ON DELETE CASCADE)""",
    "CREATE TABLE hits (n INT) ENGINE=MyISAM",  # not in the pipeline
]


def _mysql(*statements: str) -> None:
    in_one_transaction(DB, *statements)


@pytest.fixture(scope="module")
def path(stack, tmp_path_factory):
    fresh_database(
        DB,
        f"USE `{DB}`",
        *TABLES,
        f"INSERT INTO `{DB}`.ledger SELECT seq, seq % 97, seq / 100, CONCAT('opening balance ', seq) "
        f"FROM `{DB}`.seq_1_to_{ROWS}",
        f"INSERT INTO `{DB}`.events SELECT 'open', seq % 10 FROM `{DB}`.seq_1_to_2000",
        f"INSERT INTO `{DB}`.owners SELECT seq, CONCAT('owner ', seq) FROM `{DB}`.seq_1_to_6000",
        f"INSERT INTO `{DB}`.holdings SELECT seq, seq, seq % 50 FROM `{DB}`.seq_1_to_6000",
    )
    tables = [
        {"name": f"{DB}.ledger", "key": ["id"], "sync": "stream"},
        {"name": f"{DB}.events", "key": "none", "sync": "stream"},
        {"name": f"{DB}.owners", "key": ["id"], "sync": "stream"},
        {"name": f"{DB}.holdings", "key": ["id"], "sync": "stream"},
    ]
    path = pipeline_file(tmp_path_factory, "bigtxn", tables, stream={"max_transaction_memory": 2**20})
    load = run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", *[t["name"] for t in tables]],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert load.returncode == 0, load.stdout + load.stderr
    return path


def _equal(pipeline, tables=("ledger", "events", "owners", "holdings")) -> None:
    for table in tables:
        assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, table) is None


def test_a_transaction_over_the_memory_budget_spills_and_is_applied_whole(path, caplog):
    pipeline = load_pipeline(path)
    _mysql(
        "UPDATE ledger SET amount = amount + 1, note = CONCAT('settled ', id)",
        f"UPDATE ledger SET id = id + {ROWS} WHERE id % 10 = 0",  # key moves
        "DELETE FROM ledger WHERE id % 7 = 0",
        "INSERT INTO events SELECT 'settle', seq % 10 FROM seq_1_to_20000",
        "DELETE FROM events WHERE kind = 'open' AND amount = 3",
        "DELETE FROM owners WHERE id % 2 = 0",  # cascades into holdings, not in the binlog
    )
    with caplog.at_level(logging.INFO):
        stats = stream_once(pipeline)
    assert stats["spilled"] > ROWS, stats  # the reader spilled most of the transaction
    staged = [r.getMessage() for r in caplog.records if "staged in the target" in r.getMessage()]
    assert any("ledger" in m for m in staged) and any("holdings" in m for m in staged), staged
    _equal(pipeline)
    with psycopg.connect(**pipeline.target.conninfo()) as conn:  # the sink's session dropped what it staged
        left = conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'seam\\_txn\\_%'").fetchone()[0]
    assert left == 0


def test_rows_rolled_back_to_a_savepoint_in_a_spilled_transaction_are_left_out(path):
    """With a non-transactional change in the transaction, rows rolled back to a savepoint are in the binlog,
    before a ROLLBACK TO: here, most of them in the spill file, and left out of it."""
    pipeline = load_pipeline(path)
    _mysql(
        "UPDATE ledger SET note = 'kept before' WHERE id <= 20000",
        "INSERT INTO hits VALUES (1)",
        "SAVEPOINT a",
        "UPDATE ledger SET amount = amount + 1000 WHERE id <= 40000",
        "DELETE FROM events WHERE amount = 4",
        "ROLLBACK TO SAVEPOINT a",
        "UPDATE ledger SET note = 'kept after' WHERE id > 50000",
        "SAVEPOINT b",
        "INSERT INTO events SELECT 'undone', seq FROM seq_1_to_30000",
        "ROLLBACK TO b",
        "INSERT INTO events VALUES ('kept', 1)",
    )
    stats = stream_once(pipeline)
    assert stats["spilled"] > 20_000, stats
    _equal(pipeline)


def test_a_staged_transaction_that_cannot_be_applied_stops_its_table_with_none_of_it_applied(path):
    pipeline = load_pipeline(path)
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        conn.execute(f'DELETE FROM "{DB}".ledger WHERE id = (SELECT max(id) FROM "{DB}".ledger)')  # diverged
        before = conn.execute(f'SELECT count(*), sum(amount) FROM "{DB}".ledger').fetchone()
    _mysql("DELETE FROM ledger", "UPDATE events SET amount = amount + 1")  # the last delete finds nothing
    stream_once(pipeline)
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        after = conn.execute(f'SELECT count(*), sum(amount) FROM "{DB}".ledger').fetchone()
        stopped = conn.execute("SELECT stopped FROM seam.positions WHERE db = %s AND tbl = 'ledger'", (DB,)).fetchone()
    assert after == before  # not one of the staged deletes applied
    assert stopped is not None and "diverged" in str(stopped[0]), stopped
    _equal(pipeline, ("events", "owners", "holdings"))  # the other tables went on
