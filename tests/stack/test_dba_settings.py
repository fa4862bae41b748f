"""A DBA's global settings on the source do not change what Seam reads. Each of these was silently wrong
before Seam's sessions set their own (``seam.core.pipeline.SESSION_SETTINGS``):

- READ COMMITTED (a common server default): START TRANSACTION WITH CONSISTENT SNAPSHOT took no snapshot, so a
  chunk or a checksum saw commits after the position it was taken at;
- sql_select_limit: every chunk of a full load was cut at the limit, and its END counted only what was read;
- ANSI_QUOTES: SHOW CREATE TABLE names constraints in double quotes, so an ON DELETE CASCADE was not seen and
  the children the cascade removed stayed in the target;
- PAD_CHAR_TO_FULL_LENGTH: CHAR values came padded from the full load and unpadded from the stream.

Checked with the independent comparer, whose own session is not the server's default either. Settings that
take what Seam needs away (binlog_row_metadata = MINIMAL) stop the tables they touch, naming the setting.
Every test here runs alone, and this file with the other such files first (``tests/conftest.py``)."""

from __future__ import annotations

import contextlib
import os

import psycopg
import pymysql
import pytest

from seam.config import load_pipeline
from seam.source.snapshot import Opening, open_snapshot
from seam.state.connection import sink_session_name
from seam_dev import demo
from tests.support.commands import seam_command
from tests.support.independent import compare_pipeline
from tests.support.pipelines import loaded, pipeline_file, stopped_tables, stream_once
from tests.support.source import fresh_database

DB = "dba_settings_test"
ROWS = 5_000
HOSTILE = (
    "GLOBAL tx_isolation = 'READ-COMMITTED', GLOBAL sql_select_limit = 1000, "
    "GLOBAL sql_mode = 'ANSI_QUOTES,PAD_CHAR_TO_FULL_LENGTH,EMPTY_STRING_IS_NULL'"
)
pytestmark = [pytest.mark.stack, pytest.mark.alone]  # the settings are server-wide


@contextlib.contextmanager
def _dba_settings():
    admin = demo.connect(os.environ["SEAM_MYSQL_URL"], None)
    admin.autocommit(True)
    with admin.cursor() as cur:
        cur.execute("SELECT @@global.tx_isolation, @@global.sql_select_limit, @@global.sql_mode")
        before = cur.fetchone()
        cur.execute(f"SET {HOSTILE}")
        try:
            yield
        finally:
            cur.execute("SET GLOBAL tx_isolation = %s, GLOBAL sql_select_limit = %s, GLOBAL sql_mode = %s", before)
            admin.close()


def test_a_snapshot_is_one_under_a_global_read_committed(stack, tmp_path_factory):
    fresh_database(DB, f"CREATE TABLE {DB}.one (id INT PRIMARY KEY, v INT)", f"INSERT INTO {DB}.one VALUES (1, 1)")
    pipeline = load_pipeline(pipeline_file(tmp_path_factory, "dba_rc", [{"name": f"{DB}.one", "key": ["id"]}]))
    with _dba_settings():
        reader = pymysql.connect(**pipeline.source.pymysql_kwargs())
        writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
        try:
            open_snapshot(reader, pipeline.source, Opening("mariadb", ((DB, "one"),), True), "test")
            with reader.cursor() as cur:
                cur.execute(f"SELECT v FROM {DB}.one")
                first = cur.fetchone()
            with writer.cursor() as cur:
                cur.execute("UPDATE one SET v = 2")
            writer.commit()
            with reader.cursor() as cur:
                cur.execute(f"SELECT v FROM {DB}.one")
                second = cur.fetchone()
        finally:
            reader.close()
            writer.close()
    assert first == second == (1,), (first, second)


