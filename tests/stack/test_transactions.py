"""What applications write, streamed whole (issue 14): XA transactions (two-phase, committed or rolled back
later by another session, one-phase, prepared before the full load, committed after the reader restarted),
rolled-back work, and SET/ENUM members that are not lower case. Each case is checked by the values the
target must hold, and the whole table row by row against the source."""

from __future__ import annotations

import os
import sys
import threading
import time

import psycopg
import pytest

from seam.config import load_pipeline
from seam.core.errors import StreamError
from seam.source.binlog import BinlogReader
from seam.source.snapshot import source_head
from seam.source.streaming import ChangeReader
from seam.state.parts import part_states
from seam_dev import demo
from tests.support.commands import run_command, seam_command
from tests.support.compare import diff, source_rows, target_rows
from tests.support.independent import compare, compare_pipeline
from tests.support.pipelines import loaded, pipeline_file, stream_once
from tests.support.source import fresh_database, in_one_transaction

DB = "txn_test"
pytestmark = pytest.mark.stack

FILMS = """CREATE TABLE films (id INT PRIMARY KEY, title VARCHAR(40) NOT NULL,
    features SET('Trailers','Commentaries','Deleted Scenes','Behind the Scenes', 'Größe') NULL,
    rating ENUM('G','PG','PG-13','R','NC-17', 'Ünrated') NOT NULL DEFAULT 'G') ENGINE=InnoDB"""


def _connect():
    return demo.connect(os.environ["SEAM_MYSQL_URL"], DB)


def _run(*statements: str) -> None:
    """Statements in one session that autocommits (an XA transaction is ended by its own statements). A session
    that prepares one is waited out: the server detaches the prepared branch only once it has ended the session,
    after the client has gone, and until then another session's XA COMMIT or ROLLBACK answers XAER_NOTA."""
    conn = _connect()
    try:
        conn.autocommit(True)
        session = conn.thread_id()
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
    finally:
        conn.close()
    if any(sql.startswith("XA PREPARE") for sql in statements):
        _wait_until_ended(session)


def _wait_until_ended(session: int) -> None:
    conn = _connect()
    try:
        with conn.cursor() as cur:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s", (session,))
                if not cur.fetchone()[0]:
                    return
                time.sleep(0.01)
        raise AssertionError(f"session {session} that prepared an XA transaction never ended on the source")
    finally:
        conn.close()


def _target(pipeline) -> dict:
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        return {r[0]: r[1:] for r in conn.execute(f'SELECT id, title, features, rating FROM "{DB}".films')}


@pytest.fixture(scope="module")
def path(stack, tmp_path_factory):
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], None)
    try:
        with conn.cursor() as cur:
            cur.execute("XA RECOVER")
            for row in cur.fetchall():  # a prepared transaction left by an earlier, interrupted run
                if row[3].startswith(b"txn_test") if isinstance(row[3], bytes) else row[3].startswith("txn_test"):
                    cur.execute(f"XA ROLLBACK '{row[3] if isinstance(row[3], str) else row[3].decode()}'")
            cur.execute(f"DROP DATABASE IF EXISTS {DB}")
            cur.execute(f"CREATE DATABASE {DB}")
            cur.execute(f"USE {DB}")
            cur.execute(FILMS)
            cur.execute(
                "INSERT INTO films VALUES (1, 'ACADEMY DINOSAUR', 'Deleted Scenes,Behind the Scenes', 'PG'), "
                "(2, 'ACE GOLDFINGER', 'Trailers', 'G'), (3, 'ADAPTATION HOLES', '', 'NC-17'), "
                "(4, 'AFFAIR PREJUDICE', NULL, 'Ünrated'), (5, 'AGENT TRUMAN', 'Größe,Trailers', 'R')"
            )
        conn.commit()
    finally:
        conn.close()
    return pipeline_file(tmp_path_factory, "txn", [{"name": f"{DB}.films", "key": ["id"], "sync": "stream"}])


