"""spark-submit entry point: read each table of a pipeline from MySQL over JDBC
with Spark and record its row count in the target (``seam.wiring_check``).

Proves the wiring of the stack end to end: Airflow -> Spark -> MySQL -> PostgreSQL.
"""

from __future__ import annotations

import argparse
import sys

from seam.config import load_pipeline
from seam.wiring import check_tables


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pipeline", default=None)
    parser.add_argument("--table", action="append", default=[], help="db.table (repeatable; default all)")
    args = parser.parse_args(argv)
    pipeline = load_pipeline(args.pipeline)
    for result in check_tables(pipeline, args.table or [t.name for t in pipeline.tables]):
        print(f"wiring check: {result['table']} rows={result['rows']} via Spark {result['spark_master']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
