#!/usr/bin/env bash
# The whole suite, as `make test` runs it, in three pytest processes side by side on the broker,
# PostgreSQL and Redis `make services` started (each test keeps apart by topic prefix, schema and
# namespace; each process has its own API server and kube-apiserver):
#   - the unit and integration tests;
#   - the whole-system scenarios (real processes, mostly waiting on conditions);
#   - the tests marked `apart` (they bring their own broker and wait out an outage on purpose).
# Their waiting overlaps the others' work. All three must pass; the exit code says which did not.
set -uo pipefail
BIN=${BIN:-.venv/bin}
: "${TOCK_HOME:?TOCK_HOME must be set}"
mkdir -p "$TOCK_HOME"

names=(scenarios apart)
selections=("-m not apart tests/scenarios" "-m apart tests/unit tests/integration tests/scenarios")
pids=()
for i in "${!names[@]}"; do
    # shellcheck disable=SC2086  # the selection is words on purpose
    "$BIN/pytest" -q -p no:cacheprovider --durations=15 --basetemp="$TOCK_HOME/pytest-${names[$i]}" \
        ${selections[$i]} >"$TOCK_HOME/tests-${names[$i]}.log" 2>&1 &
    pids+=($!)
done
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
