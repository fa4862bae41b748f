"""Foreign-key cascades below the first level (issue 14): InnoDB logs the parent's row only, so a delete or
key update that cascades through a child into a grandchild, or through a table's keys into itself (a tree),
must be rebuilt level by level in the target. Each case is checked by the values the target must hold, and
every table row by row against the source by the independent comparer."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import psycopg
import pymysql
import pytest

from seam.apply import cascades, swap
from seam.apply.sink import Sink
from seam.config import load_pipeline
from seam.source.schema import read_foreign_keys
from seam.source.streaming import ChangeReader
from tests.support.commands import run_command
from tests.support.independent import compare
from tests.support.pipelines import pipeline_file, stream_once
from tests.support.source import in_one_transaction

DB = "cascade_levels"
pytestmark = pytest.mark.stack

SCHEMA = [
    "CREATE TABLE customers (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL UNIQUE)",
    # level 2 by a natural key: a customer's new code reaches its accounts and their statements
    "CREATE TABLE accounts (id INT PRIMARY KEY, customer_code VARCHAR(10) NOT NULL, number VARCHAR(20) NOT NULL "
    "UNIQUE, FOREIGN KEY (customer_code) REFERENCES customers (code) ON DELETE CASCADE ON UPDATE CASCADE)",
    "CREATE TABLE statements (id INT PRIMARY KEY, account_number VARCHAR(20) NULL, FOREIGN KEY (account_number) "
    "REFERENCES accounts (number) ON DELETE SET NULL ON UPDATE CASCADE)",
    "CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT NOT NULL, "
    "FOREIGN KEY (customer_id) REFERENCES customers (id) ON DELETE CASCADE)",
    "CREATE TABLE order_lines (id INT PRIMARY KEY, order_id INT NOT NULL, qty INT, "
    "FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE CASCADE)",
    # a tree that is also a grandchild: replies go with their comment, an order's deletion unlinks its thread
    "CREATE TABLE comments (id INT PRIMARY KEY, parent_id INT NULL, order_id INT NULL, body TEXT, "
    "FOREIGN KEY (parent_id) REFERENCES comments (id) ON DELETE CASCADE, "
    "FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE SET NULL)",
    # level 3, under the tree
    "CREATE TABLE reactions (id INT PRIMARY KEY, comment_id INT NOT NULL, "
    "FOREIGN KEY (comment_id) REFERENCES comments (id) ON DELETE CASCADE)",
]
TABLES = ["customers", "accounts", "statements", "orders", "order_lines", "comments", "reactions"]


_run = in_one_transaction


def _target(pipeline, table: str) -> dict:
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        return {r[0]: r[1:] for r in conn.execute(f'SELECT * FROM "{DB}"."{table}" ORDER BY 1')}


def _equal(pipeline) -> None:
    for table in TABLES:
        assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, table) is None, table


@pytest.fixture(scope="module")
def pipeline(stack, tmp_path_factory):
    _run(None, f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}")
    _run(DB, *SCHEMA)
    _run(
        DB,
        "INSERT INTO customers VALUES (1, 'C1'), (2, 'C2'), (3, 'C3')",
        "INSERT INTO accounts VALUES (10, 'C1', 'A-10'), (11, 'C1', 'A-11'), (20, 'C2', 'A-20')",
        "INSERT INTO statements VALUES (100, 'A-10'), (101, 'A-11'), (102, 'A-11'), (200, 'A-20')",
        "INSERT INTO orders VALUES (1000, 1), (1001, 1), (2000, 2), (3000, 3)",
        "INSERT INTO order_lines VALUES (1, 1000, 5), (2, 1000, 6), (3, 1001, 7), (4, 2000, 8), (5, 3000, 9)",
        # a thread under order 1000: 1 <- 2 <- 3 <- 4, and 5 on its own under order 3000
        "INSERT INTO comments VALUES (1, NULL, 1000, 'root'), (2, 1, NULL, 'reply'), (3, 2, NULL, 'deeper'), "
        "(4, 3, NULL, 'deepest'), (5, NULL, 3000, 'other'), (6, NULL, 2000, 'on order 2000')",
        "INSERT INTO reactions VALUES (1, 1), (2, 3), (3, 4), (4, 5), (5, 6)",
    )
    tables = [{"name": f"{DB}.{t}", "key": ["id"], "sync": "stream"} for t in TABLES]
    path = pipeline_file(tmp_path_factory, "cascade_levels", tables)
    # children named first: the load orders them parents first all the same
    load = run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", *(t["name"] for t in reversed(tables))],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert load.returncode == 0, load.stdout + load.stderr
    assert (
        f"cascade followed by the stream: {DB}.comments -> {DB}.comments (parent_id; ON DELETE CASCADE)" in load.stdout
    ), load.stdout
    pipeline = load_pipeline(path)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        at = {
            t: (int(f.rsplit(".", 1)[1]), p)
            for t, f, p in conn.execute(
                "SELECT DISTINCT ON (tbl) tbl, position_file, position_pos FROM seam.batches WHERE db = %s AND "
                "state = 'committed' ORDER BY tbl, finished_at DESC",
                (DB,),
            )
        }
    # each table loaded at or after the tables whose cascades reach it
    assert (
        at["customers"] <= at["orders"] <= at["order_lines"]
        and at["orders"] <= at["comments"] <= at["reactions"]
        and at["customers"] <= at["accounts"] <= at["statements"]
    ), at
    return pipeline


def test_a_delete_reaches_every_level(pipeline):
    """Customer 2 goes: its orders, their lines, the comment on its order (unlinked, not deleted), its accounts
    and their statements (unlinked) follow; a row inserted and cascaded away in one transaction is gone too."""
    _run(DB, "INSERT INTO order_lines VALUES (6, 2000, 1)", "DELETE FROM customers WHERE id = 2")
    stream_once(pipeline)
    _equal(pipeline)
    assert 2000 not in _target(pipeline, "orders")
    assert {k for k, v in _target(pipeline, "order_lines").items() if v[0] == 2000} == set()
    assert _target(pipeline, "comments")[6] == (None, None, "on order 2000")
    assert _target(pipeline, "statements")[200] == (None,)
    assert 5 in _target(pipeline, "reactions")  # its comment was unlinked, not deleted


def test_a_tree_goes_with_its_root_and_takes_level_three_along(pipeline):
    """Deleting order 1000 unlinks comment 1; deleting comment 1 then takes replies 2, 3, 4 (three levels of
    the tree) and the reactions on 1, 3 and 4 (a level under the tree)."""
    _run(DB, "DELETE FROM orders WHERE id = 1000")
    _run(DB, "DELETE FROM comments WHERE id = 1")
    stream_once(pipeline)
    _equal(pipeline)
    assert set(_target(pipeline, "comments")) == {5, 6}
    assert set(_target(pipeline, "reactions")) == {4, 5}
    assert set(_target(pipeline, "order_lines")) == {3, 5}


def test_a_key_update_cascades_two_levels(pipeline):
    """customers.code -> accounts.customer_code (ON UPDATE CASCADE); the accounts' number does not change, so
    statements keep theirs; then an account's number changes and its statements follow."""
    _run(
        DB, "UPDATE customers SET code = 'C1-NEW' WHERE id = 1", "UPDATE accounts SET number = 'A-11-NEW' WHERE id = 11"
    )
    stream_once(pipeline)
    _equal(pipeline)
    assert _target(pipeline, "accounts")[10] == ("C1-NEW", "A-10")
    assert _target(pipeline, "statements") == {100: ("A-10",), 101: ("A-11-NEW",), 102: ("A-11-NEW",), 200: (None,)}
    # and a customer's delete through the renamed key reaches statements two levels down
    _run(DB, "DELETE FROM customers WHERE id = 1")
    stream_once(pipeline)
    _equal(pipeline)
    assert _target(pipeline, "statements") == {100: (None,), 101: (None,), 102: (None,), 200: (None,)}
    assert _target(pipeline, "orders") == {3000: (3,)}


