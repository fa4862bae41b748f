"""The golden type test (issue 14): awkward values of every MySQL type family, read on every path, must be the
same value everywhere.

Paths: the full load's rows as its Spark tasks read and render them (``snapshot.read_chunk``, ``row_json``: the
compiled renderer and the Python one), a driver's
SELECT and the binlog (both through ``seam.wire.codecs`` in Python), the target after a real full load and a real
stream of changes that move the same values between rows (read back from PostgreSQL), and the validation
checksum's text on both sides. Then ``seam validate`` and the independent comparer must find the tables equal.
"""

from __future__ import annotations

import json
import os
import sys

import MySQLdb
import psycopg
import pymysql
import pytest

from seam.apply.target import normalize_target
from seam.config import load_pipeline
from seam.core.identifiers import qi, quote
from seam.core.position import Position
from seam.source import row_json
from seam.source.binlog import BinlogReader, Transaction
from seam.source.full_load import _canonical_json_values
from seam.source.schema import read_schema
from seam.source.snapshot import Chunk, ChunkPlan, ChunkRead, canonical_json_columns, chunk_sql, read_chunk, source_head
from seam.validate import canonical
from seam.wire.codecs import codec, record_value
from seam_dev import demo
from tests.support.commands import run_command
from tests.support.independent import compare
from tests.support.pipelines import pipeline_file, stream_once

DB = "golden_test"
pytestmark = pytest.mark.stack

TABLE = """CREATE TABLE golden (
  id INT PRIMARY KEY,
  tags SET('Trailers','Commentaries','Deleted Scenes','a b','Größe','ÜBER MÄ') NULL,
  rating ENUM('G','PG-13','Ünrated','with space','x') NULL,
  f FLOAT NULL, d DOUBLE NULL,
  d0 DECIMAL(10,0) NULL, d6 DECIMAL(20,6) NULL, d30 DECIMAL(65,30) NULL,
  t TIME(6) NULL, dd DATE NULL, dt DATETIME(6) NULL, ts TIMESTAMP(6) NULL DEFAULT NULL,
  j JSON NULL, l1 VARCHAR(20) CHARACTER SET latin1 NULL, vb VARBINARY(16) NULL, bl BLOB NULL,
  b1 BIT(1) NULL, b8 BIT(8) NULL, b64 BIT(64) NULL, y YEAR NULL,
  ti TINYINT NULL, ub BIGINT UNSIGNED NULL, tb TINYINT(1) NULL,
  g GEOMETRY NULL, pt POINT NULL, ls LINESTRING NULL, pg POLYGON NULL, mpt MULTIPOINT NULL,
  mls MULTILINESTRING NULL, mpg MULTIPOLYGON NULL, gc GEOMETRYCOLLECTION NULL,
  zi INT(11) UNSIGNED ZEROFILL NULL, zb BIGINT UNSIGNED ZEROFILL NULL, zd DECIMAL(10,2) ZEROFILL NULL,
  zf DOUBLE ZEROFILL NULL, bn BINARY(16) NULL, nt VARCHAR(40) NULL, jn JSON NULL,
  u UUID NULL, i4 INET4 NULL, i6 INET6 NULL
) ENGINE=InnoDB"""

