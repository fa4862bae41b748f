"""Binlog streaming: the change reader that follows a table from the binlog
position of its last committed full load.

The reader starts at the smallest position the target has applied for the
tables it follows (``seam.positions``, written by the sink in the same
transaction as the data), which is always the end of a source transaction.
It buffers each source transaction and publishes its changes only once the
transaction's XID (commit) event has been read, every record carrying the
commit position (``source.txn``) and, on the table's last change of the
transaction, ``source.last``: the sink applies whole source transactions.
Between transactions it sends HEARTBEAT control messages with its binlog
position to every followed topic, so the applied position of a table that
sees no changes still advances (lag is then source position minus applied).

It keeps no state of its own: on restart (or when Kafka has lost messages)
it reads again from the target's positions and the sink skips what it has
already applied, by position.

Delivery guarantee: at-least-once into Kafka, in binlog order per table
(one partition per table topic, one producer); exactly-once in the target
through the sink's position check.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Callable

from seam.boundary import CONTROL_HEADER, Heartbeat
from seam.config import Pipeline, TableConfig
from seam.records import Position, Record, binlog_values, key_of, normalize_row
from seam.schema import TableSchema, read_schema
from seam.snapshot import binlog_files
from seam.sink import applied_position, connect_target
from seam.topics import Publisher, ensure_topics, table_topic

log = logging.getLogger("seam.streaming")


class StreamError(RuntimeError):
    """The stream cannot go on; the message says why and what to do."""


@dataclass
class Followed:
    table: TableConfig
    schema: TableSchema
    topic: str
    applied: Position


class ChangeReader:
    def __init__(self, pipeline: Pipeline, tables: list[TableConfig] | None = None):
        import pymysql

        self.pipeline = pipeline
        target = connect_target(pipeline)
        source = pymysql.connect(**pipeline.source.pymysql_kwargs())
        self.followed: dict[tuple[str, str], Followed] = {}
        try:
            for table in tables or pipeline.tables:
                applied = applied_position(target, pipeline.target.state_schema, table.db, table.table)
                if applied is None:
                    log.warning("%s has no committed full load yet: not streamed (run `seam load full %s`)",
                                table.name, table.name)
                    continue
                self.followed[(table.db, table.table)] = Followed(
                    table, read_schema(source, table.db, table.table), table_topic(pipeline, table), applied)
        finally:
            target.close()
            source.close()
        if not self.followed:
            raise StreamError("no table of the pipeline has a committed full load to stream from; "
                              "run `seam load full TABLE` first")
        self.start = min(f.applied for f in self.followed.values())
        self._check_binlog_has(self.start)

    def _check_binlog_has(self, position: Position) -> None:
        import pymysql

        conn = pymysql.connect(**self.pipeline.source.pymysql_kwargs())
        try:
            files = binlog_files(conn)
        finally:
            conn.close()
        if position.file not in files:
            tables = " ".join(f.table.name for f in self.followed.values() if f.applied.file == position.file)
            raise StreamError(f"the source no longer has binlog {position.file} (purged; oldest is "
                              f"{files[0] if files else 'none'}), so changes after {position} are gone: re-run "
                              f"`seam load full {tables}` and keep binlogs longer (binlog_expire_logs_seconds)")

    def run(self, should_stop: Callable[[], bool] = lambda: False, until_idle: bool = False,
            on_commit: Callable[[Position, int], None] | None = None) -> dict[str, int]:
        """Publish changes until stopped (or, with ``until_idle``, until the binlog's current end)."""
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import HeartbeatLogEvent, QueryEvent, XidEvent, MariadbGtidEvent
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        src = self.pipeline.source
        ensure_topics(self.pipeline, [f.topic for f in self.followed.values()])
        publisher = Publisher(self.pipeline)
        stream = BinLogStreamReader(
            connection_settings={"host": src.host, "port": src.port, "user": src.user,
                                 "passwd": src.password.reveal()},
            server_id=src.server_id, log_file=self.start.file, log_pos=self.start.pos, resume_stream=True,
            is_mariadb=False, blocking=not until_idle, slave_heartbeat=1.0,
            only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent, QueryEvent,
                         MariadbGtidEvent, HeartbeatLogEvent],
            only_schemas=sorted({db for db, _ in self.followed}))
        stats = {"transactions": 0, "changes": 0}
        pending: list[Record] = []
        gtid = None
        last_flush, last_heartbeat = time.monotonic(), None
        try:
            for event in stream:
                if isinstance(event, MariadbGtidEvent):
                    gtid, pending = event.gtid, []
                elif isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                    followed = self.followed.get((event.schema, event.table))
                    if followed is not None:
                        pending.extend(self._records(followed, event, stream.log_file, gtid))
                elif isinstance(event, XidEvent):
                    commit = Position.through(stream.log_file, event.packet.log_pos)
                    self._publish(publisher, pending, commit)
                    stats["transactions"] += 1
                    stats["changes"] += len(pending)
                    pending = []
                elif isinstance(event, QueryEvent) and event.query.strip().upper() not in ("BEGIN", "COMMIT"):
                    log.warning("DDL in the binlog at %s:%s (%s): not handled yet", stream.log_file,
                                event.packet.log_pos, event.query[:200])
                if time.monotonic() - last_flush > 0.2:
                    if not pending and stream.log_file:  # between transactions: tell idle tables where we are
                        here = Position.through(stream.log_file, stream.log_pos)
                        if last_heartbeat is None or here.after(last_heartbeat):
                            beat = Heartbeat(here).to_json()
                            for f in self.followed.values():
                                publisher.send(f.topic, beat, b"__seam_control__", headers=[(CONTROL_HEADER, b"1")])
                            last_heartbeat = here
                    publisher.flush()
                    last_flush = time.monotonic()
                    if on_commit:
                        on_commit(Position.through(stream.log_file, stream.log_pos), stats["changes"])
                if should_stop():
                    break
        finally:
            stream.close()
            publisher.flush()
        return stats

    def _records(self, followed: Followed, event, log_file: str, gtid: str | None) -> list[Record]:
        from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

        schema, key = followed.schema, followed.table.key
        out = []
        for i, row in enumerate(event.rows):
            at = Position(log_file, event.packet.log_pos, i)
            if not at.after(followed.applied):
                continue  # already in the target (its snapshot or an applied transaction)
            if isinstance(event, UpdateRowsEvent):
                before = normalize_row(schema, binlog_values(row["before_values"], row.get("before_none_sources")))
                after = normalize_row(schema, binlog_values(row["after_values"], row.get("after_none_sources")))
                op = "u"
            else:
                image = normalize_row(schema, binlog_values(row["values"], row.get("none_sources")))
                op, before, after = ("c", None, image) if isinstance(event, WriteRowsEvent) else ("d", image, None)
            out.append(Record(op=op, db=schema.db, table=schema.table, key=key_of(schema, key, after or before),
                              before=before, after=after, position=at, gtid=gtid))
        return out

    def _publish(self, publisher: Publisher, records: list[Record], commit: Position) -> None:
        last_index = {}
        for i, r in enumerate(records):
            last_index[(r.db, r.table)] = i
        for i, r in enumerate(records):
            final = replace(r, txn=commit, last=last_index[(r.db, r.table)] == i)
            publisher.send(self.followed[(r.db, r.table)].topic, final.to_json(), final.kafka_key())
