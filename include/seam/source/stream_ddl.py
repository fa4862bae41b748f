"""What a change reader does with a statement outside the transaction grammar (DDL, or a change logged as a
statement) and with a ROLLBACK logged with rows, for each followed table it touches.

DDL the target can follow (``seam.source.ddl``: TRUNCATE, widening MODIFY/CHANGE, ADD/DROP/RENAME COLUMN,
defaults, an online schema change's cut-over) becomes a SCHEMA message in the table's chain, applied by
the sink at its position; anything else publishes STOP for that table with the remedy. Other tables go on.

Delivery guarantee: that of the reader (at-least-once into Kafka, in binlog order per table).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from seam.core.identifiers import unfit_names
from seam.core.position import Position
from seam.core.schema import Column
from seam.source.binlog import RolledBack, Statement
from seam.source.chains import Chains, Followed, Rewind
from seam.source.ddl import (
    LATER_CHANGE,
    RENAMED_AWAY,
    RENAMED_ONTO,
    composed_clauses,
    ddl_effect,
    declared_columns,
    followed_columns,
    swapped_clauses,
)
from seam.source.declared import (
    PAD_CHAR_TO_FULL_LENGTH,
    Instant,
    Now,
    StatementClock,
    declared_column,
    declared_default,
    declares_json,
    json_as_longtext,
    settled_for_mode,
    settled_timestamps,
)
from seam.source.fill_times import shifted_wall
from seam.source.fills import Unfilled, mysql_default
from seam.source.ghosts import Ghosts
from seam.source.gtid import is_mariadb
from seam.source.schema import COLUMN_FIELDS, column_from_row
from seam.source.stream_cascades import Cascades
from seam.wire.boundary import SchemaChange
from seam.wire.records import normalize
from seam.wire.topics import Publisher

log = logging.getLogger("seam.streaming")

NAMES_THE_TIME = re.compile(r"\b(CURRENT_TIMESTAMP|NOW|LOCALTIME|LOCALTIMESTAMP|CURRENT_DATE|CURDATE)\b", re.I)
# a quoted date and time a TIMESTAMP default may be (the server reads it on the session's clock)
TIME_LITERAL = re.compile(r"['\"](\d{4}-\d\d-\d\d(?: \d\d:\d\d:\d\d(?:\.\d{1,6})?)?)['\"]")
# what a TIMESTAMP holds, in UTC
TIMESTAMP_RANGE = (dt.datetime(1970, 1, 1, 0, 0, 1), dt.datetime(2038, 1, 19, 3, 14, 7, 999999))
MAY_CHANGE_KEYS = re.compile(r"\bFOREIGN\b|\bCONSTRAINT\b|^\s*(CREATE|DROP|RENAME)\b", re.I)
TRANSACTIONAL = {"innodb", "xtradb", "rocksdb", "tokudb", "ndbcluster", "ndb"}
# how long a table renamed away waits, at the binlog's end, for a copy of it to take its name (gh-ost's two-step
# cut-over renames the table away, then its copy onto the name, at once)
AWAY_WAIT_S = 10.0


def follow_statement(
    chains: Chains,
    cascades: Cascades,
    ghosts: Ghosts,
    source: Callable[[], Any],
    publisher: Publisher,
    statement: Statement,
) -> None:
    """A query event outside the transaction grammar: DDL, or a statement the stream cannot follow. Raises
    ``Rewind`` when a foreign key now cascades from a table the reader does not decode yet. ``source``: the
    reader's catalog connection, asked for only when the statement needs it; ``ghosts``: the copies online
    schema changes build, seen after the followed tables took the statement."""
    if MAY_CHANGE_KEYS.search(statement.query):
        grown = cascades.load(source())
        if grown:  # the reader must decode the new parents' rows from here on
            raise Rewind(
                f"a foreign key from {', '.join('.'.join(p) for p in sorted(grown))} now cascades "
                f"into a streamed table ({statement.position})",
                reset=False,
            )
    for (db, table), followed in list(chains.followed.items()):
        effect = ddl_effect(statement.query, statement.schema, db, table, statement.sql_mode, statement.fold_names)
        if effect is None or not statement.position.after(followed.published):
            continue
        if effect[0] == "default" and (not followed.pending or statement.in_transaction):
            continue  # no row changes; ALTERs waiting for the ones after them take it in (an ADD's default)
        if effect[0] in ("alter", "default") and not statement.in_transaction:
            earlier = [a for a in followed.pending if statement.position.after(a[0].position)]  # a rewind reads again
            read_as = settled_for_mode(effect[1], statement.sql_mode)  # as the statement's session read it
            if declares_json(read_as) and is_mariadb(source()):
                read_as = json_as_longtext(read_as)
            settled = settled_timestamps(read_as, statement.explicit_timestamps, followed.schema.columns)
            if isinstance(settled, str):
                _stop(chains, publisher, followed, statement, settled)
                continue
            padded = _padded_chars(followed, settled, statement.sql_mode)
            if padded:
                _stop(chains, publisher, followed, statement, padded)
                continue
            clauses = _stamped(source, statement, settled)
            _follow_alters(chains, source, publisher, followed, [*earlier, (statement, clauses)])
            continue
        if followed.away is not None:  # the next statement on its name is a copy's rename onto it, or it stops
            away, copies, _ = followed.away
            followed.away = None
            swapped = (
                next((c for c in copies if _renamed_away(statement, c)), None) if effect[1] == RENAMED_ONTO else None
            )
            if swapped is None:
                _stop(chains, publisher, followed, away, RENAMED_AWAY)
                continue
            effect = ("cutover", swapped)
        elif effect[1] == RENAMED_AWAY and not followed.pending:
            copies = ghosts.copies_of(db, tuple(c.name for c in followed.schema.columns))
            if copies:  # gh-ost's two-step cut-over, perhaps: the copy's rename onto the name comes next
                followed.away = (statement, copies, time.monotonic())
                continue
        if followed.pending:
            _stop(chains, publisher, followed, statement, f"then {statement.query.strip()[:100]!r}: {LATER_CHANGE}")
            continue
        change = _followed_change(source, followed, statement, *effect, ghosts=ghosts)
        if isinstance(change, str):
            _stop(chains, publisher, followed, statement, change)
            continue
        _publish_change(chains, publisher, followed, change, effect[0], statement.position)
    ghosts.see(statement, lambda: {key: tuple(c.name for c in f.schema.columns) for key, f in chains.followed.items()})


def settle_alters(chains: Chains, source: Callable[[], Any], publisher: Publisher) -> None:
    """At the binlog's end: ALTERs that waited for the ones after them are followed now, or stop their table
    (the source's definition then is what every statement in the binlog left, or it changed outside it); a
    table renamed away whose copy did not take its name within ``AWAY_WAIT_S`` stops."""
    for followed in list(chains.followed.values()):
        if followed.pending:
            _follow_alters(chains, source, publisher, followed, followed.pending, last_chance=True)
        if followed.away is not None and time.monotonic() - followed.away[2] > AWAY_WAIT_S:
            away, followed.away = followed.away[0], None
            _stop(chains, publisher, followed, away, RENAMED_AWAY)


def _renamed_away(statement: Statement, table: tuple[str, str]) -> bool:
    effect = ddl_effect(statement.query, statement.schema, *table, statement.sql_mode, statement.fold_names)
    return effect == ("stop", RENAMED_AWAY)


def _follow_alters(chains, source, publisher, followed: Followed, alters: list, last_chance: bool = False) -> None:
    """ALTERs of the table in a row (no row of it between them) followed as one, at the last one's position.
    When the source's definition is already past them (a later ALTER ran before the reader came here), they
    wait for the next ALTER, or the binlog's end; a row of the table in between stops it
    (``chains.pending_rows``)."""
    statement = alters[-1][0]
    clauses = composed_clauses([c.name for c in followed.schema.columns], [c for _, c in alters])
    ddl = _queries(alters)
    change = clauses if isinstance(clauses, str) else _altered(source(), followed, clauses, ddl, statement.position)
    if isinstance(change, str) and change.endswith(LATER_CHANGE) and not last_chance:
        followed.pending = alters
        log.info("%s: the ALTER at %s waits for the statements after it", followed.table.name, statement.position)
        return
    followed.pending = []
    if isinstance(change, str):
        _stop(chains, publisher, followed, alters[0][0], change)
        return
    _publish_change(chains, publisher, followed, change, "alter", statement.position)


def follow_declared(
    chains: Chains, publisher: Publisher, followed: Followed, names: list[str], charsets: dict[str, str | None]
) -> bool:
    """A row of a table whose ALTERs wait (the source's definition had passed them when the reader read them):
    the ALTERs are followed from what they declared, at the last one's position, when that gives exactly the
    columns the row carries (``seam.source.ddl.declared_columns``); False, and a line in the log, when it
    cannot (the row then stops the table, ``chains.pending_rows``). ``charsets``: the row's, by column."""
    alters = followed.pending
    clauses = composed_clauses([c.name for c in followed.schema.columns], [c for _, c in alters])
    result = (
        clauses
        if isinstance(clauses, str)
        else declared_columns(followed.schema.columns, followed.schema.primary_key, clauses, names, charsets)
    )
    statement = alters[-1][0]
    change: SchemaChange | str = (
        result
        if isinstance(result, str)
        else unfit_names(("column", c.name) for c in result[0])
        or _schema_change(followed, statement.position, result, _queries(alters))
    )
    followed.declared_why = change if isinstance(change, str) else None
    if isinstance(change, str):
        log.warning(
            "%s: the ALTERs up to %s cannot be followed as declared: %s",
            followed.table.name,
            statement.position,
            change,
        )
        return False
    followed.pending = []
    _publish_change(chains, publisher, followed, change, "alter (as its statements declared)", statement.position)
    return True


def _padded_chars(followed: Followed, clauses: list[tuple], sql_mode: int | None) -> str | None:
    """Why an ALTER run under ``PAD_CHAR_TO_FULL_LENGTH`` cannot be followed: that session read a CHAR's values
    padded with spaces to its length, so a CHAR made a VARCHAR or TEXT (a widening otherwise,
    ``seam.source.ddl.widening``) kept them padded. None when it changes no CHAR (or one the ALTERs waiting
    before it may have made one) into another type."""
    if not (sql_mode or 0) & PAD_CHAR_TO_FULL_LENGTH:
        return None
    chars = {c.name.lower() for c in followed.schema.columns if c.data_type == "char"}
    chars |= {n.lower() for _, waiting in followed.pending for c in waiting for n in c[1:3] if isinstance(n, str)}
    for clause in clauses:
        if clause[0].rstrip("?") not in ("modify", "change") or clause[1].lower() not in chars:
            continue
        declared = [declared_column(clause[1], d) for d in clause[2:] if isinstance(d, tuple) and d[0] == "column"]
        if not declared or declared[-1] is None or declared[-1].data_type != "char":
            return (
                f"column {clause[1]} changed from CHAR under sql_mode PAD_CHAR_TO_FULL_LENGTH: its values were padded"
            )
    return None


def _stamped(source: Callable[[], Any], statement: Statement, clauses: list[tuple]) -> list[tuple]:
    """``clauses`` with the statement's time on each declaration, when one may default to it
    (``CURRENT_TIMESTAMP``: the rows there got that time, whatever a later statement declares) or to a
    TIMESTAMP literal (read on the statement's session clock)."""
    said = " ".join(d[1] for clause in clauses for d in clause if isinstance(d, tuple))  # as settled_timestamps read it
    times = sorted({m.group(1) for m in TIME_LITERAL.finditer(statement.query)})
    if statement.clock is None or not (NAMES_THE_TIME.search(said) or times):
        return clauses
    shifts = [now for clause in clauses for d in clause if isinstance(now := _shifted(d), Now)]
    at = _instant(source(), statement.clock, times, shifts)
    return [tuple((*d, at) if isinstance(d, tuple) else d for d in clause) for clause in clauses]


def _shifted(declared) -> Now | None:
    """The statement's time with an interval added that a declaration defaults to, if it does."""
    if not isinstance(declared, tuple):
        return None
    default = declared_default(declared)
    return default if isinstance(default, Now) and default.shift else None


# the statement's session zone, as the source converted its times (its time zone tables, 'SYSTEM'; its global
# zone when the binlog logged none)
SESSION_ZONE = "COALESCE(%s, @@global.time_zone)"


def _instant(conn, clock: StatementClock, times: list[str], shifts: list[Now]) -> Instant | None:
    """The statement's time in UTC and on its session's wall clock; in UTC, as a TIMESTAMP stores them, its
    ``times`` (literals) and the wall times ``shifts`` make of it (the statement's time plus an interval on
    that clock). A shifted time is only kept where it is one instant (not in a gap the zone skips: it would
    not convert back to itself) that the type holds (CONVERT_TZ leaves a time beyond it as it is)."""
    utc = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=clock.seconds, microseconds=clock.microseconds or 0)
    with conn.cursor() as cur:
        cur.execute(f"SELECT CONVERT_TZ(%s, '+00:00', {SESSION_ZONE})", (utc.isoformat(sep=" "), clock.time_zone))
        (local,) = cur.fetchone()
    if not isinstance(local, dt.datetime):  # a zone the source does not know now: the column is not filled
        return None
    walls = sorted({shifted.isoformat(sep=" ") for now in shifts if (shifted := shifted_wall(now, local))})
    converted = _converted(conn, clock, times + walls)
    in_utc = {t: u for t, (u, _) in zip(times, converted) if isinstance(u, dt.datetime)}  # not a zero or invalid
    for wall, (u, back) in zip(walls, converted[len(times) :]):
        if (
            isinstance(u, dt.datetime)
            and back == dt.datetime.fromisoformat(wall)
            and TIMESTAMP_RANGE[0] <= u <= TIMESTAMP_RANGE[1]
        ):
            in_utc[wall] = u
    return Instant(utc, local, clock.microseconds is not None, in_utc)


def _converted(conn, clock: StatementClock, walls: list[str]) -> list[tuple[Any, Any]]:
    """Each of ``walls`` on the statement's session clock converted to UTC by the source, and that converted
    back, in one query: what the server did to the statement's times."""
    if not walls:
        return []
    to_utc = f"CONVERT_TZ(%s, {SESSION_ZONE}, '+00:00')"
    with conn.cursor() as cur:
        cur.execute(
            "SELECT " + ", ".join([f"{to_utc}, CONVERT_TZ({to_utc}, '+00:00', {SESSION_ZONE})"] * len(walls)),
            [v for wall in walls for v in (wall, clock.time_zone, wall, clock.time_zone, clock.time_zone)],
        )
        row = cur.fetchone()
    return list(zip(row[::2], row[1::2]))


def _queries(alters: list) -> str:
    return "; ".join(s.query.strip() for s, _ in alters)


def _stop(chains: Chains, publisher: Publisher, followed: Followed, statement: Statement, why: str) -> None:
    first = followed.pending[0][0] if followed.pending else statement
    followed.pending = []
    chains.stop(
        publisher,
        followed,
        first.position,
        f"a statement at {first.position} that the stream cannot follow: {first.query.strip()[:300]!r} ({why})",
    )


def _publish_change(chains, publisher, followed: Followed, change: SchemaChange, kind: str, position) -> None:
    chains.control(publisher, followed, change)
    if change.stop:
        chains.forget(followed, change.stop)
        return
    followed.schema = replace(followed.schema, columns=tuple(Column(**c) for c in change.columns))
    log.info("%s: %s at %s followed; the stream goes on", followed.table.name, kind, position)


def follow_rollback(chains: Chains, source: Callable[[], Any], publisher: Publisher, rolled: RolledBack) -> None:
    """A ROLLBACK (or ROLLBACK TO SAVEPOINT) logged after rows: undone in transactional tables; a
    non-transactional table kept them, and the stream cannot tell which of them persisted in order, so that
    table stops."""
    touched = rolled.tables | set(rolled.errors)
    for key in touched:
        followed = chains.followed.get(key)
        if followed is None:
            continue
        engine = _engine(source(), *key)
        if engine.lower() in TRANSACTIONAL:
            continue
        chains.stop(
            publisher,
            followed,
            rolled.position,
            f"a rolled-back transaction at {rolled.position} changed it, and its engine {engine} does not roll back",
        )


def _followed_change(
    source: Callable[[], Any], followed: Followed, statement: Statement, kind: str, detail, ghosts: Ghosts
) -> SchemaChange | str:
    """The SCHEMA message that follows a statement changing the table (``seam.source.ddl``), or why the
    table stops."""
    if kind == "truncate":
        columns = [asdict(c) for c in followed.schema.columns]
        ddl = statement.query.strip()[:1000]
        return SchemaChange(statement.position, followed.published, columns, {}, ddl, truncate=True)
    if kind == "alter":  # outside a transaction: _follow_alters
        return "ALTER TABLE inside a transaction"  # DDL commits implicitly: inside one it is not what it seems
    if kind == "cutover":
        renamed = ghosts.renames(detail, tuple(c.name for c in followed.schema.columns))
        change = _altered(source(), followed, None, statement.query, statement.position, renamed)
        swapped = ".".join(n for n in detail if n)
        if isinstance(change, str):
            return f"an online schema change's cut-over swapped in {swapped}: {change}"
        return replace(
            change,
            stop=f"the cut-over of an online schema change at {statement.position} swapped in {swapped} "
            f"(gh-ost, pt-online-schema-change): the target took its columns; run `seam repair "
            f"{followed.table.name}` to compare the rows the tool copied and go on streaming",
        )
    return str(detail)


def _engine(conn, db: str, table: str) -> str:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (db, table)
        )
        row = cur.fetchone()
    return str(row[0]) if row and row[0] else "unknown"


