#!/usr/bin/env bash
# Lints and scans the template: cfn-lint and checkov (lint-templates.sh; pinned in
# lint-requirements.lock), and the least-privilege test; and the repository's scripts: shellcheck on every shell
# script, ruff on every Python file (pinned there too). Installs them into
# infra/.cache/lint-venv on first use. Any finding fails; every suppression sits next to
# what it suppresses, with its reason.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=$here/.cache/lint-venv

# shellcheck source=infra/venv.sh
. "$here/venv.sh"
ensure_venv "$venv" "$here/lint-requirements.lock" "cfn-lint, checkov, shellcheck and ruff" 12

"$here/lint-templates.sh" "$here/template.yaml"
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
echo "lint: the host worker's systemd unit"
# `systemd-analyze verify` checks every directive; it also wants the program, the user and
# the environment file to exist on this machine, which they do only on the team's VM: the
# copy checked names ones that exist here and is otherwise the file as shipped.
unit=$(mktemp -d)
sed -e 's|^ExecStart=.*|ExecStart=/bin/true|' -e 's|^EnvironmentFile=|EnvironmentFile=-|' \
    -e 's|^User=.*|User=root|' -e 's|^Group=.*|Group=root|' \
    infra/host/schedkit-host-worker.service >"$unit/schedkit-host-worker.service"
if command -v systemd-analyze >/dev/null 2>&1; then
    systemd-analyze verify "$unit/schedkit-host-worker.service"
else
    echo "lint: systemd-analyze is missing (Debian: apt-get install systemd)" >&2
    exit 1
fi
rm -rf "$unit"
