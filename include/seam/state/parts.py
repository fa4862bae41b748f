"""The stream's parts' heartbeats (``stream_parts``), and what a person reads of one table.

``seam stream status`` reads the parts from here, so it sees them however they were started (the CLI,
Airflow, a process supervisor, a cluster) and on whichever host.

Delivery guarantee: none; heartbeats are best effort.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

from seam.core.identifiers import qi

PART_DEAD_AFTER_S = 20.0  # a part whose last heartbeat is older is down
PART_LOOPING_S = 120.0  # a part that restarted within this is restarting, not running
# Failures in a row: without PART_LOOPING_S of work between them. This many (about a minute of failing, with
# the back-off) make a restarting part failing: the supervisor says why (a broker's or a server's restart
# costs a part one or two).
FAILING_IN_A_ROW = 5
RETRY_FIRST_S, RETRY_MAX_S = 2.0, 30.0


def retry_delay(previous: float | None, ran_s: float) -> float:
    """How long a part waits before it tries again after a failure: ``RETRY_FIRST_S`` after a pass that ran
    for a while (a broker restart, a lost connection: back at once), doubling up to ``RETRY_MAX_S`` while
    passes keep failing quickly (a failure that repeats must not hammer the servers or flood the log)."""
    if previous is None or ran_s > PART_LOOPING_S:
        return RETRY_FIRST_S
    return min(previous * 2, RETRY_MAX_S)


def wait_unless(
    should_stop: Callable[[], bool],
    seconds: float,
    beat: Callable[[], None] | None = None,
    every: float = PART_DEAD_AFTER_S / 4,
) -> None:
    """Wait ``seconds`` (a back-off of up to half a minute), ending early when the part is asked to stop;
    ``beat`` ``every`` few seconds meanwhile: a part waiting to try again is alive, not DOWN."""
    until, beaten = time.monotonic() + seconds, time.monotonic()
    while not should_stop() and time.monotonic() < until:
        time.sleep(min(0.5, every, max(0.0, until - time.monotonic())))
        if beat is not None and time.monotonic() - beaten >= every:
            beat()
            beaten = time.monotonic()


def part_started(conn, schema: str, pipeline: str, part: str, fresh: bool) -> None:
    """A stream part (re)starts; ``fresh``: a new start, not a restart after a failure (counts reset)."""
    s = qi(schema)
    conn.execute(
        f"INSERT INTO {s}.stream_parts (pipeline, part, host, pid, started_at, beat_at) "
        "VALUES (%s, %s, %s, %s, now(), now()) ON CONFLICT (pipeline, part) DO UPDATE SET "
        "host = EXCLUDED.host, pid = EXCLUDED.pid, started_at = now(), beat_at = now(), batches = 0, "
        "stopped_at = NULL"
        + (
            ", restarts = 0, streak = 0, failed_at = NULL, worked_at = NULL, last_error = NULL, retries = 0, "
            "last_retry = NULL"
            if fresh
            else ""
        ),
        (pipeline, part, socket.gethostname(), os.getpid()),
    )


def part_beat(
    conn, schema: str, pipeline: str, part: str, batches: int = 0, retries: int = 0, last_retry: str | None = None
) -> None:
    """A part is alive (``batches`` > 0: it works); ``retries``: transient errors it retried since its last beat
    (``seam.apply.retry``). Work a while after its last failure ends a part's failures in a row."""
    conn.execute(
        f"UPDATE {qi(schema)}.stream_parts SET beat_at = now(), batches = batches + %s, retries = retries + %s, "
        "last_retry = coalesce(%s, last_retry), streak = CASE WHEN %s > 0 AND (failed_at IS NULL OR failed_at < "
        "now() - make_interval(secs => %s)) THEN 0 ELSE streak END, worked_at = CASE WHEN %s > 0 THEN now() "
        "ELSE worked_at END WHERE pipeline = %s AND part = %s",
        (batches, retries, last_retry, batches, PART_LOOPING_S, batches, pipeline, part),
    )


def part_failed(conn, schema: str, pipeline: str, part: str, error: str) -> None:
    """A part failed and will try again; ``streak`` counts its failures in a row (``part_beat`` ends them)."""
    conn.execute(
        f"UPDATE {qi(schema)}.stream_parts SET restarts = restarts + 1, streak = streak + 1, failed_at = now(), "
        "last_error = %s, beat_at = now() WHERE pipeline = %s AND part = %s",
        (error[:1000], pipeline, part),
    )


def part_stopped(conn, schema: str, pipeline: str, part: str, error: str | None = None) -> None:
    """The part ended: on request (``error`` None: no error is shown for it), or on an error it does not retry,
    which ``seam stream status`` and the supervisor show."""
    conn.execute(
        f"UPDATE {qi(schema)}.stream_parts SET stopped_at = now(), last_error = %s WHERE pipeline = %s AND part = %s",
        (None if error is None else error[:1000], pipeline, part),
    )