def test_xa_and_rollbacks_stream_exactly(path):
    pipeline = load_pipeline(path)
    # prepared before the full load, committed after it: invisible to the snapshot, its rows lie before the
    # table's position
    _run(
        "XA START 'txn_test_early'",
        "INSERT INTO films VALUES (10, 'EARLY XA', 'Commentaries', 'PG-13')",
        "XA END 'txn_test_early'",
        "XA PREPARE 'txn_test_early'",
    )
    load = run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{DB}.films"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert load.returncode == 0, load.stdout + load.stderr
    assert 10 not in _target(pipeline)
    _run("XA COMMIT 'txn_test_early'")  # another session commits it
    # two-phase, with a plain transaction committed while it is prepared, and the stream run in between
    _run(
        "XA START 'txn_test_2pc'",
        "INSERT INTO films VALUES (11, 'TWO PHASE', 'Behind the Scenes', 'G')",
        "UPDATE films SET features = 'Trailers,Commentaries' WHERE id = 1",
        "XA END 'txn_test_2pc'",
        "XA PREPARE 'txn_test_2pc'",
    )
    _run("UPDATE films SET title = 'PLAIN WHILE PREPARED', rating = 'Ünrated' WHERE id = 2")
    stream_once(pipeline)
    rows = _target(pipeline)
    assert rows[10] == ("EARLY XA", "Commentaries", "PG-13"), rows
    assert rows[2] == ("PLAIN WHILE PREPARED", "Trailers", "Ünrated"), rows
    assert 11 not in rows and rows[1][1] == "Deleted Scenes,Behind the Scenes", rows  # not committed yet
    _run("XA COMMIT 'txn_test_2pc'")  # its rows are now before the stream's position: found again
    # rolled back after PREPARE; one phase; a whole rolled-back transaction; a savepoint rolled back to
    _run(
        "XA START 'txn_test_undo'",
        "INSERT INTO films VALUES (12, 'NEVER', 'Trailers', 'G')",
        "XA END 'txn_test_undo'",
        "XA PREPARE 'txn_test_undo'",
    )
    _run("XA ROLLBACK 'txn_test_undo'")
    _run(
        "XA START 'txn_test_one'",
        "UPDATE films SET features = '' WHERE id = 5",
        "XA END 'txn_test_one'",
        "XA COMMIT 'txn_test_one' ONE PHASE",
    )
    conn = _connect()
    try:
        conn.autocommit(False)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO films VALUES (13, 'ROLLED BACK', NULL, 'G')")
            conn.rollback()
            cur.execute("UPDATE films SET features = 'Größe,Deleted Scenes' WHERE id = 3")
            cur.execute("SAVEPOINT a")
            cur.execute("DELETE FROM films WHERE id = 4")
            cur.execute("ROLLBACK TO SAVEPOINT a")
            cur.execute("UPDATE films SET rating = 5 WHERE id = 4")  # an ENUM set by its index: NC-17
        conn.commit()
    finally:
        conn.close()
    stream_once(pipeline)
    rows = _target(pipeline)
    assert rows[11] == ("TWO PHASE", "Behind the Scenes", "G"), rows
    assert rows[1][1] == "Trailers,Commentaries", rows
    assert 12 not in rows and 13 not in rows, rows
    assert (
        rows[5][1] == "" and rows[3][1] == "Deleted Scenes,Größe" and rows[4] == ("AFFAIR PREJUDICE", None, "NC-17")
    ), rows
    src, schema = source_rows(pipeline, DB, "films")
    assert target_rows(pipeline, schema) == src, diff(src, target_rows(pipeline, schema))
    assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "films") is None


def test_a_reader_with_the_same_server_id_is_named_not_retried(path):
    """A served (blocking) reader meets an XA COMMIT of a transaction prepared before its start and looks for the
    rows with a second binlog connection, which must not take the stream's server_id. Two readers that do share
    one knock each other off the source: the one knocked off stops with a line that names the server_id and the
    remedy, instead of taking the connection back forever."""
    pipeline = load_pipeline(path)
    _run(
        "XA START 'txn_test_late'",
        "INSERT INTO films VALUES (20, 'LATE XA', 'Trailers', 'G')",
        "XA END 'txn_test_late'",
        "XA PREPARE 'txn_test_late'",
    )
    _run("UPDATE films SET title = 'AFTER PREPARE' WHERE id = 2")
    stream_once(pipeline)  # the table's position is now past the PREPARE
    before = _dump_threads(pipeline.source.server_id)
    reader, failures, stop = ChangeReader(pipeline), [], threading.Event()

    def serve() -> None:
        try:
            reader.serve(should_stop=stop.is_set)
        except StreamError as exc:
            failures.append(str(exc))

    serving = threading.Thread(target=serve)
    serving.start()
    try:
        deadline = time.monotonic() + 120
        while _dump_threads(pipeline.source.server_id) <= before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _dump_threads(pipeline.source.server_id) > before, "the change reader never connected to the binlog"
        published = reader.followed[(DB, "films")].published
        _run("XA COMMIT 'txn_test_late'")
        while reader.followed[(DB, "films")].published == published and not failures and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not failures and reader.followed[(DB, "films")].published != published, failures
        conn = _connect()
        try:
            head = source_head(conn)
        finally:
            conn.close()
        other = BinlogReader(pipeline.source, head, [DB], server_id=pipeline.source.server_id, report_as="another-tool")
        try:
            next(iter(other), None)  # connects with the same server_id: the source drops the first reader
        finally:
            other.close()
        serving.join(timeout=60)
        assert not serving.is_alive(), "the knocked-off reader kept going"
    finally:
        stop.set()
        serving.join(timeout=60)
        reader.close()
    assert len(failures) == 1 and f"server_id {pipeline.source.server_id} is used by" in failures[0], failures
    assert "source.server_id" in failures[0]
    with psycopg.connect(**pipeline.target.conninfo()) as conn:  # `seam stream status` shows why, not "cleanly"
        state = part_states(conn, pipeline.target.state_schema, pipeline.name)["reader"]
    assert state["state"] == "stopped" and failures[0] == state["last_error"], state
    stream_once(pipeline)
    assert _target(pipeline)[20] == ("LATE XA", "Trailers", "G")


