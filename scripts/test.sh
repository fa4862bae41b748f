#!/usr/bin/env bash
# The whole suite against the real embedded services, on a stack of its own (scripts/test-env.sh). The
# fixtures start what is not running and stop, at the end, only what they started.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/test-env.sh
exec .venv/bin/python -m pytest "$@"
