"""The full-load and incremental cases of ``benchmarks/harness.py``: TPC-H tables in MariaDB and the baselines.

1. tpchgen-cli generates ``orders`` or ``lineitem`` at the scale factor (SF 1 = 1.5M orders, 6M lines); it is
   loaded into MariaDB as ``tpch.<table>`` (keys ``o_orderkey``; ``(l_orderkey, l_linenumber)``) unless it is
   there at that size.
2. Baseline: spark-submit of ``benchmarks/raw_jdbc_to_parquet.py`` (same master, same JDBC partitions) reads
   the table and writes Parquet: warm (a count first) or cold, timed inside the job.
3. Seam: ``seam load full tpch.<table>`` (Spark snapshot + reconciliation, Kafka, sink, atomic swap), timed
   from BEGIN to commit as recorded in the ledger (JVM start excluded, like the baseline).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))


TABLES = {  # TPC-H DDL, rows per scale factor, key
    "orders": (
        """CREATE TABLE `tpch`.`orders` (
  `o_orderkey` INT NOT NULL PRIMARY KEY, `o_custkey` INT NOT NULL, `o_orderstatus` CHAR(1) NOT NULL,
  `o_totalprice` DECIMAL(15,2) NOT NULL, `o_orderdate` DATE NOT NULL, `o_orderpriority` CHAR(15) NOT NULL,
  `o_clerk` CHAR(15) NOT NULL, `o_shippriority` INT NOT NULL, `o_comment` VARCHAR(79) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        1_500_000,
        ["o_orderkey"],
    ),
    "lineitem": (
        """CREATE TABLE `tpch`.`lineitem` (
  `l_orderkey` INT NOT NULL, `l_partkey` INT NOT NULL, `l_suppkey` INT NOT NULL, `l_linenumber` INT NOT NULL,
  `l_quantity` DECIMAL(15,2) NOT NULL, `l_extendedprice` DECIMAL(15,2) NOT NULL, `l_discount` DECIMAL(15,2) NOT NULL,
  `l_tax` DECIMAL(15,2) NOT NULL, `l_returnflag` CHAR(1) NOT NULL, `l_linestatus` CHAR(1) NOT NULL,
  `l_shipdate` DATE NOT NULL, `l_commitdate` DATE NOT NULL, `l_receiptdate` DATE NOT NULL,
  `l_shipinstruct` CHAR(25) NOT NULL, `l_shipmode` CHAR(10) NOT NULL, `l_comment` VARCHAR(44) NOT NULL,
  PRIMARY KEY (`l_orderkey`, `l_linenumber`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        6_000_000,
        ["l_orderkey", "l_linenumber"],
    ),
}


def ensure_table(name: str, scale: float) -> int:
    import pymysql

    from seam_dev import demo

    admin = os.environ["SEAM_MYSQL_URL"]
    conn = demo.connect(admin)
    ddl, per_scale, _ = TABLES[name]
    expected = int(per_scale * scale)
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS `tpch`")
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='tpch' AND TABLE_NAME=%s", (name,)
        )
        if cur.fetchone()[0]:
            cur.execute(f"SELECT COUNT(*) FROM `tpch`.`{name}`")
            if abs(cur.fetchone()[0] - expected) <= expected // 100:  # lineitem counts are approximate
                cur.execute(f"SELECT COUNT(*) FROM `tpch`.`{name}`")
                return cur.fetchone()[0]
            cur.execute(f"DROP TABLE `tpch`.`{name}`")
        cur.execute(ddl)
    with tempfile.TemporaryDirectory() as out:
        started = time.time()
        subprocess.run(
            [
                str(Path(sys.executable).with_name("tpchgen-cli")),
                "-s",
                str(scale),
                "--tables",
                name,
                "--output-dir",
                out,
            ],
            check=True,
        )
        from sqlalchemy.engine import make_url

        url = make_url(admin)
        load = pymysql.connect(
            host=url.host,
            port=url.port,
            user=url.username,
            password=url.password,
            database="tpch",
            local_infile=True,
            autocommit=True,
        )
        with load.cursor() as cur:
            cur.execute("SET unique_checks = 0")
            cur.execute(
                f"LOAD DATA LOCAL INFILE '{out}/{name}.tbl' INTO TABLE `{name}` FIELDS TERMINATED BY '|' "
                "LINES TERMINATED BY '|\\n'"
            )
            cur.execute(f"SELECT COUNT(*) FROM `{name}`")
            rows = cur.fetchone()[0]
        load.close()
        print(f"generated and loaded {rows:,} TPC-H {name} (SF {scale}) in {time.time() - started:.1f}s", flush=True)
    conn.close()
    return rows


def max_key(name: str, key: str) -> int:
    """The key's upper bound for Spark's partitioned read: even partitions, as Seam's chunks."""
    from seam_dev import demo

    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    with conn.cursor() as cur:
        cur.execute(f"SELECT MAX(`{key}`) FROM `tpch`.`{name}`")
        return int(cur.fetchone()[0])


def baseline(pipeline, name: str, rows: int, warm: bool) -> tuple[float, float]:
    """A partitioned Spark JDBC read written to Parquet, through spark-submit like Seam's job.

    Returns (rows/s of the copy itself, rows/s of the whole spark-submit incl. JVM start). With ``warm``
    the job counts the table once before the timed copy (JVM, JDBC driver and connections warmed up)."""
    from seam.load_run import job_env, spark_submit_command

    with tempfile.TemporaryDirectory() as out:
        key = TABLES[name][2][0]
        command = spark_submit_command(
            pipeline,
            "raw",
            [
                "--table",
                f"`tpch`.`{name}`",
                "--key",
                key,
                "--upper",
                str(max_key(name, key)),
                "--out",
                out + "/" + name,
                *(["--warm"] if warm else []),
            ],
            script=ROOT / "benchmarks" / "raw_jdbc_to_parquet.py",
        )
        started = time.time()
        result = subprocess.run(command, env=job_env(), capture_output=True, text=True)
        wall = time.time() - started
    if result.returncode:
        sys.exit(f"baseline failed:\n{result.stdout}\n{result.stderr}")
    line = [x for x in result.stdout.splitlines() if x.startswith("RAW ")][-1]
    copied, seconds = int(line.split("rows=")[1].split()[0]), float(line.split("seconds=")[1])
    assert copied == rows, (copied, rows)
    print(
        f"raw Spark JDBC -> Parquet ({'warm' if warm else 'cold'}): {rows:,} rows, copy {seconds:.1f}s = "
        f"{rows / seconds:,.0f} rows/s; spark-submit wall {wall:.1f}s = {rows / wall:,.0f} rows/s",
        flush=True,
    )
    return rows / seconds, rows / wall


def seam_load(pipeline_path: str, *args: str, done_marker: str, seconds_after: str) -> tuple[float, float]:
    """``seam load ...``: (the seconds its result line gives, from BEGIN to commit; the whole command's)."""
    started = time.time()
    result = subprocess.run(
        [sys.executable, "-m", "seam.cli", "--pipeline", pipeline_path, "load", *args], capture_output=True, text=True
    )
    wall = time.time() - started
    if result.returncode:
        sys.exit(f"seam load {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    line = [x for x in result.stdout.splitlines() if done_marker in x][-1]
    print(line, flush=True)
    seconds = float(line.split(seconds_after)[1].split("s")[0])
    rate = re.search(r"\(([\d,]+) rows/s\)", line)
    rows = re.search(r"([\d,]+)" + re.escape(seconds_after), line)
    if rate and rows and int(rate.group(1).replace(",", "")):  # finer than the line's one decimal (a 0.04 s load)
        seconds = int(rows.group(1).replace(",", "")) / int(rate.group(1).replace(",", ""))
    return seconds, wall


def seam_full_load(pipeline_path: str, name: str, rows: int) -> tuple[float, float]:
    seconds, wall = seam_load(
        pipeline_path, "full", f"tpch.{name}", done_marker="committed batch", seconds_after=" rows in "
    )
    print(
        f"seam full load: {rows:,} rows BEGIN->commit in {seconds:.1f}s = {rows / seconds:,.0f} rows/s; "
        f"wall incl. spark-submit start {wall:.1f}s = {rows / wall:,.0f} rows/s",
        flush=True,
    )
    return rows / seconds, rows / wall


def raw_window(pipeline, start: str, end: str, rows: int) -> float:
    """Seconds of a partitioned Spark JDBC read of lineitem's ship-date window (start, end] to Parquet (cold)."""
    from seam.load_run import job_env, spark_submit_command

    with tempfile.TemporaryDirectory() as out:
        where = f"`l_shipdate` > '{start}' AND `l_shipdate` <= '{end}'"  # the harness's own constants
        command = spark_submit_command(
            pipeline,
            "raw",
            ["--table", f"(SELECT * FROM `tpch`.`lineitem` WHERE {where}) w", "--key", "l_orderkey"]
            + ["--upper", str(max_key("lineitem", "l_orderkey")), "--out", out + "/w"],
            script=ROOT / "benchmarks" / "raw_jdbc_to_parquet.py",
        )
        result = subprocess.run(command, env=job_env(), capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"raw window read failed:\n{result.stdout}\n{result.stderr}")
    line = [x for x in result.stdout.splitlines() if x.startswith("RAW ")][-1]
    copied, seconds = int(line.split("rows=")[1].split()[0]), float(line.split("seconds=")[1])
    assert copied == rows, (copied, rows)
    print(f"raw JDBC window read: {rows:,} rows in {seconds:.1f}s = {rows / seconds:,.0f} rows/s", flush=True)
    return seconds
