#!/usr/bin/env bash
# Creates an IAM user on LocalStack holding managed policies and prints its access key as
# JSON (see localstack_user.py):
#   infra/localstack-user.sh NAME POLICY [POLICY ...]   (an ARN, or a JSON document)
#   infra/localstack-user.sh --role NAME POLICY_ARN ...  (a role holding them, assumed: its session)
#   infra/localstack-user.sh --decisions NAME          (what LocalStack decided on its requests)
# Runs on the deploy's virtualenv (boto3, pinned in deploy-requirements.lock).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=infra/venv.sh
. "$here/venv.sh"
venv=$here/.cache/deploy-venv
ensure_venv "$venv" "$here/deploy-requirements.lock" "the deploy's boto3"
exec "$venv/bin/python" "$here/localstack_user.py" "$@"
