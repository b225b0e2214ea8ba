#!/usr/bin/env bash
# Does the simulation find the defects issue 21 fixed? Each patch here reverts one fix in
# the worker; for each, this applies it to the working tree, runs the simulation (SEEDS
# seeds, default 4,000) and expects it to fail with the invariant named below, then
# reverts the patch (also when interrupted). Exit 0 when every defect was found.
#
#   shared/tests/simulation/reverts/run.sh      (make sim-reverts)
#
# It edits the working tree: run it on a clean checkout.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
seeds=${SEEDS:-4000}
# patch | the invariant the simulation must report
cases=(
  "chain-end-for-any-run.patch|was not refused"
  "keys-in-schedkits-own-space.patch|schedkit's own"
  "slot-entered-before-the-claim.patch|runs at once under its overlap policy"
  "steps-through-overlap.patch|not ended"
  "waits-counted-as-receives.patch|a dead letter without a reason"
)
if ! git diff --quiet -- shared/src; then
  echo "sim-reverts: shared/src has uncommitted changes; run it on a clean checkout" >&2
  exit 2
fi
applied=""
restore() { [ -n "$applied" ] && git apply -R "$here/$applied"; applied=""; }
trap restore EXIT
missed=0
for case in "${cases[@]}"; do
  patch=${case%%|*} expect=${case#*|}
  git apply "$here/$patch"
  applied=$patch
  log=$(mktemp)
  started=$(date +%s)
  if SCHEDKIT_SIM_SEEDS=$seeds cargo test -p schedkit --test library --locked -- \
      simulation::every_seed_keeps_every_invariant >"$log" 2>&1; then
    echo "MISSED  $patch: $seeds seeds passed with the fix reverted"
    missed=$((missed + 1))
  elif grep -q "$expect" "$log"; then
    seed=$(grep -o 'seed [0-9]* broke' "$log" | head -1)
    echo "found   $patch: ${seed:-a seed broke} \"$expect\" ($(( $(date +%s) - started )) s)"
  else
    echo "MISSED  $patch: the simulation failed, but not with \"$expect\" (log: $log)"
    missed=$((missed + 1))
    restore
    continue
  fi
  rm -f "$log"
  restore
done
exit $(( missed > 0 ))
