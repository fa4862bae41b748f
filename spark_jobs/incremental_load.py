"""spark-submit entry point: publish one incremental window per table (see seam.source.incremental)."""

from __future__ import annotations

import argparse
import json
import sys

from seam.config import load_pipeline
from seam.core.errors import SeamError, one_line
from seam.source.incremental import Window, publish_window
from seam.spark import each_table, say_line, spark_session


def main(argv: list[str] | None = None) -> int:
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
    pipeline = load_pipeline(args.pipeline)
    spark = spark_session(pipeline, "seam-incremental-load")

    def publish(job):
        name, batch, window = job
        return publish_window(spark, pipeline, pipeline.table(name), batch, Window(**json.loads(window)), say=say_line)

    try:
        jobs = list(zip(args.table, args.batch, args.window))
        for (name, _, _), end in each_table(jobs, publish, pipeline.spark.max_parallel_tables):
            say_line(f"SEAM_RESULT table={name} batch={end.batch} messages={end.rows} window={end.window}")
    except SeamError as exc:  # one line for the log and the caller, never a traceback
        print(one_line(exc), file=sys.stderr, flush=True)
        return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