# the target's DDL mirrors the source's: lengths, NOT NULL, the key and the column order (issue 34)
SHAPES = """CREATE TABLE shapes (
  code CHAR(3) NOT NULL, n INT NOT NULL, name VARCHAR(100) NOT NULL, note TEXT NULL, d DATE NOT NULL,
  dt DATETIME(3) NOT NULL, ts TIMESTAMP NOT NULL DEFAULT '2000-01-01 00:00:00', t TIME NOT NULL,
  od DATE NULL, amount DECIMAL(12,2) NOT NULL, flag TINYINT(1) NOT NULL DEFAULT 0, PRIMARY KEY (n, code)
) ENGINE=InnoDB"""
SHAPES_DDL = [
    ("code", "character varying(3)", True),
    ("n", "integer", True),
    ("name", "character varying(100)", True),
    ("note", "text", False),
    ("d", "date", True),  # NOT NULL dates stay NOT NULL: zero dates land as -infinity (target.zero_dates)
    ("dt", "timestamp(3) without time zone", True),
    ("ts", "timestamp(0) with time zone", True),
    ("t", "interval", True),
    ("od", "date", False),  # a nullable column's zero date is NULL
    ("amount", "numeric(12,2)", True),
    ("flag", "smallint", True),
]
# (code, n, d, dt, ts, od) of each row after the load and the stream: zero and partly zero dates in NOT NULL columns
# as -infinity, in the nullable one as NULL
SHAPES_ROWS = [
    ("ab", 1, "-infinity", "-infinity", "2026-01-02 00:00:01", None),
    ("abc", 1, "-infinity", "-infinity", "-infinity", None),
    ("abd", 2, "-infinity", "-infinity", "-infinity", None),
    ("abe", 2, "1999-12-31", "1999-12-31 23:59:59.5", "2000-01-01 00:00:00", "1999-12-31"),
]
GOLDEN_DDL = {  # the golden table's columns are all NULL; the types every MySQL type lands as
    "id": "integer", "tags": "text", "rating": "text", "f": "real", "d": "double precision",
    "d0": "numeric(10,0)", "d6": "numeric(20,6)", "d30": "numeric(65,30)", "t": "interval", "dd": "date",
    "dt": "timestamp(6) without time zone", "ts": "timestamp(6) with time zone", "j": "text",
    "l1": "character varying(20)", "vb": "bytea", "bl": "bytea", "b1": "bigint", "b8": "bigint",
    "b64": "numeric(20,0)", "y": "smallint", "ti": "smallint", "ub": "numeric(20,0)", "tb": "smallint",
    "g": "geometry", "pt": "geometry", "ls": "geometry", "pg": "geometry", "mpt": "geometry",
    "mls": "geometry", "mpg": "geometry", "gc": "geometry", "zi": "bigint", "zb": "numeric(20,0)",
    "zd": "numeric(10,2)", "zf": "double precision", "bn": "bytea", "nt": "character varying(40)",
    "jn": "text", "u": "uuid", "i4": "inet", "i6": "inet",
}  # fmt: skip

