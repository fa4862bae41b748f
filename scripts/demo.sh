#!/usr/bin/env bash
# The demo on the embedded stack, driven through Airflow as a user would from the UI: start the stack,
# seed the settlement schema, and while `seam writer` changes it: a full load of every demo table
# (seam_full_load: consistent snapshot -> Kafka -> PostgreSQL, each table validated), a safe window for the
# tables kept current by windows (seam_incremental), the stream taking over the streamed tables under the
# supervisor (seam_stream), then the nightly settlement of the previous business day (seam_settlement) and
# a validation of everything (seam_validate). Ends with a summary table and the UI's address and login.
# Every wait is for a condition (a DAG run's end, lag 0), with progress, never for a fixed time.
# Re-runnable on a used stack. Leaves the stack up, with the stream supervised, to explore.
set -euo pipefail
cd "$(dirname "$0")/.."
SEAM=.venv/bin/seam
ROWS="${SEAM_DEMO_ROWS:-100000}"
started=$SECONDS
step() { echo; echo "[$(( (SECONDS - started) / 60 ))m$(( (SECONDS - started) % 60 ))s] $*"; }

$SEAM up
# a stream left by an earlier run must not follow the re-seed's DROPs (the supervisor keeps a stop)
$SEAM stream stop >/dev/null
$SEAM seed --rows "$ROWS"

step "Full load of every demo table through Airflow (seam_full_load) while \`seam writer\` changes them:"
$SEAM writer --rate 200 --seconds 3600 >/dev/null 2>&1 &
WRITER=$!
trap 'kill $WRITER 2>/dev/null || true' EXIT
$SEAM trigger seam_full_load --wait --timeout 900

step "Tables with sync: windows load a safe window up to now (seam_incremental; clamped to the source's clock minus the safety delay):"
$SEAM trigger seam_incremental --conf "{\"end\": \"$(date -u +%Y-%m-%dT%H:%M:%S)\"}" --wait --timeout 900

step "Tables with sync: stream: the supervisor (seam_stream) starts the change reader and the streaming sink:"
$SEAM trigger seam_stream --conf '{"action": "start"}' --wait --timeout 900
$SEAM stream wait --timeout 900   # the stream applies what the writer did since the full load
kill $WRITER 2>/dev/null || true
wait $WRITER 2>/dev/null || true
trap - EXIT
echo "writer stopped; waiting for the stream to apply its last changes:"
$SEAM stream wait --timeout 900

step "Nightly settlement of the previous business day (seam_settlement: load or stream past the day, validate to the cent, emit Assets):"
$SEAM trigger seam_settlement --wait --timeout 900

step "Validation of every table (seam_validate: counts, checksums, column checks, differing rows):"
$SEAM trigger seam_validate --wait --timeout 900

step "Summary:"
$SEAM summary
AIRFLOW_URL="$($SEAM env | sed -n 's/^export SEAM_AIRFLOW_URL=//p')"
echo
echo "Demo done in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s: every table EQUAL."
echo "The stack is up and seam_stream keeps the stream running (every 5 minutes; its runs log each table's lag)."
echo "Airflow UI: $AIRFLOW_URL  user: admin"
echo "  password: .seam/airflow/simple_auth_manager_passwords.json.generated"
echo "  or: eval \"\$(.venv/bin/seam env)\"; echo \$SEAM_AIRFLOW_PASSWORD"
echo "Stream status: .venv/bin/seam stream status    stop it: trigger seam_stream with action=stop"
echo "Stop everything with: .venv/bin/seam down"
