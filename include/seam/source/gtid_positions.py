"""The GTID set executed through a binlog position: what a batch, a repair or a stream's start records so that
the table can be followed from another server after a failover (``seam.source.stream_servers``).

Delivery guarantee: none by itself (reads only); a wrong set would resume a failed-over stream at the wrong
place, so every answer is the server's own or built exactly from it (``_Recent``).
"""

from __future__ import annotations

import threading
import time

import pymysql

from seam.core.position import Position
from seam.source.binlog import gtids_between
from seam.source.gtid import GtidSet, gtids_enabled, is_mariadb
from seam.source.head import binlog_status


def head_gtids(conn):
    """The binlog's end and the GTID set executed through it, read together: (Position, GtidSet | None)."""
    row = binlog_status(conn)
    if row is None:
        return None, None
    head = Position.through(row[0], int(row[1]))
    if len(row) > 4:  # MySQL: Executed_Gtid_Set, empty with gtid_mode OFF
        return head, (GtidSet(row[4]) if row[4] else None)
    return head, gtids_at(conn, head)


def gtids_at(conn, position, source=None) -> GtidSet | None:
    """The GTID set executed through a binlog position of this server, or None (GTIDs off, or the
    position's binlog is gone). MariaDB computes it (BINLOG_GTID_POS, or from a recent answer: ``_Recent``);
    on MySQL it is the set at the binlog's end less the transactions logged after the position (read back
    with ``source``'s settings)."""
    if is_mariadb(conn):
        return _RECENT.gtids_at(conn, position, source)
    if not gtids_enabled(conn) or source is None:
        return None
    head, at_head = head_gtids(conn)
    if at_head is None:
        return None
    return at_head.without(gtids_between(source, position, head))


class _Recent:
    """MariaDB's BINLOG_GTID_POS reads the binlog file from its start up to the position: 0.1 s of the server's
    CPU 550 MB into a file, which every table of a load of many paid (300 tables: 30 CPU-seconds). The answers
    of the last minute are kept per server: the same position is answered at once; a later one in the same
    file from the nearest before it plus the GTIDs logged in between (``gtids_between``, with ``source``'s
    settings), when that range is a small part of what the server would read. A minute: a RESET MASTER or a
    server swapped behind one address starts numbering files again, and its answers must not outlive that
    for long (the server's id is in the key, too)."""

    KEEP_S = 60.0
    SMALL = 0.25  # of the position's offset: a range up to this is read here, a longer one by the server

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sets: dict[tuple, tuple[float, Position, GtidSet]] = {}  # (server, file, pos) -> (when, at, set)

    def gtids_at(self, conn, position: Position, source) -> GtidSet | None:
        with conn.cursor() as cur:
            cur.execute("SELECT @@server_id")
            server = (conn.host, conn.port, cur.fetchone()[0])
        now = time.monotonic()
        with self._lock:
            self._sets = {k: v for k, v in self._sets.items() if now - v[0] < self.KEEP_S}
            before = [
                (at, gtids)
                for (srv, _, _), (_, at, gtids) in self._sets.items()
                if srv == server and at.file == position.file and at.pos <= position.pos
            ]
        nearest = max(before, key=lambda b: b[0].pos, default=None)
        if nearest is not None and nearest[0].pos == position.pos:
            return GtidSet(str(nearest[1]))
        found = None
        if nearest is not None and source is not None and position.pos - nearest[0].pos < position.pos * self.SMALL:
            found = self._after(nearest[1], nearest[0], position, source)
        if found is None:
            with conn.cursor() as cur:
                cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (position.file, position.pos))
                text = cur.fetchone()[0]
            if text is None:
                return None
            found = GtidSet(text)
        with self._lock:
            self._sets[(server, position.file, position.pos)] = (now, position, GtidSet(str(found)))
        return found

    @staticmethod
    def _after(known: GtidSet, at: Position, position: Position, source) -> GtidSet | None:
        """``known`` (the set at ``at``) with the GTIDs logged up to ``position``; None when the account may not
        read the binlog (REPLICATION SLAVE, which a load does not need otherwise): the server answers then."""
        found = GtidSet(str(known))
        try:
            for gtid in gtids_between(source, at, position):
                found.add(gtid)
        except pymysql.MySQLError:
            return None
        return found


_RECENT = _Recent()
