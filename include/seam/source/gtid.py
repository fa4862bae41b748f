"""GTID sets: a binlog position that means the same on every server of a replication topology.

A position (file, pos) means something on one server only. The set of transactions executed through it
(MySQL's ``uuid:1-42,uuid:tag:1-3`` form, MariaDB's ``domain-server-seq`` list) means the same on each of
its replicas. Seam stores that set with every applied position (``seam.positions.gtids``) and the server
the position was read on (``server``). When the source is a different server later (a failover, or the
pipeline pointed at a replica), the change reader finds where each table's set ends in the new server's
binlog (``locate``), tells the sink (a REBASE message in the table's chain) and streams on from there.

Exact when the new server holds the same transactions in the same order as the old one, which is what
MariaDB's in-order replication and ``gtid_strict_mode`` give and what MySQL gives with
``replica_preserve_commit_order=ON`` (the default from 8.0.27). ``locate`` checks it: a transaction after
the found position that the set already holds, or a set with transactions the new server never executed
(lost in the failover), stops the stream with the remedy; a set the server has purged too.
MySQL's tagged GTIDs (8.3+) are not read by python-mysql-replication 1.0, so a source that uses them has
no set (positions stay per server).

Delivery guarantee: none of its own; the sets here decide where a stream resumes on another server.
"""

from __future__ import annotations

import re

from seam.core.errors import SourceError

_INTERVAL = re.compile(r"^(\d+)(?:-(\d+))?$")
_MARIADB = re.compile(r"^(\d+)-(\d+)-(\d+)$")


class GtidError(SourceError, ValueError):
    """A GTID set Seam cannot read or cannot stand for one position."""


