"""The test source: a database of a test's own, created afresh."""

from __future__ import annotations

import os

from seam_dev import demo


def fresh_database(db: str, *statements: str) -> None:
    """Drop and create ``db`` on the test stack's MariaDB, then run ``statements`` (its sequence tables need
    the database named: `` `db`.seq_1_to_5000 ``)."""
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
            cur.execute(f"CREATE DATABASE `{db}`")
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


def in_one_transaction(db: str | None, *statements: str) -> None:
    """Run ``statements`` in ``db`` as one source transaction."""
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"], db, autocommit=False)
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
        conn.commit()
    finally:
        conn.close()
