#!/usr/bin/env bash
# Lints and scans the templates: cfn-lint, checkov (both pinned in lint-requirements.lock),
# and the least-privilege test; and the repository's scripts: shellcheck on every shell
# script, ruff on every Python file (pinned there too). Installs them into
# infra/.cache/lint-venv on first use. Any finding fails; every suppression sits next to
# what it suppresses, with its reason.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=$here/.cache/lint-venv

python_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
find_python() {
    local c
    for c in ${SCHEDKIT_PYTHON:-} python3.13 python3.12 python3 \
        $(printf '%s\n' "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3 | sort -rV); do
        if command -v "$c" >/dev/null 2>&1 && python_ok "$c"; then command -v "$c"; return; fi
    done
    echo "lint: error: needs Python >= 3.12 (apt install python3.12-venv, or set SCHEDKIT_PYTHON)" >&2
    exit 1
}

wanted=$(sha256sum "$here/lint-requirements.lock" | cut -d' ' -f1)
if [ ! -f "$venv/.lock" ] || [ "$(cat "$venv/.lock")" != "$wanted" ]; then
    echo "lint: installing cfn-lint, checkov, shellcheck and ruff into $venv" >&2
    rm -rf "$venv"
    "$(find_python)" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/lint-requirements.lock"
    echo "$wanted" >"$venv/.lock"
fi

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
mapfile -t scripts < <(git ls-files '*.sh' .ci/run)
"$venv/bin/shellcheck" "${scripts[@]}"
echo "lint: ruff"
mapfile -t python < <(git ls-files '*.py')
# `localstack` is LocalStack's package (the executor plugin imports it), not this folder.
"$venv/bin/ruff" check --quiet --select E,F,W,I,B,UP --line-length 120 --target-version py312 \
    --config "lint.isort.known-third-party = ['localstack']" "${python[@]}"