GEO = ("g", "pt", "ls", "pg", "mpt", "mls", "mpg", "gc")
ROWS = [
    dict(
        id=1,
        tags="Größe,Trailers,a b",
        rating="Ünrated",
        f=0.1,
        d=1e308,
        d0=-9999999999,
        d6="-0.000001",
        d30="0.000000000000000000000000000001",
        t="-838:59:59.000000",
        dd="0000-00-00",
        dt="0000-00-00 00:00:00",
        ts="0000-00-00 00:00:00",
        j='{"k": "\\u00e9\\u4e2d", "n": 1.0e2, "a": [1, 2.5, -0], "z": null, "b": true}',
        l1="café ñ",
        vb=b"\x00\xff",
        bl=b"",
        b1=1,
        b8=128,
        b64=2**64 - 1,
        y=0,
        ti=-128,
        ub=2**64 - 1,
        tb=1,
        g=("POINT(0 0)", 0),
        pt=("POINT(1.5 -2)", 4326),
        ls=("LINESTRING(0 0,1 1,2 0)", 0),
        pg=("POLYGON((0 0,4 0,4 4,0 4,0 0),(1 1,2 1,2 2,1 1))", 3857),
        mpt=("MULTIPOINT(1 1,2 2)", 0),
        mls=("MULTILINESTRING((0 0,1 1),(2 2,3 3))", 0),
        mpg=("MULTIPOLYGON(((0 0,1 0,1 1,0 0)))", 4326),
        gc=("GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))", 0),
        zi=4294967295,  # ZEROFILL: the column's text is "04294967295"
        zb=2**64 - 1,
        zd="12.50",
        zf=2.25,
        bn=bytes.fromhex("651a00000000000000000000000074"),  # BINARY(16) pads with a zero byte; the binlog drops it
        nt="nul\x00inside\x00",  # PostgreSQL text cannot hold NUL: U+FFFD in the target (target.text_nul)
        jn='{"k": "a\\u0000b", "literal": "\\\\u0000"}',  # a NUL escape, and a backslash then "u0000"
        u="123E4567-E89B-12D3-A456-426655440000",  # MariaDB's UUID, INET4, INET6: text as MariaDB prints it
        i4="255.255.255.255",
        i6="::ffff:1.2.3.4",  # Python's ipaddress prints ::ffff:102:304
    ),
    dict(
        id=2,
        tags="",
        rating="with space",
        f=-3.4028235e38,
        d=5e-324,
        d0=0,
        d6="99999999999999.999999",
        d30="-99999999999999999999999999999999999.999999999999999999999999999999",
        t="00:00:00.000001",
        dd="2024-00-10",
        dt="9999-12-31 23:59:59.999999",
        ts="1970-01-01 00:00:01",
        j="[]",
        l1="",
        vb=b"",
        bl=b"\x00",
        b1=0,
        b8=255,
        b64=0,
        y=1901,
        ti=127,
        ub=0,
        tb=0,
        g=("LINESTRING(-1.25 3.5,1e10 -1e-10)", 4326),
        pt=("POINT(-180 90)", 4326),
        ls=("LINESTRING(0.1 0.2,0.30000000000000004 5e-324)", 0),
        pg=("POLYGON((0 0,1 0,1 1,0 0))", 0),
        mpt=("MULTIPOINT(0 0)", 4326),
        mls=("MULTILINESTRING((1 2,3 4))", 0),
        mpg=("MULTIPOLYGON(((0 0,2 0,2 2,0 0)),((5 5,6 5,6 6,5 5)))", 0),
        gc=("GEOMETRYCOLLECTION EMPTY", 0),
        zi=0,
        zb=0,
        zd="0.00",
        zf=0,
        bn=bytes(16),  # all zero: the binlog hands over b""
        nt="",
        jn="[]",
        u="00000000-0000-0000-0000-000000000000",  # all zero: the binlog hands over ''
        i4="0.0.0.0",
        i6="::",
    ),
    dict(id=3),  # every column NULL
    dict(
        id=4,
        tags="ÜBER MÄ,Deleted Scenes",
        rating=3,
        f=16777217,
        d=0.30000000000000004,
        d0=9999999999,
        d6="0",
        d30="0",
        t="838:59:59.999999",
        dd="1000-01-01",
        dt="1000-01-01 00:00:00",
        ts="2038-01-19 03:14:07.999999",
        j='{"": "", "nested": {"b": [{"c": "\\"quoted\\""}]}, "e": 1e-7}',
        l1="ÿ",
        vb=b"\x00",
        bl=bytes(range(256)),
        b1=None,
        b8=1,
        b64=2**63,
        y=2155,
        ti=0,
        ub=2**63,
        tb=-1,
        g=("POLYGON((0 0,1 0,1 1,0 0))", 4326),
        pt=("POINT(0 0)", 0),
        ls=None,
        pg=None,
        mpt=None,
        mls=None,
        mpg=None,
        gc=("GEOMETRYCOLLECTION(MULTIPOINT(1 1,2 2),POLYGON((0 0,1 0,1 1,0 0)))", 4326),
        zi=7,
        zb=2**63,
        zd="99999999.99",  # ZEROFILL implies UNSIGNED
        zf=1e-300,
        bn=b"\xff" * 16,
        nt="\x00",
        jn='"\\u0000"',
        u="550e8400-e29b-41d4-a716-446655440000",  # trailing zero bytes: the binlog drops them
        i4="10.0.0.0",
        i6="::1.2.3.4",
    ),
    dict(id=5, dd="0099-03-04", dt="0099-03-04 05:06:07.000008"),  # before 1000: stored, if unsupported
]


