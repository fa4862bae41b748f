"""Full load on the real stack: MariaDB -> Spark -> Tansu -> sink -> PostgreSQL.

Every check compares the target with the source read independently (PyMySQL
plus the record normalisation rules), or with the source at the recorded
binlog position (target image + binlog replay == source now).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import psycopg
import pytest
import yaml

from seam.config import load_pipeline, state_dir
from seam.core.position import Position
from seam.spark_driver import driver_status
from seam.state import ledger
from seam_dev import demo
from seam_dev.topic_rows import rows_published, topic_end
from tests.support.commands import run_command
from tests.support.compare import diff, replay_to_now, source_rows, target_rows
from tests.support.pipelines import pipeline_file
from tests.support.source import numbered_table

DB = "fl_test"
ODD_TABLE = "order details `v2`"

pytestmark = pytest.mark.stack


def _pipeline_file(tmp_path, **overrides) -> str:
    doc = yaml.safe_load(open(load_pipeline().path))
    doc["tables"] = [
        {"name": f"{DB}.payments", "key": ["id"]},
        {"name": f"{DB}.audit_log", "key": "none"},
        {"name": f"{DB}.type_zoo", "key": ["id"]},
        {"name": f"{DB}.{ODD_TABLE}", "key": ["select"]},
        {"name": f"{DB}.empty", "key": ["id"]},
        {"name": f"{DB}.zero dates", "key": ["id"]},
        {"name": f"{DB}.missing", "key": ["id"]},
        {"name": f"{DB}.zero key", "key": ["d", "id"]},
        {"name": f"{DB}.big payments", "key": ["id"]},
        {"name": f"{DB}.versioned", "key": ["id"]},
        {"name": f"{DB}.nullable key", "key": ["code"]},
        {"name": f"{DB}.not unique", "key": ["account"]},
    ]
    for section, values in overrides.items():
        doc[section] = {**doc[section], **values}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _seam(pipeline_path: str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", pipeline_path, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _target(pipeline, sql: str, *params):
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        return conn.execute(sql, params).fetchall()


def _count(pipeline, db: str, table: str) -> int:
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        return conn.execute(f'SELECT count(*) FROM "{db}"."{table}"').fetchone()[0]


def _target_count(pipeline, table: str) -> int | None:
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        try:
            return conn.execute(f'SELECT count(*) FROM "{DB}"."{table}"').fetchone()[0]
        except psycopg.errors.UndefinedTable:
            return None


def _ledger(pipeline, table: str) -> list[tuple]:
    return _target(
        pipeline,
        "SELECT batch_id, state, final_rows, error FROM seam.batches WHERE db = %s AND tbl = %s ORDER BY opened_at",
        DB,
        table,
    )


@pytest.fixture(scope="module")
def source(stack):
    """fl_test: the demo schema (2,000 payments) plus tables whose names need quoting, an empty table
    and a table of zero dates."""
    admin = os.environ["SEAM_MYSQL_URL"]
    demo.seed(load_pipeline(), rows=2000, admin_url=admin, database=DB, log=lambda m: None)
    conn = demo.connect(admin, DB)
    with conn.cursor() as cur:
        cur.execute(
            f"CREATE TABLE `{ODD_TABLE.replace('`', '``')}` (`select` INT PRIMARY KEY, `group` VARCHAR(20), "
            '`a b` DECIMAL(10,2), `x``y` TEXT, `ünïcode` VARCHAR(10), `say "hi"` INT, `back\\slash` INT)'
        )
        cur.executemany(
            f"INSERT INTO `{ODD_TABLE.replace('`', '``')}` VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [(i, f"g{i % 3}", f"{i}.25", "tab\there \\ back`tick", "ü", i, -i) for i in range(1, 101)],
        )
        cur.execute("CREATE TABLE `empty` (`id` INT PRIMARY KEY, `v` VARCHAR(10))")
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute(
            "CREATE TABLE `zero dates` (`id` INT PRIMARY KEY, `d` DATE NOT NULL, `dt` DATETIME(6), `ts` TIMESTAMP NULL)"
        )
        cur.execute(
            "INSERT INTO `zero dates` VALUES (1, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00'),"
            " (2, '2024-00-10', '2024-02-29 23:59:59.5', '2038-01-19 03:14:07'), (3, '2024-01-01', NULL, NULL)"
        )
        cur.execute("CREATE TABLE `zero key` (`d` DATE NOT NULL, `id` INT NOT NULL, PRIMARY KEY (`d`, `id`))")
        cur.execute("INSERT INTO `zero key` VALUES ('2024-01-01', 1), ('2024-05-00', 2), ('2024-01-02', 3)")
        cur.execute("CREATE VIEW `big payments` AS SELECT * FROM payments WHERE amount > 100")
        cur.execute("CREATE TABLE `versioned` (`id` INT PRIMARY KEY, `v` INT) WITH SYSTEM VERSIONING")
        cur.execute("CREATE TABLE `nullable key` (`id` INT PRIMARY KEY, `code` INT NULL UNIQUE)")
        cur.execute("INSERT INTO `nullable key` VALUES (1, 1), (2, NULL), (3, NULL)")
        cur.execute("CREATE TABLE `not unique` (`id` INT PRIMARY KEY, `account` INT NOT NULL)")
        cur.execute("INSERT INTO `not unique` VALUES (1, 10), (2, 10), (3, 11)")
    conn.close()
    return DB


@pytest.fixture(scope="module")
def pipeline_path(source, tmp_path_factory):
    return _pipeline_file(tmp_path_factory.mktemp("fl"))


def test_awkward_keyless_quoted_empty_and_zero_date_tables_load_equal(pipeline_path):
    tables = ["type_zoo", "audit_log", ODD_TABLE, "empty", "zero dates"]
    result = _seam(pipeline_path, "load", "full", *[f"{DB}.{t}" for t in tables])
    assert result.returncode == 0, result.stderr + result.stdout
    said = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if (" WARNING " in line or " ERROR " in line)
        and "was recreated on the broker" not in line  # true after the stack's broker restarted since an earlier run
    ]
    assert not said, f"a load that went well warned: {said}"
    pipeline = load_pipeline(pipeline_path)
    images = {}
    for table in tables:
        src, schema = source_rows(pipeline, DB, table)
        images[table] = tgt = target_rows(pipeline, schema)
        assert src == tgt, f"{table}: {diff(src, tgt)}"
        assert f"{DB}.{table}: committed batch" in result.stdout
    assert _target_count(pipeline, "empty") == 0
    audit = images["audit_log"]
    assert sum(audit.values()) > len(audit), "audit_log holds identical rows, and every copy must arrive"
    primary = _target(
        pipeline,
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
        f'"{DB}"."{ODD_TABLE.replace(chr(34), chr(34) * 2)}"',
    )
    assert primary == [("select",)]


def test_a_large_table_under_concurrent_writes_equals_the_source_at_the_recorded_position(pipeline_path):
    pipeline = load_pipeline(pipeline_path)
    admin = os.environ["SEAM_MYSQL_URL"]
    demo.seed(pipeline, rows=200_000, admin_url=admin, database=DB + "_big", log=print)
    path = pipeline_path.replace("pipeline.yaml", "big.yaml")
    doc = yaml.safe_load(open(pipeline_path))
    doc["tables"] = [{"name": f"{DB}_big.payments", "key": ["id"]}]
    open(path, "w").write(yaml.safe_dump(doc))

    stats, loaded = {}, threading.Event()  # the writer runs from before the load until it ends
    writer = threading.Thread(
        target=lambda: stats.update(
            demo.run_writer(admin, rate=400, seconds=300, threads=2, seed=7, database=DB + "_big", until=loaded)
        )
    )
    writer.start()
    time.sleep(2)
    try:
        result = _seam(path, "load", "full", f"{DB}_big.payments")
    finally:
        loaded.set()
        writer.join()
    print(result.stdout[-1500:], stats)
    assert result.returncode == 0, result.stderr + result.stdout
    assert stats["transactions"] > 300
    assert "rows/s" in result.stdout and "staged" in result.stdout  # progress and rate were shown

    ((batch, state, final_rows, _),) = _target(
        pipeline,
        "SELECT batch_id, state, final_rows, error FROM seam.batches "
        "WHERE db = %s AND tbl = 'payments' ORDER BY opened_at DESC "
        "LIMIT 1",
        DB + "_big",
    )
    assert state == "committed"
    file, pos = _target(
        pipeline, "SELECT file, pos FROM seam.positions WHERE db = %s AND tbl = 'payments'", DB + "_big"
    )[0]
    position = Position.through(file, pos)
    assert f"{file}:{pos}" in result.stdout

    src, schema = source_rows(pipeline, DB + "_big", "payments")
    at_position = target_rows(pipeline, schema)
    assert sum(at_position.values()) == final_rows > 200_000
    assert len(at_position) == final_rows, "a row is doubled"
    replayed = replay_to_now(pipeline, schema, at_position, position)
    assert replayed == src, diff(src, replayed)


def _driver_cancels(pid: str) -> int:
    """How many jobs the shared Spark driver of ``pid`` cancelled because their load went away."""
    for path in (state_dir() / "run").glob("spark-driver-*.sock"):
        status = driver_status(path)
        if status and str(status.get("pid")) == pid:
            return status["cancelled"]
    raise AssertionError(f"the shared Spark driver {pid} does not answer")


def _wait(predicate, timeout: float, what: str, every: float = 0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def _staged(pipeline):
    rows = _target(
        pipeline,
        "SELECT batch_id, state, staged_rows FROM seam.batches WHERE db = %s AND "
        "tbl = 'payments' ORDER BY opened_at DESC LIMIT 1",
        DB,
    )
    return rows[0] if rows else None


def _topic(pipeline) -> str:
    from seam.wire.topics import table_topic

    return table_topic(pipeline, pipeline.table(f"{DB}.payments"))


def _spark_publish(pipeline_path: str) -> subprocess.Popen:
    from seam.load_run import job_env, spark_submit_command

    pipeline = load_pipeline(pipeline_path)
    return subprocess.Popen(
        spark_submit_command(pipeline, "full_load", ["--pipeline", pipeline_path, "--table", f"{DB}.payments"]),
        env=job_env(),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _sink(pipeline_path: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "seam.cli", "--pipeline", pipeline_path, "sink", "--table", f"{DB}.payments", *args],
        start_new_session=True,
    )


def _grow_payments(rows: int) -> None:
    """At least ``rows`` more rows than the seed's in payments: the kill tests need a load long enough to be
    killed in; the second of them finds the first one's rows (each of the tests after them reads and
    compares every row, so the table grows once, not once per kill test)."""
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM payments WHERE reference LIKE '%#%'")
        missing = rows - cur.fetchone()[0]
        if missing > 0:
            cur.execute(
                "INSERT INTO payments (account_id, amount, currency, status, reference, value_date) "
                "SELECT account_id, amount, currency, status, CONCAT(reference, '#', seq), value_date "
                f"FROM payments, seq_1_to_{missing // 1000 + 1} WHERE reference NOT LIKE '%#%' LIMIT {missing}"
            )
    conn.close()


def test_sink_killed_mid_batch_keeps_the_old_table_until_the_batch_commits_once(pipeline_path):
    pipeline = load_pipeline(pipeline_path)
    first = _seam(pipeline_path, "load", "full", f"{DB}.payments")
    assert first.returncode == 0, first.stderr
    old_count = _target_count(pipeline, "payments")
    _grow_payments(300_000)

    spark = _spark_publish(pipeline_path)
    out, _ = spark.communicate(timeout=600)
    assert spark.returncode == 0, out
    batch = out.split("SEAM_RESULT")[-1].split("batch=")[1].split()[0]

    sink = _sink(pipeline_path, "--until-batch", batch)
    _wait(
        lambda: (_staged(pipeline) or (None, None, 0))[0] == batch and _staged(pipeline)[2] > 0,
        120,
        "the sink to stage part of the batch",
        every=0.01,
    )
    os.killpg(sink.pid, signal.SIGKILL)
    sink.wait()
    _, state, staged = _staged(pipeline)
    assert state == "open" and 0 < staged < 300_000 + 2000, (state, staged)
    assert _target_count(pipeline, "payments") == old_count  # the old table, untouched

    restarted = _sink(pipeline_path, "--until-batch", batch, "--timeout", "300")
    assert restarted.wait(timeout=320) == 0
    states = {b: s for b, s, _, _ in _ledger(pipeline, "payments")}
    assert states[batch] == "committed"
    src, schema = source_rows(pipeline, DB, "payments")
    tgt = target_rows(pipeline, schema)
    assert src == tgt, diff(src, tgt)  # every row once: nothing lost or doubled by the kill


@pytest.mark.parametrize("snapshot", ["auto"])  # the portable method: test_portable_snapshot_..., the torture
def test_spark_killed_mid_publish_is_never_published_and_a_rerun_resumes_it(pipeline_path, snapshot, monkeypatch):
    monkeypatch.setenv("SEAM_SNAPSHOT", snapshot)  # portable: MySQL 8's method, forced on MariaDB
    pipeline = load_pipeline(pipeline_path)
    before = _target_count(pipeline, "payments")
    _grow_payments(300_000)
    sink = _sink(pipeline_path)  # a long-running sink, as in production
    try:
        published = topic_end(pipeline, _topic(pipeline))
        spark = _spark_publish(pipeline_path)
        # a few thousand of its 300,000 rows on the topic: well before its END, however far the sink lags
        _wait(
            lambda: (
                rows_published(pipeline, _topic(pipeline), published) > 5_000
                and (_staged(pipeline) or (None, "", 0))[1] == "open"
            ),
            180,
            "rows of the new batch to arrive",
            every=0.01,
        )
        os.killpg(spark.pid, signal.SIGKILL)
        spark.wait()
        killed_batch = _staged(pipeline)[0]
        time.sleep(3)  # whatever was in flight lands; no END ever comes
        assert _staged(pipeline)[1] == "open"
        assert _target_count(pipeline, "payments") == before

        rerun = _seam(pipeline_path, "load", "full", f"{DB}.payments")
        assert rerun.returncode == 0, rerun.stderr + rerun.stdout
        assert "applied by the running sink" in rerun.stdout
        assert f"batch {killed_batch} resumed:" in rerun.stdout, rerun.stdout  # the killed batch, continued
        assert snapshot != "portable" or "(portable snapshot)" in rerun.stdout, rerun.stdout
    finally:
        os.killpg(sink.pid, signal.SIGTERM)
        sink.wait(timeout=60)
    states = {b: (s, e) for b, s, _, e in _ledger(pipeline, "payments")}
    assert states[killed_batch][0] == "committed", states[killed_batch]
    src, schema = source_rows(pipeline, DB, "payments")
    assert src == target_rows(pipeline, schema)
    # this batch's own tables: other tests' loads (killed on purpose) may have left theirs, open, in the schema
    leftovers = _target(
        pipeline,
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'seam' AND tablename IN (%s, %s)",
        *ledger.staging_tables(killed_batch),
    )
    assert leftovers == [(0,)], "a superseded batch's staging tables must be dropped"


@pytest.mark.parametrize(
    "case, overrides, kind, message",
    [
        ("missing table", {}, "source", "fl_test.missing does not exist"),
        ("zero date in a key", {}, "source", "fl_test.zero key: key column d holds zero dates (such as '2024-05-00')"),
        # loaded, then never changed (a view), or changed by its history rows (system-versioned)
        ("a view", {}, "source", "fl_test.big payments is a view: its rows change with no binlog rows"),
        ("system-versioned", {}, "source", "fl_test.versioned is system-versioned (WITH SYSTEM VERSIONING)"),
        ("a key that allows NULL", {}, "source", "fl_test.nullable key: key column(s) code allow NULL"),
        ("a key that is not unique", {}, "load", "the key (account) is not unique in the batch's rows"),
        ("target unreachable", {"target": {"port": 1}}, "target", "target PostgreSQL at 127.0.0.1:1"),
        (
            "broker down",
            {"kafka": {"bootstrap": "127.0.0.1:1"}},
            "broker",
            "Kafka broker at 127.0.0.1:1 is unreachable",
        ),
    ],
)
def test_bad_input_is_one_clear_error_and_the_target_is_intact(pipeline_path, tmp_path, case, overrides, kind, message):
    pipeline = load_pipeline(pipeline_path)
    if _target_count(pipeline, "type_zoo") is None:
        assert _seam(pipeline_path, "load", "full", f"{DB}.type_zoo").returncode == 0
    before = _target_count(pipeline, "type_zoo")
    path = _pipeline_file(tmp_path, **overrides)
    table = f"{DB}." + {
        "missing table": "missing",
        "zero date in a key": "zero key",
        "a view": "big payments",
        "system-versioned": "versioned",
        "a key that allows NULL": "nullable key",
        "a key that is not unique": "not unique",
    }.get(case, "type_zoo")
    result = _seam(path, "load", "full", table, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"seam: {kind}: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert _target_count(pipeline, "type_zoo") == before


def test_no_select_privilege_is_a_clear_error(source, tmp_path):
    admin = demo.connect(os.environ["SEAM_MYSQL_URL"])
    with admin.cursor() as cur:
        cur.execute("CREATE OR REPLACE USER 'seam_noselect'@'%' IDENTIFIED BY 'pw-noselect'")
        cur.execute("GRANT SELECT ON `mysql`.* TO 'seam_noselect'@'%'")  # can connect, cannot read fl_test
        cur.execute("GRANT SELECT (`id`) ON `fl_test`.`type_zoo` TO 'seam_noselect'@'%'")  # sees the table
    admin.close()
    path = _pipeline_file(tmp_path, source={"user": "seam_noselect", "password": "pw-noselect"})
    result = _seam(path, "load", "full", f"{DB}.type_zoo", timeout=120)
    assert result.returncode == 2
    assert "seam: source:" in result.stderr and "GRANT SELECT" in result.stderr and "Traceback" not in result.stderr


def test_portable_snapshot_under_concurrent_writes_is_exact_at_its_position(pipeline_path, tmp_path):
    """source.snapshot: portable (what MySQL 8 gets), forced on MariaDB while the writer runs: a keyed table
    in 4 chunks at low watermarks reconciled to the batch position, and a keyless table at an exact position;
    each target image, replayed from its recorded position, equals the source now."""
    pipeline = load_pipeline(pipeline_path)
    path = _pipeline_file(tmp_path, source={"snapshot": "portable"}, spark={"partitions": 4, "min_chunk_rows": 1})
    admin = os.environ["SEAM_MYSQL_URL"]
    stats, loaded = {}, threading.Event()  # the writer runs from before the load until it ends
    writer = threading.Thread(
        target=lambda: stats.update(
            demo.run_writer(admin, rate=300, seconds=300, threads=2, seed=11, database=DB, until=loaded)
        )
    )
    writer.start()
    try:
        time.sleep(2)
        result = _seam(path, "load", "full", f"{DB}.payments", f"{DB}.audit_log", f"{DB}.type_zoo")
    finally:
        loaded.set()
        writer.join()
    assert result.returncode == 0, result.stderr + result.stdout
    print(result.stdout)
    assert stats["transactions"] > 300, stats
    for table in ("payments", "audit_log", "type_zoo"):
        assert f"{DB}.{table}: " in result.stdout and "(portable snapshot)" in result.stdout, result.stdout
        file, pos = _target(pipeline, "SELECT file, pos FROM seam.positions WHERE db = %s AND tbl = %s", DB, table)[0]
        src, schema = source_rows(pipeline, DB, table)
        replayed = replay_to_now(pipeline, schema, target_rows(pipeline, schema), Position.through(file, pos))
        assert replayed == src, f"{table}: {diff(src, replayed)}"
    assert "4 chunk(s)" in result.stdout, result.stdout


def test_a_load_left_to_another_loads_sink_commits_after_that_sink_ends(pipeline_path):
    """A load that finds the table's topic taken by a sink leaves its batch to it; when that sink was another
    load's (it ends with its own batch), the load must start a sink of its own, not wait until it stalls (a
    nightly settlement's load and a user's, side by side). The other sink is played by its topic lock."""
    from seam.state.schema import try_lock
    from seam.wire.topics import table_topic

    pipeline = load_pipeline(pipeline_path)
    other = psycopg.connect(**pipeline.target.conninfo(), autocommit=True)
    assert try_lock(other, "topic", table_topic(pipeline, pipeline.table(f"{DB}.payments")))
    load = subprocess.Popen(
        [sys.executable, "-m", "seam.cli", "--pipeline", pipeline_path, "load", "full", f"{DB}.payments"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    assert load.stdout is not None
    for line in load.stdout:
        lines.append(line)
        if "applied by the running sink" in line:
            other.close()  # the other load's sink ends, with its own batch
    assert load.wait(timeout=600) == 0, "".join(lines)
    out = "".join(lines)
    assert "the running sink stopped before the batch committed; starting one for it" in out, out
    assert "committed batch" in out, out


def test_sigterm_stops_the_load_with_its_spark_job_and_sink_and_the_old_table_stays(stack, tmp_path_factory):
    """A supervisor's `kill` (SIGTERM) of `seam load full`: the Spark job and the sink it started (each in a
    session of its own, out of reach of a signal to the load's group) stop with it, nothing is published as
    committed, the old table serves on, and the next load commits. The table is large enough that its job is
    still publishing when the signal comes (2,000 rows were done within the moment it took: CI)."""
    numbered_table("fl_sigterm", "big", 400_000)
    path = pipeline_file(tmp_path_factory, "sigterm", [{"name": "fl_sigterm.big", "key": ["id"]}])
    pipeline = load_pipeline(path)
    first = _seam(path, "load", "full", "fl_sigterm.big", "--restart")
    assert first.returncode == 0, first.stdout + first.stderr
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        conn.execute("DELETE FROM fl_sigterm.big WHERE id % 2 = 0")  # the old table, told apart from the source's
    before = _count(pipeline, "fl_sigterm", "big")
    load = subprocess.Popen(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", "fl_sigterm.big"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert load.stdout is not None
    lines = []
    for line in load.stdout:
        lines.append(line)
        if "spark job " in line:
            break
    started_line = lines[-1]
    started = [int(p) for p in re.findall(r"(?:spark job pid|sink pid) (\d+)", started_line)]
    shared = re.search(r"shared Spark driver \(pid (\d+)\)", started_line)
    cancels = _driver_cancels(shared.group(1)) if shared else 0
    load.send_signal(signal.SIGTERM)
    out = "".join(lines) + load.communicate(timeout=120)[0]
    assert load.returncode == 143, out
    assert "seam: stopped (SIGTERM)" in out and "Traceback" not in out, out
    for pid in started:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # gone, not orphaned
    if shared:  # the driver outlives the load by design (seam.spark_driver), the load's job does not
        _wait(lambda: _driver_cancels(shared.group(1)) > cancels, 60, "the load's job cancelled in the driver")
    assert _count(pipeline, "fl_sigterm", "big") == before == 200_000
    again = _seam(path, "load", "full", "fl_sigterm.big")
    assert again.returncode == 0, again.stdout + again.stderr
    src, schema = source_rows(pipeline, "fl_sigterm", "big")
    assert src == target_rows(pipeline, schema)
