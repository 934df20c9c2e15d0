#!/usr/bin/env bash
# The whole suite, as `make test` runs it, in three lanes of pytest processes side by side on the broker,
# PostgreSQL and Redis `make services` started (each test keeps apart by topic prefix, schema and
# namespace; each process has its own API server and kube-apiserver):
#   - the unit and integration tests;
#   - the whole-system scenarios (real processes, mostly waiting on conditions);
#   - the tests marked `apart` (they bring their own broker and wait out an outage on purpose), then,
#     once they are done, the slowest scenario files (LATER), so that the three lanes end together.
# Their waiting overlaps the others' work. All must pass; the exit code says which did not.
set -uo pipefail
BIN=${BIN:-.venv/bin}
: "${TOCK_HOME:?TOCK_HOME must be set}"
mkdir -p "$TOCK_HOME"

# About ten minutes of the scenarios on 2 cores: run after the `apart` tests, in their lane.
LATER=(tests/scenarios/test_kubernetes_executor.py tests/scenarios/test_scheduler_takeover_liveness.py
       tests/scenarios/test_sensors.py)

names=()
pids=()
beside() {  # name, then the pytest arguments: a pytest process in the background, its output to a log
    local name=$1
    shift
    "$BIN/pytest" -q -p no:cacheprovider --durations=15 --basetemp="$TOCK_HOME/pytest-$name" "$@" \
        >"$TOCK_HOME/tests-$name.log" 2>&1 &
    pids+=($!)
    names+=("$name")
}
after() {  # pid, name, then the pytest arguments: as beside, once process pid has ended
    local first=$1 name=$2
    shift 2
    (tail --pid="$first" -f /dev/null
     exec "$BIN/pytest" -q -p no:cacheprovider --durations=15 --basetemp="$TOCK_HOME/pytest-$name" "$@" \
         >"$TOCK_HOME/tests-$name.log" 2>&1) &
    pids+=($!)
    names+=("$name")
}
beside scenarios -m "not apart" tests/scenarios "${LATER[@]/#/--ignore=}"
beside apart -m apart tests/unit tests/integration tests/scenarios
after "${pids[1]}" scenarios-later -m "not apart" "${LATER[@]}"
"$BIN/pytest" -q -p no:cacheprovider --durations=15 --basetemp="$TOCK_HOME/pytest-main" \
    -m "not apart" tests/unit tests/integration
main_status=$?
failed=()
[ "$main_status" -eq 0 ] || failed+=("unit+integration")
for i in "${!names[@]}"; do
    wait "${pids[$i]}" || failed+=("${names[$i]}")
    echo "--- ${names[$i]}, from $TOCK_HOME/tests-${names[$i]}.log:"
    cat "$TOCK_HOME/tests-${names[$i]}.log"
done
if [ "${#failed[@]}" -ne 0 ]; then
    echo "make test: FAILED (${failed[*]})"
    exit 1
fi
