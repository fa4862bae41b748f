"""spark-submit entry point: publish a full load of one or more tables (see seam.source.full_load)."""

from __future__ import annotations

import argparse
import sys

from seam.cli import operational_errors
from seam.config import load_pipeline
from seam.source.full_load import publish_full_load
from seam.spark import spark_session
from seam.wire.boundary import new_batch_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pipeline", default=None)
    parser.add_argument(
        "--table", action="append", required=True, help="db.table, or a table name unique in the pipeline (repeatable)"
    )
    parser.add_argument("--batch", action="append", default=[], help="batch id per --table (default: new ones)")
    args = parser.parse_args(argv)
    if args.batch and len(args.batch) != len(args.table):
        parser.error("give one --batch per --table, or none")
    pipeline = load_pipeline(args.pipeline)
    tables = [pipeline.table(t) for t in args.table]
    batches = args.batch or [new_batch_id() for _ in tables]
    spark = spark_session(pipeline, "seam-full-load")
    try:
        for table, batch in zip(tables, batches):
            end = publish_full_load(spark, pipeline, table, batch, say=lambda line: print(line, flush=True))
            print(
                f"SEAM_RESULT table={table.name} batch={end.batch} messages={end.rows} position={end.position}",
                flush=True,
            )
    except operational_errors() as exc:  # one line for the log and the caller, never a traceback
        print(f"seam: error: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
