"""The test source: a database of a test's own, created afresh."""

from __future__ import annotations

import os

from seam_dev import demo


def numbered_table(db: str, table: str, rows: int) -> None:
    """``db`` afresh with one table of ``rows`` numbered rows (id, amount, note), filled from its sequence
    tables 200,000 rows at a time."""
    fresh_database(
        db,
        f"CREATE TABLE `{db}`.`{table}` (id INT PRIMARY KEY, amount DECIMAL(18,2), note VARCHAR(100))",
        *(
            f"INSERT INTO `{db}`.`{table}` SELECT seq, seq + 0.5, REPEAT('x', 60) "
            f"FROM `{db}`.seq_{lo}_to_{min(lo + 199_999, rows)}"
            for lo in range(1, rows + 1, 200_000)
        ),
    )


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
