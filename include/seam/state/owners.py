"""One owner per pipeline and role: one change reader, one stream sink.

A second reader would publish every change twice and race the first on rewinds; a second sink would fight
the first for the topics' locks and restart in a loop. Each takes a session lock in the target's state
schema keyed by pipeline and role, held on its own connection for as long as it runs, and records who it is
(``lock_holders``: host, pid, since), so a second one refuses with one line naming the holder.

The lock lives as long as its connection: a watcher thread checks it every few seconds and, when the
connection was lost (PostgreSQL restarted), takes the lock again on a new one. When another process took it
meanwhile, ``lost`` is set and the owner's loop stops, naming the new holder.

Delivery guarantee: none (a lock, no data); the sink's position checks keep data exact even with two
owners, the lock keeps it quiet.
"""

from __future__ import annotations

import logging
import os
import socket
import threading

import psycopg

from seam.core.errors import OwnerTaken
from seam.core.identifiers import qi
from seam.core.pipeline import Pipeline
from seam.state.connection import connect_state
from seam.state.schema import try_lock

log = logging.getLogger("seam.owners")

CHECK_EVERY_S = 5.0


def record_holder(conn, schema: str, kind: str, name: str, holder: str) -> None:
    """After taking the lock on ``name`` of ``kind``: this process holds it (``holder`` says as what)."""
    conn.execute(
        f"INSERT INTO {qi(schema)}.lock_holders (kind, name, holder, host, pid, since) "
        "VALUES (%s, %s, %s, %s, %s, now()) ON CONFLICT (kind, name) DO UPDATE SET holder = EXCLUDED.holder, "
        "host = EXCLUDED.host, pid = EXCLUDED.pid, since = now()",
        (kind, name, holder, socket.gethostname(), os.getpid()),
    )


def held_by_process(conn, schema: str, kind: str, name: str, pid: int) -> bool:
    """Whether process ``pid`` of this host is the recorded holder of the lock on ``name`` of ``kind``."""
    return conn.execute(
        f"SELECT EXISTS (SELECT 1 FROM {qi(schema)}.lock_holders WHERE kind = %s AND name = %s AND host = %s "
        "AND pid = %s)",
        (kind, name, socket.gethostname(), pid),
    ).fetchone()[0]


def holder_of(conn, schema: str, kind: str, name: str) -> str:
    """Who holds the lock on ``name`` of ``kind``, as a person reads it."""
    row = conn.execute(
        f"SELECT holder, host, pid, to_char(since AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') "
        f"FROM {qi(schema)}.lock_holders WHERE kind = %s AND name = %s",
        (kind, name),
    ).fetchone()
    if row is None:
        return "another process (it has not said who yet)"
    return f"{row[0]} on host {row[1]}, pid {row[2]}, since {row[3]} UTC"


class Owner:
    """The lock on (pipeline, role), taken at construction (``OwnerTaken`` if another holds it) and held until
    ``release``; ``lost`` tells the owner's loop to stop."""

    def __init__(self, pipeline: Pipeline, role: str):
        self.pipeline, self.role = pipeline, role
        self.name = f"{pipeline.name}/{role}"
        self.lost: str | None = None
        self._conn: psycopg.Connection | None = None
        self._take()
        self._done = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name=f"seam-owner-{role}", daemon=True)
        self._watcher.start()

    def _take(self) -> None:
        schema = self.pipeline.target.state_schema
        conn = connect_state(self.pipeline)
        if not try_lock(conn, "owner", self.name):
            holder = holder_of(conn, schema, "owner", self.name)
            conn.close()
            raise OwnerTaken(
                f"the {self.role} of pipeline {self.pipeline.name!r} already runs: {holder}; "
                "stop it first (`seam stream stop`) or use that one"
            )
        record_holder(conn, schema, "owner", self.name, f"the {self.role} of pipeline {self.pipeline.name!r}")
        self._conn = conn

    def _watch(self) -> None:
        while not self._done.wait(CHECK_EVERY_S):
            try:
                assert self._conn is not None
                self._conn.execute("SELECT 1")
                continue
            except Exception:  # noqa: BLE001 - the connection is gone, and the lock with it
                pass
            try:
                if self._conn is not None:
                    self._conn.close()
                self._take()
                log.info(
                    "took the %s lock of pipeline %r again after the target's connection was lost",
                    self.role,
                    self.pipeline.name,
                )
            except OwnerTaken as exc:
                self.lost = str(exc)
                log.error("seam: %s", exc)
                return
            except Exception as exc:  # noqa: BLE001 - the target is not back yet: try again
                log.warning("the %s lock's connection is down (%s); retrying", self.role, str(exc).splitlines()[0])

    def release(self) -> None:
        self._done.set()
        self._watcher.join(timeout=10)
        if self._conn is not None:
            self._conn.close()  # the session lock goes with the session
