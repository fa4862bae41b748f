#!/usr/bin/env bash
# make faults: one fault after another under a running writer, on the test stack (see tests/faults/run.py).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/test-env.sh
exec .venv/bin/python -m tests.faults.run "$@"
