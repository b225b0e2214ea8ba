#!/usr/bin/env bash
# Creates or updates a schedkit stack on LocalStack (see deploy_localstack.py):
#   infra/deploy-localstack.sh [--stack NAME] [--template PATH] [Parameter=Value ...]
# Prints a JSON summary (status, whether anything changed, the stack's outputs) on stdout.
# Runs on a virtualenv of its own (boto3, pinned in deploy-requirements.lock), so it works
# against any LocalStack, whoever started it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=infra/venv.sh
. "$here/venv.sh"
venv=$here/.cache/deploy-venv
ensure_venv "$venv" "$here/deploy-requirements.lock" "the deploy's boto3"
exec "$venv/bin/python" "$here/deploy_localstack.py" "$@"