def _dump_threads(server_id: int) -> int:
    """The binlog readers registered with ``server_id`` (the tests beside this one use other ids)."""
    conn = _connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW SLAVE HOSTS")
            return sum(1 for row in cur.fetchall() if int(row[0]) == server_id)
    finally:
        conn.close()


def test_a_statement_the_stream_cannot_follow_stops_the_table_and_the_repair_printed_takes_it_up(path):
    """A change logged as a statement (not rows) is not followed: the table stops loudly, never skipped. Its
    columns are as they were, so the way out printed is a repair against the source as it is now (not a
    reload): it copies the changed row, and the stream goes on."""
    pipeline = load_pipeline(path)
    conn = _connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute("UPDATE films SET title = 'BY STATEMENT' WHERE id = 2")
        conn.commit()
    finally:
        conn.close()
    stream_once(pipeline)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as c:
        stopped = c.execute("SELECT stopped FROM seam.positions WHERE db = %s AND tbl = 'films'", (DB,)).fetchone()[0]
    assert stopped and "logged as a statement" in stopped, stopped
    assert f"run `seam repair {DB}.films --full` to sync the table again" in stopped, stopped
    repaired = seam_command(path, "repair", f"{DB}.films", "--full")
    assert repaired.returncode == 0 and "1 differing row(s)" in repaired.stdout, repaired.stdout + repaired.stderr
    _run("UPDATE films SET rating = 'G' WHERE id = 3")
    stream_once(pipeline)
    assert compare_pipeline(pipeline, DB, "films") is None


