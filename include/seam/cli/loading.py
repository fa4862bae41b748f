"""``seam load|summary|validate|repair``: the batch commands, each a call into the library and its printout.

Delivery guarantee: that of ``seam.loads`` and ``seam.repair`` (whole batches, exactly once); validation
only reads."""

from __future__ import annotations

import json
import os
import sys
import time

import pymysql

from seam.cli.common import pipeline_of
from seam.cli.cutover_repairs import record_failure
from seam.core.errors import ConfigError, SeamError
from seam.load_output import LoadOutput
from seam.load_run import Runner
from seam.loads import full_load, incremental_load
from seam.processes import Processes
from seam.repair import repair_table
from seam.source.lag import stream_lag
from seam.state.connection import connect_state
from seam.state.parts import table_summary
from seam.validate.side import Scope
from seam.validate.validation import validate_tables


def cmd_load(args, procs: Processes) -> int:
    pipeline = pipeline_of(args)
    if args.mode == "full":
        if args.all or args.start or args.end:
            raise ConfigError("load", "--all/--start/--end are for `seam load incremental`")
        if not args.tables:
            raise ConfigError("load", "name the table(s) to load: seam load full TABLE...")
        tables = [pipeline.table(t) for t in args.tables]
    else:
        if args.restart:
            raise ConfigError("load", "--restart is for `seam load full`")
        if args.all == bool(args.tables):
            raise ConfigError("load", "name the table(s) to load, or give --all for every incremental table")
        all_incremental = [t for t in pipeline.tables if t.incremental]
        tables = all_incremental if args.all else [pipeline.table(t) for t in args.tables]
        if not tables:
            raise ConfigError("tables", "no table of the pipeline is incremental (give it a cursor: updated_at)")
    stamp = time.strftime("%Y%m%dT%H%M%S")
    output = LoadOutput(procs.log_dir / f"load-{stamp}-{os.getpid()}.log", [t.name for t in tables])
    runner = Runner(say=lambda line: print(line, flush=True), log=output, timeout=args.timeout)
    try:
        if args.mode == "full":
            full_load(pipeline, tables, runner, restart=args.restart)
        else:
            incremental_load(pipeline, tables, runner, start=args.start, end=args.end)
    except SeamError:
        print(f"the whole output of the Spark job and the sink: {output.path}", flush=True)
        raise
    finally:
        output.close()
    return 0


def cmd_summary(args, procs: Processes) -> int:
    """One line per table: how it is kept current, rows, the full load's rows/s, lag, the last verdict.
    Exit 1 unless every table's last validation is EQUAL."""
    pipeline = pipeline_of(args)
    streamed = [t for t in pipeline.tables if not t.incremental]
    lags = {lag.table: lag for lag in stream_lag(pipeline, streamed)[1]} if streamed else {}
    conn = connect_state(pipeline)
    source = pymysql.connect(**pipeline.source.pymysql_kwargs())
    rows = []
    try:
        for t in pipeline.tables:
            s = table_summary(conn, pipeline.target.state_schema, t.db, t.table)
            rate = f"{s['load_rows'] / s['load_seconds']:,.0f}" if s["load_rows"] and s["load_seconds"] else "-"
            if t.incremental:
                lag = "-"
                if s["watermark"]:  # the cursor's distance to the source's clock, in the source's time zone
                    with source.cursor() as cur:
                        cur.execute("SELECT TIMESTAMPDIFF(MICROSECOND, %s, NOW(6)) / 1e6", (s["watermark"],))
                        behind = cur.fetchone()[0]
                    lag = f"{float(behind):.0f} s (window)" if behind is not None else "-"
            else:
                got = lags.get(t.name)
                lag = (
                    (
                        "STOPPED"
                        if got.stopped
                        else "-"
                        if got.behind_seconds is None
                        else f"{got.behind_seconds:.0f} s, {got.behind_events or 0:,} ev"
                    )
                    if got and got.applied
                    else "-"
                )
            rows.append(
                (
                    t.name,
                    f"full + {t.sync}",
                    "-" if s["rows"] is None else f"{s['rows']:,}",
                    rate,
                    lag,
                    (s["verdict"] or "not validated").upper(),
                )
            )
    finally:
        conn.close()
        source.close()
    head = ("table", "mode", "rows", "rows/s (full load)", "lag", "verdict")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(r):
        return "  ".join(c.ljust(w) if i in (0, 1, 4, 5) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    print(line(head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    return 0 if all(r[5] == "EQUAL" for r in rows) else 1


def cmd_validate(args, procs: Processes) -> int:
    pipeline = pipeline_of(args)
    if args.all == bool(args.tables):
        raise ConfigError("validate", "name the table(s) to validate, or give --all")
    tables = list(pipeline.tables) if args.all else [pipeline.table(t) for t in args.tables]
    scope = Scope(
        window=tuple(args.window) if args.window else None,
        key_range=(args.key_range[0], args.key_range[1]) if args.key_range else None,
    )
    reports = validate_tables(
        pipeline, tables, scope, limit=args.limit, report_dir=args.report_dir, say=lambda line: print(line, flush=True)
    )
    if args.json:
        print(json.dumps([r.as_dict() for r in reports], default=str, indent=2))
    if len(reports) == 1 and reports[0].unchecked:  # one named table that cannot be compared: bad input
        print(f"seam: validation: {reports[0].problem}", file=sys.stderr)
        return 2
    if len(reports) > 1:
        print("verdicts: " + ", ".join(f"{r.table} {r.verdict.upper()}" for r in reports))
    return 0 if all(r.verdict == "equal" for r in reports) else 1


def cmd_repair(args, procs: Processes) -> int:
    pipeline = pipeline_of(args)
    if args.max_rows is not None and args.max_rows < 1:
        raise ConfigError("repair", "--max-rows must be at least 1")
    for name in args.tables:
        table = pipeline.table(name)
        try:
            result = repair_table(
                pipeline,
                table,
                full=args.full,
                max_rows=args.max_rows,
                timeout=args.timeout,
                say=lambda line: print(line, flush=True),
            )
        except Exception as exc:
            if args.after_cutover:  # started by the stream: the stopped table says what happened
                record_failure(pipeline, table, exc)
            raise
        print(result.summary(), flush=True)
    return 0
