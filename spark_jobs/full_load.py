"""spark-submit entry point: publish a full load of one or more tables (see seam.source.full_load); ``run`` is
also what the shared Spark driver runs (seam.spark_driver)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping

from seam.config import load_pipeline
from seam.core.errors import SeamError, one_line
from seam.source.full_load import Resume, publish_full_load
from seam.spark import each_table, submitted_job
from seam.wire.boundary import new_batch_id


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pipeline", default=None)
    parser.add_argument(
        "--table", action="append", required=True, help="db.table, or a table name unique in the pipeline (repeatable)"
    )
    parser.add_argument("--batch", action="append", default=[], help="batch id per --table (default: new ones)")
    parser.add_argument(
        "--resume", action="append", default=[], help="per --table: the open batch's chunks to keep (JSON), or -"
    )
    parser.add_argument(
        "--in-order",
        action="store_true",
        help="one table after the other, as given (cascades: a level below loads after the level above)",
    )
    args = parser.parse_args(argv)
    if args.batch and len(args.batch) != len(args.table):
        parser.error("give one --batch per --table, or none")
    if args.resume and len(args.resume) != len(args.batch):
        parser.error("give one --resume per --batch, or none")
    return args


def run(spark, argv: list[str], env: Mapping[str, str], say: Callable[[str], None]) -> int:
    """The job on ``spark``: the pipeline read with ``env``, each line said with ``say``; the exit code."""
    args = parse(argv)
    try:
        pipeline = load_pipeline(args.pipeline, env)
        tables = [pipeline.table(t) for t in args.table]
        batches = args.batch or [new_batch_id() for _ in tables]
        resumes = [None if r == "-" else Resume.from_json(r) for r in args.resume] or [None] * len(tables)

        def publish(job):
            table, batch, resume = job
            return publish_full_load(spark, pipeline, table, batch, say=say, resume=resume)

        jobs = list(zip(tables, batches, resumes))
        parallel = 1 if args.in_order else pipeline.spark.max_parallel_tables
        for (table, _, _), end in each_table(jobs, publish, parallel):
            say(f"SEAM_RESULT table={table.name} batch={end.batch} messages={end.rows} position={end.position}")
    except SeamError as exc:  # one line for the log and the caller, never a traceback
        say(one_line(exc))
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    return submitted_job(run, argv, parse(argv).pipeline, "seam-full-load")


if __name__ == "__main__":
    sys.exit(main())
