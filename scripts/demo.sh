#!/usr/bin/env bash
# The demo on the embedded stack: start it, seed the settlement schema, run a
# full load of every demo table while a writer changes them (consistent
# snapshot -> Kafka -> PostgreSQL), keep the windows table current by a safe
# window and the streamed tables by the binlog, wait until the stream has
# applied everything (lag 0), validate every table, and run the wiring-check
# DAG through Airflow. Every wait is for a condition, with progress, never for
# a fixed time. Re-runnable on a used stack. Leaves the stack up to explore.
set -euo pipefail
cd "$(dirname "$0")/.."
SEAM=.venv/bin/seam
ROWS="${SEAM_DEMO_ROWS:-100000}"
started=$SECONDS

$SEAM up
$SEAM stream stop >/dev/null  # a stream left by an earlier run must not follow the re-seed's DROPs
$SEAM seed --rows "$ROWS"
echo
echo "Full load of every demo table while \`seam writer\` changes them:"
$SEAM writer --rate 200 --seconds 3600 >/dev/null 2>&1 &
WRITER=$!
trap 'kill $WRITER 2>/dev/null || true; $SEAM stream stop >/dev/null 2>&1 || true' EXIT
$SEAM load full demo.accounts demo.payments demo.audit_log demo.type_zoo
echo
echo "Tables with sync: windows get a safe window (clamped to the source's clock minus the safety delay):"
$SEAM load incremental --all
echo
echo "Tables with sync: stream follow the binlog from their snapshot position while the writer goes on:"
$SEAM stream start
$SEAM stream wait --timeout 900   # the stream applies what the writer did since the full load
kill $WRITER 2>/dev/null || true
wait $WRITER 2>/dev/null || true
echo "writer stopped; waiting for the stream to apply its last changes:"
$SEAM stream wait --timeout 900
$SEAM stream status
echo
echo "Validation: each target table against its source (counts, checksums, column checks, differing rows):"
$SEAM validate --all
$SEAM stream stop
trap - EXIT
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
echo "Demo done in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s: every table EQUAL."
echo "The stack is up. Airflow UI: $AIRFLOW_URL  (user admin)"
echo "  password: .seam/airflow/simple_auth_manager_passwords.json.generated"
echo "  or: eval \"\$(.venv/bin/seam env)\"; echo \$SEAM_AIRFLOW_PASSWORD"
echo "Follow the binlog again: .venv/bin/seam stream start   (status: seam stream status)"
echo "Stop everything with: .venv/bin/seam down"
