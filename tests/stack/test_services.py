"""Smoke tests of each embedded service, used the way Seam will use it."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pymysql
import pytest

from seam_dev.demo import connect
from seam_dev.settings import StackError
from seam_dev.stack import EmbeddedStack
from tests.support.commands import run_command
from tests.support.servers import MariaDB

pytestmark = pytest.mark.stack


def test_mariadb_binlog_is_row_and_the_replication_user_reads_it(stack, pipeline):
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import WriteRowsEvent

    src = pipeline.source
    assert src.user == "seam"
    conn = pymysql.connect(**src.pymysql_kwargs())
    with conn.cursor() as cur:
        cur.execute("SELECT @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, @@server_id")
        assert cur.fetchone() == ("ROW", "FULL", "FULL", 1)
        cur.execute("SHOW GRANTS")
        grants = " ".join(r[0] for r in cur.fetchall())
        for privilege in ("SELECT", "RELOAD", "REPLICATION SLAVE", "BINLOG MONITOR"):  # REPLICATION CLIENT
            assert privilege in grants
        assert "ALL PRIVILEGES" not in grants and "INSERT" not in grants
        cur.execute("SHOW MASTER STATUS")
        log_file, log_pos = cur.fetchone()[:2]
        with pytest.raises(pymysql.err.OperationalError):  # least privilege: cannot write
            cur.execute("CREATE DATABASE seam_should_not_exist")
    conn.close()

    marker = uuid.uuid4().hex
    admin = connect(os.environ["SEAM_MYSQL_URL"])
    with admin.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS smoke")
        cur.execute("CREATE TABLE IF NOT EXISTS smoke.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(40))")
        cur.execute("INSERT INTO smoke.t (v) VALUES (%s)", (marker,))
    admin.close()

    stream = BinLogStreamReader(
        connection_settings={"host": src.host, "port": src.port, "user": src.user, "passwd": src.password.reveal()},
        server_id=src.server_id + 100,
        log_file=log_file,
        log_pos=log_pos,
        resume_stream=True,
        is_mariadb=False,
        blocking=False,
        only_events=[WriteRowsEvent],
        only_schemas=["smoke"],
    )
    try:
        rows = [row["values"] for event in stream for row in event.rows]
    finally:
        stream.close()
    assert {"id": rows[-1]["id"], "v": marker} == rows[-1]  # column names need binlog_row_metadata=FULL


def test_mariadb_keeps_its_temporary_tables_from_another_mariadb_starting(stack, tmp_path):
    """A MariaDB starting deletes every #sql file in its tmpdir, another server's open temporary tables too:
    with /tmp as the stack server's tmpdir, a query of a test (or of a user's job) failed with 'Error on
    delete of /tmp/#sql-temptable-...' when a throwaway server started meanwhile. The stack's server keeps
    them in a directory of its own."""
    admin = connect(os.environ["SEAM_MYSQL_URL"])
    try:
        with admin.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS smoke")
            cur.execute("CREATE TEMPORARY TABLE smoke.kept (id INT, s TEXT) ENGINE=Aria")
            cur.execute("INSERT INTO smoke.kept VALUES (1, 'a')")
            other = MariaDB(tmp_path / "other", 91)
            other.stop()
            cur.execute("DROP TEMPORARY TABLE smoke.kept")
    finally:
        admin.close()


def test_throwaway_servers_install_side_by_side(stack, tmp_path):
    """mariadb-install-db's bootstrap server, left to /tmp, deleted the #sql files of another bootstrap
    running there, which then failed (ERROR 1051 Unknown table 'mysql.tmp_proxies_priv'): 5 of 12 side by
    side, once in CI. Each install has the tmpdir of its server."""
    with ThreadPoolExecutor(6) as pool:
        starts = [pool.submit(MariaDB, tmp_path / f"s{n}", 60 + n) for n in range(6)]
    try:
        assert [start.result().run("SELECT @@server_id")[0][0] for start in starts] == list(range(60, 66))
    finally:
        for start in starts:
            if start.exception() is None:  # a failed start leaves none to stop; the others must not outlive it
                start.result().stop()


def test_broker_produce_and_consume(stack, pipeline):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"seam.smoke.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": pipeline.kafka.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": pipeline.kafka.bootstrap, "enable.idempotence": True})
    for i in range(100):
        producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode(), headers={"seam": b"1"})
    assert producer.flush(10) == 0

    consumer = Consumer(
        {"bootstrap.servers": pipeline.kafka.bootstrap, "group.id": "seam-smoke", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])  # no group join: Seam keeps offsets in the target
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 100 and time.monotonic() < deadline:
        msg = consumer.poll(1)
        if msg is not None and not msg.error():
            got.append((msg.key().decode(), msg.value().decode(), dict(msg.headers())["seam"]))
    consumer.close()
    assert got == [(str(i), f"v{i}", b"1") for i in range(100)]


def test_spark_reads_mariadb_over_jdbc(stack, pipeline, seeded):
    from seam.spark import jdbc_options, spark_session

    spark = spark_session(pipeline, "seam-test-jdbc")
    try:
        frame = (
            spark.read.format("jdbc")
            .options(**jdbc_options(pipeline))
            .option("dbtable", "`demo`.`payments`")
            .option("partitionColumn", "id")
            .option("lowerBound", "1")
            .option("upperBound", str(seeded["payments"]))
            .option("numPartitions", "4")
            .load()
        )
        assert frame.rdd.getNumPartitions() == 4
        admin = connect(os.environ["SEAM_MYSQL_URL"])
        with admin.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM `demo`.`payments`")
            assert frame.count() == cur.fetchone()[0]
        admin.close()
        zoo = (
            spark.read.format("jdbc")
            .options(**jdbc_options(pipeline))
            .option("dbtable", "`demo`.`type_zoo`")
            .load()
            .where("id = 1")
            .collect()[0]
        )
        assert zoo["big_unsigned"] == 18446744073709551615  # unsigned BIGINT max, no overflow
        assert str(zoo["amount"]) == "99999999999999.999999"
    finally:
        spark.stop()


def test_postgres_accepts_a_write(stack, pipeline):
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS smoke")
        conn.execute("CREATE TABLE IF NOT EXISTS smoke.t (id bigint primary key, v text)")
        marker = uuid.uuid4().hex
        conn.execute("INSERT INTO smoke.t VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v", (1, marker))
    with psycopg.connect(os.environ["SEAM_TARGET_URL"].replace("postgresql+psycopg", "postgresql")) as conn:
        assert conn.execute("SELECT v FROM smoke.t WHERE id = 1").fetchone() == (marker,)


def test_seam_env_and_status(stack):
    env = subprocess.run([sys.executable, "-m", "seam.cli", "env"], capture_output=True, text=True, check=True).stdout
    exported = dict(line.removeprefix("export ").split("=", 1) for line in env.splitlines())
    for key in (
        "SEAM_MYSQL_URL",
        "SEAM_TARGET_URL",
        "SEAM_KAFKA_BOOTSTRAP",
        "SEAM_AIRFLOW_URL",
        "SEAM_AIRFLOW_USER",
        "SEAM_AIRFLOW_PASSWORD",
    ):
        assert exported[key]
    assert exported["SEAM_MYSQL_URL"].startswith("mysql+pymysql://root:")
    assert exported["SEAM_TARGET_URL"].startswith("postgresql+psycopg://seam:")
    # the URLs work as SQLAlchemy URLs
    import sqlalchemy

    for key in ("SEAM_MYSQL_URL", "SEAM_TARGET_URL"):
        engine = sqlalchemy.create_engine(exported[key].strip("'"))
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text("SELECT 1")).scalar() == 1
        engine.dispose()
    status = subprocess.run([sys.executable, "-m", "seam.cli", "status"], capture_output=True, text=True).stdout
    for name in ("mysql", "kafka", "postgres"):
        line = next(ln for ln in status.splitlines() if ln.startswith(name))
        assert " up " in line and str(stack.port(name)) in line
    # the connect hints that `seam status` prints work as printed: psql with the libpq URL, seam kafka
    assert "SEAM_TARGET_PSQL_URL" in status and "kcat" not in status
    psql = subprocess.run(
        ["psql", exported["SEAM_TARGET_PSQL_URL"].strip("'"), "-Atc", "SELECT 41 + 1"], capture_output=True, text=True
    )
    assert psql.returncode == 0 and psql.stdout.strip() == "42", psql.stderr


def test_seam_kafka_lists_topics_and_tails_one(stack, pipeline):
    from confluent_kafka import Producer

    from seam.wire.topics import ensure_topics

    topic = f"seam.test.tail-{uuid.uuid4().hex[:8]}"
    ensure_topics(pipeline, [topic])
    producer = Producer({"bootstrap.servers": pipeline.kafka.bootstrap})
    for i in range(25):
        producer.produce(topic, value=f'{{"n": {i}}}'.encode(), key=str(i).encode())
    producer.flush(30)

    def seam(*args):
        return run_command(
            [sys.executable, "-m", "seam.cli", "kafka", *args], capture_output=True, text=True, timeout=120
        )

    listed = seam("topics")
    assert listed.returncode == 0 and f"{topic}  partitions=1" in listed.stdout, listed.stderr
    tailed = seam("tail", topic, "-n", "3")
    assert tailed.returncode == 0, tailed.stderr
    lines = tailed.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["22", "23", "24"] and 'key=24 {"n": 24}' in lines[-1]
    missing = seam("tail", "no.such.topic")
    assert missing.returncode == 2 and "seam kafka topics" in missing.stderr and "Traceback" not in missing.stderr


# ----------------------------------------------- lifecycle on a private stack --


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def private_stack(tmp_path, monkeypatch):
    """A second stack in its own state dir and ports, torn down after the test."""
    for var in ("SEAM_MYSQL_PORT", "SEAM_KAFKA_PORT", "SEAM_TARGET_PORT", "SEAM_AIRFLOW_PORT"):
        monkeypatch.setenv(var, str(_free_port()))
    s = EmbeddedStack(tmp_path / "state")
    s.settings(create=True)
    yield s
    s.down(log=lambda m: None)
    data = s.state / "postgres" / "data"
    if data.is_symlink():  # the postgres user could not reach tmp_path: data lived outside it
        import shutil

        shutil.rmtree(data.resolve(), ignore_errors=True)


def _our_processes(state: Path) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [
        ln
        for ln in out.splitlines()
        if str(state) in ln
        or "tansu" in ln
        and "--listener-url" in ln
        and f":{EmbeddedStack(state).port('kafka')}" in ln
    ]


def test_up_then_down_leaves_nothing_running(private_stack):
    s = private_stack
    s.up(("mysql", "kafka", "postgres"), log=lambda m: None)
    assert [x.running for x in s.status()] == [True, True, True, False]
    pids = [s._alive_pid(n) for n in ("mysql", "kafka", "postgres")]
    s.down(log=lambda m: None)
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1]
    assert _our_processes(s.state) == []
    # up again reuses the data (idempotent), credentials unchanged
    s.up(("mysql",), log=lambda m: None)
    assert s.status()[0].running


def test_down_does_not_touch_processes_it_did_not_start(private_stack):
    s = private_stack
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        s.run_dir.mkdir(parents=True, exist_ok=True)
        # a stale PID file pointing at an unrelated process
        (s.run_dir / "kafka.pid").write_text(f'{{"pid": {stranger.pid}, "exe": "tansu"}}')
        s.down(log=lambda m: None)
        assert stranger.poll() is None
    finally:
        stranger.kill()


def test_down_stops_the_stream_parts_the_supervisor_started_on_this_stack(private_stack, tmp_path):
    """The supervisor starts stream parts detached, without a PID file: down finds them by their
    environment, and leaves another stack's alone."""
    fake = tmp_path / "fake" / "seam"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "cli.py").write_text(
        "import os, pathlib, time\npathlib.Path(os.environ['READY']).touch()\ntime.sleep(120)\n"
    )

    def part(state: Path) -> subprocess.Popen:
        ready = state.parent / f"{state.name}.ready"
        env = {**os.environ, "PYTHONPATH": str(fake.parent), "SEAM_STATE_DIR": str(state), "READY": str(ready)}
        cmd = [sys.executable, "-m", "seam.cli", "--pipeline", "p.yaml", "stream", "reader"]
        started = subprocess.Popen(cmd, env=env, start_new_session=True)
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:  # running, as the supervisor's parts are
            time.sleep(0.05)
        return started

    def signals(pid: int) -> str:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        return "; ".join(line for line in status if line.startswith(("State", "SigBlk", "SigIgn")))

    ours, theirs = part(private_stack.state), part(tmp_path / "another-stack")
    try:
        seen = private_stack._stream_part_pids()  # what down will find, named if the part outlives it
        private_stack.down(log=lambda m: None)
        try:
            ours.wait(timeout=30)
        except subprocess.TimeoutExpired:
            found = private_stack._stream_part_pids()
            pytest.fail(f"ours ({ours.pid}) outlived down: found {seen}, then {found}; {signals(ours.pid)}")
        assert theirs.poll() is None
    finally:
        for p in (ours, theirs):
            p.kill()
            p.wait()


