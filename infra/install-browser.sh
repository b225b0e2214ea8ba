#!/usr/bin/env bash
# Headless Chromium and its WebDriver from the distribution's packages, for the web page's
# browser tests (console/tests/ui.rs). Nothing is done when both are installed. Needs root
# (or sudo) to install; the packages' versions always match each other.
set -euo pipefail
if command -v chromedriver >/dev/null && command -v chromium >/dev/null; then
    exit 0
fi
as_root=()
if ((EUID != 0)); then
    if command -v sudo >/dev/null; then
        as_root=(sudo -n)
    else
        echo "install-browser: chromium and chromium-driver are missing and this is not root: install them (apt-get install chromium chromium-driver)" >&2
        exit 1
    fi
fi
packages=(chromium chromium-driver)
export DEBIAN_FRONTEND=noninteractive
echo "install-browser: installing ${packages[*]} (apt-get)" >&2
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends "${packages[@]}" >&2; then
    # A fresh machine may not have the package lists yet.
    "${as_root[@]}" apt-get update -q >&2
    "${as_root[@]}" apt-get install -y -q --no-install-recommends "${packages[@]}" >&2
fi
chromium --version >&2
chromedriver --version >&2
