"""What a table and its source must be before the table is loaded, or one clear line now (a ``SnapshotError``
naming the table, the setting and what to do): the binlog on, in ROW format with full row images and full
metadata, no filter that leaves the table's database out, names the target can hold, every column readable
and of a type Seam maps, a table the stream can follow (not a view, not system-versioned), and key columns
that are never null (no NULL allowed, no zero date).

Delivery guarantee: none of its own (read-only checks); what it lets through a load or the stream relies on.
"""

from __future__ import annotations

from seam.core.identifiers import quote, unfit_names
from seam.core.schema import TableSchema
from seam.source.head import binlog_status, unlogged
from seam.source.schema import read_columns
from seam.source.snapshot import ShapeChangeError, SnapshotError
from seam.wire.codecs import Date, codec, zero_date_sql


def check_names(schema: TableSchema) -> None:
    """Every name the table brings can be the target's (``seam.core.identifiers.unfit_names``)."""
    kinds_and_names = [("database", schema.db), ("table", schema.table), *(("column", n) for n in schema.names)]
    why = unfit_names(kinds_and_names)
    if why:
        raise SnapshotError(f"{schema.db}.{schema.table}: {why}")


def check_streamable(conn, schema: TableSchema) -> None:
    """A table the stream follows must log its own current rows, or a clear error before it is loaded: a view
    logs none (it would be loaded, then never change), and a system-versioned table logs its history rows
    among its current ones (the stream would apply them as the table's rows)."""
    name = f"{schema.db}.{schema.table}"
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (schema.db, schema.table),
        )
        row = cur.fetchone()
    kind = str(row[0]).upper() if row else ""
    if kind == "VIEW":
        raise SnapshotError(
            f"{name} is a view: its rows change with no binlog rows of their own, so the stream cannot follow "
            "it; load the tables it reads instead, or sync it by windows (tables[].sync: windows, with a cursor)"
        )
    if kind == "SYSTEM VERSIONED":
        raise SnapshotError(
            f"{name} is system-versioned (WITH SYSTEM VERSIONING): its binlog carries history rows that the "
            "stream does not tell from current ones; sync it by windows (tables[].sync: windows, with a cursor)"
        )


def check_source(conn, schema: TableSchema) -> None:
    """Binlog on, ROW format, full row images, and SELECT allowed: or a clear error now."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@log_bin, @@binlog_format, @@binlog_row_image")
        log_bin, fmt, image = cur.fetchone()
        if not int(log_bin):
            raise SnapshotError(
                "the source's binary log is off: start MySQL/MariaDB with --log-bin "
                "(and --binlog-format=ROW --binlog-row-image=FULL); Seam records a binlog "
                "position with every snapshot so streaming can start there"
            )
        if str(fmt).upper() != "ROW" or str(image).upper() != "FULL":
            raise SnapshotError(
                f"the source logs binlog_format={fmt}, binlog_row_image={image}: Seam needs "
                "ROW and FULL (SET GLOBAL binlog_format='ROW', binlog_row_image='FULL', "
                "or in my.cnf) to reconcile chunks and stream changes"
            )
        metadata = _variable(cur, "binlog_row_metadata")  # MySQL 8.0.14+, MariaDB 10.5+
        if metadata is not None and str(metadata).upper() != "FULL":
            raise SnapshotError(
                f"the source logs binlog_row_metadata={metadata}: Seam needs FULL (SET GLOBAL "
                "binlog_row_metadata='FULL', or in my.cnf), so that binlog rows carry their column "
                "names, signedness and character sets instead of being guessed from today's schema"
            )
        try:  # SELECT * : information_schema hides columns the user may not read, a silent loss otherwise
            cur.execute(f"SELECT * FROM {quote(schema.db)}.{quote(schema.table)} LIMIT 0")
            readable = tuple(d[0] for d in cur.description)
        except Exception as exc:  # noqa: BLE001 - pymysql.err.OperationalError 1142/1143: SELECT command denied
            raise SnapshotError(
                f"cannot read {schema.db}.{schema.table}: {exc.args[-1]}; "
                f"GRANT SELECT ON `{schema.db}`.* TO the Seam user"
            ) from None
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "AND EXTRA LIKE %s",
            (schema.db, schema.table, "%INVISIBLE%"),
        )
        invisible = {row[0] for row in cur.fetchall()}  # read by name, never by SELECT *
        if readable != tuple(n for n in schema.names if n not in invisible):
            now = tuple(c.name for c in read_columns(cur, schema.db, schema.table))
            if now != schema.names:  # not a grant: a DDL ran since the table's columns were read
                raise ShapeChangeError(
                    f"{schema.db}.{schema.table} changed shape while the load was planned (it has columns "
                    f"{now} now, not {schema.names}): run the full load again"
                )
            raise SnapshotError(
                f"{schema.db}.{schema.table}: the Seam user sees columns {readable}, the table has "
                f"{schema.names}; GRANT SELECT ON `{schema.db}`.* TO the Seam user"
            )
        status = binlog_status(conn)
        filtered = unlogged(status, schema.db)
        if filtered:
            raise SnapshotError(
                f"{filtered}: no stream could follow {schema.db}.{schema.table}. Remove the filter from the "
                "server's configuration and restart it, then load the table"
            )
    for column in schema.columns:
        codec(column)  # a type Seam cannot map stops the table now, with its name


def check_key_values(conn, schema: TableSchema, key: tuple[str, ...]) -> None:
    """A key column that allows NULL, or holds zero dates (records hold them as null): a key value cannot be
    null. A clear error before the snapshot starts, naming the table, the column and the remedy."""
    nullable = [k for k in key if schema.column(k).nullable]
    if nullable:  # a UNIQUE column, not the primary key: its NULLs are many rows no key can tell apart
        raise SnapshotError(
            f"{schema.db}.{schema.table}: key column(s) {', '.join(nullable)} allow NULL (a unique key is not a "
            "primary key), and a key value cannot be null: key the table by NOT NULL columns (tables[].key), or "
            "make the column NOT NULL at the source"
        )
    dates = [schema.column(k) for k in key if isinstance(codec(schema.column(k)), Date)]
    with conn.cursor() as cur:
        for column in dates:
            x = quote(column.name)
            cur.execute(
                f"SELECT CAST({x} AS CHAR) FROM {quote(schema.db)}.{quote(schema.table)} "
                f"WHERE {zero_date_sql(x)} LIMIT 1"
            )
            found = cur.fetchone()
            if found is not None:
                raise SnapshotError(
                    f"{schema.db}.{schema.table}: key column {column.name} holds zero dates (such as "
                    f"{found[0]!r}), which PostgreSQL cannot hold and Seam records as null, and a key cannot be "
                    f"null: set them to real dates at the source, or key the table by other columns (tables[].key)"
                )


def _variable(cur, name: str):
    """A server variable's value, or None where the server has no such variable."""
    cur.execute("SHOW VARIABLES LIKE %s", (name,))
    row = cur.fetchone()
    return None if row is None else row[1]
