"""The connection to the target that Seam's state lives in (``seam.state``) and every room above shares:
the target's data and the ``seam`` schema are one PostgreSQL database, so that data and position commit in
one transaction.

Delivery guarantee: none (connections).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import psycopg

from seam.core.errors import TargetError, first_line
from seam.core.pipeline import Pipeline, TableConfig
from seam.state.ledger import BATCH_KINDS, BATCHES_CHANNEL, open_batches
from seam.state.schema import ensure_state, try_lock


def scalar(conn, query: str, params: tuple | dict | None = None) -> Any:
    """The first column of a query's first row, or None when it returns no row."""
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def sink_session_name(pipeline: Pipeline) -> str:
    """The ``application_name`` of Seam's target sessions: ``seam-sink/<pipeline>``."""
    return f"seam-sink/{pipeline.name}"[:63]


def open_target(pipeline: Pipeline, **kwargs: Any) -> psycopg.Connection:
    """A session on the target with the settings of ``PostgresTarget.conninfo`` and ``_settled``'s."""
    return _settled(psycopg.connect(**pipeline.target.conninfo(), **kwargs))


def _settled(conn: psycopg.Connection) -> psycopg.Connection:
    """``conn`` with what no startup option can carry to every server: a DBA's ``idle_session_timeout``
    (PostgreSQL 14 on; an older server refuses the name) lifted. Seam's sessions idle by design: a load's sink
    while Spark starts, a stream's sink on a quiet source, validation's target session while the source
    computes its side. Ended at the limit, every retry would end the same way.

    And PostGIS found wherever it is: a role's or a database's ``search_path`` without its schema (``public``
    taken out, as hardening guides advise) made every spatial table's load fail with 'type "geometry" does not
    exist'. Its schema is put at the end of the session's path; Seam names its own tables and functions with
    their schema."""
    try:
        if conn.info.server_version >= 140000:
            conn.execute("SET idle_session_timeout = 0")
        conn.execute(
            "SELECT set_config('search_path', concat_ws(', ', nullif(current_setting('search_path'), ''), "
            "quote_ident(n.nspname)), false) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
            "WHERE t.typname = 'geometry' AND NOT pg_type_is_visible(t.oid) LIMIT 1"
        )
        conn.commit()
    except BaseException:
        conn.close()
        raise
    return conn


def connect_target(pipeline: Pipeline) -> psycopg.Connection:
    """Seam's session on the target, or ``TargetError`` when none can be made. A session cut once made (a
    restart under way, a DBA's ``pg_terminate_backend``) raises psycopg's error, which every caller retries as
    a cut: reported as 'unreachable', it ended a ``seam stream wait`` whose session was cut as it was set up."""
    t = pipeline.target
    try:
        # UTF-8 whatever the server's default: staging formats COPY text in it (seam.apply.batch); the name
        # tells a DBA whose session it is (PostgreSQL keeps 63 bytes of it)
        conn = psycopg.connect(
            **t.conninfo(), connect_timeout=10, application_name=sink_session_name(pipeline), client_encoding="UTF8"
        )
    except psycopg.OperationalError as exc:
        raise TargetError(
            f"target PostgreSQL at {t.host}:{t.port}/{t.database} is unreachable ({first_line(exc)}): "
            "start it (`seam up postgres`) or fix the pipeline's target"
        ) from None
    return _settled(conn)


def connect_state(pipeline: Pipeline) -> psycopg.Connection:
    """An autocommit connection to the target whose state schema exists (what every reader of it needs)."""
    conn = connect_target(pipeline)
    conn.autocommit = True
    try:
        ensure_state(conn, pipeline.target.state_schema)
    except psycopg.Error:
        conn.close()
        raise
    return conn


TABLE_LOCK_CHECK_S = 0.5  # how often ``take_tables`` looks whether the command it waits for has ended


