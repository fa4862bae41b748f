"""An archive of the classes a Spark driver loads while it starts (the JDK's class data sharing).

A ``spark-submit`` spends most of its first seconds loading and verifying some 10,000 classes: on our 2-core
machines a local session takes ~6 s and its first job ~3 s, most of a small table's load. With the classes
mapped from an archive the same start takes ~3.7 s and ~1.5 s. Nothing else changes: same JVM, same JIT.

The archive is built once per installation (``python -m seam.spark_classes``, which ``make setup`` runs): a
small local Spark job exercises a session, a JDBC-shaped read, Python workers and a collect under
``-XX:ArchiveClassesAtExit``; its archive is moved into place only after that JVM has exited cleanly, so a
half-written one is never used. The name is keyed by the java binary and the pyspark version: another JDK
or Spark finds none and starts as before. A JVM given an archive that does not match its class path
ignores it (``-Xshare:auto``, the default), so the archive can make a start faster, never make it fail.

Delivery guarantee: none (process start-up only).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def _java() -> Path | None:
    """The java Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path() -> Path | None:
    """Where this installation's archive is (or would be); None without a java to key it by."""
    java = _java()
    if java is None:
        return None
    try:
        pyspark = version("pyspark")
    except PackageNotFoundError:  # a Spark not installed as a distribution: no archive
        return None
    key = hashlib.sha256(f"{java}|{java.stat().st_mtime_ns}|{pyspark}".encode()).hexdigest()[:16]
    return Path(sys.prefix) / "share" / "seam" / f"spark-classes-{key}.jsa"


def driver_java_options() -> str:
    """``-XX:SharedArchiveFile=...`` when the archive exists, else nothing."""
    archive = archive_path()
    return f"-XX:SharedArchiveFile={archive}" if archive is not None and archive.is_file() else ""


def build(force: bool = False) -> str:
    """Build the archive unless it exists; one line saying what was done."""
    archive = archive_path()
    if archive is None:
        return "no java or pyspark found: Spark starts without a class archive"
    if archive.is_file() and not force:
        return f"Spark start-up classes: {archive}"
    archive.parent.mkdir(parents=True, exist_ok=True)
    spark_submit = Path(sys.executable).with_name("spark-submit")
    with tempfile.TemporaryDirectory(prefix="seam-spark-classes-") as tmp:
        dump = Path(tmp) / "classes.jsa"
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        command = [
            str(spark_submit) if spark_submit.exists() else "spark-submit",
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.log.level=ERROR",
            "--driver-java-options",
            f"-XX:ArchiveClassesAtExit={dump}",
            __file__,
            "--exercise",
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, errors="replace", cwd=tmp)
        if done.returncode != 0 or not dump.is_file():
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return f"Spark start-up classes not archived (exit {done.returncode}: {tail}); Spark starts as before"
        staged = archive.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(dump, staged)
        os.replace(staged, archive)  # whole or not at all
    return f"Spark start-up classes archived: {archive}"


def _exercise() -> None:
    """What a Seam job does while it starts: a session configured as ``seam.spark`` does, a DataFrame with
    the SQL types a JDBC read yields, Python workers (mapPartitions), a collect."""
    import datetime
    import decimal

    from pyspark.sql import SparkSession
    from pyspark.sql.types import (
        BinaryType,
        DateType,
        DecimalType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    spark = (
        SparkSession.builder.appName("seam-spark-classes")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.legacy.charVarcharAsString", "true")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("name", StringType()),
            StructField("amount", DecimalType(18, 2)),
            StructField("day", DateType()),
            StructField("at", TimestampType()),
            StructField("raw", BinaryType()),
        ]
    )
    now = datetime.datetime(2026, 1, 1, 12, 0, 0)
    rows = [(i, f"n{i}", decimal.Decimal("1.25"), now.date(), now, b"\x00") for i in range(100)]
    frame = spark.createDataFrame(rows, schema).repartition(2)
    frame.where("id > 10").groupBy("day").count().collect()
    spark.sparkContext.parallelize(range(4), 2).mapPartitions(lambda part: [sum(part)]).collect()
    frame.rdd.mapPartitions(lambda part: [len(list(part))]).collect()
    spark.stop()


if __name__ == "__main__":
    if sys.argv[1:] == ["--exercise"]:
        _exercise()
    else:
        print(build(force="--force" in sys.argv[1:]))
