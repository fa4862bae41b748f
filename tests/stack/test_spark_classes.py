"""The class archive that makes Spark start faster (``seam.spark_classes``) exists after ``make setup`` and is
really used by the spark-submit Seam runs: a driver given the options of ``seam.spark.submit_conf`` with
``-Xshare:on`` (which refuses to start with an archive it cannot map) loads most of its classes from it."""

from __future__ import annotations

import sys
from pathlib import Path

from seam.load_run import job_env
from seam.spark import submit_conf
from seam.spark_classes import archive_path, build
from tests.support.commands import run_command


def test_the_archive_is_built_once_and_a_seam_spark_submit_maps_it(tmp_path):
    archive = archive_path()
    assert archive is not None
    assert build() == f"Spark start-up classes: {archive}"  # make setup built it: nothing to do again
    options = submit_conf()["spark.driver.extraJavaOptions"]
    assert options.split()[0] == f"-XX:SharedArchiveFile={archive}"  # then SEAM_SPARK_JAVA_OPTIONS

    job = tmp_path / "job.py"
    job.write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "print('rows', spark.range(5).count())\n"
        "spark.stop()\n"
    )
    loaded = tmp_path / "classes.txt"
    done = run_command(
        [
            str(Path(sys.executable).with_name("spark-submit")),
            "--master",
            "local[1]",
            "--driver-java-options",
            f"{options} -Xshare:on -Xlog:class+load=info:file={loaded}",
            str(job),
        ],
        env=job_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rows 5" in done.stdout
    lines = loaded.read_text().splitlines()
    shared = sum("source: shared objects file (top)" in line for line in lines)  # the archive's layer
    assert shared > 0.5 * len(lines), (shared, len(lines))
