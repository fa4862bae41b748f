# Sourced by test.sh and torture.sh: the test stack's own state dir (.seam-test), ports, databases and
# Airflow home, so a user's stack (`make demo`, `seam up`) and its data, topics and DAG states are never
# touched.
export PYTHONUNBUFFERED=1
# a shell that ran `eval "$(seam env)"` carries the user's stack: none of it may reach the tests
for var in $(compgen -e | grep -E '^(SEAM_|AIRFLOW_)' | grep -v '^SEAM_TEST_' || true); do unset "$var"; done
export SEAM_STATE_DIR="${SEAM_TEST_STATE_DIR:-$PWD/.seam-test}"
export SEAM_MYSQL_PORT="${SEAM_TEST_MYSQL_PORT:-43306}"
export SEAM_KAFKA_PORT="${SEAM_TEST_KAFKA_PORT:-49092}"
export SEAM_TARGET_PORT="${SEAM_TEST_TARGET_PORT:-45432}"
export SEAM_AIRFLOW_PORT="${SEAM_TEST_AIRFLOW_PORT:-48080}"
# SEAM_TEST_SNAPSHOT=portable runs the suite with the portable snapshot method forced (seam/snapshot.py)
if [ -n "${SEAM_TEST_SNAPSHOT:-}" ]; then export SEAM_SNAPSHOT="$SEAM_TEST_SNAPSHOT"; fi
# the suite starts some hundred short Spark drivers on 2 cores: C1 alone compiles enough for them and starts
# each about a second sooner (no effect on what they do; SEAM_TEST_SPARK_JAVA_OPTIONS= turns it off)
export SEAM_SPARK_JAVA_OPTIONS="${SEAM_TEST_SPARK_JAVA_OPTIONS--XX:TieredStopAtLevel=1}"
# the suite's DAG files do not change while it runs (a changed file is parsed again at once anyway): parsing
# each of them every 30 s, Airflow's default, took more CPU than any test of the DAGs
export AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL="${SEAM_TEST_DAG_PARSE_INTERVAL:-600}"