def _connect():
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")  # zero dates, as legacy schemas hold them
        cur.execute("SET SESSION time_zone = '+00:00'")
    return conn


def _insert(cur, row: dict) -> None:
    names, values = [], []
    for name, value in row.items():
        names.append(quote(name))
        if name in GEO and value is not None:
            values.append(f"ST_GeomFromText(%s, {int(value[1])})")
            row = {**row, name: value[0]}
        elif name in ("b1", "b8", "b64") and value is not None:
            values.append("CAST(%s AS UNSIGNED)")
        else:
            values.append("%s")
    cur.execute(f"INSERT INTO golden ({', '.join(names)}) VALUES ({', '.join(values)})", [row[n] for n in row])


@pytest.fixture(scope="module")
def loaded(stack, tmp_path_factory):
    """The table written, loaded in full, then changed so the stream carries the same awkward values."""
    admin = demo.connect(os.environ["SEAM_MYSQL_URL"], None)
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        cur.execute(f"CREATE DATABASE {DB}")
    admin.close()
    conn = _connect()
    with conn.cursor() as cur:
        cur.execute(TABLE)
        cur.execute(SHAPES)
        cur.execute("INSERT INTO shapes VALUES ('ab', 1, 'x', NULL, '2026-01-02', '2026-01-02 03:04:05.678', "
                    "'2026-01-02 00:00:01', '-01:00:00', '2026-01-02', 1.50, 1), ('abc', 1, '', 'n', '0000-00-00', "
                    "'0000-00-00 00:00:00', '0000-00-00 00:00:00', '00:00:00', '0000-00-00', 0, 0)")  # fmt: skip
        start = source_head(conn)
        for row in ROWS:
            _insert(cur, row)
    conn.commit()
    tables = [
        {"name": f"{DB}.golden", "key": ["id"], "sync": "stream"},
        {"name": f"{DB}.shapes", "key": ["n", "code"], "sync": "stream"},
    ]
    path = pipeline_file(tmp_path_factory, "golden", tables)
    load = run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{DB}.golden", f"{DB}.shapes"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert load.returncode == 0, load.stdout + load.stderr
    with conn.cursor() as cur:  # the stream: every awkward value again, as inserts and as updates of other rows
        for row in ROWS:
            _insert(cur, {**row, "id": row["id"] + 100})
        cur.execute(
            "UPDATE golden a JOIN golden b ON b.id = a.id % 4 + 1 AND a.id <= 4 SET "
            + ", ".join(f"a.{quote(c)} = b.{quote(c)}" for c in ROWS[0] if c != "id")
        )
        cur.execute("UPDATE golden SET rating = 2, tags = 'a b,Commentaries' WHERE id = 103")  # ENUM by index
        cur.execute("DELETE FROM golden WHERE id = 102")
        cur.execute(
            "UPDATE shapes SET d = '0000-00-00', dt = '2024-00-10 00:00:00', od = '2024-05-00' WHERE code = 'ab'"
        )
        cur.execute("INSERT INTO shapes VALUES ('abd', 2, 'y', NULL, '0000-00-00', '2024-00-10', '0000-00-00 00:00:00', "
                    "'838:59:59', NULL, 2, 0), ('abe', 2, 'z', NULL, '1999-12-31', '1999-12-31 23:59:59.5', DEFAULT, "
                    "'00:00:01', '1999-12-31', 3, 1)")  # fmt: skip
    conn.commit()
    conn.close()
    pipeline = load_pipeline(path)
    stream_once(pipeline)
    return pipeline, path, start


def _source_schema(pipeline):
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs())
    try:
        return read_schema(conn, DB, "golden")
    finally:
        conn.close()