def test_up_fails_clearly_when_the_port_is_taken(private_stack):
    s = private_stack
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", s.port("kafka")))
        blocker.listen()
        with pytest.raises(StackError, match=f"port {s.port('kafka')} for kafka is in use.*SEAM_KAFKA_PORT"):
            s.up(("kafka",), log=lambda m: None)


def test_up_starts_a_server_again_whose_port_a_passing_connection_held(private_stack):
    """The stack's ports lie in the kernel's range for outgoing connections: a client's connection may hold
    one (`make demo` failed so: PostgreSQL could not bind 35432 while a test suite ran beside; the test stack's
    Tansu could not bind 49092, held by a connection of a client to itself). Nothing listens there, so the
    port looks free; the server fails to bind it, and is started again until the connection is gone. Both
    kinds of server: PostgreSQL says `Address already in use`, Tansu (Rust) `AddrInUse`."""
    s, servers = private_stack, ("postgres", "kafka")
    s.up(servers, log=lambda m: None)  # the data directory made: the next start binds at once
    for name in servers:
        s.stop(name)
    said: list[str] = []
    with contextlib.ExitStack() as held:
        holding = {}  # server -> (a listener, a connection to it from the server's port)
        for name in servers:
            listener, client = held.enter_context(socket.socket()), held.enter_context(socket.socket())
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            _bind_when_free(client, s.port(name))  # the connection's own end holds the port
            client.connect(listener.getsockname())
            holding[name] = (listener, client)

        def log(line: str) -> None:
            said.append(line)
            name = line.split()[0]
            if "could not bind port" in line and name in holding:
                # the connection ends once its server has failed (the listener's close resets it: no FIN_WAIT
                # or TIME_WAIT keeps the port)
                for sock in holding.pop(name):
                    sock.close()

        s.up(servers, log=log)
    for name in servers:
        assert any(line.startswith(f"{name:9} could not bind port") for line in said), said
        assert any(line.startswith(f"{name:9} up on") for line in said), said


def _bind_when_free(sock: socket.socket, port: int, within_s: float = 120) -> None:
    """Bind ``sock`` to ``port`` once nothing holds it: a connection of the server's last run lingers in
    TIME_WAIT there for up to a minute, and another process's passing connection may hold it too."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            sock.bind(("127.0.0.1", port))
            return
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_up_fails_clearly_on_a_corrupt_datadir(private_stack):
    s = private_stack
    (s.state / "mysql" / "data").mkdir(parents=True)
    (s.state / "mysql" / "data" / "junk").write_text("x")
    with pytest.raises(StackError, match="datadir .* is corrupt.*remove"):
        s.up(("mysql",), log=lambda m: None)


def test_up_fails_clearly_when_a_binary_is_missing(private_stack, monkeypatch):
    import seam_dev.stack as stack_module

    monkeypatch.setattr(
        stack_module,
        "_postgres_bin_dir",
        lambda: (_ for _ in ()).throw(StackError("postgres not found: install the apt package")),
    )
    with pytest.raises(StackError, match="postgres not found"):
        private_stack.up(("postgres",), log=lambda m: None)
