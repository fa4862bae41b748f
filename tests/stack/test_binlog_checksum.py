"""A DBA changes ``binlog_checksum`` (a server-wide setting; the server starts a new binlog file): the binlog
then holds files with checksums and files without. The change reader reads each file as it was written,
whichever setting is in force when it connects: the rows, the DDL's text and the next file's name after a
rotation (a misread checksum would cut four bytes off each) come out whole."""

from __future__ import annotations

import os

import pytest

from seam.core.position import Position
from seam.source.binlog import BinlogReader, Statement, Transaction
from seam_dev import demo

pytestmark = [pytest.mark.stack, pytest.mark.alone]  # binlog_checksum is server-wide

DB = "checksum_test"
DDL = f"CREATE TABLE `{DB}`.`a_table_created_while_binlog_checksum_is_none` (id INT PRIMARY KEY)"


def _head(cur) -> Position:
    cur.execute("SHOW MASTER STATUS")
    return Position.through(*cur.fetchone()[:2])


def _read(pipeline, start: Position, end: Position) -> tuple[list, list[str]]:
    changes, statements = [], []
    reader = BinlogReader(pipeline.source, start, {DB}, end=end)
    try:
        for item in reader:
            if isinstance(item, Transaction):
                assert not item.errors, item.errors
                changes.extend((item.commit.file, c.op, c.before, c.after) for c in item.changes)
            elif isinstance(item, Statement):
                statements.append(item.query)
    finally:
        reader.close()
    return changes, statements


def test_files_with_and_without_checksums_are_each_read_as_written(stack, pipeline):
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SELECT @@global.binlog_checksum")
        was = cur.fetchone()[0]
        try:
            cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
            cur.execute(f"CREATE DATABASE `{DB}`")
            cur.execute(f"CREATE TABLE `{DB}`.t (id INT PRIMARY KEY, v VARCHAR(40))")
            cur.execute("SET GLOBAL binlog_checksum = NONE")
            start = _head(cur)
            cur.execute(f"INSERT INTO `{DB}`.t VALUES (1, 'no checksum'), (2, 'no checksum either')")
            cur.execute(f"UPDATE `{DB}`.t SET v = 'changed' WHERE id = 2")
            cur.execute(DDL)
            cur.execute("SET GLOBAL binlog_checksum = CRC32")
            crc_file = _head(cur).file
            cur.execute(f"INSERT INTO `{DB}`.t VALUES (3, 'with a checksum')")
            cur.execute("SET GLOBAL binlog_checksum = NONE")
            last_file = _head(cur).file
            cur.execute(f"DELETE FROM `{DB}`.t WHERE id = 1")
            end = _head(cur)
            expected = [
                (start.file, "c", None, {"id": 1, "v": "no checksum"}),
                (start.file, "c", None, {"id": 2, "v": "no checksum either"}),
                (start.file, "u", {"id": 2, "v": "no checksum either"}, {"id": 2, "v": "changed"}),
                (crc_file, "c", None, {"id": 3, "v": "with a checksum"}),
                (last_file, "d", {"id": 1, "v": "no checksum"}, None),
            ]
            assert len({start.file, crc_file, last_file}) == 3  # each change of the setting began a file
            for setting in ("NONE", "CRC32"):  # in force when the reader connects
                cur.execute(f"SET GLOBAL binlog_checksum = {setting}")
                changes, statements = _read(pipeline, start, end)
                assert changes == expected, setting
                assert statements == [DDL], setting
        finally:
            cur.execute(f"SET GLOBAL binlog_checksum = {was}")
    conn.close()
