"""Validation: is the target equal to the source, and if not, which rows differ?

This module plans a table's validation and takes the consistent pair of snapshots; the comparison (buckets,
bisection, the differing rows) is ``seam.validate.compare``, the rows as they were at P
``seam.validate.at_position``, the report ``seam.validate.report``, the scope and each side's SQL
``seam.validate.side``.

Method (all heavy work inside the two databases, no table pulled to Python):

1. A consistent pair of snapshots. The target's is taken first (REPEATABLE
   READ): it fixes the table's rows and P, the source position the target has
   applied (``seam.positions``: the full load's snapshot, moved on by the
   stream). Then the source's (``START TRANSACTION WITH CONSISTENT SNAPSHOT``),
   whose exact binlog position Q >= P MariaDB reports.
2. Both sides compute, in one scan each and concurrently, per key bucket: the
   row count, the sum mod 2^64 of a 64-bit hash of every row's canonical text
   (``seam.validate.canonical``), and the configured column checks (null counts, sums).
3. Buckets that differ, and buckets holding keys the binlog changed between P
   and Q, are narrowed down: a bucket of more than ``pull_rows`` rows is split
   into 16 key ranges and checksummed again (bisection, as reladiff does), a
   small one is compared row by row on the canonical texts. A key changed after
   P is compared with its image AT P (the before image of its first change
   after P): so a table under writes, or a streamed table, validates exactly
   at P without pausing writers or the stream. The binlog (P, Q] is read only
   when some bucket differs: a table equal to its source now is equal, however
   long ago it was loaded.
4. The verdict names every row that is missing in the target, extra in the
   target, or different (with the columns that differ), limited to ``limit``
   rows in the report with exact totals.

Buckets are ranges of an integer first key column, else hash buckets of the
key (a keyless table: of the whole row). An incremental table whose last load
was a window holds its source as of its windows, not of one position: its
rows are compared up to the watermark, and rows whose source cursor has moved
past the watermark since are counted as "changed since", not as differences.
A keyless table cannot be rolled back by key: if it changed between P and Q,
both sides are read whole (record-shape values) and the source is rolled back
to P as a multiset, row image by row image: exact, but not pushed down.

Delivery guarantee: read-only on both sides (two read-only snapshots; the
only writes are Seam's helper functions and the ``seam.validations`` ledger row).
"""

from __future__ import annotations

import datetime as dt
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

import psycopg
import pymysql

from seam.apply.retry import transient
from seam.core.errors import ValidationError, first_line, target_limit
from seam.core.identifiers import qi
from seam.core.pipeline import Pipeline, TableConfig
from seam.core.position import Position
from seam.core.schema import SchemaError, TableSchema, added_by_users
from seam.files import private_dir, write_private
from seam.source.errors import transient_source_error
from seam.source.gtid import server_identity
from seam.source.head import binlog_files
from seam.source.incremental import (
    IncrementalError,
    Window,
    _parse_time,
    time_text,
)
from seam.source.lag import table_events_between
from seam.source.schema import read_schema
from seam.source.snapshot import SnapshotError, open_snapshot, snapshot_opening, source_head
from seam.state.connection import open_target, scalar
from seam.state.ledger import committed_columns, committed_tables, last_committed, record_validation, watermark
from seam.state.positions import validation_point
from seam.state.schema import ensure_state, schema_version, xact_lock
from seam.validate import canonical
from seam.validate.at_position import changes_since
from seam.validate.cascaded import cascaded_keys
from seam.validate.compare import column_checks, compare
from seam.validate.report import Report, report_folder
from seam.validate.side import INTEGER, WHOLE_TABLE, Scope, Side

_NUMERIC = INTEGER | {"decimal", "year", "bit"}


class NotLoaded(ValidationError):
    """The table has no committed load in the target yet."""


STALE_AFTER_S = 300.0  # a streamed table missing source changes older than this is STALE, even if equal at P


# ------------------------------------------------------------------ config checks


def enabled_checks(table: TableConfig) -> tuple[str, ...]:
    return tuple(c for c in ("count", "checksum") if table.checks.get(c, True))


def _columns_drift(tgt, state: str, schema, table: TableConfig) -> str | None:
    """Why the target table cannot be compared with the source's: columns on one side only (the source's
    definition changed while the table was not followed, e.g. after it stopped); None when they match.
    Columns users added to the target are not compared (``added_by_users``)."""
    found = tgt.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
        (table.db, table.table),
    ).fetchall()
    recorded = committed_columns(tgt, state, table.db, table.table)
    target = [r[0] for r in found]
    theirs = added_by_users(target, recorded, schema.names)
    only_source = [n for n in schema.names if n not in target]
    only_target = [n for n in target if n not in schema.names and n not in theirs]
    if not only_source and not only_target:
        return None
    sides = [f"only in the source: {', '.join(only_source)}"] if only_source else []
    sides += [f"only in the target: {', '.join(only_target)}"] if only_target else []
    return (
        f"{table.name}: the target's columns are not the source's ({'; '.join(sides)}): the source's definition "
        f"changed while the table was not followed; run `seam load full {table.name}`"
    )


