"""The ``seam`` command line: one module per group of commands, the parser in ``seam.cli.parser``.

- ``seam.cli.stack``: up, down, status, env, seed, writer, trigger
- ``seam.cli.loading``: load, summary, validate, repair
- ``seam.cli.topics``: sink, kafka, quarantine
- ``seam.cli.stream_start``: stream start; ``seam.cli.stream``: stream stop|status|wait; the parts: the reader
  in ``seam.cli.stream_reader``, the sink and both in the foreground in ``seam.cli.stream_parts``

The command bodies only call the library and print. Only the given command's module is imported, so
``seam --help`` and the quick commands start in a tenth of a second instead of importing the binlog reader,
Kafka and Spark's helpers.

Every command takes ``--pipeline PATH`` (default ``include/pipelines/demo.yaml``). When the embedded stack has
been set up, its endpoints and credentials are put in the environment (without overriding what is already
set), so the pipeline's ``${SEAM_...}`` references resolve with no manual export.

Delivery guarantee: that of the commands' rooms; a Seam error ends a command with one line and exit 2.
"""

from __future__ import annotations

import importlib
import signal
import sys

from seam.cli.common import pipeline_of
from seam.cli.parser import command_of, parse_arguments
from seam.config import DEFAULT_PIPELINE, state_dir
from seam.core.errors import SeamError, first_line, one_line, target_limit, target_read_only
from seam.processes import Processes
from seam_dev.settings import stack_settings, use_stack_env


class Terminated(KeyboardInterrupt):
    """SIGTERM, taken as Ctrl-C: the command's ``finally`` stops the Spark job and sink it started (they run
    in sessions of their own, so a signal to this process's group does not reach them)."""


def _terminated(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the stopping of the children short
    raise Terminated()


def _server_lost(exc: Exception) -> str | None:
    """``source`` or ``target`` when ``exc`` is a server's session that broke mid-command (a restart, a
    failover, a DBA ending it), not a bug. Looked up where the drivers are loaded already: ``seam --help``
    does not import them."""
    psycopg, pymysql = sys.modules.get("psycopg"), sys.modules.get("pymysql")
    if psycopg is not None and isinstance(exc, psycopg.OperationalError):
        return "target"
    if pymysql is not None and isinstance(exc, pymysql.err.OperationalError):
        return "source"
    return None


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminated)  # the stream's long-running parts set their own
    args = parse_arguments(argv)
    explicit = args.pipeline is not None
    if not explicit:
        args.pipeline = str(DEFAULT_PIPELINE)
    module, name = command_of(args).split(".")
    try:
        if args.command == "up":
            stack_settings(state_dir(), create=True)  # credentials exist before anything reads the pipeline
        use_stack_env()
        if explicit:
            pipeline_of(args)  # a broken pipeline fails every command, before it does anything
        command = getattr(importlib.import_module(f"seam.cli.{module}"), name)
        return command(args, Processes())
    except SeamError as exc:  # Seam's own clear line; anything else is a bug and keeps its traceback
        print(one_line(exc), file=sys.stderr)
        return 2
    except Exception as exc:
        limit, read_only, side = target_limit(exc), target_read_only(exc), _server_lost(exc)
        if limit is not None:
            print(f"seam: target: {first_line(exc)}: {limit}, then run the command again", file=sys.stderr)
            return 2
        if read_only is not None:
            print(f"seam: target: {first_line(exc)}: {read_only}", file=sys.stderr)
            return 2
        if side is None:
            raise
        print(
            f"seam: the {side} broke off the command ({first_line(exc)}): run it again when it is back", file=sys.stderr
        )
        return 2
    except Terminated:
        print("seam: stopped (SIGTERM); what it started was stopped too", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("seam: interrupted", file=sys.stderr)
        return 130
