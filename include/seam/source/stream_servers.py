"""A stream's positions on a server that is not the one they were read on, or that no longer has them.

A failover, or a pipeline pointed at a replica: each moved table's GTID set is found in this server's
binlog and its chain moves there (REBASE, ``seam.source.gtid``). A position this server cannot read (its
binlog purged, no GTIDs to find it by), or a table this server's binlog names otherwise than the pipeline
(a case-folding server), stops that table in the target with the way out; the other tables go on.
Nothing is published at a lost position.

Delivery guarantee: that of the reader (at-least-once into Kafka); a table whose position is lost is
stopped, never skipped ahead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from seam.alerts import alert
from seam.core.errors import StreamError
from seam.core.position import Position
from seam.source.binlog import locate
from seam.source.chains import Chains, Followed
from seam.source.gtid import GtidError, GtidSet, gtids_enabled, is_mariadb
from seam.source.gtid_positions import gtids_at
from seam.source.head import binlog_files, binlog_status, unlogged
from seam.state.positions import stop_stream
from seam.wire.boundary import Rebase
from seam.wire.topics import Publisher

log = logging.getLogger("seam.streaming")

Lose = Callable[..., None]  # (table, why, advice, way_out=None)


def lose_position(chains: Chains, target, f: Followed, why: str, advice: str, way_out: str | None = None) -> None:
    """Stop a table whose position cannot be read on this source (its binlog is gone, a failover without
    GTIDs) with the way out (the cheapest that works, unless given), in the target's state (no message can
    be placed at a lost position); the other tables go on."""
    reason = f"{why}: {advice}; {way_out or chains.way_out(f)}"
    stop_stream(target, chains.pipeline.target.state_schema, f.table.db, f.table.table, reason)
    del chains.followed[(f.table.db, f.table.table)]
    chains.stopped[f.table.name] = reason
    log.error("%s: stream stopped: %s", f.table.name, reason)
    alert(chains.pipeline, f.table.name, "stream stopped", reason)


def stop_purged(chains: Chains, conn, lose: Lose) -> None:
    """A table whose position is in a binlog the source no longer has (purged, expired) stops, with the
    way out; the other tables go on."""
    files = binlog_files(conn)
    if not files:
        raise StreamError("the source's binary log is off (no binlog files): start it with --log-bin")
    for f in list(chains.followed.values()):
        if chains.on_this_server(f) and f.published.file not in files:
            lose(
                f,
                f"the source no longer has binlog {f.published.file} (purged; oldest is {files[0]}), so its "
                f"changes after {f.published} are gone",
                "keep binlogs longer (binlog_expire_logs_seconds)",
            )


def stop_unlogged(chains: Chains, conn, lose: Lose) -> None:
    """A table whose database the source leaves out of its binlog (a filter set since its load) stops: none
    of its changes will come. The other tables go on."""
    status = binlog_status(conn)
    for f in list(chains.followed.values()):
        why = unlogged(status, f.table.db)
        if why:
            lose(
                f,
                f"{why}, so its changes since the filter was set are in no binlog",
                "remove the filter (and restart the server) before the repair",
            )


def stop_misnamed(chains: Chains, conn, lose: Lose) -> None:
    """A table the pipeline names in another case than a case-folding source (``lower_case_table_names``
    1 or 2) stores it stops: the binlog names it as stored, so none of its changes would be taken for
    its own. Loads refuse such a name (``seam.source.schema``); a table loaded before they did is found here."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@lower_case_table_names")
        if str(cur.fetchone()[0]) == "0" or not chains.followed:
            return
        dbs = sorted({f.table.db for f in chains.followed.values()})
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA IN %s", (dbs,))
        stored = {(db.lower(), table.lower()): f"{db}.{table}" for db, table in cur.fetchall()}
    for f in list(chains.followed.values()):
        name = stored.get((f.table.db.lower(), f.table.table.lower()))
        if name is not None and name != f.table.name:
            lose(
                f,
                f"the source stores it as {name} (it compares names in any case: lower_case_table_names) "
                "and its binlog names it so, so the stream has taken none of its changes since its load",
                f"name it {name} in the pipeline",
                way_out=f"run `seam load full {name}` to sync the table again",
            )


def gtids_at_start(chains: Chains, conn, start: Position) -> GtidSet | None:
    """The GTID set through the reader's start: as the target recorded it, else from the server."""
    for f in chains.followed.values():
        if f.published == start and f.gtids and f.server == chains.here:
            return GtidSet(f.gtids)
    if not gtids_enabled(conn):
        return None
    return gtids_at(conn, start, chains.pipeline.source)


def rebase(chains: Chains, conn, publisher: Publisher, lose: Lose) -> None:
    """Tables whose applied position was read on another server (a failover, or the pipeline pointed at
    a replica): find each one's GTID set in this server's binlog and move its chain there (REBASE)."""
    moved = [f for f in chains.followed.values() if not chains.on_this_server(f)]
    if not moved:
        return
    here = chains.here
    assert here is not None  # a table is on another server only when this one is known
    logs_gtids, mariadb = gtids_enabled(conn), is_mariadb(conn)
    for f in moved:
        where = f"its position {f.published} was read on {f.server} and the source is {here} now"
        if not logs_gtids:
            lose(f, f"{where}, which logs no GTIDs", "set gtid_mode=ON for failovers")
            continue
        if not f.gtids:
            lose(f, f"{where}; it has no GTID set to find it by", "keep GTIDs on")
            continue
        try:
            at = locate(chains.pipeline.source, GtidSet(f.gtids), mariadb)
        except GtidError as exc:
            lose(f, f"{where}; its GTID set {f.gtids} cannot be found there ({exc})", "check the failover")
            continue
        log.warning(
            "%s: the source is %s now, not %s: its GTID set %s ends at %s there; the stream goes on from there",
            f.table.name,
            here,
            f.server,
            f.gtids,
            at,
        )
        chains.control(publisher, f, Rebase(at, f.published, f.gtids, here))
        f.server = here
    publisher.flush()


def clash(server_id: int, who: str) -> str:
    return (
        f"server_id {server_id} is used by {who}: each binlog reader needs its own; give this pipeline a "
        f"source.server_id of its own in the pipeline file (or stop the other `seam stream` of this pipeline)"
    )
