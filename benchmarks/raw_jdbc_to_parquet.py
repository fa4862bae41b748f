"""spark-submit job for the benchmark baseline: a partitioned JDBC read of a table written to Parquet."""

from __future__ import annotations

import argparse
import sys
import time

from seam.config import load_pipeline
from seam.spark import jdbc_options, spark_session


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--table", required=True, help="`db`.`table`, or a subquery with an alias")
    parser.add_argument("--key", required=True)
    parser.add_argument("--upper", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--warm", action="store_true", help="count once first, then time the copy")
    args = parser.parse_args()
    pipeline = load_pipeline()
    spark = spark_session(pipeline, "seam-bench-raw")
    reader = (
        spark.read.format("jdbc")
        .options(**jdbc_options(pipeline))
        .option("dbtable", args.table)
        .option("partitionColumn", args.key)
        .option("lowerBound", "1")
        .option("upperBound", str(args.upper))
        .option("numPartitions", str(pipeline.spark.partitions))
    )
    if args.warm:
        reader.load().selectExpr("count(*)").collect()
    started = time.time()
    reader.load().write.mode("overwrite").parquet(args.out)
    seconds = time.time() - started
    rows = spark.read.parquet(args.out).count()
    print(f"RAW rows={rows} seconds={seconds:.3f}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