def _altered(
    conn,
    followed: Followed,
    clauses: list[tuple] | None,
    ddl: str,
    position: Position,
    renamed: dict[str, str] | None = None,
):
    """The SCHEMA message for an ALTER whose column clauses the target can follow (checked against the
    source's definition now, ``seam.source.ddl.followed_columns``); a string (the reason) otherwise.
    ``clauses`` None: a table swapped in by a cut-over, compared by column name after ``renamed`` (the
    renames run on it, ``seam.source.ghosts``); when those do not lead to the source's columns, by name alone."""
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT {COLUMN_FIELDS}, COLUMN_DEFAULT, EXTRA FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (followed.table.db, followed.table.table),
        )
        rows = cur.fetchall()
    mariadb = is_mariadb(conn)  # MySQL 8 shows a literal default unquoted
    now = []
    for row in rows:
        column = column_from_row(row)
        default, extra = row[-2], row[-1] or ""
        now.append((column, default if mariadb else mysql_default(column, default, extra)))
    old, key = followed.schema.columns, followed.schema.primary_key
    if clauses is not None:
        result = followed_columns(old, key, clauses, now)
    else:
        result = followed_columns(old, key, swapped_clauses(old, [c for c, _ in now], renamed), now)
        if isinstance(result, str) and renamed:  # the copy's renames do not lead to its columns: by name alone
            result = followed_columns(old, key, swapped_clauses(old, [c for c, _ in now]), now)
    if isinstance(result, str):
        return result
    return unfit_names(("column", c.name) for c in result[0]) or _schema_change(followed, position, result, ddl)


