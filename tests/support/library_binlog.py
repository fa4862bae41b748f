"""python-mysql-replication on its own: a second binlog decoder for tests, sharing no code with Seam's
(``seam.source.rows``)."""

from __future__ import annotations

from typing import Any

from seam.core.position import Position


def binlog_values(values: dict[str, Any], none_sources: dict[str, str] | None) -> dict[str, Any]:
    """Undo the library's lossy ``None``s, using the reason it records: an empty SET arrives as ``None``
    (reason "empty set"); a partial JSON update carries no full value."""
    if not none_sources:
        return values
    fixed = dict(values)
    for name, reason in none_sources.items():
        if reason == "empty set":
            fixed[name] = ""
        elif reason == "same with before values":  # NONE_SOURCE.JSON_PARTIAL_UPDATE
            raise ValueError(f"column {name!r} arrived as a partial JSON update")
    return fixed


def library_stream(pipeline, start: Position, db: str, tables: list[str] | None = None, server_offset: int = 300):
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    src = pipeline.source
    return BinLogStreamReader(
        connection_settings={"host": src.host, "port": src.port, "user": src.user, "passwd": src.password.reveal()},
        server_id=src.server_id + server_offset,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        is_mariadb=False,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=[db],
        only_tables=tables,
    )


def library_rows(pipeline, start: Position, end: Position, db: str) -> list[tuple]:
    """(table, op, before, after, position) of every row image in (start, end], decoded by the library."""
    from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

    stream = library_stream(pipeline, start, db, server_offset=500)
    out = []
    try:
        for event in stream:
            at = Position.through(stream.log_file, event.packet.log_pos)
            if at.after(end):
                break
            for i, row in enumerate(event.rows):
                position = Position(stream.log_file, event.packet.log_pos, i)
                if isinstance(event, UpdateRowsEvent):
                    before = binlog_values(row["before_values"], row.get("before_none_sources"))
                    after = binlog_values(row["after_values"], row.get("after_none_sources"))
                    out.append((event.table, "u", before, after, position))
                elif isinstance(event, WriteRowsEvent):
                    out.append(
                        (event.table, "c", None, binlog_values(row["values"], row.get("none_sources")), position)
                    )
                else:
                    out.append(
                        (event.table, "d", binlog_values(row["values"], row.get("none_sources")), None, position)
                    )
    finally:
        stream.close()
    return out
