#!/usr/bin/env bash
# Every test of the workspace against a LocalStack that is already running, in two lanes
# at once (what `make test-only` runs):
#
#   tests/lanes.sh [COMMAND...]
#
# Lane one is the integration binary, INTEGRATION_THREADS tests at a time (default 4): its
# tests mostly wait on LocalStack (a lease to lapse, a heartbeat timeout, a poller's
# receive), so on two cores a third of the CPU stayed idle while they ran one or two at a
# time; then the demo's test, whose report counts attempts and so wants the CPU it has
# alone (beside lane two's tests, a heartbeat came late once and a long job took an
# attempt more). Lane two is every other test target (the library's unit, property and
# simulation tests, the console's, the doc tests) and then COMMAND, if given (`make test`
# passes its remaining lints and the simulation's reverts), at a lower priority so that it
# takes what lane one leaves. Lane one's lines are prefixed `integration |`. Both lanes run
# to their end; the exit status is non-zero if either failed.
#
# Both lanes select the whole workspace and then their targets: cargo resolves features
# over the packages selected, so `-p` or `--exclude` would compile dependencies again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo=${CARGO:-cargo}
threads=${INTEGRATION_THREADS:-4}

# Every test target but the integration binary, from the workspace's metadata (a failure
# here fails the run: an empty list would skip those tests and pass).
listed=$("$cargo" metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
packages = json.load(sys.stdin)["packages"]
names = {t["name"] for p in packages for t in p["targets"] if "test" in t["kind"]}
for name in sorted(names - {"integration", "demo"}):
    print("--test\n" + name)
')
mapfile -t others <<<"$listed"
if ((${#others[@]} < 2)); then
    echo "tests/lanes.sh: the workspace's metadata listed no test target besides integration and demo" >&2
    exit 1
fi

# One build before the lanes start (cargo holds its build lock only while it compiles).
"$cargo" test --workspace --locked --no-run

(
    status=0
    "$cargo" test --workspace --locked --test integration -- --test-threads "$threads" 2>&1 |
        sed -u 's/^/integration | /' || status=1
    "$cargo" test --workspace --locked --test demo 2>&1 | sed -u 's/^/demo | /' || status=1
    exit "$status"
) &
integration=$!

failed=()
"$cargo" test --workspace --locked --lib --bins "${others[@]}" || failed+=("the other test targets")
"$cargo" test --workspace --locked --doc || failed+=("the doc tests")
if (($#)); then
    nice -n 10 "$@" || failed+=("$*")
fi
wait "$integration" || failed+=("the integration or the demo's tests")

if ((${#failed[@]})); then
    printf 'tests/lanes.sh: failed: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "tests/lanes.sh: every lane passed"