def _by_driver(pipeline, schema) -> dict:
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs(utc=True))
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(
            f"SELECT {', '.join(codec(c).read_mysql(c, quote(c.name)) + ' AS ' + quote(c.name) for c in schema.columns)} "
            f"FROM {DB}.golden"
        )
        rows = cur.fetchall()
    conn.close()
    return {r["id"]: {c.name: record_value(c, r[c.name]) for c in schema.columns} for r in rows}


def _by_snapshot(pipeline, schema) -> dict:
    """What the full load's Spark tasks publish: the chunk's SELECT, each row's JSON rendered by the task (then
    JSON columns are put in canonical key order, as ``full_load`` does). The compiled renderer and the Python one
    must give the same bytes, key and image."""
    rows = row_json.RowJson.of(schema, ("id",))
    whole = Chunk(0, None, None)
    read = ChunkRead(0, chunk_sql(schema, ChunkPlan(None, (whole,)), whole, rows), rows, None, schema)
    rendered = [pair for _, _, pairs in read_chunk(pipeline.source, read) for pair in pairs]
    conn = MySQLdb.connect(**pipeline.source.pymysql_kwargs())
    conn.converter = {}
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(read.sql)
        raw = list(cur.fetchall())
    conn.close()
    assert row_json.render_python(rows, raw) == rendered and len(rendered) == len(raw) > 0
    out = {}
    for image, key in rendered:
        envelope = b'{"after":' + image + b"}"
        after = json.loads(_canonical_json_values(envelope, canonical_json_columns(schema)))["after"]
        assert json.loads(key) == {"id": after["id"]}
        out[after["id"]] = after
    return out


def _by_binlog(pipeline, schema, start: Position) -> dict:
    """The last image of every row in the binlog since the table was created, decoded as the stream does."""
    reader = BinlogReader(pipeline.source, start, {DB}, tables={(DB, "golden")})
    rows: dict = {}
    try:
        for item in reader:
            for change in item.changes if isinstance(item, Transaction) else ():
                if change.after is None:
                    rows.pop(change.before["id"], None)
                else:
                    rows[change.after["id"]] = {c.name: record_value(c, change.after[c.name]) for c in schema.columns}
    finally:
        reader.close()
    return rows


def _by_target(pipeline, schema) -> dict:
    names = ", ".join(qi(c.name) for c in schema.columns)
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        rows = conn.execute(f"SELECT {names} FROM {qi(DB)}.golden").fetchall()
    return {r[0]: {c.name: normalize_target(c, v) for c, v in zip(schema.columns, r)} for r in rows}