def test_a_load_and_its_stream_are_exact_under_a_dbas_settings(stack, tmp_path_factory):
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.parent (id INT PRIMARY KEY, code CHAR(8) NOT NULL)",
        f"CREATE TABLE {DB}.child (id INT PRIMARY KEY, parent_id INT NOT NULL, tag CHAR(5), note VARCHAR(20), "
        f"CONSTRAINT `child_parent` FOREIGN KEY (parent_id) REFERENCES {DB}.parent (id) ON DELETE CASCADE)",
        f"INSERT INTO {DB}.parent SELECT seq, CONCAT('p', seq) FROM {DB}.seq_1_to_100",
        f"INSERT INTO {DB}.child SELECT seq, 1 + seq % 100, IF(seq % 3 = 0, NULL, CONCAT('t', seq % 7)), "
        f"CONCAT('note ', seq) FROM {DB}.seq_1_to_{ROWS}",
    )
    tables = [{"name": f"{DB}.{t}", "key": ["id"]} for t in ("parent", "child")]
    path = pipeline_file(tmp_path_factory, "dba_settings", tables)
    pipeline = load_pipeline(path)
    with _dba_settings():
        load = seam_command(path, "load", "full", f"{DB}.parent", f"{DB}.child")
        assert load.returncode == 0, load.stdout[-3000:] + load.stderr[-3000:]
        stream_once(pipeline)
        writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
        with writer.cursor() as cur:
            cur.execute("DELETE FROM parent WHERE id % 10 = 0")  # the cascade removes 500 children, unlogged
            cur.execute("UPDATE child SET tag = 'x', note = 'changed' WHERE id % 11 = 0")
        writer.commit()
        writer.close()
        stream_once(pipeline)
        checked = seam_command(path, "validate", f"{DB}.parent", f"{DB}.child")
    for table in ("parent", "child"):
        assert compare_pipeline(pipeline, DB, table) is None, table
    assert checked.returncode == 0, checked.stdout + checked.stderr


TARGET_SETTINGS = {
    "DateStyle": "SQL, DMY",
    "TimeZone": "America/New_York",
    "IntervalStyle": "sql_standard",
    "extra_float_digits": "0",
    "bytea_output": "escape",
    "default_transaction_isolation": "serializable",
    # hardening: no public (nor Seam's schema, where Seam creates PostGIS when it may) in the role's path
    "search_path": "hardened",
    "standard_conforming_strings": "off",  # a backslash in a string is an escape
    "array_nulls": "off",
    "transform_null_equals": "on",
    "client_encoding": "LATIN1",
}


@contextlib.contextmanager
def _target_role_settings(target, settings: dict[str, str]):
    role = f'ALTER ROLE "{target.user}" IN DATABASE "{target.database}"'
    with psycopg.connect(**target.conninfo(), autocommit=True) as dba:
        for name, value in settings.items():
            dba.execute(f"{role} SET {name} = '{value}'")
        try:
            yield
        finally:
            for name in settings:
                dba.execute(f"{role} RESET {name}")


def _typed_row(i: int) -> str:
    return (
        f"({i}, '2026-0{1 + i % 9}-1{i % 10}', '2026-03-29 0{i % 10}:30:00.{i:06d}', "
        f"'2026-10-25 0{i % 4}:15:00.25', '{i % 30}:0{i % 10}:07.5', {i}.125e-3, 1e{i % 300} / 3, "
        f"{i}.{i:04d}, X'00{i % 256:02x}5c27ff', JSON_OBJECT('k', {i}, 'f', 0.1), b'{i % 4096:012b}', {1901 + i % 200}, "
        f"POINT({i}, {i % 7}), '日本€ö{i}')"
    )