# ------------------------------------------------------------------ main entry


def validate(
    pipeline: Pipeline,
    table: TableConfig,
    scope: Scope = WHOLE_TABLE,
    *,
    limit: int = 50,
    bucket_rows: int = 64,
    max_buckets: int = 65536,
    pull_rows: int = 5000,
    as_of_source: bool = False,
    say: Callable[[str], None] = print,
) -> Report:
    """Compare the table's source and target at a consistent point; see the module docstring.
    ``as_of_source``: compare the target as it is with the source's snapshot (exact position Q) as it is, not
    at the target's position (``seam repair --full``: a position whose binlog is gone, or a stopped table).
    Its length: the consistent pair of snapshots in their order (the target's fixes P, then the source's
    Q >= P), with the checks that must pass between them; the order is the guarantee."""
    started = time.monotonic()
    state = pipeline.target.state_schema
    src = pymysql.connect(**pipeline.source.pymysql_kwargs(utc=True), connect_timeout=10)
    tgt = open_target(pipeline, connect_timeout=10, autocommit=True, application_name="seam-validate")
    try:
        try:
            schema = read_schema(src, table.db, table.table)
        except SchemaError as exc:
            raise ValidationError(str(exc)) from None
        check_config(schema, table, scope)
        scope = _resolve(schema, table, scope)
        ensure_functions(tgt, state)
        exists = scalar(tgt, "SELECT to_regclass(%s)", (f"{qi(table.db)}.{qi(table.table)}",))
        if exists is None:
            raise NotLoaded(
                f"the target has no table {qi(table.db)}.{qi(table.table)}: run `seam load full {table.name}` first"
            )
        drift = _columns_drift(tgt, state, schema, table)
        if drift:
            raise ValidationError(drift)
        # 1. the target's snapshot first (it fixes P), then the source's (Q >= P)
        tgt.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        tgt.read_only = True
        tgt.autocommit = False
        applied = validation_point(tgt, state, table.db, table.table)
        read_on = applied[6] if applied is not None else None
        here = server_identity(src) if read_on is not None else None
        if applied is not None and here is not None and read_on != here and not as_of_source:
            raise ValidationError(
                f"{table.name}: the target's position {applied[0]}:{applied[1]} was read on "
                f"{applied[6]}, not on this source ({here}): start the stream "
                "(`seam stream start`), which moves it here by its GTID set, then validate"
            )
        last = last_committed(tgt, state, table.db, table.table)
        mark = watermark(tgt, state, table.db, table.table, table.cursor)
        if last is None or (applied is None and mark is None):
            raise NotLoaded(
                f"{table.name} has no committed load in the target: run `seam load full {table.name}` first"
            )
        window_mode = last[0] == "incremental" and mark is not None and (applied is None or last[1] > applied[3])
        # Q: the source snapshot's position. Portable (MySQL 8): the snapshot holds every change up to its low
        # watermark and perhaps some after it, so Q is the head read once it is open: a key changed in
        # between is explained by the binlog (P, Q] like any change after the target's position
        opening = snapshot_opening(src, pipeline, table)
        try:
            source_at = open_snapshot(src, pipeline.source, replace(opening, exact=as_of_source), table.name)
            if opening.method != "mariadb" and not as_of_source:
                source_at = source_head(src)
        except SnapshotError as exc:
            raise ValidationError(str(exc)) from None
        target_at = Position(applied[0], applied[1], applied[2]) if applied else None
        if window_mode and mark is not None:  # window_mode needs a watermark
            scope = _cap_window(schema, table, scope, mark)
        report = Report(
            pipeline=pipeline.name,
            table=table.name,
            scope=scope.describe(),
            mode="window" if window_mode else "position",
            target_position=None if window_mode else str(source_at if as_of_source else target_at),
            compared_at=None if window_mode else (source_at if as_of_source else target_at),
            source_position=str(source_at) if source_at else None,
            checks=enabled_checks(table),
            started=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            limit=limit,
        )
        soft = bool(table.soft_delete)  # flagged rows are kept out of the target in every mode
        nul = pipeline.target.nul_replacement
        source = Side("mysql", src, schema, table, state, scope, soft, nul)
        target = Side("postgres", tgt, schema, table, state, scope, soft, nul)

        def changes() -> list:
            """The table's changes in (P, Q]: read only when some bucket differs (an equal table never pays
            for a long binlog since its load)."""
            if window_mode or as_of_source:
                return []
            t0 = time.monotonic()
            assert target_at is not None  # outside a window, a loaded table has a position (NotLoaded above)
            found = changes_since(pipeline, src, schema, table, target_at, source_at)
            say(
                f"{table.name}: {len(found):,} row changes in the binlog ({target_at}, {source_at}], read in "
                f"{time.monotonic() - t0:.1f}s"
            )
            return found

        def cascaded(since: list) -> set:
            """Keys a foreign-key cascade changed in (P, Q], which ``since`` does not show."""
            if window_mode or as_of_source or not table.key:
                return set()
            assert target_at is not None and source_at is not None
            return cascaded_keys(pipeline, src, tgt, schema, table, target_at, source_at, since)

        compare(
            report,
            source,
            target,
            schema,
            table,
            changes,
            cascaded,
            window_mode,
            limit=limit,
            bucket_rows=bucket_rows,
            max_buckets=max_buckets,
            pull_rows=pull_rows,
            say=say,
        )
        if not window_mode and not as_of_source and table.sync == "stream" and target_at is not None:
            report.stale = _staleness(pipeline, src, table, applied, target_at, source_at)
        report.seconds = time.monotonic() - started
        return report
    finally:
        src.close()
        try:
            tgt.rollback()
        except psycopg.Error:
            pass
        tgt.close()


