#!/usr/bin/env bash
# Draws bench/results.png from bench/results.json, with matplotlib pinned in
# bench/chart/requirements.lock (installed once into bench/.cache/chart-venv).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=infra/venv.sh
. "$root/infra/venv.sh"
venv=$root/bench/.cache/chart-venv
ensure_venv "$venv" "$here/chart/requirements.lock" "matplotlib (the benchmark's chart)" 12
"$venv/bin/python" "$here/chart.py" "$here/results.json" "$here/results.png"