def test_foreign_key_cascades_reach_the_children(stack, tmp_path_factory):
    """ON DELETE CASCADE, ON UPDATE CASCADE and ON DELETE SET NULL act inside InnoDB: the binlog has rows for the
    parent only. The children in the target must change all the same, in order with their own changes (a child
    row inserted and then cascaded away in one transaction is gone)."""
    db = "cascade_test"
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], None)
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
            cur.execute(f"CREATE DATABASE {db}")
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE customers (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL UNIQUE, name TEXT)")
            cur.execute(
                "CREATE TABLE orders (id INT PRIMARY KEY, customer_code VARCHAR(10) NOT NULL, amount "
                "DECIMAL(10,2), FOREIGN KEY (customer_code) REFERENCES customers (code) ON DELETE CASCADE "
                "ON UPDATE CASCADE)"
            )
            cur.execute(
                "CREATE TABLE tickets (id INT PRIMARY KEY, customer_id INT NULL, text TEXT, "
                "FOREIGN KEY (customer_id) REFERENCES customers (id) ON DELETE SET NULL)"
            )
            cur.execute("INSERT INTO customers VALUES (1, 'C1', 'one'), (2, 'C2', 'two'), (3, 'C3', 'three')")
            cur.execute(
                "INSERT INTO orders VALUES (10, 'C1', 1.50), (11, 'C1', 2.50), (20, 'C2', 3.00), (30, 'C3', 4.00)"
            )
            cur.execute("INSERT INTO tickets VALUES (100, 1, 'a'), (200, 2, 'b'), (300, 3, 'c')")
        conn.commit()
    finally:
        conn.close()
    tables = [{"name": f"{db}.{t}", "key": ["id"], "sync": "stream"} for t in ("customers", "orders", "tickets")]
    path = pipeline_file(tmp_path_factory, "cascade", tables)
    pipeline = load_pipeline(path)
    load = run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", *(t["name"] for t in tables)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert load.returncode == 0, load.stdout + load.stderr
    assert (
        f"cascade followed by the stream: {db}.customers -> {db}.orders (customer_code; ON DELETE CASCADE, "
        "ON UPDATE CASCADE)" in load.stdout
    ), load.stdout
    assert f"{db}.customers -> {db}.tickets (customer_id; ON DELETE SET NULL)" in load.stdout, load.stdout
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], db)
    try:
        conn.autocommit(False)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO orders VALUES (21, 'C2', 9.99)")  # then cascaded away in the same transaction
            cur.execute("DELETE FROM customers WHERE id = 2")  # orders 20, 21 deleted; ticket 200 set NULL
            cur.execute("UPDATE customers SET code = 'C1-NEW' WHERE id = 1")  # orders 10, 11 follow the new code
            cur.execute("INSERT INTO orders VALUES (12, 'C1-NEW', 5.00)")
        conn.commit()
    finally:
        conn.close()
    stream_once(pipeline)
    for table in ("customers", "orders", "tickets"):
        assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), db, table) is None
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as c:
        orders = dict(c.execute(f'SELECT id, customer_code FROM "{db}".orders').fetchall())
        tickets = dict(c.execute(f'SELECT id, customer_id FROM "{db}".tickets').fetchall())
    assert orders == {10: "C1-NEW", 11: "C1-NEW", 12: "C1-NEW", 30: "C3"}, orders
    assert tickets == {100: 1, 200: None, 300: 3}, tickets
    # a cascading key added after the load, from a parent the pipeline does not sync: its deletes reach the child
    _run(
        f"CREATE TABLE {db}.agents (id INT PRIMARY KEY)",
        f"INSERT INTO {db}.agents VALUES (5), (6)",
        f"ALTER TABLE {db}.tickets ADD COLUMN agent_id INT NULL",
        f"UPDATE {db}.tickets SET agent_id = 5 WHERE id IN (100, 300)",
        f"ALTER TABLE {db}.tickets ADD CONSTRAINT to_agent FOREIGN KEY (agent_id) REFERENCES {db}.agents (id) "
        "ON DELETE SET NULL",
        f"DELETE FROM {db}.agents WHERE id = 5",
    )
    stream_once(pipeline)
    assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), db, "tickets") is None
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as c:
        agents = dict(c.execute(f'SELECT id, agent_id FROM "{db}".tickets').fetchall())
    assert agents == {100: None, 200: None, 300: None}, agents


def test_rows_rolled_back_to_a_savepoint_are_left_out_when_the_binlog_holds_them(stack, tmp_path_factory):
    """A transaction that also changed a non-transactional table (a MyISAM log, a MEMORY cache) has its rows
    rolled back to a savepoint logged anyway, with a ``ROLLBACK TO`` after them, for replicas to undo. Seam
    took that ROLLBACK TO for a plain SAVEPOINT and applied the rows the source never kept."""
    db = "txn_savepoint_test"
    fresh_database(
        db,
        f"CREATE TABLE {db}.films (id INT PRIMARY KEY, title VARCHAR(40) NOT NULL) ENGINE=InnoDB",
        f"INSERT INTO {db}.films SELECT seq, CONCAT('FILM ', seq) FROM {db}.seq_1_to_5",
        f"CREATE TABLE {db}.hits (n INT) ENGINE=MyISAM",  # not in the pipeline
    )
    _, pipeline = loaded(tmp_path_factory, "txn_savepoint", [{"name": f"{db}.films", "key": ["id"]}])
    stream_once(pipeline)
    in_one_transaction(
        db,
        "UPDATE films SET title = 'KEPT BEFORE' WHERE id = 1",
        "INSERT INTO hits VALUES (1)",
        "SAVEPOINT a",
        "UPDATE films SET title = 'UNDONE' WHERE id = 2",
        "INSERT INTO films VALUES (40, 'UNDONE TOO')",
        "SAVEPOINT b",
        "DELETE FROM films WHERE id = 3",
        "ROLLBACK TO SAVEPOINT a",  # b goes with it
        "UPDATE films SET title = 'KEPT AFTER' WHERE id = 4",
        "SAVEPOINT c",
        "INSERT INTO films VALUES (41, 'UNDONE AGAIN')",
        "ROLLBACK TO SAVEPOINT c",
        "INSERT INTO films VALUES (42, 'KEPT LAST')",
    )
    stream_once(pipeline)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as c:
        titles = dict(c.execute(f'SELECT id, title FROM "{db}".films').fetchall())
    assert titles == {1: "KEPT BEFORE", 2: "FILM 2", 3: "FILM 3", 4: "KEPT AFTER", 5: "FILM 5", 42: "KEPT LAST"}
    assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), db, "films") is None


