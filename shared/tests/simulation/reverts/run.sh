#!/usr/bin/env bash
# Does the simulation find the defects issue 21 fixed (and those found since)? Each patch
# here reverts one fix in code that runs against AWS (a condition the DynamoDB store sends,
# which the in-memory store evaluates as it is; the worker's own steps); for each, this applies it to a copy of the working tree, runs the simulation
# (SEEDS seeds, default 4,000) and expects it to fail with the invariant named below.
# Exit 0 when every defect was found. The working tree is never changed. The copy builds
# into the same target directory, so only the library is compiled again, not its
# dependencies; cargo names a workspace's artifacts by their path within the workspace, so
# the copy's builds replace the library's: on the way out, the files the patches touch
# are touched in the working tree too, and the next build compiles them again.
#
#   [ONLY=NAME] [SEEDS=N] shared/tests/simulation/reverts/run.sh      (make sim-reverts; not part of make test: each revert compiles the library again)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../../.." && pwd)
seeds=${SEEDS:-4000}
# patch | the world that finds it (main: the composed world, limits included; limits: the
# flow-control world alone, denser in limited runs; accountant: the accountant's checks
# over hours of firings, pauses and schedule changes) | the invariant
# the simulation must report (an extended regular expression)
cases=(
  "cancel-of-a-decided-run.patch|main|record rewritten by .cancel."
  "cancel-chain-of-a-decided-run.patch|main|record rewritten by .cancel_chain."
  "cancel-leaves-its-execution-running.patch|main|still running when .chains cancel. completed"
  "chain-cancel-sent-again.patch|main|CANCELLED, and no operator cancelled it"
  "chain-end-for-any-run.patch|main|was not refused"
  "claim-of-another-payload.patch|main|two payloads, neither refused"
  "claim-over-a-live-lease.patch|main|runs at once under its overlap policy"
  "keys-in-schedkits-own-space.patch|main|schedkit's own"
  "leave-by-key-alone.patch|main|runs at once under its overlap policy"
  "owner-writes-by-any-owner.patch|main|bodies at once|runs at once under its overlap policy"
  "pause-over-a-pause.patch|main|the operator paused"
  "permit-of-a-cancelled-holder.patch|main|bodies at once"
  "permit-past-the-limit.patch|main|bodies at once"
  "release-by-key-alone.patch|limits|bodies at once"
  "line-in-arrival-order.patch|limits|waited before it in every image"
  "line-blind-to-shares.patch|limits|waited before it in every image its waker may have read: share"
  "waiters-never-age.patch|limits|waited before it in every image"
  "slot-entered-before-the-claim.patch|main|runs at once under its overlap policy"
  "steps-through-overlap.patch|main|not ended|PAUSED without naming a step that failed|SKIPPED, though .exclusive. never skips"
  "waits-counted-as-receives.patch|main|a dead letter without a reason"
  "pause-windows-forgotten.patch|accountant|reported Missed .*, but the world never fired it"
  "schedule-change-unseen.patch|accountant|reported Missed .*, but the world never fired it"
  "ledger-taken-by-its-twin.patch|accountant|twice .* in a world whose requests were never refused"
  "ledger-written-over-a-newer.patch|accountant|twice .* in a world whose requests were never refused"
  "report-lost-with-its-answer.patch|accountant|was lost and never reported missed|never reported late"
  "pause-window-open-at-its-start.patch|accountant|never reported late|never reported missed"
  "no-grace-for-a-late-delivery.patch|accountant|before it could be|but it ran"
  "cancelled-run-reported-late.patch|accountant|an operator cancelled it before its deadline"
)
work=$(mktemp -d)
# shellcheck disable=SC2329  # called by the EXIT trap
done_with_copy() {
  rm -rf "$work"
  (cd "$root" && grep -h '^+++ b/' "$here"/*.patch | cut -c7- | sort -u | xargs touch)
}
trap done_with_copy EXIT
# The sources as they are now (committed or not), without what git ignores.
(cd "$root" && git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do
  if [ -e "$f" ]; then printf '%s\0' "$f"; fi
done | tar --null -T - -cf -) | tar -C "$work" -xf -
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
# Built without clippy's driver even under make test (which lints as it builds): a revert
# may well be code clippy would refuse, and the point is what the simulation says of it.
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
# Incremental even under make test (which turns it off): the builds differ by a patch.
export CARGO_INCREMENTAL=1
cd "$work"
missed=0
for case in "${cases[@]}"; do
  patch=${case%%|*} rest=${case#*|}
  # ONLY=NAME runs the patches whose name contains NAME.
  if [[ -n ${ONLY:-} && $patch != *"$ONLY"* ]]; then continue; fi
  world=${rest%%|*} expect=${rest#*|}
  case $world in
    main) test=simulation::every_seed_keeps_every_invariant ;;
    limits) test=simulation::every_limits_seed_keeps_every_invariant ;;
    accountant) test=simulation::every_accountant_seed_keeps_every_invariant ;;
  esac
  # A patch whose context the code has moved away from is said, not skipped silently
  # (set -e would end the whole run at the first one).
  if ! git apply "$here/$patch" 2>/dev/null; then
    echo "STALE   $patch: no longer applies to the code (write it again against the tree)"
    missed=$((missed + 1))
    continue
  fi
  log=$(mktemp)
  started=$(date +%s)
  if SCHEDKIT_SIM_SEEDS=$seeds SCHEDKIT_SIM_LIMIT_SEEDS=$seeds SCHEDKIT_SIM_ACCOUNTANT_SEEDS=$seeds cargo test -p schedkit --test library --locked -- \
      "$test" >"$log" 2>&1; then
    echo "MISSED  $patch: $seeds seeds passed with the fix reverted"
    missed=$((missed + 1))
  elif grep -qE "$expect" "$log"; then
    seed=$(grep -oE '(seed|limits seed|accountant seed) [0-9]+ broke' "$log" | head -1)
    echo "found   $patch: ${seed:-a seed broke} \"$expect\" ($(( $(date +%s) - started )) s)"
  else
    echo "MISSED  $patch: the simulation failed, but not with \"$expect\":"
    tail -40 "$log"
    missed=$((missed + 1))
  fi
  rm -f "$log"
  git apply -R "$here/$patch"
done
exit $(( missed > 0 ))
