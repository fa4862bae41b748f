"""spark-submit entry point: publish a full load of one table (see seam.full_load)."""
from __future__ import annotations

import argparse
import sys

from seam.boundary import new_batch_id
from seam.config import load_pipeline
from seam.full_load import publish_full_load
from seam.spark import spark_session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pipeline", default=None)
    parser.add_argument("--table", required=True, help="db.table, or a table name unique in the pipeline")
    parser.add_argument("--batch", default=None, help="batch id (default: a new one)")
    args = parser.parse_args(argv)
    pipeline = load_pipeline(args.pipeline)
    table = pipeline.table(args.table)
    spark = spark_session(pipeline, f"seam-full-load-{table.name}")
    try:
        end = publish_full_load(spark, pipeline, table, args.batch or new_batch_id(),
                                say=lambda line: print(line, flush=True))
    finally:
        spark.stop()
    print(f"SEAM_RESULT batch={end.batch} rows={end.rows} position={end.position}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
