#!/usr/bin/env bash
# make torture: the randomized differential test on the test stack (see tests/torture/run.py).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/test-env.sh
exec .venv/bin/python -m tests.torture.run "$@"
