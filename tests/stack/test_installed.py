"""An installed ``seam`` works outside the checkout (issue 17): the package built from this repository (not
the editable checkout) runs ``seam load full`` and ``seam validate`` from an unrelated directory, with its
state there, against the test stack.

The dependencies come from the project's .venv (a path entry, not its site dir: the checkout's editable
finder is not installed), so the test costs a build, not a download."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from seam.config import CHECKOUT, load_pipeline
from tests.support.commands import run_command
from tests.support.pipelines import pipeline_file
from tests.support.source import fresh_database

DB = "installed_test"
pytestmark = pytest.mark.stack


def test_an_installed_seam_loads_and_validates_outside_the_checkout(stack, tmp_path_factory):
    fresh_database(
        DB,
        f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, note VARCHAR(20), amount DECIMAL(12,2))",
        f"INSERT INTO {DB}.t SELECT seq, CONCAT('n', seq), seq / 7 FROM `{DB}`.seq_1_to_5000",
    )
    work = tmp_path_factory.mktemp("elsewhere")
    pipeline = Path(pipeline_file(tmp_path_factory, "installed", [{"name": f"{DB}.t", "key": ["id"]}]))
    shutil.copy(pipeline, work / "p.yaml")

    venv = work / "venv"
    uv = Path(sys.executable).with_name("uv")
    subprocess.run([str(uv), "venv", "-q", str(venv), "--python", sys.executable], check=True)
    built = subprocess.run(
        [str(uv), "pip", "install", "-q", "--no-deps", "--python", str(venv / "bin/python"), str(CHECKOUT)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    packages = next(Path(p) for p in site.getsitepackages() if p.endswith("site-packages"))
    (next(venv.glob("lib/python*/site-packages")) / "deps.pth").write_text(f"{packages}\n")

    env = {k: v for k, v in os.environ.items() if k not in ("SEAM_STATE_DIR", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), str(packages.parents[2] / "bin"), env["PATH"]])  # spark-submit
    where = subprocess.run(
        [str(venv / "bin/python"), "-c", "import seam, spark_jobs; print(seam.__file__, spark_jobs.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert str(venv) in where.stdout and str(CHECKOUT) not in where.stdout, where.stdout + where.stderr

    def seam(*args: str) -> subprocess.CompletedProcess:
        return run_command(
            [str(venv / "bin/seam"), "--pipeline", "p.yaml", *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    loaded = seam("load", "full", f"{DB}.t")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert "committed batch" in loaded.stdout
    checked = seam("validate", f"{DB}.t")
    assert checked.returncode == 0 and "EQUAL" in checked.stdout, checked.stdout + checked.stderr
    assert list((work / ".seam" / "reports").glob("*.html")), "the report lands in the working directory's .seam"
    target = load_pipeline(str(pipeline)).target
    with psycopg.connect(**target.conninfo(), autocommit=True) as tgt:
        assert tgt.execute(f'SELECT count(*) FROM "{DB}"."t"').fetchone()[0] == 5000
