"""The ``seam`` command line's arguments. Each command names the module and function that runs it
(``"stream.cmd_stream"`` is ``seam.cli.stream.cmd_stream``): only the module of the command given is imported
(``command_of``).

Delivery guarantee: none (argument parsing)."""

from __future__ import annotations

import argparse

from seam.config import DEFAULT_PIPELINE
from seam_dev.settings import SERVICES


def command_of(args: argparse.Namespace) -> str:
    """The module and function that run the parsed command. A stream's start and its parts have modules of their
    own: a start imports little before it starts the parts, and each part only what it runs."""
    if args.command == "stream" and args.action == "reader":
        return "stream_reader.cmd_stream_reader"
    if args.command == "stream" and (args.action == "sink" or (args.action == "start" and args.foreground)):
        return "stream_parts.cmd_stream_part"
    if args.command == "stream" and args.action == "start":
        return "stream_start.cmd_stream_start"
    return args.func


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, parsed. A command's TABLEs may also follow its options (`seam load full --restart
    T`): argparse gives the TABLE list to the first run of positionals, and would call the rest unrecognised."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and isinstance(getattr(args, "tables", None), list) and not any(r.startswith("-") for r in rest):
        args.tables = [*args.tables, *rest]
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return args


def build_parser() -> argparse.ArgumentParser:
    """Every command and its arguments. Its length: one table of the command line, read top to bottom."""
    parser = argparse.ArgumentParser(
        prog="seam", description="Keep MySQL tables in sync with PostgreSQL, in batch and in stream, with proof."
    )

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--pipeline",
        default=argparse.SUPPRESS,
        metavar="PATH",
        help=f"pipeline YAML (default {DEFAULT_PIPELINE.relative_to(DEFAULT_PIPELINE.parents[2])})",
    )
    parser.add_argument("--pipeline", default=None, metavar="PATH", help="pipeline YAML")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("up", parents=[common], help="start the embedded stack (MariaDB, broker, PostgreSQL, Airflow)")
    p.add_argument("services", nargs="*", metavar="SERVICE", help=f"only these ({', '.join(SERVICES)})")
    p.add_argument("--timeout", type=float, default=240, help="seconds to wait for each service's health")
    p.set_defaults(func="stack.cmd_up")

    sub.add_parser("down", parents=[common], help="stop what `seam up` started").set_defaults(func="stack.cmd_down")
    p = sub.add_parser(
        "status",
        parents=[common],
        help="each service: up/down, port, how to connect; with TABLE: "
        "its watermark, last windows/batches and stream position",
    )
    p.add_argument("tables", nargs="*", metavar="TABLE")
    p.set_defaults(func="stack.cmd_status")
    sub.add_parser("env", parents=[common], help="print export lines for every endpoint and credential").set_defaults(
        func="stack.cmd_env"
    )

    p = sub.add_parser("seed", parents=[common], help="create the demo schema and fill it")
    p.add_argument("--rows", type=int, default=10_000, help="rows in the payments ledger (other tables scale)")
    p.add_argument("--keep", action="store_true", help="add rows instead of recreating the demo tables")
    p.set_defaults(func="stack.cmd_seed")

    p = sub.add_parser("writer", parents=[common], help="run a concurrent insert/update/delete mix on the demo tables")
    p.add_argument("--rate", type=float, default=200, help="target changes per second (all threads)")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=None, help="random seed, for a repeatable mix")
    p.add_argument("--database", default="demo")
    p.set_defaults(func="stack.cmd_writer")

    p = sub.add_parser("load", parents=[common], help="load tables: `seam load full|incremental TABLE...`")
    p.add_argument(
        "mode",
        choices=["full", "incremental"],
        help="full: a consistent snapshot replaces the target table; incremental: the rows changed "
        "in a window are merged",
    )
    p.add_argument("tables", nargs="*", metavar="TABLE", help="db.table, or a table name unique in the pipeline")
    p.add_argument("--all", action="store_true", help="incremental: every incremental table of the pipeline")
    p.add_argument("--start", help="incremental: window start (exclusive; default: the stored watermark)")
    p.add_argument(
        "--end",
        help="incremental: window end (inclusive; default: now; always clamped to the "
        "source's now minus the safety delay)",
    )
    p.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the commit")
    p.add_argument(
        "--restart",
        action="store_true",
        help="full: start afresh (by default a load interrupted with its batch open resumes it, keeping its chunks)",
    )
    p.set_defaults(func="loading.cmd_load")

    sub.add_parser(
        "summary",
        parents=[common],
        help="per table: mode, rows, full-load rows/s, lag and the last verdict; exit 1 unless every table is EQUAL",
    ).set_defaults(func="loading.cmd_summary")

    p = sub.add_parser(
        "validate",
        parents=[common],
        help="compare source and target (counts, checksums, the differing rows); exit 1 on mismatch",
    )
    p.add_argument("tables", nargs="*", metavar="TABLE", help="db.table, or a table name unique in the pipeline")
    p.add_argument("--all", action="store_true", help="every table of the pipeline")
    p.add_argument("--window", nargs=2, metavar=("START", "END"), help="only rows whose cursor is in (START, END]")
    p.add_argument(
        "--key-range",
        nargs=2,
        type=int,
        metavar=("LO", "HI"),
        help="only rows whose (integer) first key column is in [LO, HI]",
    )
    p.add_argument("--limit", type=int, default=50, help="differing rows to list (totals are always exact)")
    p.add_argument("--report-dir", help="where to write the HTML report (default .seam/reports)")
    p.add_argument("--json", action="store_true", help="also print the reports as JSON")
    p.set_defaults(func="loading.cmd_validate")

    p = sub.add_parser(
        "repair",
        parents=[common],
        help="copy again only the rows that differ from the source, and go on streaming from there",
    )
    p.add_argument("tables", nargs="+", metavar="TABLE", help="db.table, or a table name unique in the pipeline")
    p.add_argument(
        "--full",
        action="store_true",
        help="compare with the source as it is now, not at the table's position (its binlog is gone, or it stopped)",
    )
    p.add_argument("--max-rows", type=int, default=None, help="at most this many differing rows (repair.max_rows)")
    p.add_argument("--timeout", type=float, default=900.0, help="give up after this many seconds")
    p.add_argument(
        "--after-cutover",
        action="store_true",
        help="started by the stream for a table stopped at a cut-over: a failure is added to its stop's reason",
    )
    p.set_defaults(func="loading.cmd_repair")

    p = sub.add_parser("sink", parents=[common], help="apply table topics to the target (runs until stopped)")
    p.add_argument("--table", action="append", default=[], help="only these tables (repeatable; default all)")
    p.add_argument("--until-batch", action="append", default=[], help="exit once these batches are final")
    p.add_argument("--idle-exit", type=float, default=None, help="exit after this many idle seconds")
    p.add_argument("--timeout", type=float, default=None, help="give up after this many seconds")
    p.add_argument("--stream-part", action="store_true", help=argparse.SUPPRESS)  # `seam stream start` runs it
    p.set_defaults(func="topics.cmd_sink")

    p = sub.add_parser(
        "stream",
        parents=[common],
        help="binlog streaming: `seam stream start|stop|status|wait` "
        "(wait: until lag 0; reader|sink: run one part in the foreground)",
    )
    p.add_argument("action", choices=["start", "stop", "status", "wait", "reader", "sink"])
    p.add_argument("--table", action="append", default=[], help="only these tables (repeatable; default all)")
    p.add_argument("--foreground", action="store_true", help="start: run here instead of in the background")
    p.add_argument("--until-idle", action="store_true", help="start --foreground: stop at the binlog's end")
    p.add_argument(
        "--fail-fast", action="store_true", help="wait: exit 3 at the first STOPPED table (default: wait for the rest)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600,
        help="start: seconds to wait for the parts' heartbeats; wait: seconds to wait for lag 0",
    )
    p.set_defaults(func="stream.cmd_stream")  # start, and the parts in the foreground: see command_of

    p = sub.add_parser("kafka", parents=[common], help="the broker: `seam kafka topics`, `seam kafka tail TOPIC`")
    p.add_argument("action", choices=["topics", "tail"])
    p.add_argument("topic", nargs="?", help="tail: the topic (`seam kafka topics` lists them)")
    p.add_argument("-n", type=int, default=10, help="tail: how many of the last messages (default 10)")
    p.add_argument("--follow", "-f", action="store_true", help="tail: keep printing new messages until Ctrl-C")
    p.add_argument("--full", action="store_true", help="tail: print whole values (default: 300 characters)")
    p.set_defaults(func="topics.cmd_kafka")

    p = sub.add_parser(
        "quarantine",
        parents=[common],
        help="messages the sink would not apply: `seam quarantine list`, `show ID`, `skip ID [--note TEXT]`",
    )
    p.add_argument("action", choices=["list", "show", "skip"])
    p.add_argument("id", nargs="?", type=int, help="show, skip: the message's number (`seam quarantine list`)")
    p.add_argument("--all", action="store_true", help="list: the skipped ones too")
    p.add_argument("--note", help="skip: why (recorded with who and when)")
    p.set_defaults(func="topics.cmd_quarantine")

    p = sub.add_parser("trigger", parents=[common], help="trigger an Airflow DAG run on the stack's Airflow")
    p.add_argument("dag_id")
    p.add_argument("--conf", help="run conf as JSON")
    p.add_argument("--wait", action="store_true", help="wait for the run to finish; exit 1 unless it succeeds")
    p.add_argument("--timeout", type=float, default=600)
    p.set_defaults(func="stack.cmd_trigger")
    return parser
