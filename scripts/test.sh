#!/usr/bin/env bash
# The whole suite against the real embedded services. The fixtures start
# what is not running (and stop only that at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
exec .venv/bin/python -m pytest "$@"
