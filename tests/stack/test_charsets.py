"""Text in the source's other character sets, through the change stream: each character set Seam decodes is
decoded as the server converts it (every single byte; samples of the multi-byte ones), ENUM and SET member
names too (the binlog library turns a name that is not UTF-8 into ""), and a table in a character set Seam
does not decode exactly stops alone, naming it. Checked with the independent comparer."""

from __future__ import annotations

import os

import psycopg
import pytest

from seam.config import load_pipeline
from seam.source.row_values import _CODECS
from seam_dev import demo
from tests.support.commands import seam_command
from tests.support.independent import compare
from tests.support.pipelines import pipeline_file, stream_once
from tests.support.source import fresh_database

DB = "charsets_test"
MULTI_BYTE = {"euckr", "gb2312", "gbk", "sjis", "ujis", "big5", "cp932", "eucjpms"}
pytestmark = pytest.mark.stack


def _server_charsets(cur) -> dict[str, str]:
    """MySQL character set -> python-mysql-replication's name for it (what the stream's columns carry)."""
    from pymysqlreplication.constants import CHARSET

    cur.execute("SELECT CHARACTER_SET_NAME, ID FROM information_schema.COLLATIONS WHERE IS_DEFAULT = 'Yes'")
    return {name: CHARSET.charset_by_id(str(cid), "mariadb").encoding for name, cid in cur.fetchall()}


def _samples(charset: str) -> list[bytes]:
    if charset in ("ucs2", "utf16", "utf16le"):
        return [bytes([a, b]) for a in range(0, 256, 3) for b in range(0, 256, 5)]
    if charset == "utf32":
        return [bytes([0, c, a, b]) for c in (0, 1) for a in range(0, 256, 9) for b in range(0, 256, 9)]
    if charset in ("utf8mb3", "utf8mb4"):
        return [bytes([a, b]) for a in range(0xC2, 0xE0) for b in range(0x80, 0xC0)]
    one = [bytes([b]) for b in range(256)]
    return one + (
        [bytes([a, b]) for a in range(0x81, 0xFF) for b in range(0x40, 0xFF)] if charset in MULTI_BYTE else []
    )


def test_every_character_set_seam_decodes_is_decoded_as_the_server_converts_it(stack):
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    checked, different = 0, []
    try:
        with conn.cursor() as cur:
            for charset, name in sorted(_server_charsets(cur).items()):
                encoding = _CODECS.get(name)
                if encoding is None:
                    continue
                samples = _samples(charset)
                for i in range(0, len(samples), 1000):
                    part = samples[i : i + 1000]
                    cur.execute(
                        "SELECT "
                        + ", ".join(
                            f"HEX(CONVERT(CONVERT(UNHEX('{s.hex()}') USING {charset}) USING utf8mb4))" for s in part
                        )
                    )
                    for raw, converted in zip(part, cur.fetchone()):
                        try:
                            ours = raw.decode(encoding)
                        except UnicodeDecodeError:
                            continue  # refused: that table stops, loudly
                        checked += 1
                        if converted is None or ours != bytes.fromhex(converted).decode():
                            different.append((charset, raw.hex(), ours, converted))
    finally:
        conn.close()
    assert checked > 20_000 and not different, different[:10]


COLUMNS = (
    "id INT PRIMARY KEY, l1 VARCHAR(20) CHARACTER SET latin1, u16 VARCHAR(20) CHARACTER SET utf16, "
    "u32 TEXT CHARACTER SET utf32, uc2 CHAR(5) CHARACTER SET ucs2, ru VARCHAR(20) CHARACTER SET cp1251, "
    "kr VARCHAR(20) CHARACTER SET euckr, cn VARCHAR(20) CHARACTER SET gbk, "
    "e1 ENUM('é', 'x') CHARACTER SET latin1, s1 SET('ä', 'ö', 'o') CHARACTER SET latin1, "
    "e16 ENUM('日本', 'ß') CHARACTER SET utf16, s16 SET('日', '本') CHARACTER SET utf16"
)


def _row(i: int) -> str:
    return (
        f"({i}, CONVERT(X'{'81c3a9' if i % 2 else 'ff'}' USING latin1), '日本語😀{i}', '😀x{i}', 'ab{i % 10}', "
        f"'Привет{i}', '한국{i}', '中文{i}', '{'éx'[i % 2]}', '{['ä,ö', '', 'o,ä'][i % 3]}', "
        f"'{['日本', 'ß'][i % 2]}', '{['日,本', '本', ''][i % 3]}')"
    )


def test_text_in_other_character_sets_streams_exactly_and_one_seam_cannot_decode_stops_alone(stack, tmp_path_factory):
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.texts ({COLUMNS})",
        f"INSERT INTO {DB}.texts VALUES {', '.join(_row(i) for i in range(1, 40))}",
        f"CREATE TABLE {DB}.greek (id INT PRIMARY KEY, g VARCHAR(20) CHARACTER SET greek)",
        f"INSERT INTO {DB}.greek VALUES (1, 'Ελλάδα')",
    )
    path = pipeline_file(
        tmp_path_factory, "charsets", [{"name": f"{DB}.{t}", "key": ["id"]} for t in ("texts", "greek")]
    )
    pipeline = load_pipeline(path)
    loaded = seam_command(path, "load", "full", f"{DB}.texts", f"{DB}.greek")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    stream_once(pipeline)
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO texts VALUES {', '.join(_row(i) for i in range(100, 140))}")
        cur.execute("UPDATE texts SET u16 = '𝄞', e1 = 'é', s1 = 'ö', e16 = '日本', s16 = '日' WHERE id % 3 = 0")
        cur.execute("UPDATE texts SET l1 = CONVERT(X'8d908f9d' USING latin1) WHERE id % 5 = 0")
        cur.execute("DELETE FROM texts WHERE id % 7 = 0")
        cur.execute("UPDATE greek SET g = 'Αθήνα' WHERE id = 1")
    conn.close()
    stream_once(pipeline)
    assert compare(pipeline.source.pymysql_kwargs(), pipeline.target.conninfo(), DB, "texts") is None
    with psycopg.connect(**pipeline.target.conninfo()) as target:
        stopped = target.execute(
            f"SELECT tbl, stopped FROM {pipeline.target.state_schema}.positions WHERE db = %s AND stopped IS NOT NULL",
            (DB,),
        ).fetchall()
    assert [t for t, _ in stopped] == ["greek"], stopped
    assert "character set greek, which Seam does not decode exactly" in stopped[0][1], stopped
