"""Repair, not reload: ``seam repair TABLE`` copies again only the rows of a table that differ from its source.

1. BEGIN of a ``repair`` batch on the table's topic. While a batch of a table is open the sink holds that
   table's change events (as for a full load): its target rows and its applied position A stay as they are.
   The repair waits until the sink has opened the batch.
2. Validation finds every key whose target row differs from the source's row at A (``seam.validate``: at one
   consistent point, by bisection of checksums; rows changed after A compared with their image at A). With
   ``--full`` it compares with the source as it is now, at an exact snapshot position Q instead: for a
   position whose binlog is gone (purged, a failover without GTIDs) or a table that was left behind.
3. A consistent snapshot of the source at an exact position P (taken after 2). The keys to copy again are
   the differing keys and every key the binlog (A, P] (or (Q, P]) changed: every other key's target row is
   already the source's row at P. Their rows at P are published (a key without a row at P as a delete),
   then END at P.
4. The sink replaces exactly those keys' rows in the target, stores P as the table's position in the same
   transaction, and applies the held change events after P: the table goes on streaming from P (a STOPPED
   table is taken up again; so is a running one, which lost no change and doubled none).

A STOPPED table whose columns the source changed meanwhile (DDL the stream did not follow) first gets the
source's columns in the target (renamed, dropped, added NULL, retyped by a cast, or added afresh where the
target's values do not cast; ``_take_definitions``), and is then compared as with ``--full``: the binlog since
the stop holds rows of the old columns.

A repair started while another batch of the table is under way (the stream's own repair after a cut-over, a
full load) waits for it to end rather than supersede it; then it compares. A repair that finds more than
``repair.max_rows`` differing rows changes nothing (its batch is cancelled; the held changes are applied) and
says so: a full load is then the cheaper way. Keyless tables cannot be
repaired by key: ``seam load full``. What it reads out, carries and writes follows the difference, not the
table; its comparison still reads every row once inside each database (validation's checksum scan), so on
a narrow table near the target a reload takes about as long (README, "Repair, not reload").

Delivery guarantee: exactly once, as a batch: the sink applies the repair's END atomically with its
position, or (cancelled, rejected, or the process gone and the batch abandoned) not at all.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime

import psycopg
import pymysql

from seam.apply.follow_ddl import align_columns
from seam.apply.retry import transient
from seam.apply.target import Landing, target_table
from seam.core.errors import DivergenceError, ValidationError, first_line
from seam.core.identifiers import quote
from seam.core.pipeline import Pipeline, TableConfig
from seam.core.schema import Column, TableSchema, redefined
from seam.load_run import job_env, sink_running
from seam.source.checks import check_streamable
from seam.source.ddl import same_type
from seam.source.errors import transient_source_error
from seam.source.gtid import gtids_enabled, server_identity
from seam.source.gtid_positions import gtids_at
from seam.source.publication import Publication
from seam.source.schema import read_schema
from seam.source.snapshot import open_snapshot, snapshot_opening
from seam.state.connection import StateWatch, open_target
from seam.state.ledger import batch_status, committed_columns
from seam.state.positions import note_stop, store_columns, table_state
from seam.validate.at_position import changes_since, key_texts
from seam.validate.cascaded import cascaded_keys
from seam.validate.side import Scope, Side
from seam.validate.validation import check_config, ensure_functions, validate
from seam.wire.boundary import RECONCILE_PART, End, Part, Tally, new_batch_id
from seam.wire.records import Record, kafka_key, key_of


class RepairError(DivergenceError):
    """A repair that could not be done; the message names why and the way out. The target is unchanged."""


@dataclass
class RepairResult:
    table: str
    batch: str
    compared_at: str  # the position the target was compared at (A, or Q with --full)
    position: str  # where the table is now (P)
    differing: int  # rows validation found different, missing or extra
    changed: int  # keys the binlog changed between the comparison and P (copied again too)
    rows: int  # rows published (the source's rows of those keys at P)
    deletes: int  # keys without a row at P: deleted from the target
    seconds: float

    def summary(self) -> str:
        return (
            f"{self.table}: repaired at {self.position}: {self.differing:,} differing row(s) found at "
            f"{self.compared_at}, {self.changed:,} key(s) changed since; {self.rows:,} row(s) written, "
            f"{self.deletes:,} deleted, in {self.seconds:.1f}s (batch {self.batch})"
        )


REPAIR_ATTEMPTS = 4  # a repair interrupted by a transient error is cancelled and done again after 1, 2, 4 s


def repair_table(
    pipeline: Pipeline,
    table: TableConfig,
    *,
    full: bool = False,
    max_rows: int | None = None,
    timeout: float = 900.0,
    env: Mapping[str, str] | None = None,
    say: Callable[[str], None] = print,
) -> RepairResult:
    """Repair one table (see the module docstring); raises RepairError (target unchanged) or returns what
    was done. ``env``: the connections' ``SEAM_*`` variables for the sink it starts when none runs. A transient
    error of either database (a restart, a failover, a cancelled statement) ends the attempt, which changed
    nothing (its batch is cancelled), and the repair is done again."""
    attempt = 1
    while True:
        try:
            return _repair_once(pipeline, table, full=full, max_rows=max_rows, timeout=timeout, env=env, say=say)
        except Exception as exc:
            if not (transient(exc) or transient_source_error(exc)):
                raise
            if attempt == REPAIR_ATTEMPTS:
                raise RepairError(
                    f"{table.name}: the repair was interrupted {attempt} times for a transient reason, the last: "
                    f"{first_line(exc)}; nothing was changed; run `seam repair {table.name}` again"
                ) from None
            delay = 2 ** (attempt - 1)
            say(
                f"{table.name}: the repair was interrupted ({first_line(exc)}, transient); nothing was changed; "
                f"repairing again in {delay} s"
            )
            time.sleep(delay)
            attempt += 1


def _repair_once(
    pipeline: Pipeline,
    table: TableConfig,
    *,
    full: bool,
    max_rows: int | None,
    timeout: float,
    env: Mapping[str, str] | None,
    say: Callable[[str], None],
) -> RepairResult:
    """One attempt. Its length: one repair's steps in their order (compare at one point, read, publish,
    await the commit), each of which leaves the table as it was when it fails."""
    if not table.key:
        raise RepairError(
            f"{table.name} has no key: a repair finds rows by key; run `seam load full {table.name}` instead"
        )
    limit = max_rows or pipeline.repair.max_rows
    started = time.monotonic()
    batch = new_batch_id()
    publication = Publication(pipeline, table, batch)
    watch = StateWatch(pipeline, say)  # the sink's batch state, read across a restart of the target
    watch.hold([batch])  # while it compares, no rows come: its sink must not take it for gone
    sink: subprocess.Popen | None = None
    ended = False
    try:
        source = pymysql.connect(**pipeline.source.pymysql_kwargs(), connect_timeout=10)
        try:
            schema = read_schema(source, table.db, table.table)
            if not table.incremental:  # the stream takes the table up after the repair: it must be able to
                check_streamable(source, schema)
        finally:
            source.close()
        try:  # before the target's columns change: a renamed column the checks still name
            check_config(schema, table, Scope())
        except ValidationError as exc:
            raise RepairError(f"{exc}; nothing was changed: name the source's columns in the pipeline") from None
        if watch.take_tables([table], timeout) is not None:  # another load or repair of it: its batch stays
            raise RepairError(
                f"{table.name}: another load or repair of it still runs after {timeout:.0f}s; nothing was changed: "
                "run the repair again once it has ended (`seam stream status`)"
            )
        aligned = _take_definitions(pipeline, watch.conn, table, schema, limit, say)
        full = aligned or full
        if not sink_running(watch.conn, publication.topic):
            sink = _start_sink(pipeline, table, batch, timeout, env)
        publication.begin("repair", schema)
        # the comparison waits for the sink to hold the table: comparing while it still applies what came
        # before the BEGIN (a stream starting, a sink of our own taking over the topic) left a running table
        # behind its source in the stack test of a repair under a writer
        _wait_state(watch, pipeline, publication, lambda s: s is not None, timeout, sink, "open the repair's batch")
        say(f"{table.name}: repair batch {batch} open; the sink holds the table's changes meanwhile")

        def cancel(why: str) -> None:
            nonlocal ended
            publication.cancel("repair", why)
            ended = True

        try:
            report = validate(pipeline, table, limit=limit + 1, as_of_source=full, say=say)
        except ValidationError as exc:
            cancel(str(exc))
            raise RepairError(str(exc) if str(exc).startswith(f"{table.name}:") else f"{table.name}: {exc}") from None
        if report.unchecked:
            cancel(report.problem or report.unchecked)
            raise RepairError(f"{table.name}: {report.problem}")
        if report.compared_at is None:
            why = (
                f"its last load was a window, so it is compared up to its watermark, not at a position: load the "
                f"window again (`seam load incremental {table.name}`) or `seam load full {table.name}`"
            )
            cancel(why)
            raise RepairError(f"{table.name}: {why}")
        differing = report.missing + report.extra + report.different
        if differing > limit:
            why = f"{differing:,} rows differ, {_over(limit, table)}"
            cancel(why)
            kept = (
                "no row was changed (the target's columns are the source's now)" if aligned else "nothing was changed"
            )
            raise RepairError(f"{table.name}: {why}; {kept}")
        compared_at = report.compared_at
        say(f"{table.name}: {differing:,} differing row(s) at {compared_at} ({report.seconds:.1f}s)")
        try:
            end, changed, deletes = _publish_rows(
                pipeline, table, schema, publication, compared_at, {tuple(d.key.values()) for d in report.differences}
            )
        except ValidationError as exc:  # (compared_at, P] cannot be read, or a cascade in it cannot be followed
            cancel(str(exc))
            raise RepairError(str(exc)) from None
        ended = True
        final = _wait_state(
            watch,
            pipeline,
            publication,
            lambda s: s is not None and s["state"] != "open",
            timeout,
            sink,
            "apply the repair",
        )
        if final["state"] != "committed":
            raise RepairError(f"{table.name}: the sink did not commit the repair ({final['state']}: {final['error']})")
        return RepairResult(
            table=table.name,
            batch=batch,
            compared_at=str(compared_at),
            position=str(end.position),
            differing=differing,
            changed=changed,
            rows=end.parts[0].rows,
            deletes=deletes,
            seconds=round(time.monotonic() - started, 2),
        )
    except BaseException:
        if not ended:  # the open batch would hold the table's changes until load.abandon_after
            try:
                publication.cancel("repair", "interrupted")
            except Exception:  # noqa: BLE001 - the batch is then abandoned by the sink
                pass
        raise
    finally:
        if sink is not None:
            _stop(sink)
        watch.close()


# noted in a stopped table's reason (``_align_target``) until a repair copies its rows and it streams again
COLUMNS_TAKEN = "; its target's columns were made the source's, and not yet its rows, by a repair"


def _take_definitions(pipeline: Pipeline, conn, table: TableConfig, schema: TableSchema, limit: int, say) -> bool:
    """A repair copies rows into the target's columns as they are, and records the source's definitions as
    theirs. Where the source changed the table's columns since the target's were made:

    - on a STOPPED table (the stream followed none of it: a second ALTER after the one it stopped at, or one it
      could not follow) the target's columns are first made the source's, in one transaction with the columns
      recorded: renamed (``_renamed``), dropped, added (NULL), retyped (each value cast). The comparison then
      finds every row whose value is not the source's, whatever the change did to it, and the repair copies
      those. Returns True: the comparison is then with the source as it is now (``--full``), the binlog since
      the stop holding rows of the old columns. Added columns whose values alone are more rows than ``limit``
      are refused first: the target keeps the columns it has;
    - on a running table the stream follows DDL itself: the repair refuses until it has (RepairError)."""
    state = pipeline.target.state_schema
    recorded = committed_columns(conn, state, table.db, table.table)
    if recorded is None:
        return False
    changed = redefined(recorded, schema, same_definition)
    then = replace(schema, columns=tuple(Column(**c) for c in recorded))
    stopped = (table_state(conn, state, table.db, table.table) or (None, None))[1]
    if not changed and set(then.names) == set(schema.names):  # a repair that made them so copied no row yet
        return bool(stopped and COLUMNS_TAKEN in stopped)  # (the binlog since the stop has the old columns)
    if not stopped:
        if changed:  # (columns on one side only: validation's own check names them)
            raise RepairError(
                f"{table.name}: the source changed the definition of {', '.join(changed)} and the stream has not "
                f"followed it yet: run `seam stream wait`, then `seam repair {table.name}` again (or `seam load "
                f"full {table.name}`)"
            )
        return False
    gone = [k for k in table.key if k not in schema.names]
    if gone:
        raise RepairError(
            f"{table.name}: the source has no column {', '.join(gone)} of the table's key any more; nothing was "
            f"changed: set the table's key (tables[].key) and run `seam load full {table.name}`"
        )
    renamed = _renamed(then, schema, table.key)
    added = [n for n in schema.names if n not in then.names and n not in renamed.values()]
    valued = _rows_valued(pipeline, table, added) if added else 0
    if valued > limit:
        raise RepairError(
            f"{table.name}: the source added {', '.join(added)} while the table was stopped, with values in {valued:,} "
            f"rows, {_over(limit, table)}; nothing was changed"
        )
    afresh = _align_target(pipeline, table, then, schema, renamed, added, limit)
    cast_not = " (its values did not cast: added afresh)"
    done = [c + (cast_not if any(c.startswith(f"{n} ") for n in afresh) else "") for c in changed]
    done += [
        f"{old} renamed {new} (the same definition in the same place: its values are kept, and compared)"
        for old, new in renamed.items()
    ]
    done += [f"{n} dropped" for n in then.names if n not in schema.names and n not in renamed]
    done += [f"{n} added" for n in added]
    say(f"{table.name}: the target's columns made the source's: {', '.join(done)}")
    return True


def _renamed(then: TableSchema, now: TableSchema, key: Sequence[str]) -> dict[str, str]:
    """Of the columns the target has (``then``) and the source no longer has, those taken as renamed (old name
    to new): one of the source's new columns has the same definition and the same place (after the same column
    both sides have), and no other gone column has both (a `RENAME COLUMN` while the table was stopped, or one
    the binlog does not hold). A guess, and a safe one: the comparison that follows checks every value, so a
    column that was in fact dropped and another added there costs the rows that differ, as an added column's
    rows with a value would. Never a key column (its rows would not be found by key)."""
    both = set(then.names) & set(now.names)

    def place(schema: TableSchema, name: str) -> str | None:
        before = schema.names[: schema.names.index(name)]
        return next((n for n in reversed(before) if n in both), None)

    def alike(a: Column, b: Column) -> bool:
        return same_definition(a, b) and place(then, a.name) == place(now, b.name)

    gone = [c for c in then.columns if c.name not in now.names and c.name not in key]
    new = [c for c in now.columns if c.name not in then.names]
    pairs = {}
    for column in gone:
        like = [c for c in new if alike(column, c)]
        if len(like) == 1 and sum(alike(g, like[0]) for g in gone) == 1:
            pairs[column.name] = like[0].name
    return pairs


def _align_target(
    pipeline: Pipeline,
    table: TableConfig,
    then: TableSchema,
    schema: TableSchema,
    renamed: dict[str, str],
    added: list[str],
    limit: int,
) -> list[str]:
    """The target table's columns made ``schema``'s (from ``then``'s, ``renamed`` old name to new), with the
    columns recorded, in one transaction; RepairError (nothing changed) for what the target refuses. A column
    whose values the target cannot cast (a text made an integer) is added afresh, NULL: the comparison then
    finds each of its rows, which are copied, unless that is more rows than ``limit`` (``added``: the columns
    added, whose rows count too). Returns the columns added afresh."""
    with open_target(pipeline, application_name="seam-repair") as tgt:
        tgt.execute("SET lock_timeout = '10s'")  # a report holding the table: transient, the repair goes again
        postgis = tgt.execute("SELECT to_regtype('geometry') IS NOT NULL").fetchone()
        landing = Landing(bool(postgis and postgis[0]), pipeline.target.nul_replacement, pipeline.target.zero_dates)
        target = target_table(table.db, table.table)
        try:
            afresh = align_columns(
                tgt, target, then, schema, tuple(table.key), landing, renamed, afresh_if_uncastable=True
            )
        except psycopg.Error as exc:
            if transient(exc):
                raise
            raise RepairError(
                f"{table.name}: the target could not take the source's new columns ({first_line(exc)}); nothing "
                f"was changed: run `seam load full {table.name}`"
            ) from None
        valued = _rows_valued(pipeline, table, added + afresh) if afresh else 0
        if valued > limit:  # (the transaction is rolled back on the way out)
            raise RepairError(
                f"{table.name}: the target's values of {', '.join(afresh)} do not cast to the source's new type; "
                f"taking the column afresh would copy the {valued:,} rows with a value in {', '.join(added + afresh)}, "
                f"{_over(limit, table)}; nothing was changed"
            )
        state = pipeline.target.state_schema
        store_columns(tgt, state, table.db, table.table, [asdict(c) for c in schema.columns])
        note_stop(tgt, state, table.db, table.table, f"{COLUMNS_TAKEN} at {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC")
        tgt.commit()
    return afresh


def _over(limit: int, table: TableConfig) -> str:
    """What every refusal over ``repair.max_rows`` ends with: the limit and the ways out."""
    return (
        f"more than repair.max_rows ({limit:,}): run `seam load full {table.name}` (or repair with a higher --max-rows)"
    )


def _rows_valued(pipeline: Pipeline, table: TableConfig, columns: list[str]) -> int:
    """The source rows with a value (not NULL) in any of ``columns``: each is a row the repair would copy."""
    src = pymysql.connect(**pipeline.source.pymysql_kwargs(), connect_timeout=10)
    try:
        with src.cursor() as cur:
            held = " OR ".join(f"{quote(c)} IS NOT NULL" for c in columns)
            cur.execute(f"SELECT COUNT(*) FROM {quote(table.db)}.{quote(table.table)} WHERE {held}")
            return cur.fetchone()[0]
    finally:
        src.close()


def same_definition(a: Column, b: Column) -> bool:
    """The same type, however spelled, and the same nullability: what the target's column was made from (a
    text's character set is not: the target's text holds any)."""
    return a.nullable == b.nullable and same_type(replace(a, charset=None), replace(b, charset=None))


def _publish_rows(pipeline, table, schema, publication: Publication, compared_at, keys) -> tuple[End, int, int]:
    """The rows at an exact snapshot position P of ``keys`` and of every key changed in (compared_at, P],
    then END at P."""
    src = pymysql.connect(**pipeline.source.pymysql_kwargs(utc=True), connect_timeout=10)
    tgt = open_target(pipeline, autocommit=True, application_name="seam-repair")
    try:
        opening = replace(snapshot_opening(src, pipeline, table), exact=True)
        at = open_snapshot(src, pipeline.source, opening, table.name)
        if read_schema(src, table.db, table.table) != schema:  # an ALTER up to P (or just after it, to be safe)
            raise ValidationError(
                f"{table.name}: its definition changed on the source during the repair; run `seam repair "
                f"{table.name}` again"
            )
        changes = changes_since(pipeline, src, schema, table, compared_at, at)
        changed = {key_texts(schema, table, image) for pair in changes for image in pair if image is not None}
        changed |= cascaded_keys(pipeline, src, tgt, schema, table, compared_at, at, changes)
        wanted = sorted(keys | changed)
        nul, state = pipeline.target.nul_replacement, pipeline.target.state_schema
        ensure_functions(tgt, state)
        rows = Side("mysql", src, schema, table, state, Scope(), bool(table.soft_delete), nul).values_by_key(
            wanted, True
        )
        gone = [k for k in wanted if k not in rows]
        target_rows = Side("postgres", tgt, schema, table, state, Scope(), False, nul).values_by_key(gone, False)
        gtids = gtids_at(src, at, pipeline.source) if gtids_enabled(src) else None
        server = server_identity(src)
    finally:
        src.close()
        tgt.close()
    written, deleted = Tally(), Tally()
    record = functools.partial(Record, db=table.db, table=table.table, position=at, batch=publication.batch, attempt=0)
    for row in rows.values():
        value = record(
            op="r", key=key_of(schema, table.key, row), before=None, after=row, snapshot=True, part=0
        ).to_json()
        publication.send(value, kafka_key(key_of(schema, table.key, row)))
        written.add(value)
    for row in target_rows.values():
        value = record(
            op="d", key=key_of(schema, table.key, row), before=row, after=None, part=RECONCILE_PART
        ).to_json()
        publication.send(value, kafka_key(key_of(schema, table.key, row)))
        deleted.add(value)
    end = publication.end(
        "repair",
        at,
        [Part(0, 0, written.rows, written.checksum), Part(RECONCILE_PART, 0, deleted.rows, deleted.checksum)],
        gtids=str(gtids) if gtids and gtids.flavour else None,
        server=server,
        stats={"compared_at": str(compared_at), "changed_keys": len(changed), "keys": len(wanted)},
    )
    return end, len(changed - keys), deleted.rows


def _start_sink(pipeline: Pipeline, table: TableConfig, batch: str, timeout: float, env) -> subprocess.Popen:
    """A sink for the table's topic until the repair's batch is final (no sink holds the topic)."""
    command = [
        sys.executable,
        "-m",
        "seam.cli",
        "sink",
        *(["--pipeline", pipeline.path] if pipeline.path else []),
        "--table",
        table.name,
        "--until-batch",
        batch,
        "--timeout",
        str(timeout),
    ]
    return subprocess.Popen(command, env=job_env(env), start_new_session=True, stdout=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _wait_state(watch: StateWatch, pipeline, publication: Publication, done, timeout, sink, what) -> dict:
    """The batch's state once ``done`` says so. ``sink``: the one the repair started (None: another runs). When
    it exits because another sink took the topic as it started (the stream's, started again after its pipeline
    file changed), that one applies the batch."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            status = batch_status(watch.conn, pipeline.target.state_schema, publication.batch)
            if done(status):
                return status or {}
            if sink is not None and sink.poll() is not None and not sink_running(watch.conn, publication.topic):
                raise RepairError(f"the sink stopped (exit {sink.returncode}) before it could {what}")
        except psycopg.OperationalError as exc:  # the target restarted: the sink goes on after it, so does this
            watch.reconnect(exc)
        if time.monotonic() > deadline:
            raise RepairError(
                f"the sink did not {what} within {timeout:.0f}s: is the stream's sink running and reading the same "
                f"broker? (`seam stream status`)"
            )
        time.sleep(0.05)
