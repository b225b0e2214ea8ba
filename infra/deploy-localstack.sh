#!/usr/bin/env bash
# Creates or updates the schedkit stack on LocalStack (see deploy_localstack.py):
#   infra/deploy-localstack.sh [--stack NAME] [--template PATH] [Parameter=Value ...]
# Prints a JSON summary (status, whether anything changed, the stack's outputs) on stdout.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=$root/localstack/.cache/venv/bin/python
[ -x "$python" ] || { echo "deploy: error: LocalStack's virtualenv is missing; run localstack/launch.sh start" >&2; exit 1; }
exec "$python" "$root/infra/deploy_localstack.py" "$@"
