# shellcheck shell=bash
#
# A Qdrant server for Engram, built here from the vendored source (no registry reached from these
# machines ships its binary) and run like Neo4j: loopback only, an API key made once in the data
# folder's secrets, its storage in the data folder, a checked pid file.
# Source it after ops/lib/common.sh; it only defines variables and functions.
#
#   qdrant_build    build once into the cache (a no-op when the binary of this version is there)
#   qdrant_start    start unless it answers; wait until GET / answers with the key
#   qdrant_status   0 = answering, 1 = not running, 2 = process up but not answering
#   qdrant_stop     SIGTERM, SIGKILL after a bound; 0 if not running
#
# Variables read at call time (defaults in brackets):
#   ENGRAM_QDRANT_SOURCE   the source archive [$ENGRAM_ROOT/../shared/vendor/qdrant-$QDRANT_VERSION-src.tar.gz]
#   ENGRAM_CACHE_DIR       where builds are kept between checkouts [$XDG_CACHE_HOME/engram or ~/.cache/engram]
#   ENGRAM_QDRANT_URL      [http://127.0.0.1:6333]; the port is taken from it (gRPC on port + 1)
#   ENGRAM_QDRANT_API_KEY  the key; else $ENGRAM_DATA_DIR/secrets/qdrant.api_key, made on first start
#
# Why the build is what it is (../shared/vendor/README.md): `--profile perf` is upstream's profile
# without LTO (65 min on two cores at nice 19, where the release profile's fat LTO takes far
# longer); it needs Debian's protobuf-compiler and clang; `--locked` resolves every crate from the
# lock file against crates.io, and the two git dependencies are folders beside the source.

QDRANT_VERSION=${ENGRAM_QDRANT_VERSION:-1.18.3}
ENGRAM_CACHE_DIR=${ENGRAM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/engram}
QDRANT_CACHE="$ENGRAM_CACHE_DIR/qdrant"
QDRANT_SRC="$QDRANT_CACHE/qdrant-$QDRANT_VERSION"
QDRANT_BIN="$QDRANT_SRC/target/perf/qdrant"
QDRANT_HOME="$ENGRAM_DATA_DIR/qdrant-server"
QDRANT_PIDFILE="$RUN_DIR/qdrant.pid"
QDRANT_LOG="$LOG_DIR/qdrant.log"
QDRANT_KEY_FILE="$ENGRAM_DATA_DIR/secrets/qdrant.api_key"

