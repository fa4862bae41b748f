"""spark-submit entry point: publish one incremental window per table (see seam.source.incremental); ``run`` is
also what the shared Spark driver runs (seam.spark_driver)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping

from seam.config import load_pipeline
from seam.core.errors import SeamError, one_line
from seam.source.incremental import Window, publish_window
from seam.spark import each_table, submitted_job


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pipeline", default=None)
    parser.add_argument("--table", action="append", required=True, help="db.table (repeatable)")
    parser.add_argument("--batch", action="append", required=True, help="batch id per --table")
    parser.add_argument(
        "--window",
        action="append",
        required=True,
        help="per --table, the planned window as JSON (`seam load incremental` plans it)",
    )
    args = parser.parse_args(argv)
    if not len(args.table) == len(args.batch) == len(args.window):
        parser.error("give one --batch and one --window per --table")
    return args


def run(spark, argv: list[str], env: Mapping[str, str], say: Callable[[str], None]) -> int:
    """The job on ``spark``: the pipeline read with ``env``, each line said with ``say``; the exit code."""
    args = parse(argv)
    try:
        pipeline = load_pipeline(args.pipeline, env)

        def publish(job):
            name, batch, window = job
            return publish_window(spark, pipeline, pipeline.table(name), batch, Window(**json.loads(window)), say=say)

        jobs = list(zip(args.table, args.batch, args.window))
        for (name, _, _), end in each_table(jobs, publish, pipeline.spark.max_parallel_tables):
            say(f"SEAM_RESULT table={name} batch={end.batch} messages={end.rows} window={end.window}")
    except SeamError as exc:  # one line for the log and the caller, never a traceback
        say(one_line(exc))
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    return submitted_job(run, argv, parse(argv).pipeline, "seam-incremental-load")


if __name__ == "__main__":
    sys.exit(main())
