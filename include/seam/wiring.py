"""The stack's wiring check: Spark reads each table from MySQL over JDBC and
the row counts land in the target's state schema (``seam.wiring_check``).

Delivery guarantee: none (a diagnostic; each run appends one row per table).
"""

from __future__ import annotations

import datetime as dt

from psycopg import sql

from seam.core.pipeline import Pipeline
from seam.spark import jdbc_options, quote_mysql, spark_session
from seam.state.connection import open_target


def check_tables(pipeline: Pipeline, tables: list[str]) -> list[dict]:
    spark = spark_session(pipeline, "seam-wiring-check")
    results = []
    try:
        for ref in tables:
            table = pipeline.table(ref)
            frame = (
                spark.read.format("jdbc")
                .options(**jdbc_options(pipeline))
                .option("dbtable", f"{quote_mysql(table.db)}.{quote_mysql(table.table)}")
                .load()
            )
            results.append(
                {
                    "table": table.name,
                    "rows": frame.count(),
                    "columns": len(frame.columns),
                    "spark_master": spark.sparkContext.master,
                }
            )
    finally:
        spark.stop()
    record(pipeline, results)
    return results


def record(pipeline: Pipeline, results: list[dict]) -> None:
    schema = sql.Identifier(pipeline.target.state_schema)
    with open_target(pipeline) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
        conn.execute(
            sql.SQL("""CREATE TABLE IF NOT EXISTS {}.wiring_check (
            checked_at timestamptz NOT NULL, table_name text NOT NULL, row_count bigint NOT NULL,
            column_count int NOT NULL, spark_master text NOT NULL)""").format(schema)
        )
        now = dt.datetime.now(dt.UTC)
        with conn.cursor() as cur:
            cur.executemany(
                sql.SQL("INSERT INTO {}.wiring_check VALUES (%s, %s, %s, %s, %s)").format(schema),
                [(now, r["table"], r["rows"], r["columns"], r["spark_master"]) for r in results],
            )


def latest(pipeline: Pipeline) -> list[tuple]:
    """The most recent check's rows: (table, rows, checked_at)."""
    schema = sql.Identifier(pipeline.target.state_schema)
    with open_target(pipeline) as conn:
        return conn.execute(
            sql.SQL(
                "SELECT DISTINCT ON (table_name) table_name, row_count, checked_at FROM {}.wiring_check "
                "ORDER BY table_name, checked_at DESC"
            ).format(schema)
        ).fetchall()
