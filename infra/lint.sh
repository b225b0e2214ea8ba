#!/usr/bin/env bash
# Lints and scans the templates: cfn-lint, checkov (both pinned in lint-requirements.lock),
# and the least-privilege test; and the repository's scripts: shellcheck on every shell
# script, ruff on every Python file (pinned there too). Installs them into
# infra/.cache/lint-venv on first use. Any finding fails; every suppression sits next to
# what it suppresses, with its reason.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=$here/.cache/lint-venv

# shellcheck source=infra/venv.sh
. "$here/venv.sh"
ensure_venv "$venv" "$here/lint-requirements.lock" "cfn-lint, checkov, shellcheck and ruff" 12

templates=("$here"/template.yaml)
echo "lint: cfn-lint ${templates[*]##*/}"
"$venv/bin/cfn-lint" "${templates[@]}"
echo "lint: checkov"
# --skip-download: no call to the vendor's platform (offline machines); rules are local.
rc=0
files=()
for t in "${templates[@]}"; do files+=(-f "$t"); done
report=$("$venv/bin/checkov" --quiet --compact --skip-download --framework cloudformation \
    "${files[@]}" 2>&1) || rc=$?
printf '%s\n' "$report" | grep -v '^$' || true
[ "$rc" = 0 ] || { echo "lint: checkov found problems (above)" >&2; exit 1; }
echo "lint: least-privilege test"
"$venv/bin/python" -m unittest discover -s "$here/tests" 2>&1 | tail -n 3
cd "$here/.."
echo "lint: shellcheck"
mapfile -t scripts < <(git ls-files --cached --others --exclude-standard '*.sh' .ci/run)
"$venv/bin/shellcheck" -x "${scripts[@]}"
echo "lint: ruff"
mapfile -t python < <(git ls-files --cached --others --exclude-standard '*.py')
# `localstack` is LocalStack's package (the executor plugin imports it), not this folder.
"$venv/bin/ruff" check --quiet --select E,F,W,I,B,UP --line-length 120 --target-version py312 \
    --config "lint.isort.known-third-party = ['localstack']" "${python[@]}"
