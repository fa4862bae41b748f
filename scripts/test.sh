#!/usr/bin/env bash
# The whole suite against the real embedded services, on a stack of its own (scripts/test-env.sh). The
# fixtures start what is not running and stop, at the end, only what they started.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/test-env.sh
# two lanes (pytest-xdist), a file at a time each: the suite waits on services and Spark more than it
# computes; tests marked `alone` run with the other lane held (tests/conftest.py). SEAM_TEST_LANES=0: one process.
exec .venv/bin/python -m pytest -n "${SEAM_TEST_LANES:-2}" --dist loadscope --no-loadscope-reorder "$@"
