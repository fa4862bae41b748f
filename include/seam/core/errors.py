"""One base for every error Seam explains, and the few kinds a user acts on.

A ``SeamError``'s message is one line that names the problem and the way out. Its ``kind`` says where to
look (the CLI prints ``seam: <kind>: <message>``; anything else is a bug and keeps its traceback), and
``retry`` whether trying the same thing again later can help (a server down, a lock) or cannot (a typo, a
table without a key): Airflow tasks fail at once on the second and are retried on the first.

Delivery guarantee: none (definitions only).
"""

from __future__ import annotations

import re


class SeamError(Exception):
    kind = "error"
    retry = False


class ConfigurationError(SeamError):
    """The pipeline file, a command's arguments or an Airflow Param: fix them and run again."""

    kind = "configuration"


class ConfigError(ConfigurationError, ValueError):
    """A pipeline file (or a command's argument) is invalid; ``str()`` is one line naming file and field."""

    def __init__(self, field_path: str, message: str, source: str | None = None):
        self.field_path = field_path
        self.message = message
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{field_path}: {message}")


class SourceError(SeamError):
    """The MySQL/MariaDB source: unreachable, not set up as Seam needs, or a table it cannot follow."""

    kind = "source"
    retry = True


class StreamError(SourceError):
    """The stream cannot go on; the message says why and what to do."""


class BrokerError(SeamError):
    """The Kafka broker cannot be reached or refused an operation."""

    kind = "broker"
    retry = True


class TargetError(SeamError):
    """The PostgreSQL target cannot hold or apply what it was sent."""

    kind = "target"
    retry = True


class OwnerTaken(SeamError):
    """Another process holds the lock (a table's load, a pipeline's change reader); the message names it and
    what to do."""

    kind = "busy"
    retry = True


class ValidationError(SeamError):
    """Validation could not run (not loaded, binlog purged, bad check); the message says what to do."""

    kind = "validation"


class DivergenceError(SeamError):
    """Source and target disagree in a way Seam will not paper over; the message names the way back."""

    kind = "divergence"


# what a process prints for a SeamError, so that a parent reading its output can tell it from noise
ONE_LINE = re.compile(r"^seam: [a-z]+: ")


def one_line(exc: SeamError) -> str:
    return f"seam: {exc.kind}: {exc}"


# a Seam error raised in a Spark task reaches the driver as text in Spark's own exception
_IN_A_TASK = re.compile(r"(seam\.[\w.]+)\.(\w+Error): ([^\n]+)")


def raised_in_a_task(exc: BaseException, known: tuple[type[SeamError], ...] = ()) -> SeamError | None:
    """The Seam error a Spark task raised, from the driver's exception that carries it (Py4J's, with the Python
    worker's traceback as text): of its own class when that is one of ``known``, else as one of the kinds
    above; None when the task failed otherwise."""
    found = _IN_A_TASK.findall(str(exc))
    if not found:
        return None
    module, name, message = found[-1]
    own = [k for k in known if (k.__module__, k.__name__) == (module, name)]
    kind = (
        own[0]
        if own
        else SourceError
        if module.startswith("seam.source")
        else TargetError
        if module.startswith(("seam.apply", "seam.wire"))
        else SeamError
    )
    error = kind(message.strip())
    error.retry = False  # it failed the same way in the task: the message says what to change
    return error


def first_line(exc: BaseException) -> str:
    """The first line of an error's text (drivers add context lines), or its type when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


CONFIGURATION_LIMIT = "53400"  # PostgreSQL's SQLSTATE for a limit a DBA set, such as temp_file_limit
READ_ONLY = "25006"  # a write in a read-only transaction


def target_limit(exc: BaseException) -> str | None:
    """What to do about a limit a DBA set on the target (``temp_file_limit``: superuser-only, so Seam cannot
    lift it in its sessions) that the failed work exceeds, or None. The same work exceeds it again: not
    transient."""
    if getattr(exc, "sqlstate", None) != CONFIGURATION_LIMIT:
        return None
    return "a limit a DBA set on the target is too small for this work: have it raised (or lifted) for Seam's role"


def target_read_only(exc: BaseException) -> str | None:
    """What to do when the target refused a write because it takes none (a DBA's ``default_transaction_read_only``
    for Seam's role or database, or a standby), or None. A stream waits for it; a command ends in one line."""
    if getattr(exc, "sqlstate", None) != READ_ONLY:
        return None
    return (
        "the target takes no writes now (a DBA's default_transaction_read_only, or a standby): "
        "run it again once it does (or point the pipeline's target at the primary)"
    )