@pytest.mark.parametrize("spilled", [False, True])
def test_a_parent_changed_with_foreign_key_checks_off_cascades_nothing(stack, tmp_path_factory, spilled):
    """A session with foreign_key_checks = 0 (a DBA's data fix, a bulk load) deletes or rekeys a parent: the
    engine cascades nothing, and its row events say so (NO_FOREIGN_KEY_CHECKS_F). The children stay as they
    are in the target too; before, the stream rebuilt the cascade and deleted them. ``spilled``: the
    transaction is larger than stream.max_transaction_memory, so its events are read back from the spill file."""
    db = f"unchecked_keys_{int(spilled)}"
    fresh_database(
        db,
        f"CREATE TABLE {db}.parent (id INT PRIMARY KEY, code INT UNIQUE)",
        f"CREATE TABLE {db}.child (id INT PRIMARY KEY, pid INT, pcode INT, "
        f"FOREIGN KEY (pid) REFERENCES {db}.parent (id) ON DELETE CASCADE, "
        f"FOREIGN KEY (pcode) REFERENCES {db}.parent (code) ON UPDATE CASCADE ON DELETE SET NULL)",
        f"CREATE TABLE {db}.filler (id INT PRIMARY KEY, pad VARCHAR(200))",
        f"INSERT INTO {db}.parent VALUES (1, 10), (2, 20), (3, 30)",
        f"INSERT INTO {db}.child VALUES (1, 1, 10), (2, 1, 10), (3, 2, 20), (4, 3, 30)",
    )
    tables = [{"name": f"{db}.{t}", "key": ["id"]} for t in ("parent", "child", "filler")]
    path = pipeline_file(tmp_path_factory, f"unchecked_{spilled}", tables, stream={"max_transaction_memory": 2**20})
    load = seam_command(path, "load", "full", *(t["name"] for t in tables))
    assert load.returncode == 0, load.stdout[-2000:] + load.stderr[-2000:]
    pipeline = load_pipeline(path)
    stream_once(pipeline)
    filler = ["INSERT INTO filler SELECT seq, REPEAT('x', 200) FROM seq_1_to_20000"] if spilled else []
    in_one_transaction(
        db,
        "SET FOREIGN_KEY_CHECKS = 0",
        *filler,
        "DELETE FROM parent WHERE id = 1",
        "UPDATE parent SET code = 21 WHERE id = 2",
    )
    in_one_transaction(db, "DELETE FROM parent WHERE id = 3")  # checked: the child's pcode is set NULL, row 4 goes
    stream_once(pipeline)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        children = conn.execute(f'SELECT id, pid, pcode FROM "{db}".child ORDER BY id').fetchall()
    assert children == [(1, 1, 10), (2, 1, 10), (3, 2, 20)], children
    for table in ("parent", "child", "filler"):
        assert compare_pipeline(pipeline, db, table) is None, table


def test_a_cascade_from_a_parent_in_another_database_reaches_the_child(stack, tmp_path_factory):
    """The parent's database is not the pipeline's: its delete cascades into the streamed child all the same.
    Before, foreign keys were read only between the pipeline's databases, and the cascade was lost."""
    fresh_database("cross_db_child")  # its key into the parent would keep the parent's database from going
    fresh_database(
        "cross_db_parent",
        "CREATE TABLE cross_db_parent.parent (id INT PRIMARY KEY)",
        "INSERT INTO cross_db_parent.parent VALUES (1), (2)",
    )
    fresh_database(
        "cross_db_child",
        "CREATE TABLE cross_db_child.child (id INT PRIMARY KEY, pid INT, "
        "FOREIGN KEY (pid) REFERENCES cross_db_parent.parent (id) ON DELETE CASCADE)",
        "INSERT INTO cross_db_child.child VALUES (1, 1), (2, 1), (3, 2)",
    )
    _, pipeline = loaded(tmp_path_factory, "cross_db", [{"name": "cross_db_child.child", "key": ["id"]}])
    stream_once(pipeline)
    in_one_transaction("cross_db_parent", "DELETE FROM parent WHERE id = 1")
    stream_once(pipeline)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        assert conn.execute('SELECT id FROM "cross_db_child".child').fetchall() == [(3,)]
    assert compare_pipeline(pipeline, "cross_db_child", "child") is None