def test_a_load_its_stream_and_validation_are_exact_under_a_dbas_target_settings(stack, tmp_path_factory):
    """The target role's DateStyle, TimeZone, IntervalStyle, float digits, bytea output and default isolation
    change how PostgreSQL reads and shows values: none of them changes what lands or what validation says. Its
    search_path without PostGIS's schema failed the load: 'type "geometry" does not exist'; with
    standard_conforming_strings off, streamed rows whose values held a backslash landed changed."""
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.typed (id INT PRIMARY KEY, d DATE, dt DATETIME(6), ts TIMESTAMP(2) NULL, t TIME(1), "
        "f FLOAT, g DOUBLE, n DECIMAL(20,4), b VARBINARY(20), j JSON, bits BIT(12), y YEAR, p POINT, u VARCHAR(20) DEFAULT '日本€ö')",
        f"INSERT INTO {DB}.typed VALUES {', '.join(_typed_row(i) for i in range(1, 400))}",
    )
    path = pipeline_file(tmp_path_factory, "dba_target", [{"name": f"{DB}.typed", "key": ["id"]}])
    pipeline = load_pipeline(path)
    with _target_role_settings(pipeline.target, TARGET_SETTINGS):
        load = seam_command(path, "load", "full", f"{DB}.typed")
        assert load.returncode == 0, load.stdout[-3000:] + load.stderr[-3000:]
        writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
        with writer.cursor() as cur:
            cur.execute(f"INSERT INTO typed VALUES {', '.join(_typed_row(i) for i in range(400, 500))}")
            cur.execute(
                "UPDATE typed SET g = g * 7, f = f / 3, ts = ts + INTERVAL 1 HOUR, p = POINT(id, 9) WHERE id % 3 = 0"
            )
            cur.execute("DELETE FROM typed WHERE id % 7 = 0")
        writer.close()
        stream_once(pipeline)
        checked = seam_command(path, "validate", f"{DB}.typed")
    assert compare_pipeline(pipeline, DB, "typed") is None
    assert checked.returncode == 0 and f"{DB}.typed: EQUAL" in checked.stdout, checked.stdout + checked.stderr


def test_ddl_a_writer_runs_under_ansi_quotes_is_seen(stack, tmp_path_factory):
    """An application's session with sql_mode ANSI_QUOTES names tables and columns in double quotes: its
    ALTER is followed and its TRUNCATE empties the target (both were missed: the target kept the old rows)."""
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.quoted (id INT PRIMARY KEY, note VARCHAR(20))",
        f"INSERT INTO {DB}.quoted SELECT seq, CONCAT('n', seq) FROM {DB}.seq_1_to_50",
    )
    _, pipeline = loaded(tmp_path_factory, "dba_quotes", [{"name": f"{DB}.quoted", "key": ["id"]}])
    stream_once(pipeline)
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with writer.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'ANSI_QUOTES'")
        cur.execute(f'ALTER TABLE "{DB}"."quoted" ADD COLUMN "extra" INT NOT NULL DEFAULT 7')
        cur.execute("UPDATE quoted SET extra = id WHERE id % 5 = 0")
        cur.execute(f'TRUNCATE "{DB}"."quoted"')
        cur.execute("INSERT INTO quoted VALUES (1000, 'after', 1)")
    writer.close()
    stream_once(pipeline)
    assert compare_pipeline(pipeline, DB, "quoted") is None
    with psycopg.connect(**pipeline.target.conninfo()) as target:
        rows = target.execute(f'SELECT id, note, extra FROM "{DB}"."quoted"').fetchall()
    assert rows == [(1000, "after", 1)], rows


