#!/usr/bin/env bash
# Builds Lambda binaries and packages each as a provided.al2023 zip with `bootstrap` at
# its root, for this host's architecture:
#
#   functions/package.sh [--release] [BIN...]     (default BIN: worker)
#
# Zips land in target/lambda/<debug|release>/<BIN>.zip. The IaC template deploys the
# release ones; the LocalStack tests deploy the debug ones (built with the tests' profile).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
profile=debug
cargo_flags=()
bins=()
for arg in "$@"; do
    case "$arg" in
        --release) profile=release; cargo_flags+=(--release) ;;
        -*) echo "package.sh: unknown option $arg" >&2; exit 2 ;;
        *) bins+=("$arg") ;;
    esac
done
[ ${#bins[@]} -gt 0 ] || bins=(worker)
target=${CARGO_TARGET_DIR:-$root/target}
out=$target/lambda/$profile
mkdir -p "$out"
if [ "$profile" = release ]; then
    build=()
    for b in "${bins[@]}"; do build+=(--bin "$b"); done
else
    # The debug zips are what the tests deploy: build them exactly as `make build` does
    # (binaries and tests together), so that they share one feature set with `cargo test`
    # and nothing is compiled twice.
    build=(--workspace --bins --tests)
fi
(cd "$root" && cargo build --quiet --locked "${cargo_flags[@]}" "${build[@]}")
for b in "${bins[@]}"; do
    # zipfile keeps the executable bit; `bootstrap` is the name Lambda runs.
    python3 - "$target/$profile/$b" "$out/$b.zip" <<'PY'
import sys, zipfile
binary, archive = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
    info = zipfile.ZipInfo.from_file(binary, arcname="bootstrap")
    info.compress_type = zipfile.ZIP_DEFLATED
    # A fixed date: the zip changes only when the binary does (so an unchanged
    # deploy is a no-op).
    info.date_time = (1980, 1, 1, 0, 0, 0)
    with open(binary, "rb") as f:
        z.writestr(info, f.read())
PY
    echo "$out/$b.zip"
done
