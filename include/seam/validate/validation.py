"""Validation: is the target equal to the source, and if not, which rows differ?

Its size: one comparison at one consistent point, from snapshots to the differing rows; the report is
``seam.validate.report``, the scope and each side's SQL ``seam.validate.side``.

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

import collections
import datetime as dt
import hashlib
import json
import math
import os
import struct
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import psycopg
import pymysql

from seam.apply.retry import first_line, transient
from seam.apply.target import scalar
from seam.config import Pipeline, TableConfig, state_dir
from seam.core.errors import SeamError
from seam.core.identifiers import qi
from seam.core.schema import Column, SchemaError, TableSchema
from seam.files import private_dir, write_private
from seam.source.binlog import BinlogReader, LostTransaction, Transaction, binlog_files
from seam.source.errors import transient_source_error
from seam.source.gtid import server_identity
from seam.source.incremental import (
    IncrementalError,
    Window,
    _parse_time,
    time_text,
)
from seam.source.lag import table_events_between
from seam.source.schema import read_schema
from seam.source.snapshot import SnapshotError, open_snapshot, snapshot_opening, source_head
from seam.state.ledger import committed_tables, last_committed, record_validation, watermark
from seam.state.positions import validation_point
from seam.state.schema import ensure_state, schema_version, xact_lock
from seam.validate import canonical
from seam.validate.report import BucketResult, Difference, MetricResult, Report
from seam.validate.side import INTEGER, WHOLE_TABLE, Scope, Side
from seam.wire.codecs import codec
from seam.wire.records import Position, normalize_row

_NUMERIC = INTEGER | {"decimal", "year", "bit"}
METRICS = ("sum", "null_count")
SPLIT = 16


class ValidationError(SeamError):
    """Validation could not run (not loaded, binlog purged, bad check); the message says what to do."""

    kind = "validation"


class NotLoaded(ValidationError):
    """The table has no committed load in the target yet."""


STALE_AFTER_S = 300.0  # a streamed table missing source changes older than this is STALE, even if equal at P


# ------------------------------------------------------------------ config checks


def column_checks(table: TableConfig) -> dict[str, dict[str, dict]]:
    return dict(table.checks.get("columns") or {})


def enabled_checks(table: TableConfig) -> tuple[str, ...]:
    return tuple(c for c in ("count", "checksum") if table.checks.get(c, True))


# ------------------------------------------------------------------ main entry


def validate(
    pipeline: Pipeline,
    table: TableConfig,
    scope: Scope = WHOLE_TABLE,
    *,
    limit: int = 50,
    bucket_rows: int = 1000,
    max_buckets: int = 4096,
    pull_rows: int = 5000,
    as_of_source: bool = False,
    say: Callable[[str], None] = print,
) -> Report:
    """Compare the table's source and target at a consistent point; see the module docstring.
    ``as_of_source``: compare the target as it is with the source's snapshot (exact position Q) as it is, not
    at the target's position (``seam repair --full``: a position whose binlog is gone, or a stopped table)."""
    started = time.monotonic()
    state = pipeline.target.state_schema
    src = pymysql.connect(
        **pipeline.source.pymysql_kwargs(), connect_timeout=10, init_command="SET time_zone = '+00:00'"
    )
    tgt = psycopg.connect(
        **pipeline.target.conninfo(), connect_timeout=10, autocommit=True, application_name="seam-validate"
    )
    try:
        try:
            schema = read_schema(src, table.db, table.table)
        except SchemaError as exc:
            raise ValidationError(str(exc)) from None
        _check_config(schema, table, scope)
        scope = _resolve(schema, table, scope)
        ensure_functions(tgt, state)
        exists = scalar(tgt, "SELECT to_regclass(%s)", (f"{qi(table.db)}.{qi(table.table)}",))
        if exists is None:
            raise NotLoaded(
                f"the target has no table {qi(table.db)}.{qi(table.table)}: run `seam load full {table.name}` first"
            )
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

        _compare(
            report,
            source,
            target,
            schema,
            table,
            changes,
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


def _check_config(schema: TableSchema, table: TableConfig, scope: Scope) -> None:
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
    folder = Path(report_dir or os.environ.get("SEAM_REPORT_DIR") or state_dir() / "reports")
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
                raise ValidationError(f"{table.name}: the {side} failed: {first_line(exc)}") from None
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
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
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


def changes_since(
    pipeline: Pipeline, conn, schema: TableSchema, table: TableConfig, start: Position, end: Position
) -> list[tuple[dict | None, dict | None]]:
    """(before, after) images of the table's row changes in (start, end], in binlog order."""
    if not end.after(start):
        return []
    files = binlog_files(conn)
    if start.file not in files:
        raise ValidationError(
            f"{table.name}: the binlog at the target's position {start} has been purged (oldest "
            f"is {files[0] if files else 'none'}), so the table cannot be compared at that "
            "position; run `seam load full` and validate soon after, or stream the table"
        )

    reader = BinlogReader(pipeline.source, start, [schema.db], tables={(schema.db, schema.table)}, end=end)
    out: list[tuple[dict | None, dict | None]] = []
    try:
        for item in _decoded(reader, table, start):
            if isinstance(item, LostTransaction):
                raise ValidationError(f"{table.name}: {item.reason}; run `seam load full` and validate again")
            if not isinstance(item, Transaction):
                continue
            if item.errors:
                raise _undecodable(table, start, next(iter(item.errors.values())))
            for change in item.changes:
                out.append(
                    (
                        None if change.before is None else normalize_row(schema, change.before),
                        None if change.after is None else normalize_row(schema, change.after),
                    )
                )
    finally:
        reader.close()
    return out


def _undecodable(table: TableConfig, start: Position, problem: str) -> ValidationError:
    return ValidationError(
        f"{table.name}: the binlog after the target's position {start} cannot be decoded with "
        f"the table's current definition ({problem}); was the table recreated or altered since "
        "its load? Run `seam load full` and validate again"
    )


def _decoded(stream, table: TableConfig, start: Position):
    try:
        yield from stream
    except (UnicodeDecodeError, KeyError, IndexError, struct.error) as exc:
        raise _undecodable(table, start, f"{type(exc).__name__}: {exc}") from None


def _images_at(schema: TableSchema, table: TableConfig, changes) -> dict[tuple[str, ...], dict | None]:
    """Each changed key's row at the start of ``changes``: the before image of its first change."""
    at: dict[tuple[str, ...], dict | None] = {}
    for before, after in changes:
        if before is not None:
            at.setdefault(key_texts(schema, table, before), before)
        if after is not None:
            at.setdefault(key_texts(schema, table, after), None)
    return at


def key_texts(schema: TableSchema, table: TableConfig, image: dict) -> tuple[str, ...]:
    """A normalised row's key in canonical text (``seam.validate.canonical``) form."""
    texts = tuple(_value_text(schema.column(k), image[k]) for k in table.key)
    return cast(tuple[str, ...], texts)  # key columns are NOT NULL


def _value_text(column: Column, value: Any) -> str | None:
    return None if value is None else codec(column).check_text(column, value)


def _in_scope(schema: TableSchema, table: TableConfig, scope: Scope, image: dict | None, soft: bool) -> bool:
    if image is None:
        return False
    if scope.key_range is not None:
        k = int(image[table.key[0]])
        if not scope.key_range[0] <= k <= scope.key_range[1]:
            return False
    w = scope.resolved
    if w is not None:
        column = schema.column(w.cursor)
        lo, hi = _window_bounds(column, w)
        if image[w.cursor] is None or not lo < _cursor_value(column, image[w.cursor]) <= hi:
            return False
    if soft and str(image.get(table.soft_delete) or 0) not in ("0", "False", "false"):
        return False
    return True


def _window_bounds(column: Column, w: Window) -> tuple:
    return (int(w.start), int(w.end)) if column.data_type in INTEGER else (w.start, w.end)


def _cursor_value(column: Column, value: Any) -> int | str:
    """A normalised cursor value, comparable with ``_window_bounds``."""
    if column.data_type in INTEGER:
        return int(value)
    text = _value_text(column, value)
    assert text is not None  # callers leave rows without a cursor value out of every window
    return text + " 00:00:00.000000" if len(text) == 10 else text


# ------------------------------------------------------------------ comparison


@dataclass
class _Plan:
    mode: str  # range | hash
    lo: int = 0
    width: int = 1
    buckets: int = 1

    def label(self, b: int) -> str:
        if self.mode == "hash":
            return f"hash {b}/{self.buckets}"
        return f"[{self.lo + b * self.width}, {self.lo + (b + 1) * self.width})"


def _compare(
    report: Report,
    source: Side,
    target: Side,
    schema: TableSchema,
    table: TableConfig,
    changes: Callable[[], list],
    window_mode: bool,
    *,
    limit: int,
    bucket_rows: int,
    max_buckets: int,
    pull_rows: int,
    say: Callable[[str], None],
) -> None:
    metrics = [(c, m) for c, ms in column_checks(table).items() for m in ms if m in METRICS]
    ranged = bool(table.key) and schema.column(table.key[0]).data_type in INTEGER
    with ThreadPoolExecutor(2) as pool:
        if ranged:
            (slo, shi), (tlo, thi) = pool.map(lambda side: side.key_bounds(), (source, target))
            los = [v for v in (slo, tlo) if v is not None]
            his = [v for v in (shi, thi) if v is not None]
            lo, hi = (min(los), max(his)) if los else (0, 0)
            est = _estimated_rows(source)
            n = max(1, min(max_buckets, math.ceil(min(est, hi - lo + 1) / bucket_rows)))
            plan = _Plan("range", lo=lo, width=max(1, math.ceil((hi - lo + 1) / n)))
            plan.buckets = math.ceil((hi - lo + 1) / plan.width)
            exprs = (source.bucket_of_range(lo, plan.width), target.bucket_of_range(lo, plan.width))
        else:
            plan = _Plan("hash", buckets=max(1, min(max_buckets, math.ceil(_estimated_rows(source) / bucket_rows))))
            exprs = (source.bucket_of_hash(plan.buckets), target.bucket_of_hash(plan.buckets))
        t0 = time.monotonic()
        s_aggr, t_aggr = pool.map(lambda pair: pair[0].aggregate(pair[1], metrics), zip((source, target), exprs))
    say(
        f"{table.name}: first pass in {time.monotonic() - t0:.1f}s: {plan.buckets:,} bucket checksums on each side "
        f"(the source as it is now; rows changed since the compared point are looked at next)"
    )

    differing = {b for b in set(s_aggr) | set(t_aggr) if s_aggr.get(b, (0, 0))[:2] != t_aggr.get(b, (0, 0))[:2]}
    at_p: dict[tuple[str, ...], dict | None] = {}
    if differing:
        # 3. keys changed after P, with their images at P
        since = changes()
        if since and not table.key:
            say(
                f"{table.name}: keyless and changed {len(since):,} times since the target's position; "
                "comparing whole rows, rolled back to that position"
            )
            return _compare_keyless(report, source, target, schema, since, limit)
        at_p = _images_at(schema, table, since)
        report.changed_since = len(at_p)
    changed_buckets = collections.Counter(_bucket_of(plan, k) for k in at_p)
    flagged = sorted(differing | set(changed_buckets))
    # narrow flagged buckets down to ranges small enough to compare row by row (range mode: bisection)
    ranges: list[tuple[int, str]] = []  # (top-level bucket, SQL condition)
    for b in flagged:
        rows = max(s_aggr.get(b, (0,))[0], t_aggr.get(b, (0,))[0])
        if plan.mode == "range":
            lo = plan.lo + b * plan.width
            ranges += [
                (b, cond)
                for cond in _narrow(source, target, lo, lo + plan.width, rows, pull_rows, b in changed_buckets)
            ]
        else:
            ranges.append((b, f"{source.bucket_of_hash(plan.buckets)} = {b}"))
    mismatched_buckets: set[int] = set()
    differences: list[Difference] = []
    q_rows: dict[tuple[str, ...], tuple] = {}
    bucket_of: dict[int, int] = {}  # id(difference) -> its bucket
    for b, cond in ranges:
        tcond = (
            cond.replace(source.col(table.key[0]), target.col(table.key[0]))
            if plan.mode == "range"
            else f"{target.bucket_of_hash(plan.buckets)} = {b}"
        )
        with ThreadPoolExecutor(2) as pool:
            s_rows, t_rows = pool.map(lambda pair: pair[0].texts(pair[1]), ((source, cond), (target, tcond)))
        found = _diff_rows(schema, table, s_rows, t_rows, at_p, q_rows)
        if found:
            mismatched_buckets.add(b)
            differences += found
            bucket_of.update((id(d), b) for d in found)
    # keys changed after P: compare the target's row with the key's image at P (normalised values)
    soft = bool(table.soft_delete)  # flagged rows are kept out of the target in every mode
    if at_p:
        keys = list(at_p)
        t_vals = target.values_by_key(keys, in_scope=True)
        for key in keys:
            expected = at_p[key] if _in_scope(schema, table, source.scope, at_p[key], soft) else None
            actual = t_vals.get(key)
            d = _difference(schema, table, key, expected, actual)
            if d is not None:
                differences.append(d)
                mismatched_buckets.add(_bucket_of(plan, key))
                bucket_of[id(d)] = _bucket_of(plan, key)
    moved: list[Difference] = []
    if window_mode:
        moved = _moved_on(source, schema, table, differences)
        report.changed_since += len(moved)
        differences = [d for d in differences if d not in moved]
        mismatched_buckets = {bucket_of[id(d)] for d in differences}  # the rest are rechecked, not differing
    # totals and the (limited) list
    report.missing = sum(d.kind == "missing" for d in differences)
    report.extra = sum(d.kind == "extra" for d in differences)
    report.different = sum(d.kind == "different" for d in differences)
    report.differences = differences[:limit]
    s_count = sum(v[0] for v in s_aggr.values())
    # the source's count and metrics at P: take the changed keys' rows at Q out, put their images at P in
    q_changed = {k: v for k, v in q_rows.items() if k in at_p}
    p_present = {k: v for k, v in at_p.items() if _in_scope(schema, table, source.scope, v, soft)}
    report.source_rows = s_count - len(q_changed) + len(p_present)
    # a row that moved past the window is in the target's window still, with its old values: not counted
    report.target_rows = sum(v[0] for v in t_aggr.values()) - len(moved)
    report.metrics = _metrics(schema, table, metrics, s_aggr, t_aggr, q_changed, p_present, [d.target for d in moved])
    report.buckets = [
        BucketResult(
            plan.label(b),
            s_aggr.get(b, (0,))[0],
            t_aggr.get(b, (0,))[0],
            "differs" if b in mismatched_buckets else "rechecked" if b in flagged else "equal",
        )
        for b in sorted(set(s_aggr) | set(t_aggr) | set(flagged))
    ]


def _compare_keyless(report: Report, source: Side, target: Side, schema: TableSchema, changes, limit: int) -> None:
    def canon(image: dict) -> str:
        return json.dumps(image, sort_keys=True, default=str)

    with ThreadPoolExecutor(2) as pool:
        s_rows, t_rows = pool.map(lambda side: side.all_values(), (source, target))
    at_p = collections.Counter(canon(r) for r in s_rows)
    for before, after in reversed(changes):  # undo, newest first
        if after is not None:
            at_p[canon(after)] -= 1
        if before is not None:
            at_p[canon(before)] += 1
    at_p = +at_p
    now = collections.Counter(canon(r) for r in t_rows)
    differences = [Difference("missing", json.loads(r)) for r, n in (at_p - now).items() for _ in range(n)]
    differences += [Difference("extra", json.loads(r)) for r, n in (now - at_p).items() for _ in range(n)]
    report.source_rows, report.target_rows = sum(at_p.values()), len(t_rows)
    report.changed_since = len(changes)
    report.missing = sum(d.kind == "missing" for d in differences)
    report.extra = len(differences) - report.missing
    report.differences = differences[:limit]
    report.buckets = [
        BucketResult("whole table", report.source_rows, report.target_rows, "differs" if differences else "rechecked")
    ]


def _estimated_rows(side: Side) -> int:
    rows = side.run(
        "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
        (side.schema.db, side.schema.table),
    )
    return max(1, int(rows[0][0] or 1)) if rows else 1


def _bucket_of(plan: _Plan, key: tuple[str, ...]) -> int:
    if plan.mode == "range":
        return (int(key[0]) - plan.lo) // plan.width
    text = "\x1f".join("\x1e" if k is None else k for k in key)
    return int(hashlib.md5(text.encode()).hexdigest()[16:23], 16) % plan.buckets


def _narrow(source: Side, target: Side, lo: int, hi: int, rows: int, pull_rows: int, keep_all: bool) -> list[str]:
    """Key-range conditions covering the differences in [lo, hi): split by 16 while a range is too big to pull."""
    k_src = source.col(source.key_cols[0].name)
    if rows <= pull_rows or hi - lo <= SPLIT or keep_all:
        return [f"{k_src} >= {lo} AND {k_src} < {hi}"]
    width = math.ceil((hi - lo) / SPLIT)
    cond_s = f"{k_src} >= {lo} AND {k_src} < {hi}"
    cond_t = cond_s.replace(k_src, target.col(target.key_cols[0].name))
    with ThreadPoolExecutor(2) as pool:
        s, t = pool.map(
            lambda pair: pair[0].aggregate(pair[0].bucket_of_range(lo, width), [], pair[1]),
            ((source, cond_s), (target, cond_t)),
        )
    out = []
    for b in sorted(set(s) | set(t)):
        if s.get(b, (0, 0))[:2] != t.get(b, (0, 0))[:2]:
            sub_lo = lo + b * width
            out += _narrow(
                source,
                target,
                sub_lo,
                min(hi, sub_lo + width),
                max(s.get(b, (0,))[0], t.get(b, (0,))[0]),
                pull_rows,
                False,
            )
    return out


def _diff_rows(schema: TableSchema, table: TableConfig, s_rows, t_rows, at_p: dict, q_rows: dict) -> list[Difference]:
    """Row-by-row comparison of canonical texts; keys changed after P are left to the caller."""
    names = schema.names
    if not table.key:  # keyless: multisets of whole rows
        s_count = collections.Counter(r for _, r in s_rows)
        t_count = collections.Counter(r for _, r in t_rows)
        out = [Difference("missing", dict(zip(names, r))) for r, n in (s_count - t_count).items() for _ in range(n)]
        return out + [
            Difference("extra", dict(zip(names, r))) for r, n in (t_count - s_count).items() for _ in range(n)
        ]
    s_map = dict(s_rows)
    t_map = dict(t_rows)
    for key, row in s_map.items():
        if key in at_p:
            q_rows[key] = row
    out = []
    for key in sorted(set(s_map) | set(t_map), key=_sort_key):
        if key in at_p:
            continue
        s, t = s_map.get(key), t_map.get(key)
        key_dict = dict(zip(table.key, key))
        if t is None:
            out.append(Difference("missing", key_dict, source=dict(zip(names, s or ()))))
        elif s is None:
            out.append(Difference("extra", key_dict, target=dict(zip(names, t))))
        elif s != t:
            cols = tuple(n for n, a, b in zip(names, s, t) if a != b)
            out.append(
                Difference(
                    "different",
                    key_dict,
                    cols,
                    {c: s[names.index(c)] for c in cols},
                    {c: t[names.index(c)] for c in cols},
                )
            )
    return out


def _sort_key(key: tuple) -> tuple:
    return tuple((0, int(k), "") if k is not None and k.lstrip("-").isdigit() else (1, 0, k or "") for k in key)


def _difference(
    schema: TableSchema, table: TableConfig, key: tuple, expected: dict | None, actual: dict | None
) -> Difference | None:
    key_dict = dict(zip(table.key, key))
    if expected is None and actual is None:
        return None
    if actual is None:
        return Difference("missing", key_dict, source=expected)
    if expected is None:
        return Difference("extra", key_dict, target=actual)
    cols = tuple(c for c in schema.names if expected[c] != actual[c])
    if not cols:
        return None
    return Difference("different", key_dict, cols, {c: expected[c] for c in cols}, {c: actual[c] for c in cols})


def _moved_on(source: Side, schema: TableSchema, table: TableConfig, differences: list[Difference]) -> list[Difference]:
    """Window mode: target rows whose source row now has a cursor past the compared window changed after
    its window was loaded; the next window brings them. Those are counted, not reported."""
    suspects = [d for d in differences if d.kind == "extra"]
    if not suspects:
        return []
    keys = [tuple(d.key[k] for k in table.key) for d in suspects]
    now = source.values_by_key(keys, in_scope=False)
    column = schema.column(table.cursor_column)
    window = source.scope.resolved
    assert window is not None  # only a window can leave rows its cursor says were loaded later
    end = _window_bounds(column, window)[1]
    return [
        d
        for d, key in zip(suspects, keys)
        if now.get(key) is not None and _cursor_value(column, now[key][table.cursor_column]) > end
    ]


def _metrics(schema, table, metrics, s_aggr, t_aggr, q_changed, p_present, t_moved) -> list[MetricResult]:
    out = []
    names = schema.names
    for i, (column, metric) in enumerate(metrics):

        def total(aggr, i=i):
            return sum((Decimal(str(v[2 + i])) for v in aggr.values() if v[2 + i] is not None), Decimal(0))

        s, t = total(s_aggr), total(t_aggr)
        idx = names.index(column)
        s -= sum(_measure(metric, row[idx]) for row in q_changed.values())  # texts at Q out
        t -= sum(_measure(metric, row[column]) for row in t_moved)  # target rows that moved past the window out
        s += sum(_measure(metric, image[column]) for image in p_present.values())  # images at P in
        expected = column_checks(table)[column][metric].get("equal_to")
        ok = s == t and (expected is None or t == Decimal(str(expected)))
        out.append(MetricResult(column, metric, _num(s), _num(t), None if expected is None else str(expected), ok))
    return out


def _measure(metric: str, value: Any) -> Decimal:
    """One row's contribution to a column check."""
    if metric == "sum":
        return Decimal(str(value)) if value is not None else Decimal(0)
    return Decimal(value is None)


def _num(value: Decimal) -> str:
    return format(value.normalize(), "f") if value == value.to_integral() else str(value)


# ------------------------------------------------------------------ ledger and HTML


def record(pipeline: Pipeline, report: Report, vid: str) -> None:
    """Store the report in ``seam.validations`` under the id ``vid``."""
    db, _, tbl = report.table.partition(".")
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:  # validate() made the table
        record_validation(conn, pipeline.target.state_schema, vid, db, tbl, report)