def test_rows_without_column_names_stop_their_table_naming_binlog_row_metadata(stack, tmp_path_factory):
    """A DBA sets binlog_row_metadata = MINIMAL after the load: the binlog's rows carry no column names, and
    matching them to today's columns by position could be wrong. The table written meanwhile stops naming the
    setting; none is applied with guessed names, and one written after the DBA set FULL again goes on."""
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.minimal (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE {DB}.full_again (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {DB}.minimal SELECT seq, seq FROM {DB}.seq_1_to_100",
        f"INSERT INTO {DB}.full_again SELECT seq, seq FROM {DB}.seq_1_to_100",
    )
    tables = [{"name": f"{DB}.{t}", "key": ["id"]} for t in ("minimal", "full_again")]
    _, pipeline = loaded(tmp_path_factory, "dba_row_metadata", tables)
    dba = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    dba.autocommit(True)
    with contextlib.closing(dba), dba.cursor() as cur:
        cur.execute("SET GLOBAL binlog_row_metadata = 'MINIMAL'")
        try:
            cur.execute("UPDATE minimal SET v = v + 1 WHERE id <= 3")
        finally:
            cur.execute("SET GLOBAL binlog_row_metadata = 'FULL'")
        cur.execute("UPDATE full_again SET v = v + 1 WHERE id <= 3")
    stream_once(pipeline)
    stopped = stopped_tables(pipeline, DB)
    assert stopped["full_again"] is None and "binlog_row_metadata" in stopped["minimal"], stopped
    assert compare_pipeline(pipeline, DB, "full_again") is None


def test_a_dbas_partition_maintenance_does_not_stop_the_table(stack, tmp_path_factory):
    """ANALYZE, CHECK, OPTIMIZE, REBUILD and REPAIR PARTITION are logged as ALTER TABLE statements and change
    no row: the table goes on (they stopped it, with a reload as the way out)."""
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.parts (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) "
        "(PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (200), PARTITION p2 VALUES LESS THAN MAXVALUE)",
        f"INSERT INTO {DB}.parts SELECT seq, seq FROM {DB}.seq_1_to_300",
    )
    _, pipeline = loaded(tmp_path_factory, "dba_parts", [{"name": f"{DB}.parts", "key": ["id"]}])
    stream_once(pipeline)
    dba = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with dba.cursor() as cur:
        for upkeep in (
            "ANALYZE PARTITION p0",
            "OPTIMIZE PARTITION p0, p1",
            "REBUILD PARTITION p2",
            "CHECK PARTITION ALL",
        ):
            cur.execute("UPDATE parts SET v = v + 1 WHERE id % 7 = 0")
            cur.execute(f"ALTER TABLE parts {upkeep}")
            cur.fetchall()  # ANALYZE, OPTIMIZE and CHECK answer with a result set
        cur.execute("DELETE FROM parts WHERE id % 11 = 0")
    dba.close()
    stream_once(pipeline)
    assert compare_pipeline(pipeline, DB, "parts") is None
    with psycopg.connect(**pipeline.target.conninfo()) as target:
        stopped = target.execute(
            f"SELECT stopped FROM {pipeline.target.state_schema}.positions WHERE db = %s AND tbl = 'parts'", (DB,)
        ).fetchall()
    assert stopped == [(None,)], stopped


def test_a_truncated_partition_stops_the_table_and_the_repair_printed_takes_it_up(stack, tmp_path_factory):
    """TRUNCATE PARTITION removes rows the binlog does not list: the table stops. Its columns are as they were,
    so the way out printed is a repair against the source as it is now (it deletes just the partition's rows
    in the target), not a reload, and the stream goes on after it. A table whose columns the stopping
    statement changed (a narrowing) is repaired the same way, the repair giving the target the source's
    columns first; the reload is named beside it (for a value the target could not cast)."""
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.parts (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) "
        "(PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN MAXVALUE)",
        f"INSERT INTO {DB}.parts SELECT seq, seq FROM {DB}.seq_1_to_300",
        f"CREATE TABLE {DB}.narrow (id INT PRIMARY KEY, s VARCHAR(20))",
        f"INSERT INTO {DB}.narrow VALUES (1, 'a'), (2, 'b')",
    )
    tables = [{"name": f"{DB}.parts", "key": ["id"]}, {"name": f"{DB}.narrow", "key": ["id"]}]
    path, pipeline = loaded(tmp_path_factory, "dba_truncated", tables)
    dba = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    dba.autocommit(True)
    with dba.cursor() as cur:
        cur.execute("ALTER TABLE parts TRUNCATE PARTITION p0")
        cur.execute("ALTER TABLE narrow MODIFY s VARCHAR(5)")
    stream_once(pipeline)
    stopped = stopped_tables(pipeline, DB)
    assert "TRUNCATE PARTITION" in stopped["parts"] and f"run `seam repair {DB}.parts --full`" in stopped["parts"]
    assert f"run `seam repair {DB}.narrow --full`" in stopped["narrow"], stopped["narrow"]
    assert f"or `seam load full {DB}.narrow`" in stopped["narrow"], stopped["narrow"]
    repaired = seam_command(path, "repair", f"{DB}.narrow", "--full")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "the target's columns made the source's: s varchar(20) -> varchar(5)" in repaired.stdout, repaired.stdout
    repaired = seam_command(path, "repair", f"{DB}.parts", "--full")
    assert repaired.returncode == 0 and "99 differing row(s)" in repaired.stdout, repaired.stdout + repaired.stderr
    with dba.cursor() as cur:
        cur.execute("UPDATE parts SET v = -v WHERE id % 10 = 0")
    dba.close()
    stream_once(pipeline)
    assert compare_pipeline(pipeline, DB, "parts") is None and compare_pipeline(pipeline, DB, "narrow") is None
    assert stopped_tables(pipeline, DB)["parts"] is None and stopped_tables(pipeline, DB)["narrow"] is None


