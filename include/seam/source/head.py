"""The source's binlog head and the databases it leaves out: ``SHOW BINARY LOG STATUS`` (MySQL 8.2+, which removed
``SHOW MASTER STATUS`` in 8.4) or ``SHOW MASTER STATUS`` (MariaDB, MySQL 8.0), whose first four columns are the same:
file, position, ``Binlog_Do_DB``, ``Binlog_Ignore_DB``.

Delivery guarantee: none (reading only).
"""

from __future__ import annotations


def binlog_status(conn) -> tuple | None:
    """The binlog's head and filters: file, position, Binlog_Do_DB, Binlog_Ignore_DB (``SHOW BINARY LOG STATUS``
    on MySQL 8.2+, which removed ``SHOW MASTER STATUS`` in 8.4; the old statement elsewhere; the same columns
    first); None when the binlog is off."""
    with conn.cursor() as cur:
        try:
            cur.execute("SHOW BINARY LOG STATUS")
        except Exception:  # noqa: BLE001 - MariaDB and MySQL before 8.2: a syntax error
            cur.execute("SHOW MASTER STATUS")
        return cur.fetchone()


def unlogged(status: tuple | None, db: str) -> str | None:
    """Why a binlog of ``status`` (``binlog_status``) leaves out the changes of database ``db`` (``--binlog-do-db``
    or ``--binlog-ignore-db`` in the server's configuration: with ROW format they filter by the table's
    database), or None."""
    columns = tuple(status or ()) + ("", "", "", "")
    only = {n for n in str(columns[2] or "").split(",") if n}
    ignored = {n for n in str(columns[3] or "").split(",") if n}
    if only and db not in only:
        return f"the source logs only the changes of databases {', '.join(sorted(only))} (binlog-do-db), not of {db}"
    if db in ignored:
        return f"the source does not log the changes of database {db} (binlog-ignore-db)"
    return None
