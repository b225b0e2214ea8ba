#!/usr/bin/env bash
# Every test of the workspace against a LocalStack that is already running, in two lanes
# at once (what `make test-only` runs):
#
#   tests/lanes.sh [COMMAND...]
#
# Lane one holds every test that talks to LocalStack, one binary after another: the
# integration binary, INTEGRATION_THREADS tests at a time (default 4: they mostly wait on
# LocalStack, a lease to lapse, a heartbeat timeout, a poller's receive, so two at a time
# left a third of the CPU idle), then the console's and the demo's. Lane two holds what
# needs the CPU alone: the unit tests, the library's (its property tests and the
# simulation's seeds), the doc tests, then COMMAND if given (`make test` passes its
# remaining lints and the simulation's reverts), all at a lower priority, so that
# LocalStack and the tests waiting on it get the CPU first. LocalStack is one process:
# with the console's or the demo's tests beside the integration binary, its answers came
# late enough that a heartbeat missed its bound and a run took an attempt more.
# Lane one's lines are prefixed with its binary's name. Both lanes run to their end; the
# exit status is non-zero if either failed.
#
# Both lanes select the whole workspace and then their targets: cargo resolves features
# over the packages selected, so `-p` or `--exclude` would compile dependencies again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo=${CARGO:-cargo}
threads=${INTEGRATION_THREADS:-4}
# The test targets that talk to LocalStack, in the order lane one runs them.
localstack_targets=(integration console demo)

# Every other test target, from the workspace's metadata (a failure here fails the run:
# an empty list would skip those tests and pass).
listed=$("$cargo" metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
packages = json.load(sys.stdin)["packages"]
names = {t["name"] for p in packages for t in p["targets"] if "test" in t["kind"]}
for name in sorted(names - set(sys.argv[1:])):
    print("--test\n" + name)
' "${localstack_targets[@]}")
mapfile -t others <<<"$listed"
if ((${#others[@]} < 2)); then
    echo "tests/lanes.sh: the workspace's metadata listed no test target besides ${localstack_targets[*]}" >&2
    exit 1
fi

# One build before the lanes start (cargo holds its build lock only while it compiles).
"$cargo" test --workspace --locked --no-run

(
    status=0
    for target in "${localstack_targets[@]}"; do
        args=()
        if [[ $target == integration ]]; then args=(--test-threads "$threads"); fi
        "$cargo" test --workspace --locked --test "$target" -- "${args[@]}" 2>&1 |
            sed -u "s/^/$target | /" || status=1
    done
    exit "$status"
) &
localstack_lane=$!

failed=()
nice -n 10 "$cargo" test --workspace --locked --lib --bins "${others[@]}" ||
    failed+=("the tests that need no LocalStack")
nice -n 10 "$cargo" test --workspace --locked --doc || failed+=("the doc tests")
if (($#)); then
    nice -n 10 "$@" || failed+=("$*")
fi
wait "$localstack_lane" || failed+=("the tests on LocalStack")

if ((${#failed[@]})); then
    printf 'tests/lanes.sh: failed: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "tests/lanes.sh: every lane passed"