def _schema_change(followed: Followed, position: Position, result: tuple, ddl: str) -> SchemaChange | str:
    """The SCHEMA message of a followed change: (columns, renamed, defaults as source literals); a string (why
    not) when a default is no value of its column's type (the table stops, not the reader). An added column
    whose rows' value the stream cannot reproduce (``Unfilled``: ``(UUID())``, an expression, a generated or
    AUTO_INCREMENT column) is added all the same, NULL in those rows, and the table then stops for a repair,
    which copies the rows that differ (as after a cut-over, the stream starts it itself); a keyless table,
    which no repair can take up, stops before it."""
    columns, renamed, defaults = result
    unfilled = {n: v.why for n, v in defaults.items() if isinstance(v, Unfilled)}
    if unfilled and followed.table.keyless:
        return "; ".join(unfilled.values())
    by_name = {c.name: c for c in columns}
    try:
        defaults = {n: None if v is None or n in unfilled else normalize(by_name[n], v) for n, v in defaults.items()}
    except (ValueError, TypeError, ArithmeticError) as exc:
        return f"a column's default is not read as a value of its type ({exc})"
    stop = None
    if unfilled:
        stop = (
            f"{'; '.join(unfilled.values())}: the target took the column{'s' if len(unfilled) > 1 else ''} at "
            f"{position}, NULL in the rows there; run `seam repair {followed.table.name}` to copy their values "
            "from the source and go on streaming"
        )
    return SchemaChange(
        position,
        followed.published,
        [asdict(c) for c in columns],
        defaults,
        ddl.strip()[:1000],
        renamed=renamed,
        stop=stop,
    )
