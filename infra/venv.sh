# shellcheck shell=bash
# Sourced by the infra scripts: a Python virtualenv of the project's own, installed from a
# pinned requirements file into infra/.cache/ and reinstalled only when that file changes.
# Nothing here uses LocalStack's virtualenv, so the scripts work against any LocalStack.
#
#   ensure_venv DIR LOCKFILE WHAT [MIN_MINOR]   # MIN_MINOR: lowest Python 3.x (default 9)

# A Python 3 of at least 3.$1 on this machine (pyenv shims may exist without the version
# being selected, so each candidate is run).
find_python() {
    local minor=$1 c
    for c in ${SCHEDKIT_PYTHON:-} python3.13 python3.12 python3 \
        $(printf '%s\n' "$HOME"/.pyenv/versions/3.1[0-9]*/bin/python3 | sort -rV); do
        if command -v "$c" >/dev/null 2>&1 &&
            "$c" -c "import sys; sys.exit(0 if sys.version_info >= (3, $minor) else 1)" >/dev/null 2>&1; then
            command -v "$c"
            return
        fi
    done
    echo "infra: error: needs Python >= 3.$minor with venv (apt install python3-venv, or set SCHEDKIT_PYTHON)" >&2
    exit 1
}

ensure_venv() {
    local venv=$1 lock=$2 what=$3 minor=${4:-9} wanted guard
    wanted=$(sha256sum "$lock" | cut -d' ' -f1)
    ready() { [ -f "$venv/.lock" ] && [ "$(cat "$venv/.lock")" = "$wanted" ] && [ -x "$venv/bin/python" ]; }
    ready && return
    # Deploys run side by side (the tests deploy a stage each): one installs, the others
    # wait for it instead of installing over it.
    mkdir -p "$(dirname "$venv")"
    exec {guard}>"$venv.install-lock"
    flock "$guard"
    if ! ready; then
        echo "infra: installing $what into $venv" >&2
        rm -rf "$venv"
        "$(find_python "$minor")" -m venv "$venv"
        # --no-compile: Python compiles each module when it is first imported instead of
        # pip compiling every file at install: the lint tools installed cold in 12 CPU-s
        # instead of 26 (2026-12-05), and CI installs every tool cold.
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --upgrade pip
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -r "$lock"
        echo "$wanted" >"$venv/.lock"
    fi
    exec {guard}>&-
}
