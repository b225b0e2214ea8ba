#!/usr/bin/env bash
# Every test of the workspace against a LocalStack that is already running (what `make
# test-only` runs), in two lanes at once:
#
#   tests/run.sh [COMMAND...]
#
# Lane one: every test target that talks to LocalStack (all but the library's), each in a
# cargo command of its own, all at once: `integration` INTEGRATION_THREADS tests at a time
# (default 4), the others (`console`, `demo`) OTHER_THREADS (default 2). These tests mostly
# wait on LocalStack, a lease to lapse, a heartbeat timeout, a poller's receive: one after
# another the three took 143 + 92 + 418 s in a fresh-clone run (2026-12-06), where side by
# side they take about as long as `integration` alone. Each line is prefixed by its target's
# name (`integration |`).
#
# Lane two, at the idle scheduling class (SCHED_IDLE: it runs only on CPU lane one leaves
# idle): the library's unit, property and simulation tests, the other unit tests, the doc
# tests, then COMMAND if given (`make test` passes its remaining lints and the book). The
# LocalStack tests have timing bounds (a heartbeat answered within 500 ms, a lease of a
# second or two): beside work of the same priority, LocalStack (one process) answered late
# now and then and a run took an attempt more than its test expects (fresh-clone runs of
# 2026-12-02); at the idle class it keeps the CPU it would have alone.
#
# Both lanes run to their end; the exit status is non-zero if either failed. Every cargo
# command selects the whole workspace and then its targets: cargo resolves features over
# the packages selected, so `-p` or `--exclude` would compile dependencies again. Cargo
# holds its build lock only while it compiles: one build first, then the lanes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo=${CARGO:-cargo}
integration_threads=${INTEGRATION_THREADS:-4}
other_threads=${OTHER_THREADS:-2}

# The test targets on LocalStack: every one but the library's, from the workspace's
# metadata (a failure here fails the run: an empty list would skip those tests and pass).
listed=$("$cargo" metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
packages = json.load(sys.stdin)["packages"]
names = {t["name"] for p in packages for t in p["targets"] if "test" in t["kind"]}
for name in sorted(names - {"library"}):
    print(name)
')
mapfile -t on_localstack <<<"$listed"
if [[ -z $listed ]]; then
    echo "tests/run.sh: the workspace's metadata listed no test target on LocalStack" >&2
    exit 1
fi

# Lane two's class: idle where the system has it, else the lowest nice.
if chrt --idle 0 true 2>/dev/null; then
    idle=(chrt --idle 0)
else
    idle=(nice -n 19)
fi

"$cargo" test --workspace --locked --no-run

lane_one=()
for target in "${on_localstack[@]}"; do
    threads=$other_threads
    [[ $target == integration ]] && threads=$integration_threads
    (
        set +e
        "$cargo" test --workspace --locked --no-fail-fast --test "$target" -- \
            --test-threads "$threads" 2>&1 | sed -u "s/^/$target | /"
        exit "${PIPESTATUS[0]}"
    ) &
    lane_one+=("$target:$!")
done

failed=()
"${idle[@]}" "$cargo" test --workspace --locked --no-fail-fast --lib --bins --test library ||
    failed+=("the library's and the unit tests")
"${idle[@]}" "$cargo" test --workspace --locked --doc || failed+=("the doc tests")
if (($#)); then
    "${idle[@]}" "$@" || failed+=("$*")
fi
for job in "${lane_one[@]}"; do
    wait "${job#*:}" || failed+=("the tests on LocalStack of ${job%%:*}")
done

if ((${#failed[@]})); then
    printf 'tests/run.sh: failed: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "tests/run.sh: every test passed"
