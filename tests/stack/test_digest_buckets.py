"""Bucket digests (``seam.validate.canonical.mysql_digest``/``pg_digest``): a table keyed by one integer column
whose columns all have bounded texts is checksummed as one MD5 per bucket of its rows' texts in key order. Equal
tables of every bounded type with awkward values validate equal bucket by bucket, whatever order the target's
rows lie in on disk; one changed value of any column, a missing row and an extra row are each found by key; a
table with a TEXT column is checksummed row by row as before, with the same verdicts."""

from __future__ import annotations

import os
import random

import psycopg
import pytest

from seam.config import load_pipeline
from seam.core.schema import Column, TableSchema
from seam.validate import canonical
from seam.validate.validation import validate
from seam_dev import demo
from tests.support.commands import seam_command
from tests.support.pipelines import pipeline_file

DB = "digest_test"
pytestmark = pytest.mark.stack

COLUMNS = (
    "id BIGINT PRIMARY KEY, d DOUBLE, f FLOAT, t TIME(3), b VARBINARY(16), dd DATE, dt DATETIME(6), "
    "ts TIMESTAMP(6) NULL, n DECIMAL(30,10), u BIGINT UNSIGNED, c CHAR(5) CHARACTER SET latin1, "
    "v VARCHAR(20), s SET('a','b c','d'), e ENUM('x','y'), bits BIT(5), yr YEAR, small TINYINT"
)
NAMES = ["id", "d", "f", "t", "b", "dd", "dt", "ts", "n", "u", "c", "v", "s", "e", "bits", "yr", "small"]


def _rows(count: int) -> list[tuple]:
    rng = random.Random(11)
    awkward = [
        (1.5e20, 1.1, "-838:59:59.123", b"\x00\xff", "0000-00-00", "0000-00-00 00:00:00", None,
         "-12345678901234567890.0123456789", 18446744073709551615, "café", "a\x00b ü 😀", "a,d", "y", 31, 2155, -128),
        (0.00000015, -3.4e38, "12:00:00", b"", "2024-02-29", "1999-12-31 23:59:59.999999", "2038-01-19 03:14:07",
         "0.0000000000", 0, "", "", "", "x", 0, 1901, 127),
        (None,) * 16,
    ]  # fmt: skip
    rows = [(i + 1, *r) for i, r in enumerate(awkward)]
    for i in range(len(rows) + 1, count + 1):
        rows.append(
            (
                i * 3,  # gaps in the key
                rng.choice([1, -1]) * rng.random() * 10 ** rng.randint(-20, 22),
                rng.random() * 1000,
                f"{rng.randint(-838, 838)}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}",
                rng.randbytes(rng.randint(0, 16)),
                f"{rng.randint(1000, 9999)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                f"{rng.randint(1000, 9999)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 12:34:56.{rng.randint(0, 999999):06d}",
                f"20{rng.randint(10, 37)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 0{rng.randint(0, 9)}:00:00.000001",
                f"{rng.randint(-(10**19), 10**19)}.{rng.randint(0, 10**10 - 1):010d}",
                rng.randint(0, 2**64 - 1),
                rng.choice(["", "x", "é à", "abcde"]),
                "".join(rng.choice("aé😀\x1f\x1e\x1d,;'\"\\") for _ in range(rng.randint(0, 20))),
                rng.choice(["", "a", "a,b c", "a,b c,d"]),
                rng.choice(["x", "y", None]),
                rng.randint(0, 31),
                rng.randint(1901, 2155),
                rng.randint(-128, 127),
            )
        )
    return rows


@pytest.fixture(scope="module")
def path(stack, tmp_path_factory):
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute("SET SESSION sql_mode = ''")  # zero dates
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"CREATE TABLE {DB}.zoo ({COLUMNS})")
        cur.execute(f"CREATE TABLE {DB}.zoo_text ({COLUMNS}, memo TEXT)")
        rows = _rows(3000)
        cur.executemany(f"INSERT INTO {DB}.zoo VALUES ({', '.join(['%s'] * len(NAMES))})", rows)
        cur.execute(f"INSERT INTO {DB}.zoo_text SELECT z.*, CONCAT('memo ', z.id) FROM {DB}.zoo z")
    conn.commit()
    conn.close()
    file = pipeline_file(
        tmp_path_factory, "digest", [{"name": f"{DB}.{t}", "key": ["id"]} for t in ("zoo", "zoo_text")]
    )
    loaded = seam_command(file, "load", "full", f"{DB}.zoo", f"{DB}.zoo_text", timeout=900)
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    return file


def _target(pipeline, sql: str, *params) -> None:
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        conn.execute(sql, params)


def _validate(pipeline, name: str, **options):
    said: list[str] = []
    report = validate(pipeline, pipeline.table(f"{DB}.{name}"), say=said.append, **options)
    return report, " ".join(said)


@pytest.mark.parametrize(("name", "checksum"), [("zoo", "digests"), ("zoo_text", "checksums")])
def test_equal_tables_are_equal_bucket_by_bucket_in_any_order_on_disk(path, name, checksum):
    pipeline = load_pipeline(path)
    # a third of the target's rows rewritten: they lie elsewhere in the heap, out of key order
    _target(pipeline, f'UPDATE "{DB}"."{name}" SET small = small WHERE id %% 3 = 1')
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        on_disk = [r[0] for r in conn.execute(f'SELECT id FROM "{DB}"."{name}" ORDER BY ctid')]
    assert on_disk != sorted(on_disk)
    report, said = _validate(pipeline, name, bucket_rows=100)
    assert f"bucket {checksum} on each side" in said
    assert report.verdict == "equal" and report.source_rows == 3000, said
    assert len(report.buckets) >= 30 and {b.state for b in report.buckets} == {"equal"}


