"""spark-submit entry point: the shared Spark driver that loads run their jobs in (see seam.spark_driver)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from seam.config import load_pipeline
from seam.spark import spark_session
from seam.spark_driver import Server
from spark_jobs import full_load, incremental_load


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pipeline", default=None, help="the pipeline whose Spark settings start the session")
    parser.add_argument("--socket", required=True, help="where to listen (a path in the state dir's run/)")
    parser.add_argument("--identity", required=True, help="what callers must name (seam.spark_driver.driver_identity)")
    parser.add_argument("--idle-s", type=float, required=True, help="stop after this long without a job")
    args = parser.parse_args(argv)
    spark = spark_session(load_pipeline(args.pipeline), "seam-shared-driver")
    try:
        jobs = {"full_load": full_load.run, "incremental_load": incremental_load.run}
        Server(spark, jobs, Path(args.socket), args.identity, args.idle_s).serve()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