def test_alters_a_dba_logs_in_two_phases_are_followed_once(stack, tmp_path_factory):
    """MariaDB's binlog_alter_two_phase logs an ALTER when it starts and again when it commits, or fails (then
    it changed nothing): the whole statement each time. Seam followed both: the second ADD or RENAME found its
    column there already and stopped the table, and a failed ALTER's columns were added all the same."""
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.phased (id INT PRIMARY KEY, memo VARCHAR(20), v INT)",
        f"INSERT INTO {DB}.phased SELECT seq, CONCAT('m', seq), seq % 5 FROM {DB}.seq_1_to_50",
    )
    _, pipeline = loaded(tmp_path_factory, "dba_phased", [{"name": f"{DB}.phased", "key": ["id"]}])
    stream_once(pipeline)
    dba = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with dba.cursor() as cur:
        cur.execute("SET SESSION binlog_alter_two_phase = ON")
        cur.execute("ALTER TABLE phased ADD COLUMN n INT DEFAULT 3")
        cur.execute("UPDATE phased SET n = 4 WHERE id < 5")
        cur.execute("ALTER TABLE phased RENAME COLUMN memo TO note")
        with pytest.raises(pymysql.err.IntegrityError):  # v repeats: logged as begun, then as rolled back
            cur.execute("ALTER TABLE phased ADD COLUMN q INT DEFAULT 9, ADD UNIQUE (v)")
        cur.execute("UPDATE phased SET note = 'after' WHERE id > 45")
    dba.close()
    stream_once(pipeline)
    assert compare_pipeline(pipeline, DB, "phased") is None
    with psycopg.connect(**pipeline.target.conninfo()) as target:
        stopped = target.execute(
            f"SELECT stopped FROM {pipeline.target.state_schema}.positions WHERE db = %s AND tbl = 'phased'", (DB,)
        ).fetchall()
        columns = [
            r[0]
            for r in target.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = 'phased'"
                " ORDER BY ordinal_position",
                (DB,),
            )
        ]
    assert stopped == [(None,)], stopped
    assert columns == ["id", "note", "v", "n"], columns


# a DBA's temp_file_limit on Seam's role, on a table small enough for a test: its key index built in parallel
# (whose workers sort into temp files) as a large table's is, and sorts short of memory (validation's, repair's)
TEMP_LIMITED = {"temp_file_limit": "64kB", "min_parallel_table_scan_size": "0", "work_mem": "64kB"}