def supervisor_ran(conn, schema: str, pipeline: str, problems: list[str], stop: bool | None) -> None:
    """The stream supervisor's own heartbeat (part ``supervisor``) with its problems, if any; ``stop`` True
    records that the stream was stopped on request (a scheduled supervisor leaves it stopped), False that
    it was started (None: as it was)."""
    conn.execute(
        f"INSERT INTO {qi(schema)}.stream_parts (pipeline, part, host, pid, started_at, beat_at, last_error, "
        "stopped_at) VALUES (%s, 'supervisor', %s, %s, now(), now(), %s, CASE WHEN %s THEN now() END) "
        "ON CONFLICT (pipeline, part) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, beat_at = now(), "
        "last_error = EXCLUDED.last_error, stopped_at = CASE WHEN %s THEN now() WHEN %s THEN NULL "
        "ELSE stream_parts.stopped_at END",
        (
            pipeline,
            socket.gethostname(),
            os.getpid(),
            "; ".join(problems)[:1000] or None,
            bool(stop),
            stop is True,
            stop is False,
        ),
    )


def part_states(conn, schema: str, pipeline: str) -> dict[str, dict]:
    """Per part: ``state`` (running, starting, restarting, stopped, down) and what shows it; ``failing``: a
    restarting part that failed ``FAILING_IN_A_ROW`` times in a row (``streak``), not a one-off, and has done
    no work since its last failure (one that works again has recovered)."""
    rows = conn.execute(
        f"SELECT part, host, pid, batches, restarts, streak, last_error, stopped_at IS NOT NULL, retries, last_retry, "
        f"extract(epoch FROM now() - beat_at), extract(epoch FROM now() - failed_at), "
        f"extract(epoch FROM now() - started_at), coalesce(worked_at > failed_at, false) "
        f"FROM {qi(schema)}.stream_parts WHERE pipeline = %s",
        (pipeline,),
    ).fetchall()
    out = {}
    for (
        part,
        host,
        pid,
        batches,
        restarts,
        streak,
        error,
        stopped,
        retries,
        last_retry,
        beat_age,
        failed_age,
        up_s,
        worked_since,
    ) in rows:
        if stopped:
            state = "stopped"
        elif beat_age > PART_DEAD_AFTER_S:
            state = "down"
        elif failed_age is not None and failed_age < PART_LOOPING_S:
            state = "restarting"
        elif batches == 0:
            state = "starting"
        else:
            state = "running"
        out[part] = dict(
            state=state,
            host=host,
            pid=pid,
            batches=batches,
            restarts=restarts,
            streak=streak,
            worked=bool(worked_since),  # since its last failure (a liveness beat while it waits to retry is not work)
            failing=state == "restarting" and streak >= FAILING_IN_A_ROW and not worked_since,
            last_error=error,
            retries=retries,
            last_retry=last_retry,
            beat_age=max(0.0, float(beat_age)),  # the beat can be stamped a moment after now()
            up_s=float(up_s),
            failed_age=None if failed_age is None else float(failed_age),
        )
    return out


def table_summary(conn, schema: str, db: str, table: str) -> dict:
    """What a person asks of one table after a run: its last committed full load (rows, seconds), its
    watermark (windows), and its last validation (verdict, target rows, when); absent parts are None."""
    s = qi(schema)
    load = conn.execute(
        f"SELECT final_rows, extract(epoch FROM finished_at - opened_at) FROM {s}.batches "
        "WHERE db = %s AND tbl = %s AND mode = 'full' AND state = 'committed' "
        "ORDER BY opened_at DESC LIMIT 1",
        (db, table),
    ).fetchone()
    mark = conn.execute(
        f"SELECT watermark FROM {s}.watermarks WHERE db = %s AND tbl = %s ORDER BY updated_at DESC LIMIT 1", (db, table)
    ).fetchone()
    checked = None
    if conn.execute("SELECT to_regclass(%s)", (f"{s}.validations",)).fetchone()[0]:
        checked = conn.execute(
            f"SELECT verdict, target_rows, checked_at FROM {s}.validations WHERE db = %s AND "
            "tbl = %s ORDER BY checked_at DESC LIMIT 1",
            (db, table),
        ).fetchone()
    return {
        "load_rows": load[0] if load else None,
        "load_seconds": float(load[1]) if load and load[1] else None,
        "watermark": mark[0] if mark else None,
        "verdict": checked[0] if checked else None,
        "rows": checked[1] if checked else None,
        "checked_at": checked[2] if checked else None,
    }
