#!/usr/bin/env bash
# Installs the benchmark's peer (Powertools for AWS Lambda, Python; pinned in
# bench/peer/requirements.lock) into bench/.cache/peer-venv, once per lock file; prints the
# virtualenv's python.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=infra/venv.sh
. "$root/infra/venv.sh"
venv=$root/bench/.cache/peer-venv
ensure_venv "$venv" "$here/requirements.lock" "Powertools for AWS Lambda (the benchmark's peer)" 12
echo "$venv/bin/python"
