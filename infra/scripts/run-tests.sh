#!/usr/bin/env bash
# The whole suite, as `make test` runs it: tests marked `apart` (they bring their own broker and
# spend minutes waiting out an outage on purpose) run in a second pytest process beside the rest,
# so their waiting overlaps the others' work. Both must pass; the exit code is the worse of the two.
set -uo pipefail
BIN=${BIN:-.venv/bin}
: "${TOCK_HOME:?TOCK_HOME must be set}"
mkdir -p "$TOCK_HOME"
apart_log="$TOCK_HOME/tests-apart.log"
"$BIN/pytest" -q -p no:cacheprovider -m apart --basetemp="$TOCK_HOME/pytest-apart" \
    tests/unit tests/integration tests/scenarios >"$apart_log" 2>&1 &
apart=$!
"$BIN/pytest" -q -p no:cacheprovider --durations=30 -m "not apart" tests/unit tests/integration tests/scenarios
rest=$?
wait "$apart"
apart_status=$?
echo "--- tests run apart (own broker), from $apart_log:"
cat "$apart_log"
if [ "$rest" -ne 0 ] || [ "$apart_status" -ne 0 ]; then
    echo "make test: FAILED (suite exit $rest, tests apart exit $apart_status)"
    exit 1
fi