def _as_target(row: dict, schema) -> dict:
    """A source row as the target holds it: a NUL in text and JSON strings is U+FFFD (target.text_nul). On
    MariaDB a JSON column is text as written (the escape \u0000 is six characters, kept)."""

    def no_nul(doc):
        if isinstance(doc, str):
            return doc.replace("\x00", "\ufffd")
        if isinstance(doc, dict):
            return {no_nul(k): no_nul(v) for k, v in doc.items()}
        return [no_nul(v) for v in doc] if isinstance(doc, list) else doc

    out = {**row, "nt": no_nul(row["nt"])}
    if row["jn"] is not None and schema.column("jn").data_type == "json":
        out["jn"] = json.dumps(no_nul(json.loads(row["jn"])), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return out


def test_every_path_gives_the_same_value(loaded):
    pipeline, _, start = loaded
    schema = _source_schema(pipeline)
    paths = {
        "driver": _by_driver(pipeline, schema),
        "snapshot": _by_snapshot(pipeline, schema),
        "binlog": _by_binlog(pipeline, schema, start),
        "target": _by_target(pipeline, schema),
    }
    reference = paths["driver"]
    assert sorted(reference) == [1, 2, 3, 4, 5, 101, 103, 104, 105], sorted(reference)
    for path, rows in paths.items():
        assert sorted(rows) == sorted(reference), (path, sorted(rows))
        for key, row in reference.items():
            expected = _as_target(row, schema) if path == "target" else row
            different = {c: (expected[c], rows[key][c]) for c in row if rows[key][c] != expected[c]}
            assert not different, f"{path} differs from a SELECT in row {key}: {different}"
    assert paths["target"][101]["nt"] == "nul\ufffdinside\ufffd" and paths["target"][104]["nt"] == "\ufffd"
    row = reference[101]  # row 1's values, streamed: as the README documents them
    assert row["u"] == "123e4567-e89b-12d3-a456-426655440000" and row["i6"] == "::ffff:1.2.3.4"
    assert row["tags"] == "Trailers,a b,Größe" and row["rating"] == "Ünrated" and row["f"] == 0.10000000149011612
    assert row["dd"] is None and row["ts"] is None and row["t"] == "-838:59:59.000000" and row["y"] == 0
    # MariaDB's JSON is a LONGTEXT with a json_valid check: its text as stored (MySQL's JSON: canonical text)
    assert (
        row["j"] == ROWS[0]["j"]
        if schema.column("j").data_type == "longtext"
        else row["j"] == '{"a":[1,2.5,0],"b":true,"k":"é中","n":100.0,"z":null}'
    ), row["j"]
    assert row["pt"] == {"wkb": "AQEAAAAAAAAAAAD4PwAAAAAAAADA", "srid": 4326}
    assert row["ub"] == "18446744073709551615" and row["b64"] == 2**64 - 1 and row["d6"] == "-0.000001"
    assert row["zi"] == 4294967295 and row["zd"] == "12.50" and row["zf"] == 2.25
    assert (
        row["bn"] == "ZRoAAAAAAAAAAAAAAAB0AA==" and reference[1]["bn"] == "AAAAAAAAAAAAAAAAAAAAAA=="
    )  # row 2's, streamed
    assert reference[103]["rating"] == "PG-13" and reference[103]["tags"] == "Commentaries,a b"
    assert reference[104]["rating"] == "Ünrated" and reference[104]["f"] == 16777216.0


def test_the_checksum_text_is_the_same_on_both_sides(loaded):
    pipeline, path, _ = loaded
    done = run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "validate", f"{DB}.golden"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr  # also creates the printers in the target
    schema = _source_schema(pipeline)
    state = pipeline.target.state_schema
    conn = pymysql.connect(**pipeline.source.pymysql_kwargs(utc=True))
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT x.id, {', '.join(canonical.mysql_text(c, pipeline.target.nul_replacement) for c in schema.columns)} FROM {DB}.golden x"
        )
        source = {r[0]: r[1:] for r in cur.fetchall()}
    conn.close()
    with psycopg.connect(**pipeline.target.conninfo()) as pg:
        target = {
            r[0]: r[1:]
            for r in pg.execute(
                f"SELECT x.id, {', '.join(canonical.pg_text(c, state) for c in schema.columns)} FROM {qi(DB)}.golden x"
            )
        }
    assert source.keys() == target.keys()
    for key in source:
        different = {c.name: (s, t) for c, s, t in zip(schema.columns, source[key], target[key]) if s != t}
        assert not different, f"row {key}: {different}"
    assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "golden") is None


def test_spatial_columns_are_postgis_geometry_with_their_srid(loaded):
    pipeline, _, _ = loaded
    with psycopg.connect(**pipeline.target.conninfo()) as pg:
        kinds = dict(
            pg.execute(
                "SELECT column_name, udt_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = 'golden'",
                (DB,),
            ).fetchall()
        )
        point = pg.execute(
            f"SELECT ST_AsText(pt), ST_SRID(pt), ST_AsText(pg), ST_SRID(pg) FROM {qi(DB)}.golden WHERE id = 101"
        ).fetchone()
    assert all(kinds[c] == "geometry" for c in GEO), kinds
    assert point == ("POINT(1.5 -2)", 4326, "POLYGON((0 0,4 0,4 4,0 4,0 0),(1 1,2 1,2 2,1 1))", 3857), point