def test_a_dbas_temp_file_limit_the_target_work_exceeds_stops_it_once_naming_the_limit(stack, tmp_path_factory):
    """``temp_file_limit`` (superuser-only: Seam cannot lift it) fails a load's key index, a validation's or a
    repair's comparison with 53400. In class 53, it was retried as transient: the load (and its sink) waited
    forever under warnings, and the repair said the target 'broke off the command'. The same work meets the
    same limit: each command ends once, in one line that names the limit and what to do, and the load's old
    table stays. Once the limit is raised, the same commands work."""
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.big (id INT PRIMARY KEY, v INT, note VARCHAR(40))",
        f"INSERT INTO {DB}.big SELECT seq, seq, CONCAT('note ', seq) FROM {DB}.seq_1_to_60000",
    )
    path, pipeline = loaded(tmp_path_factory, "dba_temp_limit", [{"name": f"{DB}.big", "key": ["id"]}])
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with writer.cursor() as cur:
        cur.execute("UPDATE big SET v = -v WHERE id % 1000 = 0")  # not streamed: 60 rows for validation and repair
    writer.close()
    commands = [("load", "full", f"{DB}.big"), ("validate", f"{DB}.big"), ("repair", f"{DB}.big")]
    with _target_role_settings(pipeline.target, TEMP_LIMITED):
        limited = [seam_command(path, *command, timeout=300) for command in commands]
    advice = "a limit a DBA set on the target is too small for this work: have it raised (or lifted) for Seam's role"
    for done in limited:
        output = done.stdout + done.stderr
        assert done.returncode != 0 and "temporary file size exceeds temp_file_limit (64kB)" in output, output
        assert "Traceback" not in output and "transient" not in output and "broke off" not in output, output
    load = limited[0].stdout + limited[0].stderr
    assert "a limit set on the target is too small for it: temporary file" in load, load
    assert "loading it again with a new batch" not in load, load
    assert all(advice in done.stdout + done.stderr for done in limited[1:]), limited
    assert compare_pipeline(pipeline, DB, "big") is not None  # the old table stayed, and nothing was repaired
    repaired = seam_command(path, *commands[2])
    assert repaired.returncode == 0 and "60 row(s) written" in repaired.stdout, repaired.stdout + repaired.stderr
    assert compare_pipeline(pipeline, DB, "big") is None


def test_a_target_a_dba_made_read_only_holds_the_stream_and_ends_a_load_in_one_line(stack, tmp_path_factory):
    """A maintenance window: the DBA makes Seam's role read-only (``default_transaction_read_only``) and ends
    its sessions. A load failed with psycopg's traceback ('cannot execute CREATE SCHEMA in a read-only
    transaction'); it now ends in one line that says so. The stream waits for the target as for a restart,
    and once the role may write again it catches up, exact."""
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.orders (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {DB}.orders SELECT seq, seq FROM {DB}.seq_1_to_500",
    )
    path, pipeline = loaded(tmp_path_factory, "dba_read_only", [{"name": f"{DB}.orders", "key": ["id"]}])
    started = seam_command(path, "stream", "start")
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        with _read_only(pipeline):
            writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
            with writer.cursor() as cur:
                cur.execute("UPDATE orders SET v = -v WHERE id % 5 = 0")
                cur.execute(f"INSERT INTO orders SELECT seq, seq FROM {DB}.seq_501_to_700")
            writer.close()
            load = seam_command(path, "load", "full", f"{DB}.orders", timeout=120)
        waited = seam_command(path, "stream", "wait", "--timeout", "180")
    finally:
        seam_command(path, "stream", "stop")
    output = load.stdout + load.stderr
    assert load.returncode == 2 and "Traceback" not in output, output
    assert "the target takes no writes now (a DBA's default_transaction_read_only" in output, output
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert stopped_tables(pipeline, DB)["orders"] is None
    assert compare_pipeline(pipeline, DB, "orders") is None


@contextlib.contextmanager
def _read_only(pipeline):
    """Seam's role made read-only and its sessions ended, as a DBA starting a maintenance window would."""
    role = f'ALTER ROLE "{pipeline.target.user}" IN DATABASE "{pipeline.target.database}"'
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as dba:
        dba.execute(f"{role} SET default_transaction_read_only = on")
        dba.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (sink_session_name(pipeline),),
        )
    try:
        yield
    finally:
        with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as dba:
            dba.execute("SET default_transaction_read_only = off")  # the DBA's own new session is read-only too
            dba.execute(f"{role} RESET default_transaction_read_only")
