#!/usr/bin/env bash
# Lints and scans CloudFormation templates: cfn-lint, then checkov (both pinned in
# lint-requirements.lock, installed into infra/.cache/lint-venv on first use):
#   infra/lint-templates.sh TEMPLATE...
# What `infra/lint.sh` runs on infra/template.yaml, and the scale test on a template
# generated from a catalog of a thousand jobs. Any finding fails; every suppression sits
# next to what it suppresses, with its reason.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=$here/.cache/lint-venv
(($#)) || { echo "usage: infra/lint-templates.sh TEMPLATE..." >&2; exit 2; }

# shellcheck source=infra/venv.sh
. "$here/venv.sh"
ensure_venv "$venv" "$here/lint-requirements.lock" "cfn-lint, checkov, shellcheck and ruff" 12

echo "lint: cfn-lint $*"
"$venv/bin/cfn-lint" "$@"
echo "lint: checkov"
# --skip-download: no call to the vendor's platform (offline machines); rules are local.
rc=0
files=()
for t in "$@"; do files+=(-f "$t"); done
report=$("$venv/bin/checkov" --quiet --compact --skip-download --framework cloudformation \
    "${files[@]}" 2>&1) || rc=$?
printf '%s\n' "$report" | grep -v '^$' || true
[ "$rc" = 0 ] || { echo "lint: checkov found problems (above)" >&2; exit 1; }
