"""Quarantined messages: what the sink would not apply (not a Seam record, another table's BEGIN, a control
message that does not parse), kept byte for byte with where it came from and why, and the table it
concerns stopped until a person decides.

``skip`` records that decision (who, when, a note) and lets the table go on without the message: its stop
is lifted and a gap reported, so the change reader publishes the table's changes again from the position
the target applied, and nothing the table was sent after the bad message is lost.

Delivery guarantee: none of its own; a message is quarantined in the transaction that moves its offset.
"""

from __future__ import annotations

import getpass
import socket
from dataclasses import dataclass

from seam.core.identifiers import qi


@dataclass(frozen=True)
class Quarantined:
    id: int
    db: str
    table: str
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    reason: str
    quarantined_at: object
    skipped_at: object
    skipped_by: str | None
    note: str | None

    @property
    def name(self) -> str:
        return f"{self.db}.{self.table}"


_FIELDS = (
    "id, db, tbl, topic, kafka_partition, kafka_offset, kafka_key, value, reason, quarantined_at, skipped_at, "
    "skipped_by, note"
)


def add(conn, schema: str, db: str, table: str, topic: str, offset: int, key, value, reason: str) -> int:
    """Keep one message; returns its id."""
    return conn.execute(
        f"INSERT INTO {qi(schema)}.quarantine (db, tbl, topic, kafka_partition, kafka_offset, kafka_key, value, "
        "reason) VALUES (%s, %s, %s, 0, %s, %s, %s, %s) RETURNING id",
        (db, table, topic, offset, key, value, reason[:2000]),
    ).fetchone()[0]


def listed(conn, schema: str, topics: list[str], all_: bool = False) -> list[Quarantined]:
    """The messages of ``topics`` (a pipeline's) not yet decided on (``all_``: with the skipped ones), oldest
    first."""
    undecided = "" if all_ else " AND skipped_at IS NULL"
    rows = conn.execute(
        f"SELECT {_FIELDS} FROM {qi(schema)}.quarantine WHERE topic = ANY(%s){undecided} ORDER BY id", (topics,)
    ).fetchall()
    return [Quarantined(*r) for r in rows]


def get(conn, schema: str, id_: int) -> Quarantined | None:
    row = conn.execute(f"SELECT {_FIELDS} FROM {qi(schema)}.quarantine WHERE id = %s", (id_,)).fetchone()
    return Quarantined(*row) if row else None


def stop_reason(id_: int, name: str, topic: str, offset: int, reason: str) -> str:
    """What the table's stop says: the message, why, and the way out."""
    return (
        f"message {topic}:{offset} quarantined as #{id_}: {reason}; review it with `seam quarantine show {id_}`, "
        f"then `seam quarantine skip {id_}` to go on without it (or `seam load full {name}`)"
    )


def skip(conn, schema: str, id_: int, note: str | None) -> bool:
    """Record that the message is skipped; lift its table's stop when no other quarantined message of its
    topic waits for a decision. Returns whether the table goes on."""
    s = qi(schema)
    found = get(conn, schema, id_)
    assert found is not None
    conn.execute(
        f"UPDATE {s}.quarantine SET skipped_at = now(), skipped_by = %s, note = %s WHERE id = %s",
        (f"{getpass.getuser()}@{socket.gethostname()}", note, id_),
    )
    waiting = conn.execute(
        f"SELECT count(*) FROM {s}.quarantine WHERE topic = %s AND skipped_at IS NULL", (found.topic,)
    ).fetchone()[0]
    if waiting:
        return False
    lifted = conn.execute(
        f"UPDATE {s}.positions SET stopped = NULL, gap_at = now() WHERE db = %s AND tbl = %s "
        "AND stopped LIKE 'message %% quarantined as #%%'",
        (found.db, found.table),
    ).rowcount
    return bool(lifted)
