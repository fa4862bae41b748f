#!/usr/bin/env bash
# Install everything Seam's embedded stack needs: Debian packages, a venv at
# .venv with the pinned requirements, and Seam itself (editable). Idempotent:
# a re-run only checks, and finishes in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(mariadb-server mariadb-client libmariadb-java postgresql postgresql-client postgresql-15-postgis-3 kcat
              pkg-config default-libmysqlclient-dev zlib1g-dev docker-compose openjdk-17-jre-headless)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  if [ "$pkg" = openjdk-17-jre-headless ] && command -v java >/dev/null \
     && java -version 2>&1 | grep -q 'version "17'; then
    continue  # any Java 17 will do
  fi
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.seam-requirements.sha256
want="$(cat requirements.txt pyproject.toml setup.py include/seam/source/*.c include/seam/apply/*.c include/seam/wire/*.c include/seam/wire/*.h scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing pinned Python requirements into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check "uv==0.13.8"
  # bytecode now: with PYTHONDONTWRITEBYTECODE set (as on CI machines) every process would compile every module
  # it imports (Spark's Python workers, the sink, Airflow) each time it starts
  .venv/bin/uv pip sync -q --compile-bytecode --python .venv/bin/python requirements.txt
  # Seam itself, and its compiled row decoder (seam.source._rowimages) and snapshot stager
  # (seam.apply._snapshotrows) built in place; rebuilt when their source changes
  .venv/bin/uv pip install -q --python .venv/bin/python --no-deps --reinstall-package seam -e .
  .venv/bin/python -c 'import seam.source._rowimages' \
    || echo "setup: WARNING: the compiled row decoder did not build (gcc and Python's headers?); the stream reads rows in Python, slower"
  .venv/bin/python -c 'import seam.apply._snapshotrows' \
    || echo "setup: WARNING: the compiled snapshot stager did not build (gcc, Python's and zlib's headers?); full loads stage rows in Python, slower"
  .venv/bin/python -c 'import seam.source._rowjson' \
    || echo "setup: WARNING: the compiled snapshot row renderer did not build (gcc and Python's headers?); full loads render rows in Python, slower"
  .venv/bin/python -c 'import seam.wire._frames' \
    || echo "setup: WARNING: the compiled snapshot framer did not build (gcc, Python's and zlib's headers?); full loads frame rows in Python, slower"
  echo "$want" > "$stamp"
fi
# Seam's own modules as bytecode, brought up to date on every run (only what changed is compiled): with
# PYTHONDONTWRITEBYTECODE set (as on CI machines) every seam process (a CLI command, the stream's parts, a Spark
# job's Python workers) would otherwise compile each module it imports from source, a tenth of a second a start
.venv/bin/python -m compileall -q -j 0 include plugins spark_jobs dags >/dev/null
# once per installation: Spark's start-up classes in an archive the JVM maps (seam.spark_classes)
.venv/bin/python -m seam.spark_classes | sed 's/^/setup: /'
echo "setup: ready ($(.venv/bin/python -c 'import airflow, pyspark; print(f"airflow {airflow.__version__}, pyspark {pyspark.__version__}")'))"