def test_a_cascade_indexes_the_columns_it_finds_rows_by_and_a_load_still_swaps_the_table(pipeline):
    """InnoDB keeps an index on every foreign key's columns; the target had only the key, so each cascade
    statement read the whole child table (a child of 600,000 rows: 40 ms each, and a writer changing 100
    parents' codes a second left the stream behind for good). The first cascade into a table indexes the
    columns it finds rows by; the index is Seam's: the table's next load still swaps it in (no refill)."""
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        indexed = {
            (table, columns)
            for table, columns, comment in conn.execute(
                "SELECT c.relname, array_to_string(array_agg(a.attname ORDER BY k.n), ','), "
                "obj_description(i.indexrelid, 'pg_class') FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
                "JOIN pg_namespace s ON s.oid = c.relnamespace CROSS JOIN unnest(i.indkey::int2[]) WITH ORDINALITY "
                "k(att, n) JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.att "
                "WHERE s.nspname = %s AND NOT i.indisprimary GROUP BY c.relname, i.indexrelid",
                (DB,),
            )
            if comment == cascades.INDEX_COMMENT
        }
        assert {("accounts", "customer_code"), ("statements", "account_number"), ("orders", "customer_id")} <= (
            indexed
        ), indexed
        assert {("order_lines", "order_id"), ("comments", "parent_id"), ("reactions", "comment_id")} <= indexed
        oid = conn.execute("SELECT to_regclass(%s)::oid", (f'"{DB}"."accounts"',)).fetchone()[0]
        assert not swap._has_dependents(conn, oid)
        # a load of a table swaps a new one in (another oid), and the swap builds the index on it
        before = conn.execute("SELECT to_regclass(%s)::oid", (f'"{DB}"."reactions"',)).fetchone()[0]
        load = run_command(
            [sys.executable, "-m", "seam.cli", "--pipeline", pipeline.path, "load", "full", f"{DB}.reactions"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert load.returncode == 0, load.stdout + load.stderr
        after = conn.execute("SELECT to_regclass(%s)::oid", (f'"{DB}"."reactions"',)).fetchone()[0]
        assert after != before
        assert conn.execute(
            "SELECT array_agg(a.attname::text) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND "
            "a.attnum = ANY(i.indkey::int2[]) WHERE i.indrelid = %s AND obj_description(i.indexrelid, 'pg_class') = %s",
            (after, cascades.INDEX_COMMENT),
        ).fetchone()[0] == ["comment_id"]
    _equal(pipeline)


def test_a_table_seam_does_not_own_takes_its_cascades_without_the_index(pipeline, caplog):
    """Making an index needs the table's owner: a sink whose role may only change the rows (a DBA gave the table
    to another role) goes on without one, and says so, instead of failing every cascade."""
    conninfo = pipeline.target.conninfo()
    with psycopg.connect(**conninfo, autocommit=True) as admin:
        admin.execute("DROP TABLE IF EXISTS public.cascade_not_ours")
        admin.execute("DROP ROLE IF EXISTS seam_rows_only")
        admin.execute("CREATE ROLE seam_rows_only LOGIN PASSWORD 'rows-only'")
        admin.execute("CREATE TABLE public.cascade_not_ours (id int PRIMARY KEY, code text)")
        admin.execute("INSERT INTO public.cascade_not_ours VALUES (1, 'a'), (2, 'b')")
        admin.execute("GRANT USAGE ON SCHEMA public TO seam_rows_only")
        admin.execute("GRANT SELECT, UPDATE, DELETE ON public.cascade_not_ours TO seam_rows_only")
    table = SimpleNamespace(
        target="public.cascade_not_ours",
        indexed=set(),
        postgis=False,
        schema=SimpleNamespace(db="public", table="cascade_not_ours", columns=[]),
    )
    try:
        with psycopg.connect(**{**conninfo, "user": "seam_rows_only", "password": "rows-only"}) as conn:
            with conn.cursor() as cur, caplog.at_level("WARNING", "seam.sink"):
                cascades._index(cur, table, ("code",))
                cur.execute("DELETE FROM public.cascade_not_ours WHERE code = 'a'")  # the transaction goes on
            conn.commit()
        assert "no index on (code) for its cascades" in caplog.text, caplog.text
    finally:
        with psycopg.connect(**conninfo, autocommit=True) as admin:
            assert admin.execute("SELECT array_agg(id) FROM public.cascade_not_ours").fetchone()[0] == [2]
            admin.execute("DROP TABLE public.cascade_not_ours")
            admin.execute("DROP OWNED BY seam_rows_only")
            admin.execute("DROP ROLE seam_rows_only")


def _sink(pipeline, names: list[str]) -> None:
    """A sink for some of the tables only, up to the end of their topics."""
    sink = Sink(pipeline, [pipeline.table(f"{DB}.{n}") for n in names])
    try:
        sink.run(caught_up=True)
    finally:
        sink.close()


def test_a_level_waits_for_the_level_above(pipeline):
    """The level below is applied first (its own sink): it waits, and nothing of it moves, until the level
    above has applied the same change; then it follows."""
    _run(
        DB,
        "INSERT INTO comments VALUES (10, NULL, NULL, 'thread'), (11, 10, NULL, 'reply')",
        "INSERT INTO reactions VALUES (10, 11), (11, 10)",
    )
    stream_once(pipeline)
    _run(DB, "DELETE FROM comments WHERE id = 10", "INSERT INTO reactions VALUES (12, 5)")
    reader = ChangeReader(pipeline)
    try:
        reader.run(until_idle=True)
    finally:
        reader.close()
    _sink(pipeline, ["reactions"])
    assert {10, 11} <= set(_target(pipeline, "reactions")) and 12 not in _target(pipeline, "reactions")
    _sink(pipeline, [t for t in TABLES if t != "reactions"])
    assert {10, 11} <= set(_target(pipeline, "reactions"))
    _sink(pipeline, ["reactions"])
    assert not {10, 11} & set(_target(pipeline, "reactions")) and 12 in _target(pipeline, "reactions")
    _equal(pipeline)


def test_a_level_above_loaded_past_the_change_stops_the_level_below(pipeline):
    """A middle level loaded again after a cascade went through it, before the stream applied that cascade,
    never saw which of its rows went: the level below stops with the remedy, and loading it again heals it."""
    _run(
        DB,
        "INSERT INTO comments VALUES (20, NULL, NULL, 'thread'), (21, 20, NULL, 'reply')",
        "INSERT INTO reactions VALUES (20, 21)",
    )
    stream_once(pipeline)
    _run(DB, "DELETE FROM comments WHERE id = 20")
    path = str(pipeline.path)
    load = run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{DB}.comments"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert load.returncode == 0, load.stdout + load.stderr
    assert f"note: cascades through {DB}.comments continue into {DB}.reactions" in load.stdout, load.stdout
    stream_once(pipeline)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        stopped = conn.execute(
            "SELECT stopped FROM seam.positions WHERE db = %s AND tbl = 'reactions'", (DB,)
        ).fetchone()[0]
    assert stopped and f"a cascade through {DB}.comments" in stopped and "seam load full" in stopped, stopped
    load = run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{DB}.reactions"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert load.returncode == 0, load.stdout + load.stderr
    stream_once(pipeline)
    _equal(pipeline)


def test_tables_under_a_middle_level_load_with_it(pipeline):
    """What the full-load DAG maps: a table that a cascade reaches through another loaded table shares its
    task; a table only reached from a top-level parent loads on its own."""
    from seam.loads import cascade_groups

    groups = cascade_groups(pipeline, [pipeline.table(f"{DB}.{t}") for t in TABLES])
    assert sorted(sorted(t.table for t in g) for g in groups) == [
        ["accounts", "statements"],
        ["comments", "order_lines", "orders", "reactions"],
        ["customers"],
    ], groups


def test_one_tables_foreign_keys_are_read_alone(pipeline):
    """A repair reads the cascades into its one table: that table's foreign keys, the same as in the whole
    database's, and no other table's (a schema of hundreds of tables is not read per repair)."""
    with pymysql.connect(**pipeline.source.pymysql_kwargs()) as conn:
        everything = read_foreign_keys(conn, {DB})
        for table in ("comments", "customers"):
            alone = read_foreign_keys(conn, {DB}, child=(DB, table))
            assert alone == [fk for fk in everything if fk.child == (DB, table)], table
        assert {fk.parent for fk in read_foreign_keys(conn, {DB}, child=(DB, "comments"))} == {
            (DB, "comments"),
            (DB, "orders"),
        }
        assert read_foreign_keys(conn, {DB}, child=(DB, "customers")) == []
