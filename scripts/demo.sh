#!/usr/bin/env bash
# The demo on the embedded stack: start it, seed the settlement schema, run a
# full load of every demo table while a writer changes them (consistent
# snapshot -> Kafka -> PostgreSQL), stream the binlog from there, load an
# incremental window of every incremental table, and run the wiring-check DAG
# through Airflow. Leaves the stack up to explore.
set -euo pipefail
cd "$(dirname "$0")/.."
SEAM=.venv/bin/seam
ROWS="${SEAM_DEMO_ROWS:-100000}"

$SEAM up
$SEAM seed --rows "$ROWS"
echo
echo "Full load of every demo table while \`seam writer\` changes them:"
$SEAM writer --rate 200 --seconds 600 >/dev/null 2>&1 &
WRITER=$!
trap 'kill $WRITER 2>/dev/null || true' EXIT
$SEAM load full demo.accounts demo.payments demo.audit_log demo.type_zoo
echo
echo "Incremental windows of the tables with an updated_at cursor (clamped to the safety delay):"
$SEAM load incremental --all
echo
echo "Streaming the binlog from each table's snapshot position while the writer goes on:"
$SEAM stream start
sleep 30
$SEAM stream status || true
kill $WRITER 2>/dev/null || true
$SEAM stream stop
echo
echo "Validation: each target table against its source (counts, checksums, column checks, differing rows):"
$SEAM validate --all
echo
$SEAM trigger seam_wiring_check --wait --timeout 900
.venv/bin/python -c '
from seam.cli import _inject_stack_env
from seam.stack import EmbeddedStack
_inject_stack_env(EmbeddedStack())
from seam.config import load_pipeline
from seam.wiring import latest
print("\nRow counts read by Spark from MariaDB, recorded in PostgreSQL (seam.wiring_check):")
for table, rows, checked_at in latest(load_pipeline()):
    print(f"  {table:18} {rows:>10,}   {checked_at:%Y-%m-%d %H:%M:%S} UTC")
'
echo
$SEAM status
AIRFLOW_URL="$($SEAM env | sed -n 's/^export SEAM_AIRFLOW_URL=//p')"
echo
echo "The stack is up. Airflow UI: $AIRFLOW_URL  (user admin)"
echo "  password: .seam/airflow/simple_auth_manager_passwords.json.generated"
echo "  or: eval \"\$(.venv/bin/seam env)\"; echo \$SEAM_AIRFLOW_PASSWORD"
echo "Stop everything with: .venv/bin/seam down"