def test_without_postgis_spatial_columns_are_mysqls_stored_value(loaded, tmp_path_factory):
    """A target whose user may not create extensions: spatial columns land as bytea holding MySQL's stored value
    (SRID, then WKB), and the load, the stream and validation stay exact."""
    pipeline, _, _ = loaded
    import secrets

    password = secrets.token_hex(12)
    os.environ["SEAM_TEST_NOGIS_PASSWORD"] = password
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as pg:
        pg.execute("DROP DATABASE IF EXISTS nogis WITH (FORCE)")
        pg.execute("DROP ROLE IF EXISTS seam_nogis")
        pg.execute(
            psycopg.sql.SQL("CREATE ROLE seam_nogis LOGIN NOSUPERUSER PASSWORD {}").format(
                psycopg.sql.Literal(password)
            )
        )
        pg.execute("CREATE DATABASE nogis OWNER seam_nogis")
    target = {
        "host": pipeline.target.host,
        "port": pipeline.target.port,
        "database": "nogis",
        "user": "seam_nogis",
        "password": "${SEAM_TEST_NOGIS_PASSWORD}",
        "state_schema": "seam",
    }
    path = pipeline_file(
        tmp_path_factory, "golden_nogis", [{"name": f"{DB}.golden", "key": ["id"], "sync": "stream"}], target=target
    )
    nogis = load_pipeline(path)
    load = run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{DB}.golden"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert load.returncode == 0, load.stdout + load.stderr
    conn = _connect()
    with conn.cursor() as cur:
        cur.execute("UPDATE golden SET pt = ST_GeomFromText('POINT(7 8)', 4326), gc = g WHERE id = 1")
    conn.commit()
    conn.close()
    stream_once(nogis)
    with psycopg.connect(**nogis.target.conninfo()) as pg:
        kinds = dict(
            pg.execute(
                "SELECT column_name, udt_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = 'golden'",
                (DB,),
            ).fetchall()
        )
        assert pg.execute("SELECT to_regtype('geometry')").fetchone()[0] is None
    assert all(kinds[c] == "bytea" for c in GEO), kinds
    done = run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "validate", f"{DB}.golden"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert compare(nogis.source.pymysql_kwargs(), nogis.target.conninfo(), DB, "golden") is None
    schema = _source_schema(nogis)
    expected = {key: _as_target(row, schema) for key, row in _by_driver(nogis, schema).items()}
    assert _by_target(nogis, schema) == expected


def _target_ddl(pipeline, table: str) -> tuple[list[tuple], list[str], list[tuple]]:
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        oid = conn.execute("SELECT to_regclass(%s)::oid", (f"{qi(DB)}.{qi(table)}",)).fetchone()[0]
        columns = conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute WHERE attrelid = %s "
            "AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (oid,),
        ).fetchall()
        keys = [
            r[0]
            for r in conn.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s", (oid,))
        ]
        rows = (
            conn.execute(
                "SELECT code, n, d::text, dt::text, (ts AT TIME ZONE 'UTC')::text, od::text "
                f"FROM {qi(DB)}.{qi(table)} ORDER BY n, code"
            ).fetchall()
            if table == "shapes"
            else []
        )
    return columns, keys, rows


def test_the_targets_ddl_mirrors_the_source(loaded):
    """Golden: each column's PostgreSQL type, NOT NULL and order, and the primary key in the source's key order."""
    pipeline, path, _ = loaded
    columns, keys, rows = _target_ddl(pipeline, "shapes")
    assert columns == SHAPES_DDL
    assert keys == ["PRIMARY KEY (n, code)"]
    # CHAR(3) 'ab' comes back as MySQL returns it, without blank padding
    assert rows == SHAPES_ROWS
    assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "shapes") is None
    done = run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "validate", f"{DB}.shapes"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0 and "EQUAL" in done.stdout, done.stdout + done.stderr
    columns, keys, _ = _target_ddl(pipeline, "golden")
    assert [(name, kind) for name, kind, _ in columns] == list(GOLDEN_DDL.items())
    assert keys == ["PRIMARY KEY (id)"]