def _staleness(
    pipeline: Pipeline, src, table: TableConfig, applied, target_at: Position, source_at: Position | None
) -> str | None:
    """Why a streamed table's target is behind its source: its stream stopped, or it misses changes of the
    table that the source committed more than ``STALE_AFTER_S`` ago. None when it is current."""
    if applied[4]:
        return f"its stream is stopped ({applied[4][:200]})"
    if source_at is None or not source_at.after(target_at):
        return None
    current_ms = applied[5] or applied[3].timestamp() * 1000  # the source time the target is current to
    behind_s = time.time() - current_ms / 1000
    if behind_s <= STALE_AFTER_S:
        return None
    events = table_events_between(pipeline, binlog_files(src), table.db, table.table, target_at, source_at)
    if not events:
        return None  # nothing of this table happened since: current, however long ago the stream ran
    return (
        f"{events:,} binlog event(s) of the table after {target_at} are not applied, the oldest up to "
        f"{behind_s:,.0f} s old: is its stream running (`seam stream status`)?"
    )


def check_config(schema: TableSchema, table: TableConfig, scope: Scope) -> None:
    """ValidationError where the table's checks or ``scope`` name what ``schema`` does not have."""
    for column, metrics in column_checks(table).items():
        if column not in schema.names:
            raise ValidationError(
                f"{table.name}: checks.columns names {column!r}, which the table does not have "
                f"(columns: {', '.join(schema.names)})"
            )
        if "sum" in metrics and schema.column(column).data_type not in _NUMERIC:
            raise ValidationError(
                f"{table.name}: checks.columns.{column}.sum needs an exact numeric column "
                f"(integer or DECIMAL); {column} is {schema.column(column).column_type}"
            )
    if scope.key_range and (not table.key or schema.column(table.key[0]).data_type not in INTEGER):
        raise ValidationError(f"{table.name}: a key range needs an integer first key column")
    if scope.window and not table.cursor:
        raise ValidationError(f"{table.name}: a window needs tables[].cursor in the pipeline")


def _resolve(schema: TableSchema, table: TableConfig, scope: Scope) -> Scope:
    if scope.window is None or isinstance(scope.window, Window):
        return scope
    start, end = scope.window
    if schema.column(table.cursor_column).data_type in INTEGER:
        try:
            first, last = int(start), int(end)
        except ValueError:
            raise ValidationError(f"{table.name}: window bounds must be integers for cursor {table.cursor}") from None
        window = Window(table.cursor_column, str(first), str(last), str(last), False)
    else:
        try:
            lo, hi = (time_text(_parse_time(v, what)) for v, what in ((start, "window start"), (end, "window end")))
        except IncrementalError as exc:
            raise ValidationError(str(exc)) from None
        window = Window(table.cursor_column, lo, hi, hi, False)
    if window.end <= window.start if not window.end.isdigit() else int(window.end) <= int(window.start):
        raise ValidationError(f"window end {end} is not after its start {start}")
    return Scope(window=window, key_range=scope.key_range)