class StateWatch:
    """The state session of a command that watches the target while other processes do the work (a load, a
    repair, ``seam stream wait``). When it breaks (a restart, a failover, a DBA's ``pg_terminate_backend``) the
    command waits for the target and goes on, as the sink and the reader it watches do, instead of failing."""

    def __init__(self, pipeline: Pipeline, say: Callable[[str], None]):
        self.pipeline, self.say = pipeline, say
        self.lost = False  # broken, and not made again yet
        self.held: set[str] = set()  # the batches whose ``load`` lock this session holds (``hold``)
        self.tables: set[str] = set()  # the tables whose ``table`` lock it holds (``take_tables``)
        self.conn = self._first_connection()

    def _first_connection(self, tries: int = 3) -> psycopg.Connection:
        """An unreachable target is the caller's to report; a session cut right after it was made (a restart
        under way, a DBA ending every Seam session) is made again, as a later cut would be."""
        for attempt in range(tries):
            try:
                conn = connect_state(self.pipeline)
            except psycopg.OperationalError as exc:
                if attempt == tries - 1:
                    raise TargetError(
                        f"the target's session was cut as soon as it was made, {tries} times ({first_line(exc)}): "
                        "see what ends Seam's sessions (`seam-sink/...` in pg_stat_activity)"
                    ) from None
                self._lost(exc)
                time.sleep(1)
                continue
            self._back()
            return self._listening(conn)
        raise AssertionError("unreachable")

    def _listening(self, conn: psycopg.Connection) -> psycopg.Connection:
        conn.execute(f"LISTEN {BATCHES_CHANNEL}")
        for batch in self.held:  # taken again on a session made again
            try_lock(conn, "load", batch)
        for name in self.tables:
            try_lock(conn, "table", name)
        return conn

    def take_tables(self, tables: Iterable[TableConfig], timeout: float | None = None) -> TableConfig | None:
        """The ``table`` lock of each table, held for as long as this command runs: one command at a time
        publishes a table's batches (a full load, a window, a repair). Another's BEGIN supersedes a batch that
        is still under way, which then fails (seen: a repair run by hand as the stream's automatic one ran), and
        a full load started while one runs took its batch for an interrupted one and published it a second
        time. Waits for each in name order (two commands taking several never deadlock), saying what it waits
        for; returns the table another command still holds after ``timeout`` (None: every one is held)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        schema = self.pipeline.target.state_schema
        for table in sorted(tables, key=lambda t: t.name):
            said = None
            while True:
                try:
                    if try_lock(self.conn, "table", table.name):
                        self.tables.add(table.name)
                        break
                    live = open_batches(self.conn, schema).get(table.name)
                except psycopg.OperationalError as exc:
                    self.reconnect(exc)
                    continue
                if said is None or (live and live[0] != said):  # once, and again for another batch
                    kind = BATCH_KINDS.get(live[1], live[1]) if live else ""
                    what = f"a {kind} of it is under way (batch {live[0]})" if live else "another command loads it"
                    self.say(f"{table.name}: {what}: waiting for it to end first")
                    said = live[0] if live else ""
                if deadline is not None and time.monotonic() > deadline:
                    return table
                time.sleep(TABLE_LOCK_CHECK_S)
        return None

    def hold(self, batches: Iterable[str]) -> None:
        """Hold the ``load`` lock of each batch for as long as this command runs: a sink abandons an open batch
        that got no rows for ``load.abandon_after`` only when no command holds it (the load is gone). Rows can
        stop coming from a live load: its sink held up (a busy machine, a lock), a repair comparing the table."""
        for batch in batches:
            try_lock(self.conn, "load", batch)
            self.held.add(batch)

    def wait(self, seconds: float) -> None:
        """Up to ``seconds``, less when a batch becomes final meanwhile (the sink's NOTIFY at its commit): a
        watcher sees a commit at once instead of at its next look. A broken session raises, as a look would."""
        if self.lost:
            time.sleep(seconds)
            return
        for _ in self.conn.notifies(timeout=seconds, stop_after=1):
            pass

    def reconnect(self, exc: Exception) -> None:
        """After ``exc`` broke the session: makes it again, or (after a second) leaves it broken while the
        target is still away, for the caller's next look. Said once each way."""
        self._lost(exc)
        self.conn.close()
        try:
            self.conn = self._listening(connect_state(self.pipeline))
        except (TargetError, psycopg.OperationalError):  # away, or cut again as it was made
            time.sleep(1)
            return
        self._back()

    def _lost(self, exc: Exception) -> None:
        if not self.lost:
            self.lost = True
            self.say(f"lost the target's connection ({first_line(exc)}); waiting for it")

    def _back(self) -> None:
        if self.lost:
            self.lost = False
            self.say("the target is back")

    def close(self) -> None:
        self.conn.close()
