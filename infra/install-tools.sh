#!/usr/bin/env bash
# Installs every pinned tool `make test` needs besides Rust, each into its own cache and only
# when its lock file changed: LocalStack, DynamoDB Local and the Lambda executor plugin
# (localstack/launch.sh install; the executor's Rust init is built with the workspace),
# the lint, deploy and SAM CLI virtualenvs, Chromium and its WebDriver (the distribution's
# packages) and the benchmark's peer (bench/peer/). `make
# test` runs it in the background while rustfmt, clippy and the build use the CPU: the
# installs mostly wait on the registries. Not the book's tools: mdBook compiles for a
# CPU-minute, which the build needs more; `make book` installs them when it first runs
# (under `make test`, beside the tests, at the idle scheduling class).
# Each installer takes a lock, so a script that needs a tool before this is done waits for
# it instead of installing it a second time.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# shellcheck source=infra/venv.sh
. "$here/venv.sh"
"$root/localstack/launch.sh" install --no-init
ensure_venv "$here/.cache/lint-venv" "$here/lint-requirements.lock" "cfn-lint, checkov, shellcheck and ruff" 12
ensure_venv "$here/.cache/deploy-venv" "$here/deploy-requirements.lock" "the deploy's boto3"
ensure_venv "$here/.cache/sam-venv" "$here/sam-requirements.lock" "the SAM CLI, cargo-lambda and zig" 12
# Headless Chromium and chromedriver, for the web page's browser tests.
"$here/install-browser.sh"
# The benchmark's peer (Powertools for AWS Lambda), for the tests' smoke run of `make bench`.
"$root/bench/peer/install.sh" >/dev/null
echo "infra: every pinned tool is installed" >&2