class GtidSet:
    """An executed GTID set, MySQL's or MariaDB's (a set holds one flavour; empty holds none yet).

    MySQL: per source uuid (and tag), sorted disjoint inclusive intervals of transaction numbers.
    MariaDB: per replication domain, the last GTID (its server id and sequence number); in strict mode a
    domain's sequence numbers only grow, so a GTID is in the set when its sequence is at most the domain's.
    """

    def __init__(self, text: str | None = ""):
        self.mysql: dict[str, list[list[int]]] = {}
        self.mariadb: dict[int, tuple[int, int]] = {}
        self._text: str | None = None  # str() of the set, kept until it changes (read per published transaction)
        for part in (p.strip() for p in (text or "").replace("\n", "").split(",")):
            if not part:
                continue
            m = _MARIADB.match(part)
            if m:
                domain, server, seq = (int(g) for g in m.groups())
                if domain not in self.mariadb or self.mariadb[domain][1] < seq:
                    self.mariadb[domain] = (server, seq)
                continue
            self._parse_mysql(part)
        if self.mysql and self.mariadb:
            raise GtidError(f"{text!r} mixes MySQL and MariaDB GTIDs")

    def _parse_mysql(self, part: str) -> None:
        tokens = part.split(":")
        uuid, key = tokens[0].strip().lower(), tokens[0].strip().lower()
        if not re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", uuid) or len(tokens) < 2:
            raise GtidError(f"{part!r} is not a GTID set element (uuid:1-5 or domain-server-seq)")
        for token in (t.strip() for t in tokens[1:]):
            m = _INTERVAL.match(token)
            if m is None:
                if not re.fullmatch(r"[a-z_][a-z0-9_]{0,31}", token.lower()):
                    raise GtidError(f"{part!r}: {token!r} is neither an interval nor a tag")
                key = f"{uuid}:{token.lower()}"
                continue
            first, last = int(m.group(1)), int(m.group(2) or m.group(1))
            if first < 1 or last < first:
                raise GtidError(f"{part!r}: interval {token} is empty")
            self._add_range(key, first, last)

    @property
    def flavour(self) -> str | None:
        return "mysql" if self.mysql else "mariadb" if self.mariadb else None

    def _add_range(self, key: str, first: int, last: int) -> None:
        self._text = None
        merged, out = [first, last], []
        for lo, hi in self.mysql.get(key, []):
            if hi + 1 < merged[0] or lo > merged[1] + 1:
                out.append([lo, hi])
            else:
                merged = [min(lo, merged[0]), max(hi, merged[1])]
        out.append(merged)
        self.mysql[key] = sorted(out)

    @staticmethod
    def _split(gtid: str) -> tuple[str, int]:
        key, _, number = gtid.strip().lower().rpartition(":")
        if not key or not number.isdigit():
            raise GtidError(f"{gtid!r} is not a GTID")
        return key, int(number)

    def add(self, gtid: str) -> None:
        """Record one more executed transaction (as the binlog's GTID event names it)."""
        m = _MARIADB.match(gtid.strip())
        if m:
            if self.mysql:
                raise GtidError(f"MariaDB GTID {gtid} added to a MySQL set")
            domain, server, seq = (int(g) for g in m.groups())
            self.mariadb[domain] = (server, seq)
            self._text = None
            return
        if self.mariadb:
            raise GtidError(f"MySQL GTID {gtid} added to a MariaDB set")
        key, number = self._split(gtid)
        self._add_range(key, number, number)

    def __contains__(self, gtid: str) -> bool:
        m = _MARIADB.match(gtid.strip())
        if m:
            domain, seq = int(m.group(1)), int(m.group(3))
            return domain in self.mariadb and self.mariadb[domain][1] >= seq
        key, number = self._split(gtid)
        return any(lo <= number <= hi for lo, hi in self.mysql.get(key, []))

    def issubset(self, other: GtidSet) -> bool:
        if self.mariadb:
            return all(d in other.mariadb and other.mariadb[d][1] >= seq for d, (_, seq) in self.mariadb.items())
        return all(
            any(lo >= olo and hi <= ohi for olo, ohi in other.mysql.get(key, []))
            for key, ranges in self.mysql.items()
            for lo, hi in ranges
        )

    def missing_from(self, other: GtidSet) -> str:
        """What this set holds that ``other`` does not, for a message (MariaDB: domains ahead)."""
        if self.mariadb:
            return ",".join(
                f"{d}-{s}-{q}"
                for d, (s, q) in sorted(self.mariadb.items())
                if d not in other.mariadb or other.mariadb[d][1] < q
            )
        gone = GtidSet(str(self))
        for key, ranges in other.mysql.items():
            for lo, hi in ranges:
                gone._remove_range(key, lo, hi)
        return str(gone)

    def _remove_range(self, key: str, first: int, last: int) -> None:
        self._text = None
        out = []
        for lo, hi in self.mysql.get(key, []):
            if hi < first or lo > last:
                out.append([lo, hi])
                continue
            if lo < first:
                out.append([lo, first - 1])
            if hi > last:
                out.append([last + 1, hi])
        if out:
            self.mysql[key] = out
        else:
            self.mysql.pop(key, None)

    def without(self, gtids: list[str]) -> GtidSet:
        """This set less single transactions (MySQL: the set before them, read back from the binlog)."""
        if self.mariadb:
            raise GtidError("a MariaDB GTID position cannot be stepped back; use BINLOG_GTID_POS")
        out = GtidSet(str(self))
        for gtid in gtids:
            key, number = self._split(gtid)
            out._remove_range(key, number, number)
        return out

    def __str__(self) -> str:
        if self._text is None:
            self._text = self._render()
        return self._text

    def _render(self) -> str:
        if self.mariadb:
            return ",".join(f"{d}-{s}-{q}" for d, (s, q) in sorted(self.mariadb.items()))
        by_uuid: dict[str, list[str]] = {}
        for key in sorted(self.mysql):
            uuid, _, tag = key.partition(":")
            ranges = ":".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in self.mysql[key])
            by_uuid.setdefault(uuid, []).append(f"{tag}:{ranges}" if tag else ranges)
        return ",".join(f"{uuid}:{':'.join(parts)}" for uuid, parts in by_uuid.items())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GtidSet) and str(self) == str(other)

    def __repr__(self) -> str:
        return f"GtidSet({str(self)!r})"


def server_identity(conn) -> str:
    """Which server a position was read on: MySQL's ``server_uuid``; MariaDB has none, so its
    ``server_id`` (unique within a replication topology, which is what a failover stays in)."""
    with conn.cursor() as cur:
        try:
            cur.execute("SELECT @@server_uuid")
            return str(cur.fetchone()[0])
        except Exception:  # noqa: BLE001 - MariaDB: unknown system variable
            cur.execute("SELECT @@server_id")
            return f"server_id {cur.fetchone()[0]}"


def is_mariadb(conn) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        return "mariadb" in str(cur.fetchone()[0]).lower()


def gtids_enabled(conn) -> bool:
    """MariaDB always logs GTIDs; MySQL only with ``gtid_mode=ON``."""
    if is_mariadb(conn):
        return True
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.gtid_mode")
        return str(cur.fetchone()[0]).upper() == "ON"
