#!/usr/bin/env bash
# The book's tools, pinned: mdBook (built by cargo into infra/.cache/mdbook; no package of
# it in the distribution) and LinkChecker (a virtualenv from infra/book-requirements.lock).
# Each is installed once and again only when its pin changes; concurrent runs wait for
# the first.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=infra/venv.sh
. "$here/venv.sh"
MDBOOK_VERSION=0.5.4
root="$here/.cache/mdbook"
mkdir -p "$root"
exec {guard}>"$root.install-lock"
flock "$guard"
if [ "$("$root/bin/mdbook" --version 2>/dev/null)" != "mdbook v$MDBOOK_VERSION" ]; then
    echo "infra: installing mdBook $MDBOOK_VERSION into $root" >&2
    # No file watcher or web server (`mdbook serve`): the build and its search index only.
    # Not as this workspace's code: `make test` sets clippy's driver as the workspace's
    # compiler for its own build, which this environment would hand to mdBook's.
    # Unoptimised and without debug information: it compiles in 52 CPU-seconds instead of
    # 135 (2026-12-05, this 2-core machine; CI installs it cold), and builds this book in
    # 0.4 s instead of 0.1.
    env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS -u CARGO_TARGET_DIR -u CARGO_BUILD_TARGET_DIR \
        CARGO_PROFILE_DEV_DEBUG=0 \
        cargo install --debug --quiet --locked "mdbook@$MDBOOK_VERSION" --no-default-features \
        --features search --root "$root" --target-dir "$root/target"
    rm -rf "$root/target"
fi
flock -u "$guard"
ensure_venv "$here/.cache/book-venv" "$here/book-requirements.lock" "LinkChecker, the book's link check"
