#!/usr/bin/env bash
# Every test of the workspace against a LocalStack that is already running, in two lanes
# at once (what `make test-only` runs):
#
#   tests/lanes.sh [COMMAND...]
#
# Lane one is the integration binary, INTEGRATION_THREADS tests at a time (default 4): its
# tests mostly wait on LocalStack (a lease to lapse, a heartbeat timeout, a poller's
# receive), so on two cores a third of the CPU stayed idle while they ran one or two at a
# time. Lane two is every other test binary (the library's unit, property and simulation
# tests, the console's, the demo's, the doc tests) and then COMMAND, if given (`make test`
# passes the simulation's reverts), at a lower priority so that it takes what lane one
# leaves. Lane one's lines are prefixed `integration |`. Both lanes run to their end; the
# exit status is non-zero if either failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo=${CARGO:-cargo}
threads=${INTEGRATION_THREADS:-4}

# One build before the lanes start (cargo holds its build lock only while it compiles).
"$cargo" test --workspace --locked --no-run

(
    "$cargo" test --locked -p schedkit-testkit --test integration -- --test-threads "$threads" 2>&1 |
        sed -u 's/^/integration | /'
) &
integration=$!

failed=()
"$cargo" test --workspace --locked --exclude schedkit-testkit || failed+=("the other test binaries")
"$cargo" test --locked -p schedkit-testkit --lib || failed+=("the test kit's unit tests")
if (($#)); then
    nice -n 10 "$@" || failed+=("$*")
fi
wait "$integration" || failed+=("the integration tests")

if ((${#failed[@]})); then
    printf 'tests/lanes.sh: failed: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "tests/lanes.sh: every lane passed"