def validate_tables(
    pipeline: Pipeline,
    tables: list[TableConfig],
    scope: Scope = WHOLE_TABLE,
    *,
    limit: int = 50,
    report_dir: str | os.PathLike | None = None,
    say: Callable[[str], None] = print,
) -> list[Report]:
    """Validate each table, store each report in the ledger and as HTML; what the CLI and Airflow run."""
    out = []
    folder = report_folder(report_dir)
    private_dir(folder)
    for table in tables:  # every table gets a verdict: one that cannot be compared does not stop the others
        try:
            report = _validate_retrying(pipeline, table, scope, limit, say)
        except ValidationError as exc:
            report = Report(
                pipeline=pipeline.name,
                table=table.name,
                scope=str(scope.window or "whole table"),
                mode="none",
                target_position=None,
                source_position=None,
                unchecked="not loaded" if isinstance(exc, NotLoaded) else "error",
                problem=str(exc),
            )
            say(report.to_text())
            out.append(report)
            continue
        vid = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
        path = folder / f"validate-{table.db}.{table.table}-{vid}.html".replace("/", "_").replace(" ", "_")
        write_private(path, report.to_html())
        report.html = str(path)
        record(pipeline, report, vid)
        say(report.to_text())
        say(f"  report: {path}")
        out.append(report)
    return out


VALIDATE_ATTEMPTS = 5  # a table is validated again after a transient error, waiting 1, 2, 4, 8 s


def _validate_retrying(pipeline: Pipeline, table: TableConfig, scope: Scope, limit: int, say) -> Report:
    """``validate``, again from the start after a transient error of either database (a validation only
    reads, so nothing is left half-done); any other database error is the table's ERROR verdict, one line."""
    delay = 1.0
    for attempt in range(1, VALIDATE_ATTEMPTS + 1):
        try:
            return validate(pipeline, table, scope, limit=limit, say=say)
        except (psycopg.Error, pymysql.err.MySQLError) as exc:
            again = transient(exc) or transient_source_error(exc)
            side = "target" if isinstance(exc, psycopg.Error) else "source"
            if not again:
                over = target_limit(exc)
                advice = f"; {over}, then validate again" if over else ""
                raise ValidationError(f"{table.name}: the {side} failed: {first_line(exc)}{advice}") from None
            if attempt == VALIDATE_ATTEMPTS:
                raise ValidationError(
                    f"{table.name}: the {side} failed {attempt} times for a transient reason, the last: "
                    f"{first_line(exc)}; validate again when it is back"
                ) from None
            say(f"  {table.name}: the {side} failed ({first_line(exc)}, transient): validating again in {delay:.0f} s")
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


def loaded_tables(pipeline: Pipeline) -> list[TableConfig]:
    """The pipeline's tables that have a committed load in the target (the ones validation can compare)."""
    with open_target(pipeline, autocommit=True) as conn:
        if schema_version(conn, pipeline.target.state_schema) == 0:
            return []
        have = committed_tables(conn, pipeline.target.state_schema)
    return [t for t in pipeline.tables if (t.db, t.table) in have]


def ensure_functions(conn, state: str) -> None:
    """The state schema (its ``validations`` ledger), and validation's SQL helper functions in it."""
    ensure_state(conn, state)
    with conn.transaction():
        xact_lock(conn, "functions")
        have = conn.execute(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s AND p.proname LIKE 'mariadb\\_%%' AND p.prosrc LIKE %s",
            (state, f"%{_FUNCTIONS_VERSION}%"),
        ).fetchone()[0]
        if have < 4:
            for sql in canonical.pg_functions(state):
                conn.execute(sql.replace("AS $$", f"AS $$ /* {_FUNCTIONS_VERSION} */", 1))
        for sql in canonical.pg_geometry_functions(state):
            conn.execute(sql)


_FUNCTIONS_VERSION = "seam-canonical-1"


def _cap_window(schema: TableSchema, table: TableConfig, scope: Scope, watermark: str) -> Scope:
    """An incremental table is compared up to its watermark: later rows are not loaded yet."""
    start = "0" if schema.column(table.cursor_column).data_type in INTEGER else "0001-01-01 00:00:00.000000"
    if scope.window is None:
        window = Window(table.cursor_column, start, watermark, watermark, False)
    else:
        given = scope.resolved
        assert given is not None
        end = min(given.end, watermark, key=lambda v: (len(v), v) if v.isdigit() else (0, v))
        window = Window(table.cursor_column, given.start, end, given.end, end != given.end)
    return Scope(window=window, key_range=scope.key_range)


# ------------------------------------------------------------------ ledger and HTML


def record(pipeline: Pipeline, report: Report, vid: str) -> None:
    """Store the report in ``seam.validations`` under the id ``vid``."""
    db, _, tbl = report.table.partition(".")
    with open_target(pipeline, autocommit=True) as conn:  # validate() made the table
        record_validation(conn, pipeline.target.state_schema, vid, db, tbl, report)
