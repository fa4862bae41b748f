"""Validation on the embedded stack: equal tables of every awkward type validate equal while writers keep
changing the source (compared at the target's position); a changed value, a missing row, an extra row and a
changed DECIMAL scale are each found by key, with and without bisection, and reladiff finds the same keys;
an incremental window is compared up to its watermark; bad input gets one clear error."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

import psycopg
import pytest

from seam.config import load_pipeline
from seam.validate.validation import validate
from seam_dev import demo
from tests.support.commands import run_command
from tests.support.pipelines import pipeline_file
from tests.support.source import fresh_database

DB = "val_test"
ODD = "odd `name` t"
pytestmark = pytest.mark.stack

TABLES = [
    {"name": f"{DB}.accounts", "key": ["id"], "cursor": "updated_at"},
    {
        "name": f"{DB}.payments",
        "key": ["id"],
        "checks": {"columns": {"amount": {"sum": {}}, "memo": {"null_count": {}}}},
    },
    {"name": f"{DB}.audit_log", "key": "none"},
    {"name": f"{DB}.type_zoo", "key": ["id"]},
    {"name": f"{DB}.{ODD}", "key": ["key col"]},
    {"name": f"{DB}.canon", "key": ["id"]},
    {"name": f"{DB}.never_loaded", "key": ["id"]},
]
LOADED = [t["name"] for t in TABLES if not t["name"].endswith("never_loaded")]


def _seam(path: str, *args, timeout: float = 900) -> subprocess.CompletedProcess:
    return run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True, timeout=timeout
    )


def _target(pipeline, sql: str, *params):
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else None


@pytest.fixture(scope="module")
def path(stack, tmp_path_factory):
    pipeline = load_pipeline()
    demo.seed(pipeline, rows=3000, admin_url=os.environ["SEAM_MYSQL_URL"], database=DB, log=lambda m: None)
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")  # zero dates
        cur.execute("""CREATE TABLE `odd ``name`` t` (`key col` INT PRIMARY KEY, `select` DOUBLE, `f` FLOAT,
            `t` TIME(3), `b` VARBINARY(16), `d` DATE, `z` DATETIME, `j` JSON, `dec` DECIMAL(30,10),
            `u` BIGINT UNSIGNED, `c` CHAR(5) CHARACTER SET latin1, `s` SET('a','b c','d'), `e` ENUM('x','y'),
            `bits` BIT(5), `yr` YEAR)""")
        rows = [
            (
                1,
                1.5e20,
                1.1,
                "-838:59:59.123",
                b"\x00\xff",
                "0000-00-00",
                "0000-00-00 00:00:00",
                '{"b": [1, 2.5], "a": "é"}',
                "-12345678901234567890.0123456789",
                18446744073709551615,
                "café",
                "a,d",
                "y",
                31,
                2155,
            ),
            (
                2,
                0.00000015,
                -3.4e38,
                "12:00:00",
                b"",
                "2024-02-29",
                "1999-12-31 23:59:59",
                "[]",
                "0.0000000000",
                0,
                "",
                "",
                "x",
                0,
                1901,
            ),
            (3, None, None, None, None, None, None, None, None, None, None, None, None, None, None),
            (
                4,
                123456789.123,
                1e-7,
                "00:00:00.5",
                b"abc",
                "1000-01-01",
                "2038-01-19 03:14:08",
                '{"n": 12345678901234567890, "z": null, "t": true}',
                "1.5",
                42,
                "x y",
                "b c",
                "x",
                5,
                2000,
            ),
        ]
        cur.executemany(f"INSERT INTO `odd ``name`` t` VALUES ({', '.join(['%s'] * 15)})", rows)
        cur.execute("CREATE TABLE never_loaded (id INT PRIMARY KEY)")
        # random values of the types whose text PostgreSQL prints differently from MariaDB
        cur.execute(
            "CREATE TABLE canon (id INT PRIMARY KEY, d DOUBLE, f FLOAT, t TIME(6), j JSON, "
            "n DECIMAL(38,12), ts TIMESTAMP(6) NULL, dt DATETIME(3))"
        )
        rng = random.Random(7)

        def number():
            return rng.choice([1, -1]) * rng.random() * 10 ** rng.randint(-20, 22)

        def doc():
            return json.dumps(
                {
                    rng.choice("abcxyzé"): [number(), rng.randint(-(10**18), 10**18), None, True, 'q"é'],
                    "k" + str(rng.randint(0, 99)): {"x": rng.random()},
                }
            )

        canon = [
            (
                i,
                number(),
                number() / 1e10,
                f"{rng.choice('-+')}{rng.randint(0, 838)}:{rng.randint(0, 59):02d}:"
                f"{rng.randint(0, 59):02d}.{rng.randint(0, 999999):06d}".lstrip("+"),
                doc(),
                f"{rng.randint(-(10**25), 10**25)}.{rng.randint(0, 10**12 - 1):012d}",
                f"20{rng.randint(10, 37)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 0{rng.randint(0, 9)}:"
                f"{rng.randint(10, 59)}:00.{rng.randint(0, 999999):06d}",
                f"19{rng.randint(10, 99)}-1{rng.randint(0, 2)}-2{rng.randint(0, 8)} 12:00:00.{rng.randint(0, 999):03d}",
            )
            for i in range(1, 3001)
        ]
        cur.executemany("INSERT INTO canon VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", canon)
    conn.close()
    file = pipeline_file(tmp_path_factory, "val", TABLES)
    loaded = _seam(file, "load", "full", *LOADED)
    assert loaded.returncode == 0, loaded.stderr + loaded.stdout
    return file


def test_canonical_text_is_identical_on_both_sides(path):
    """3,000 rows of random doubles, floats, TIMEs up to 838 hours, JSON with big integers, exponents and
    escapes, DECIMAL(38,12) and TIMESTAMP/DATETIME: every bucket checksum equal, no row pulled to compare."""
    pipeline = load_pipeline(path)
    report = validate(pipeline, pipeline.table("canon"), bucket_rows=100, say=lambda m: None)
    assert report.verdict == "equal" and report.source_rows == 3000
    assert len(report.buckets) >= 30 and {b.state for b in report.buckets} == {"equal"}


@pytest.mark.parametrize("snapshot", ["auto", "portable"])
def test_equal_tables_validate_equal_while_the_source_changes(path, tmp_path, snapshot, monkeypatch):
    """A writer changes accounts, payments, audit_log (keyless) and type_zoo during the validation: each is
    compared as of the target's position, not as of now; with MariaDB's snapshot position and with the
    portable method's watermarks (MySQL 8's, forced)."""
    monkeypatch.setenv("SEAM_SNAPSHOT", snapshot)
    writer = subprocess.Popen(
        [sys.executable, "-m", "seam.cli", "writer", "--database", DB, "--seconds", "12", "--rate", "150"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(3)
        out = _seam(path, "validate", *[t["name"] for t in TABLES[:5]], "--report-dir", str(tmp_path))
    finally:
        writer.wait(timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    verdicts = [line for line in out.stdout.splitlines() if ": EQUAL:" in line or ": MISMATCH:" in line]
    assert len(verdicts) == 5 and all(": EQUAL:" in v for v in verdicts), out.stdout
    assert "keys changed on the source after that point were compared as they were then" in out.stdout
    assert "check sum(amount): source" in out.stdout and "check null_count(memo)" in out.stdout
    reports = sorted(tmp_path.glob("validate-*.html"))
    assert len(reports) == 5
    # reports hold rows: readable by owner and group only, whatever the umask
    assert {r.stat().st_mode & 0o777 for r in reports} == {0o640} and tmp_path.stat().st_mode & 0o777 == 0o750
    assert "<svg" in reports[0].read_text() and "EQUAL" in reports[0].read_text()


def _differences(report) -> dict:
    return {(d.kind, tuple(d.key.values())): d.columns for d in report.differences}


def test_each_difference_is_found_by_key_and_reladiff_agrees(path):
    pipeline = load_pipeline(path)
    again = _seam(path, "load", "full", f"{DB}.payments", f"{DB}.type_zoo")  # the writer has moved the source on
    assert again.returncode == 0, again.stderr
    # the copied row has a memo: a copy with a NULL memo would (rightly) fail null_count(memo) too
    ids = [r[0] for r in _target(pipeline, f'SELECT id FROM "{DB}".payments WHERE memo IS NOT NULL ORDER BY id')]
    changed, gone, copied = ids[100], ids[1500], ids[2300]
    extra = ids[-1] + 1_000_000
    _target(pipeline, f'UPDATE "{DB}".payments SET amount = amount + 0.01 WHERE id = %s', changed)
    _target(pipeline, f'DELETE FROM "{DB}".payments WHERE id = %s', gone)
    _target(
        pipeline,
        f'INSERT INTO "{DB}".payments SELECT %s, account_id, amount, currency, status, reference, memo, '
        f'value_date, is_deleted, created_at, updated_at FROM "{DB}".payments WHERE id = %s',
        extra,
        copied,
    )
    zoo = _target(pipeline, f'SELECT id FROM "{DB}".type_zoo WHERE amount IS NOT NULL ORDER BY id LIMIT 1')[0][0]
    # the same number with another scale: equal as a number, different as data
    _target(pipeline, f'ALTER TABLE "{DB}".type_zoo ALTER COLUMN amount TYPE numeric')
    _target(pipeline, f'UPDATE "{DB}".type_zoo SET amount = round(amount, 8) WHERE id = %s', zoo)

    expected = {
        ("different", (str(changed),)): ("amount",),
        ("missing", (str(gone),)): (),
        ("extra", (str(extra),)): (),
    }
    table = pipeline.table("payments")
    report = validate(pipeline, table, say=lambda m: None)
    assert report.verdict == "mismatch"
    assert (report.missing, report.extra, report.different) == (1, 1, 1)
    assert _differences(report) == expected
    assert [m.ok for m in report.metrics] == [False, True]  # sum(amount) is off by 0.01; memo's nulls agree
    # bisection: small buckets and pulls force the key ranges to be split before rows are compared
    narrow = validate(pipeline, table, bucket_rows=2000, pull_rows=40, say=lambda m: None)
    assert _differences(narrow) == expected
    assert sum(b.state == "differs" for b in narrow.buckets) >= 2
    scale = validate(pipeline, pipeline.table("type_zoo"), say=lambda m: None)
    assert _differences(scale) == {("different", (str(zoo),)): ("amount",)}
    d = scale.differences[0]
    assert d.source["amount"] != d.target["amount"] and d.target["amount"].endswith("00")

    cli = _seam(path, "validate", f"{DB}.payments")
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert f"missing    id={gone}" in cli.stdout and f"extra      id={extra}" in cli.stdout
    assert f"different  id={changed}: amount:" in cli.stdout
    status = _seam(path, "status", f"{DB}.payments")
    assert "last validation MISMATCH" in status.stdout and "1 missing, 1 extra, 1 different" in status.stdout, (
        status.stdout
    )

    assert _reladiff_keys(pipeline) == {("-", str(changed)), ("+", str(changed)), ("-", str(gone)), ("+", str(extra))}


def _reladiff_keys(pipeline) -> set:
    import reladiff

    s, t = pipeline.source, pipeline.target
    cols = (
        "account_id",
        "amount",
        "currency",
        "status",
        "reference",
        "value_date",
        "is_deleted",
        "created_at",
        "updated_at",
    )
    a = reladiff.connect_to_table(
        f"mysql://{s.user}:{s.password.reveal()}@{s.host}:{s.port}/{DB}", "payments", "id", extra_columns=cols
    )
    b = reladiff.connect_to_table(
        f"postgresql://{t.user}:{t.password.reveal()}@{t.host}:{t.port}/{t.database}",
        (DB, "payments"),
        "id",
        extra_columns=cols,
    )
    return {(sign, row[0]) for sign, row in reladiff.diff_tables(a, b)}


def test_an_incremental_window_is_compared_up_to_its_watermark(path):
    pipeline = load_pipeline(path)
    table = pipeline.table("accounts")
    loaded = _seam(path, "load", "incremental", table.name)
    assert loaded.returncode == 0, loaded.stderr + loaded.stdout
    report = validate(pipeline, table, say=lambda m: None)
    assert report.mode == "window" and report.verdict == "equal", report.to_text()
    assert report.source_rows > 0
    before = report.changed_since  # rows the writer changed within the safety delay: past the watermark already
    # a source row updated after the window moves past the watermark: not a difference until the next window
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM accounts WHERE updated_at < NOW(6) - INTERVAL 10 MINUTE ORDER BY id LIMIT 2")
        moved, broken = [r[0] for r in cur.fetchall()]
        cur.execute("UPDATE accounts SET balance = balance + 1 WHERE id = %s", (moved,))
    conn.close()
    _target(pipeline, f"UPDATE \"{DB}\".accounts SET owner = owner || '!' WHERE id = %s", broken)
    report = validate(pipeline, table, say=lambda m: None)
    assert report.changed_since == before + 1
    assert _differences(report) == {("different", (str(broken),)): ("owner",)}
    windowed = _seam(path, "validate", table.name, "--window", "2000-01-01", "2100-01-01")
    assert windowed.returncode == 1 and f"different  id={broken}: owner:" in windowed.stdout, windowed.stdout


def test_bad_input_gets_one_clear_error(path, tmp_path_factory):
    out = _seam(path, "validate", f"{DB}.never_loaded")
    assert out.returncode == 2 and "the target has no table" in out.stderr and "seam load full" in out.stderr, (
        out.stderr
    )
    assert "Traceback" not in out.stderr
    out = _seam(path, "validate", f"{DB}.nope")
    assert out.returncode == 2 and "no table" in out.stderr
    bad = pipeline_file(
        tmp_path_factory,
        "val_bad",
        [{"name": f"{DB}.payments", "key": ["id"], "checks": {"columns": {"currency": {"sum": {}}}}}],
    )
    out = _seam(bad, "validate", f"{DB}.payments")
    assert out.returncode == 2 and "needs an exact numeric column" in out.stderr, out.stderr
    bad = pipeline_file(
        tmp_path_factory,
        "val_bad2",
        [{"name": f"{DB}.payments", "key": ["id"], "checks": {"columns": {"amount": {"average": {}}}}}],
    )
    out = _seam(bad, "validate", f"{DB}.payments")
    assert out.returncode == 2 and "checks.columns.amount.average: unknown key" in out.stderr, out.stderr


def test_all_gives_every_table_a_verdict(path, tmp_path):
    """`--all` goes on past a table it cannot check: each table gets a verdict, and the exit is 1 unless
    every one is EQUAL."""
    out = _seam(path, "validate", "--all", "--report-dir", str(tmp_path))
    assert out.returncode == 1, out.stdout + out.stderr
    verdicts = out.stdout.split("verdicts: ")[-1].strip()
    assert f"{DB}.never_loaded NOT LOADED" in verdicts, out.stdout + out.stderr
    assert all(t["name"] in verdicts for t in TABLES), verdicts
    assert "Traceback" not in out.stderr


def test_rows_a_cascade_changed_after_the_compared_point_are_not_differences(stack, tmp_path_factory):
    """owners -> entries -> postings, loaded, then an owner deleted and another re-keyed at the source: the
    engine deletes and re-keys their entries and the postings below them with no row in the binlog. Compared
    at the load's position, those rows are what the target holds; before, a delete or re-key two levels up
    read as rows extra and different in the target, a MISMATCH that a nightly validation would alert on. A
    row that really differs is still found."""
    db = "val_cascade_test"
    fresh_database(
        db,
        f"CREATE TABLE {db}.owners (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL UNIQUE) ENGINE=InnoDB",
        f"CREATE TABLE {db}.entries (id BIGINT PRIMARY KEY, owner_code VARCHAR(10) NOT NULL, "
        f"FOREIGN KEY (owner_code) REFERENCES {db}.owners (code) ON DELETE CASCADE ON UPDATE CASCADE) ENGINE=InnoDB",
        f"CREATE TABLE {db}.postings (id BIGINT PRIMARY KEY, entry_id BIGINT NOT NULL, n INT, "
        f"FOREIGN KEY (entry_id) REFERENCES {db}.entries (id) ON DELETE CASCADE) ENGINE=InnoDB",
        f"INSERT INTO {db}.owners SELECT seq, CONCAT('c', seq) FROM {db}.seq_1_to_10",
        f"INSERT INTO {db}.entries SELECT seq, CONCAT('c', 1 + seq % 10) FROM {db}.seq_1_to_100",
        f"INSERT INTO {db}.postings SELECT seq, 1 + seq % 100, seq FROM {db}.seq_1_to_1000",
    )
    names = [f"{db}.{t}" for t in ("owners", "entries", "postings")]
    path = pipeline_file(tmp_path_factory, "val_cascade", [{"name": n, "key": ["id"]} for n in names])
    pipeline = load_pipeline(path)
    assert _seam(path, "load", "full", *names).returncode == 0
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], db)
    conn.autocommit(True)
    with conn.cursor() as cur:
        cur.execute("DELETE FROM owners WHERE code = 'c4'")  # 10 entries and their 100 postings go
        cur.execute("UPDATE owners SET code = 'c5x' WHERE code = 'c5'")  # 10 entries follow
    conn.close()
    _target(pipeline, f'UPDATE "{db}"."postings" SET n = -1 WHERE id = 1')  # entry 2, owner c3: a real difference
    out = _seam(path, "validate", *names)
    verdicts = {
        line.split(":")[0]: line for line in out.stdout.splitlines() if ": EQUAL:" in line or ": MISMATCH:" in line
    }
    assert ": EQUAL:" in verdicts[f"{db}.owners"] and ": EQUAL:" in verdicts[f"{db}.entries"], out.stdout
    assert (
        "source 100 rows, target 100 rows; 0 missing in target, 0 extra in target, 0 with" in verdicts[f"{db}.entries"]
    )
    assert (
        "MISMATCH: at" in verdicts[f"{db}.postings"]
        and "source 1,000 rows, target 1,000 rows; 0 missing in target, 0 extra in target, 1 with" in out.stdout
    ), out.stdout
    assert "different  id=1: n: source 1 target -1" in out.stdout, out.stdout
    assert (
        "20 of them a foreign-key cascade changed" in out.stdout and "100 of them a foreign-key cascade" in out.stdout
    )


def test_differences_are_found_whatever_the_key_is_made_of(stack, tmp_path_factory):
    """Keys of two columns with an integer first (compared in ranges of that column) and a text key (hash
    buckets): a row missing, one extra and one different are found in each, among rows changed at the source
    after the compared point; the default first pass and one that bisects before it pulls rows agree."""
    db = "val_keys_test"
    fresh_database(
        db,
        f"CREATE TABLE {db}.ledger (account INT, seq VARCHAR(8), amount DECIMAL(12,2), note TEXT, "
        "PRIMARY KEY (account, seq))",
        f"INSERT INTO {db}.ledger SELECT seq DIV 3, CONCAT('s', seq % 3), seq / 100, CONCAT('n', seq) "
        f"FROM {db}.seq_1_to_5000",
        f"CREATE TABLE {db}.codes (code VARCHAR(12) PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.codes SELECT CONCAT('code-', seq), seq FROM {db}.seq_1_to_5000",
    )
    names = [f"{db}.ledger", f"{db}.codes"]
    path = pipeline_file(
        tmp_path_factory,
        "val_keys",
        [{"name": names[0], "key": ["account", "seq"]}, {"name": names[1], "key": ["code"]}],
    )
    pipeline = load_pipeline(path)
    assert _seam(path, "load", "full", *names).returncode == 0
    _target(pipeline, f'DELETE FROM "{db}"."ledger" WHERE account = 700 AND seq = \'s1\'')
    _target(pipeline, f"UPDATE \"{db}\".\"ledger\" SET note = 'tampered' WHERE account = 1200 AND seq = 's2'")
    _target(pipeline, f"INSERT INTO \"{db}\".\"ledger\" VALUES (1500, 's9', 1, 'extra')")
    _target(pipeline, f'DELETE FROM "{db}"."codes" WHERE code = \'code-70\'')
    _target(pipeline, f'UPDATE "{db}"."codes" SET v = -1 WHERE code = \'code-1200\'')
    _target(pipeline, f'INSERT INTO "{db}"."codes" VALUES (\'code-x\', 1)')
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], db)
    conn.autocommit(True)
    with conn.cursor() as cur:  # after the compared point: compared as they were then
        cur.execute("UPDATE ledger SET amount = amount + 1 WHERE account BETWEEN 690 AND 710")
        cur.execute("UPDATE codes SET v = v + 1 WHERE code LIKE 'code-7%'")
    conn.close()
    expected = {
        "ledger": {
            ("missing", ("700", "s1")): (),
            ("different", ("1200", "s2")): ("note",),
            ("extra", ("1500", "s9")): (),
        },
        "codes": {("missing", ("code-70",)): (), ("different", ("code-1200",)): ("v",), ("extra", ("code-x",)): ()},
    }
    for name, want in expected.items():
        table = pipeline.table(name)
        for options in ({}, {"bucket_rows": 2000, "pull_rows": 40}):
            report = validate(pipeline, table, say=lambda m: None, **options)
            assert _differences(report) == want, (name, options, report.to_text())
            assert report.changed_since > 0 and report.source_rows == 5000, report.to_text()
