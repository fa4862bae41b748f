"""spark-submit entry point: the Structured Streaming sink (Kafka topics -> PostgreSQL, foreachBatch)."""

from __future__ import annotations

import argparse
import logging
import sys

from seam.apply.stream_sink import run_stream_sink
from seam.config import load_pipeline
from seam.spark import spark_session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pipeline", default=None)
    parser.add_argument("--table", action="append", default=[], help="only these tables (repeatable)")
    parser.add_argument(
        "--source",
        choices=["seam", "kafka"],
        default="seam",
        help="seam: the bundled Python Kafka source; kafka: Spark's format('kafka') (needs its jar)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    pipeline = load_pipeline(args.pipeline)
    tables = [pipeline.table(t) for t in args.table] if args.table else list(pipeline.tables)
    spark = spark_session(pipeline, "seam-stream-sink")
    run_stream_sink(spark, pipeline, tables, source=args.source)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
