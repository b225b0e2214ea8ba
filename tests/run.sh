#!/usr/bin/env bash
# Every test of the workspace against a LocalStack that is already running (what `make
# test-only` runs), one test binary after another:
#
#   tests/run.sh [COMMAND...]
#
# First the integration binary, INTEGRATION_THREADS tests at a time (default 4: its tests
# mostly wait on LocalStack, a lease to lapse, a heartbeat timeout, a poller's receive, and
# two at a time left a third of the two cores idle), then every other test target (the
# library's unit, property and simulation tests, the console's, the demo's), the doc
# tests, and COMMAND if given (`make test` passes its remaining lints and the simulation's
# reverts). Nothing runs beside the tests on LocalStack: with other tests or a compile
# beside them, LocalStack (one process) answered a heartbeat past its 500 ms bound now and
# then, and a run took an attempt more than its test expects (three fresh-clone runs,
# 2026-12-02: the demo's report, a chain step, a Lambda-mode job). Every step runs; the exit
# status is non-zero if any failed.
#
# Each step selects the whole workspace and then its targets: cargo resolves features over
# the packages selected, so `-p` or `--exclude` would compile dependencies again.
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
for name in sorted(names - {"integration"}):
    print("--test\n" + name)
')
mapfile -t others <<<"$listed"
if ((${#others[@]} < 2)); then
    echo "tests/run.sh: the workspace's metadata listed no test target besides integration" >&2
    exit 1
fi

failed=()
"$cargo" test --workspace --locked --test integration -- --test-threads "$threads" ||
    failed+=("the integration tests")
"$cargo" test --workspace --locked --lib --bins "${others[@]}" || failed+=("the other tests")
"$cargo" test --workspace --locked --doc || failed+=("the doc tests")
if (($#)); then
    "$@" || failed+=("$*")
fi

if ((${#failed[@]})); then
    printf 'tests/run.sh: failed: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "tests/run.sh: every test passed"