qdrant_port() {
    local url=${ENGRAM_QDRANT_URL:-http://127.0.0.1:6333} rest
    rest=${url#*://}
    rest=${rest%%/*}
    [[ $rest == *:* ]] && echo "${rest##*:}" || echo 6333
}

qdrant_host() {
    local url=${ENGRAM_QDRANT_URL:-http://127.0.0.1:6333} rest
    rest=${url#*://}
    rest=${rest%%/*}
    echo "${rest%:*}"
}

# The server's API key: ENGRAM_QDRANT_API_KEY, else the data folder's secret (made once, 0600).
qdrant_key() {
    if [[ -n ${ENGRAM_QDRANT_API_KEY:-} ]]; then
        printf '%s' "$ENGRAM_QDRANT_API_KEY"
        return 0
    fi
    "$PY" -c 'import sys
from pathlib import Path
from shared import secrets
sys.stdout.write(secrets.ensure(Path(sys.argv[1])).get_secret_value())' "$QDRANT_KEY_FILE"
}

qdrant_build() {
    if [[ -x $QDRANT_BIN ]]; then
        echo "qdrant: $QDRANT_VERSION is built ($QDRANT_BIN)"
        return 0
    fi
    local archive=${ENGRAM_QDRANT_SOURCE:-$ENGRAM_ROOT/../shared/vendor/qdrant-$QDRANT_VERSION-src.tar.gz}
    [[ -f $archive ]] || fail "qdrant: no source archive at $archive (set ENGRAM_QDRANT_SOURCE)"
    command -v cargo >/dev/null || fail "qdrant: building the server needs cargo (rustc >= 1.94)"
    local missing=()
    command -v protoc >/dev/null || missing+=(protobuf-compiler)
    command -v clang >/dev/null || missing+=(clang)
    if ((${#missing[@]})); then
        say "installing ${missing[*]} from Debian (Qdrant's build needs them)"
        local sudo=""
        [[ $(id -u) -ne 0 ]] && sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    mkdir -p "$QDRANT_CACHE"
    if [[ ! -f $QDRANT_SRC/Cargo.toml ]]; then
        say "unpacking $archive into $QDRANT_CACHE"
        tar -xzf "$archive" -C "$QDRANT_CACHE"
    fi
    say "building Qdrant $QDRANT_VERSION (cargo --profile perf; about an hour on two cores; log $QDRANT_CACHE/build.log)"
    (cd "$QDRANT_SRC" && nice -n 19 cargo build --profile perf --bin qdrant --locked) >>"$QDRANT_CACHE/build.log" 2>&1 || {
        tail -n 30 "$QDRANT_CACHE/build.log" >&2
        fail "qdrant: the build failed (log $QDRANT_CACHE/build.log)"
    }
    echo "qdrant: built $QDRANT_BIN"
}

_qdrant_answers() {
    curl -fsS -m 2 -H "api-key: $1" "http://$(qdrant_host):$(qdrant_port)/" 2>/dev/null | grep -q '"version"'
}

qdrant_status() {
    local pid key
    pid=$(live_pid "$QDRANT_PIDFILE" qdrant) || pid=
    key=$(qdrant_key) || return 1
    if _qdrant_answers "$key"; then
        [[ -n $pid ]] && echo "qdrant: running (pid $pid) on $(qdrant_host):$(qdrant_port); storage $QDRANT_HOME" ||
            echo "qdrant: something answers on $(qdrant_host):$(qdrant_port) with our key (not started by these scripts)"
        return 0
    fi
    if [[ -n $pid ]]; then
        echo "qdrant: process $pid alive but not answering (starting or stuck); log $QDRANT_LOG"
        return 2
    fi
    echo "qdrant: not running ($(qdrant_host):$(qdrant_port))"
    return 1
}

qdrant_start() {
    local host port key pid started=$SECONDS timeout=${ENGRAM_QDRANT_START_TIMEOUT:-60}
    host=$(qdrant_host)
    port=$(qdrant_port)
    [[ $host == 127.* || $host == localhost ]] ||
        fail "qdrant: ENGRAM_QDRANT_URL names $host; ops/ starts a server on the loopback only"
    key=$(qdrant_key) || fail "qdrant: cannot read or make the API key"
    if _qdrant_answers "$key"; then
        echo "qdrant: already answering on $host:$port"
        return 0
    fi
    qdrant_build
    mkdir -p "$QDRANT_HOME/storage" "$QDRANT_HOME/snapshots" "$RUN_DIR" "$LOG_DIR"
    pid=$(live_pid "$QDRANT_PIDFILE" qdrant) || pid=
    if [[ -z $pid ]]; then
        echo "qdrant: starting $QDRANT_VERSION on $host:$port (gRPC $((port + 1)), storage $QDRANT_HOME, log $QDRANT_LOG)"
        # The key goes in through the environment, never on a command line.
        # The subshell becomes the server (exec), so $! is the server's pid and no shell is left
        # holding the caller's stdout open.
        (cd "$QDRANT_HOME" && export QDRANT__SERVICE__HOST=127.0.0.1 QDRANT__SERVICE__HTTP_PORT=$port \
            QDRANT__SERVICE__GRPC_PORT=$((port + 1)) QDRANT__SERVICE__API_KEY=$key \
            QDRANT__STORAGE__STORAGE_PATH="$QDRANT_HOME/storage" \
            QDRANT__STORAGE__SNAPSHOTS_PATH="$QDRANT_HOME/snapshots" \
            QDRANT__TELEMETRY_DISABLED=true QDRANT__LOG_LEVEL=WARN &&
            exec nohup "$QDRANT_BIN" >>"$QDRANT_LOG" 2>&1 </dev/null) &
        echo $! >"$QDRANT_PIDFILE"
        pid=$(cat "$QDRANT_PIDFILE")
    fi
    until _qdrant_answers "$key"; do
        if ! kill -0 "$pid" 2>/dev/null || ((SECONDS - started > timeout)); then
            tail -n 30 "$QDRANT_LOG" >&2
            fail "qdrant: not answering on $host:$port after $((SECONDS - started)) s (log $QDRANT_LOG)"
        fi
        sleep 0.3
    done
    echo "qdrant: ready on http://$host:$port (pid $pid)"
}

qdrant_stop() {
    local pid
    pid=$(live_pid "$QDRANT_PIDFILE" qdrant) || { rm -f "$QDRANT_PIDFILE" && return 0; }
    echo "qdrant: stopping pid $pid ..."
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 120); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$QDRANT_PIDFILE" && echo "qdrant: stopped" && return 0; }
        sleep 0.5
    done
    echo "qdrant: still alive after 60s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$QDRANT_PIDFILE"
}
