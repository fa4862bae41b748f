"""The source's binlog head and the databases it leaves out: ``SHOW BINARY LOG STATUS`` (MySQL 8.2+, which removed
``SHOW MASTER STATUS`` in 8.4) or ``SHOW MASTER STATUS`` (MariaDB, MySQL 8.0), whose first four columns are the same:
file, position, ``Binlog_Do_DB``, ``Binlog_Ignore_DB``.

A user without the privilege to read them gets one line naming the grant (``BinlogAccessError``).

Delivery guarantee: none (reading only).
"""

from __future__ import annotations

from seam.core.errors import SourceError

# 1227: "Access denied; you need (at least one of) the ... privilege(s) for this operation"
ACCESS_DENIED = 1227
GRANT = "GRANT REPLICATION CLIENT, REPLICATION SLAVE ON *.* TO the Seam user (on MariaDB: BINLOG MONITOR, REPLICATION SLAVE)"


class BinlogAccessError(SourceError):
    """The Seam user may not read the binlog's head, list or events: a grant is missing (not transient)."""

    retry = False


def _binlog_query(cur, *statements: str) -> None:
    """Run the first of ``statements`` the server knows (a syntax error: the next); a missing privilege as
    ``BinlogAccessError``."""
    for i, statement in enumerate(statements):
        try:
            cur.execute(statement)
            return
        except Exception as exc:  # PyMySQL's or MySQLdb's
            if exc.args and exc.args[0] == ACCESS_DENIED:
                message = f"the Seam user may not read the source's binlog ({exc.args[-1]}): {GRANT}"
                raise BinlogAccessError(message) from None
            if i == len(statements) - 1:
                raise


def binlog_status(conn) -> tuple | None:
    """The binlog's head and filters: file, position, Binlog_Do_DB, Binlog_Ignore_DB (``SHOW BINARY LOG STATUS``
    on MySQL 8.2+, which removed ``SHOW MASTER STATUS`` in 8.4; the old statement elsewhere; the same columns
    first); None when the binlog is off."""
    with conn.cursor() as cur:
        _binlog_query(cur, "SHOW BINARY LOG STATUS", "SHOW MASTER STATUS")  # the latter: MariaDB, MySQL < 8.2
        return cur.fetchone()


def binlog_sizes(conn) -> dict[str, int]:
    """The binlog's files and their sizes, oldest first."""
    with conn.cursor() as cur:
        _binlog_query(cur, "SHOW BINARY LOGS")
        return {r[0]: int(r[1]) for r in cur.fetchall()}


def binlog_files(conn) -> list[str]:
    return list(binlog_sizes(conn))


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
