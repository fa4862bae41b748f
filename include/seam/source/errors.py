"""Source errors by kind: a transient one (the connection lost, the server going away, a lock wait or a
deadlock, a query killed by a DBA) may not happen again when the same read is done again; any other is the
request's or the data's.

Delivery guarantee: none (classification only).
"""

from __future__ import annotations

import pymysql

# 1040 too many connections, 1053 server shutdown, 1205 lock wait timeout, 1213 deadlock, 1317 query
# interrupted, 1927 connection killed (MariaDB), 2003 can't connect, 2006 server gone away, 2013 lost
# connection during a query, 3024 max_execution_time exceeded (MySQL), 1969 max_statement_time (MariaDB)
_TRANSIENT = {1040, 1053, 1205, 1213, 1317, 1927, 1969, 2003, 2006, 2013, 3024}


def transient_source_error(exc: BaseException) -> bool:
    """Whether a source (MySQL/MariaDB) error may not happen again when the same read is retried."""
    if isinstance(exc, pymysql.err.InterfaceError):  # the connection was already closed
        return True
    return isinstance(exc, pymysql.err.MySQLError) and bool(exc.args) and exc.args[0] in _TRANSIENT
