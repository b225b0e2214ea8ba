#!/usr/bin/env bash
# The AWS path as users take it, runnable offline: the pinned SAM CLI, cargo-lambda and zig
# (sam-requirements.lock, installed into infra/.cache/sam-venv), then `sam validate --lint`
# and `sam build` of the template:
#
#   infra/sam-build.sh [TEMPLATE]     (default infra/template.yaml)
#
# The artifacts land in $SAM_BUILD_DIR (default target/sam/): `WorkerFunction/bootstrap`
# is the release binary `sam deploy` uploads (a debug one with SAM_BUILD_MODE=debug, which
# `make test` sets). SAM_ARCHITECTURE is x86_64 (default, the one tested) or arm64
# (untested here: it needs `rustup target add aarch64-unknown-linux-gnu`, and the machines
# this is tested on have only the x86_64 target and cannot fetch another).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# shellcheck source=infra/venv.sh
. "$here/venv.sh"
venv=$here/.cache/sam-venv
ensure_venv "$venv" "$here/sam-requirements.lock" "the SAM CLI, cargo-lambda and zig" 12
template=$(cd "$(dirname "${1:-$here/template.yaml}")" && pwd)/$(basename "${1:-$here/template.yaml}")
build=${SAM_BUILD_DIR:-${CARGO_TARGET_DIR:-$root/target}/sam}
# cargo-lambda finds zig (python-zig) on PATH; no telemetry from an offline machine.
export PATH="$venv/bin:$PATH" SAM_CLI_TELEMETRY=0
echo "sam: validate --lint $template" >&2
sam validate --lint --template "$template"
arch=${SAM_ARCHITECTURE:-x86_64}
# SAM_BUILD_MODE=debug (what `make test` sets) builds cargo's debug profile instead.
echo "sam: build (${SAM_BUILD_MODE:-release}, $arch) into $build" >&2
# --beta-features: the rust-cargolambda build method is still a beta feature of the SAM CLI.
sam build --template "$template" --build-dir "$build" --beta-features \
    --parameter-overrides "Architecture=$arch"