@pytest.mark.parametrize("name", ["zoo", "zoo_text"])
def test_a_changed_value_of_any_column_a_missing_and_an_extra_row_are_found_by_key(path, name):
    pipeline = load_pipeline(path)
    table = f'"{DB}"."{name}"'
    changes = {  # column -> its new value in the target, each in another row
        "d": "d * (1 + 1e-15)",
        "f": "f + 1",
        "t": "t + interval '1 millisecond'",
        "b": "b || '\\x00'::bytea",
        "dd": "dd + 1",
        "dt": "dt + interval '1 microsecond'",
        "n": "n + 0.0000000001",
        "u": "u - 1",
        "c": "'q'",
        "v": "left(v, 19) || '!'",
        "s": "'d'",
        "bits": "bits # 1",
        "small": "small - 1",
    }
    expected = {}
    for offset, (column, value) in enumerate(changes.items()):
        key = 300 + 3 * offset * 50
        _target(pipeline, f"UPDATE {table} SET {column} = {value} WHERE id = %s", key)
        expected[("different", str(key))] = (column,)
    _target(pipeline, f"DELETE FROM {table} WHERE id = 6000")
    _target(pipeline, f"INSERT INTO {table} SELECT id + 1, {', '.join(NAMES[1:])}"
            f"{', memo' if name == 'zoo_text' else ''} FROM {table} WHERE id = 3000")  # fmt: skip
    expected[("missing", "6000")] = ()
    expected[("extra", "3001")] = ()
    for options in ({}, {"bucket_rows": 2000, "pull_rows": 40}):  # whole buckets; and ranges bisected first
        report, said = _validate(pipeline, name, **options)
        found = {(d.kind, str(next(iter(d.key.values())))): d.columns for d in report.differences}
        assert report.verdict == "mismatch", said
        assert found == expected, said


def test_the_hashed_text_is_the_canonical_texts_bytes_in_every_character_set(stack):
    """What an MD5 reads (``mysql_row_text(..., hashed=True)``: a text not converted when its bytes are UTF-8
    already, its NUL replaced byte by byte) is the canonical text's bytes, in every character set and collation
    and with either NUL replacement: the digests stay the PostgreSQL side's. Columns of several collations in
    one row (their texts joined) are no mix MariaDB refuses."""
    schema = TableSchema(
        DB,
        "charsets",
        (
            Column("id", "int", "int(11)", False),
            Column("a", "varchar", "varchar(20)", True, charset="utf8mb4"),
            Column("b", "varchar", "varchar(20)", True, charset="utf8mb4"),
            Column("c", "char", "char(10)", True, charset="utf8mb3"),
            Column("d", "varchar", "varchar(20)", True, charset="latin1"),
            Column("e", "varchar", "varchar(20)", True, charset="ascii"),
            Column("f", "varchar", "varchar(20)", True, charset="ucs2"),
            Column("g", "text", "text", True, charset="utf8mb4"),
            Column("s", "set", "set('ä','b c')", True, charset="utf8mb4"),
            Column("en", "enum", "enum('x','😀')", True, charset="utf8mb4"),
        ),
        ("id",),
    )
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {DB}")
            cur.execute(f"DROP TABLE IF EXISTS {DB}.charsets")
            cur.execute(
                f"CREATE TABLE {DB}.charsets (id INT PRIMARY KEY, a VARCHAR(20) COLLATE utf8mb4_bin, "
                "b VARCHAR(20) COLLATE utf8mb4_unicode_ci, c CHAR(10) CHARACTER SET utf8mb3, "
                "d VARCHAR(20) CHARACTER SET latin1, e VARCHAR(20) CHARACTER SET ascii, "
                "f VARCHAR(20) CHARACTER SET ucs2, g TEXT, s SET('ä','b c'), en ENUM('x','😀'))"
            )
            values = [
                (1, "a\x00b", "😀\x00", "ç\x00", "é\x00ü", "x\x00y", "ü\x00€", "\x00\x00", "ä,b c", "😀"),
                (2, "", "", "", "", "", "", "", "", "x"),
                (3, *(None,) * 9),
                (4, "plain", "Straße", "ñ", "ÿ", "~", "Ω", "long " * 50, "b c", None),
            ]
            cur.executemany(f"INSERT INTO {DB}.charsets VALUES ({', '.join(['%s'] * 10)})", values)
            for nul in ("\ufffd", "", "?"):
                text = canonical.mysql_row_text(schema.columns, nul)
                hashed = canonical.mysql_row_text(schema.columns, nul, hashed=True)
                cur.execute(f"SELECT id, HEX({text}), HEX({hashed}) FROM {DB}.charsets x ORDER BY id")
                found = cur.fetchall()
                assert [r[0] for r in found] == [1, 2, 3, 4]
                for key, expected, got in found:
                    assert got == expected, (nul, key, bytes.fromhex(expected), bytes.fromhex(got))
                assert "EFBFBD" in found[0][1] or nul != "\ufffd"
        conn.commit()
    finally:
        conn.close()
