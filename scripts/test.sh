#!/usr/bin/env bash
# The whole suite against the real embedded services, on a stack of its own (scripts/test-env.sh). The
# fixtures start what is not running and stop, at the end, only what they started.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/test-env.sh
# three lanes (pytest-xdist), a file at a time each: the suite waits on services, Spark and polls as much as it
# computes (two cores were 34% idle under two lanes, 23% under three; 22.6 against 19.5 minutes); tests marked
# `alone` run with the other lanes held (tests/conftest.py). SEAM_TEST_LANES=0: one process.
exec .venv/bin/python -m pytest -n "${SEAM_TEST_LANES:-3}" --dist loadscope --no-loadscope-reorder "$@"
