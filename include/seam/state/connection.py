"""The connection to the target that Seam's state lives in (``seam.state``) and every room above shares:
the target's data and the ``seam`` schema are one PostgreSQL database, so that data and position commit in
one transaction.

Delivery guarantee: none (connections).
"""

from __future__ import annotations

from typing import Any

import psycopg

from seam.core.errors import TargetError
from seam.core.pipeline import Pipeline
from seam.state.schema import ensure_state


def scalar(conn, query: str, params: tuple | dict | None = None) -> Any:
    """The first column of a query's first row, or None when it returns no row."""
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def sink_session_name(pipeline: Pipeline) -> str:
    """The ``application_name`` of Seam's target sessions: ``seam-sink/<pipeline>``."""
    return f"seam-sink/{pipeline.name}"[:63]


def connect_target(pipeline: Pipeline) -> psycopg.Connection:
    t = pipeline.target
    try:
        # UTF-8 whatever the server's default: staging formats COPY text in it (seam.apply.batch); the name
        # tells a DBA whose session it is (PostgreSQL keeps 63 bytes of it)
        return psycopg.connect(
            **t.conninfo(), connect_timeout=10, application_name=sink_session_name(pipeline), client_encoding="UTF8"
        )
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TargetError(
            f"target PostgreSQL at {t.host}:{t.port}/{t.database} is unreachable ({first}): "
            "start it (`seam up postgres`) or fix the pipeline's target"
        ) from None


def connect_state(pipeline: Pipeline) -> psycopg.Connection:
    """An autocommit connection to the target whose state schema exists (what every reader of it needs)."""
    conn = connect_target(pipeline)
    conn.autocommit = True

    ensure_state(conn, pipeline.target.state_schema)
    return conn
