# shellcheck shell=bash
#
# A Redis that fails over, for this data folder: a primary, one replica and three Sentinels (quorum
# 2), all on the loopback, all from the redis-server binary ops/ already installs (`redis-server
# conf --sentinel` is what Debian's redis-sentinel package runs; the package adds only a service).
# Source it after ops/lib/common.sh; it only defines variables and functions.
#
#   sentinel_start    start what is not running; wait until the Sentinels agree on a primary
#                     with a replica in sync
#   sentinel_status   0 = a primary, its replica and every Sentinel answer; 1 = nothing runs; 2 = part
#   sentinel_stop     the Sentinels first (so none fails over a node being stopped), then the nodes
#   sentinel_node_pid N   the pid of data node N (0 or 1), for a fault row's kill -9
#
# Variables read at call time (defaults in brackets):
#   ENGRAM_REDIS_URL               the first primary's port [6379]; the replica takes the next one
#   ENGRAM_REDIS_REPLICA_PORT      the replica's port [the primary's + 1]
#   ENGRAM_REDIS_SENTINELS         host:port,... of the Sentinels to run (loopback only) [127.0.0.1:26379..26381]
#   ENGRAM_REDIS_SENTINEL_MASTER   the name they watch the primary by [engram]
#   ENGRAM_REDIS_SENTINEL_PASSWORD the Sentinels' own password [none]
#   ENGRAM_SENTINEL_DOWN_AFTER_MS  how long a silent primary is taken for down [1000]
#   ENGRAM_SENTINEL_FAILOVER_MS    Sentinel's failover-timeout [3000]
#
# The data nodes are not kept alive by ops/keep.py as the single Redis is: a primary started again
# within down-after-milliseconds would hide its death from the Sentinels, and a node that comes back
# must come back as what the Sentinels made it (its config file, which they rewrite, says which).
# The Redis password (ENGRAM_REDIS_PASSWORD or the data folder's secret) is every data node's
# requirepass and masterauth, and the Sentinels' auth-pass; the config files holding it are 0600
# in the data folder, as the secret itself is.

HA_DIR="$ENGRAM_DATA_DIR/redis-ha"
HA_MASTER=${ENGRAM_REDIS_SENTINEL_MASTER:-engram}

_ha_sentinel_ports() {
    local nodes=${ENGRAM_REDIS_SENTINELS:-127.0.0.1:26379,127.0.0.1:26380,127.0.0.1:26381} node
    IFS=, read -ra nodes <<<"$nodes"
    for node in "${nodes[@]}"; do
        [[ ${node%:*} == 127.* || ${node%:*} == localhost ]] ||
            fail "sentinel: ENGRAM_REDIS_SENTINELS names ${node%:*}; ops/ starts Sentinels on the loopback only"
        echo "${node##*:}"
    done
}

_ha_node_ports() {
    local primary
    primary=$(redis_port)
    echo "$primary" "${ENGRAM_REDIS_REPLICA_PORT:-$((primary + 1))}"
}

sentinel_node_pid() { live_pid "$RUN_DIR/redis-ha-$1.pid" redis-server; }

# redis-cli to a Sentinel; its password (if any) through the environment, never the command line.
_scli() {
    REDISCLI_AUTH=${ENGRAM_REDIS_SENTINEL_PASSWORD:-} redis-cli --no-auth-warning -p "$1" "${@:2}"
}

# A config line's string, quoted as redis-server reads it (shared/redis_client.py's requirepass_line).
_ha_quoted() {
    "$PY" -c 'import sys
from pydantic import SecretStr
from shared.redis_client import requirepass_line
print(requirepass_line(SecretStr(sys.stdin.read())).split(" ", 1)[1], end="")'
}

_ha_write_node_conf() {
    local index=$1 port=$2 primary=$3 conf=$HA_DIR/node-$1.conf quoted
    [[ -f $conf ]] && return 0 # rewritten by the Sentinels since: it says what this node now is
    quoted=$(printf '%s' "$REDIS_AUTH" | _ha_quoted)
    mkdir -p "$HA_DIR/node-$index"
    {
        echo "port $port"
        echo "bind 127.0.0.1"
        echo "protected-mode yes"
        echo "dir $HA_DIR/node-$index"
        echo "appendonly yes"
        echo "appendfsync everysec"
        echo "maxmemory-policy noeviction"
        echo 'save ""'
        echo "pidfile $RUN_DIR/redis-ha-$index.pid"
        echo "logfile $LOG_DIR/redis-ha-$index.log"
        echo "requirepass $quoted"
        echo "masterauth $quoted"
        ((index == 0)) || echo "replicaof 127.0.0.1 $primary"
    } >"$conf"
}

_ha_write_sentinel_conf() {
    local index=$1 port=$2 primary=$3 conf=$HA_DIR/sentinel-$1.conf quoted
    [[ -f $conf ]] && return 0 # the Sentinel keeps its view of the primary and its peers here
    quoted=$(printf '%s' "$REDIS_AUTH" | _ha_quoted)
    mkdir -p "$HA_DIR/sentinel-$index"
    {
        echo "port $port"
        echo "bind 127.0.0.1"
        echo "dir $HA_DIR/sentinel-$index"
        echo "pidfile $RUN_DIR/sentinel-$index.pid"
        echo "logfile $LOG_DIR/sentinel-$index.log"
        echo "sentinel monitor $HA_MASTER 127.0.0.1 $primary 2"
        echo "sentinel auth-pass $HA_MASTER $quoted"
        echo "sentinel down-after-milliseconds $HA_MASTER ${ENGRAM_SENTINEL_DOWN_AFTER_MS:-1000}"
        echo "sentinel failover-timeout $HA_MASTER ${ENGRAM_SENTINEL_FAILOVER_MS:-3000}"
        echo "sentinel parallel-syncs $HA_MASTER 1"
        if [[ -n ${ENGRAM_REDIS_SENTINEL_PASSWORD:-} ]]; then
            quoted=$(printf '%s' "$ENGRAM_REDIS_SENTINEL_PASSWORD" | _ha_quoted)
            echo "requirepass $quoted"
            echo "sentinel sentinel-pass $quoted" # the Sentinels' password among themselves
        fi
    } >"$conf"
}

# The primary's port as the Sentinel on port $1 names it (empty when it answers no such thing).
_ha_primary_of() {
    _scli "$1" sentinel get-master-addr-by-name "$HA_MASTER" 2>/dev/null | sed -n 2p
}

_ha_agreed() {
    local sentinels=("$@") port primary="" seen
    for port in "${sentinels[@]}"; do
        seen=$(_ha_primary_of "$port")
        [[ -n $seen ]] || return 1
        [[ -z $primary || $seen == "$primary" ]] || return 1
        primary=$seen
    done
    [[ $(rcli -p "$primary" role 2>/dev/null | head -n 1) == master ]] || return 1
    # One replica connected and in sync, and every Sentinel has found the others.
    rcli -p "$primary" info replication 2>/dev/null | grep -q '^connected_slaves:1' || return 1
    rcli -p "$primary" info replication 2>/dev/null | grep -q 'state=online' || return 1
    for port in "${sentinels[@]}"; do
        _scli "$port" sentinel master "$HA_MASTER" 2>/dev/null |
            grep -A1 -x 'num-other-sentinels' | tail -n 1 | grep -qx "$((${#sentinels[@]} - 1))" || return 1
    done
}

sentinel_start() {
    local nodes sentinels index port started=$SECONDS timeout=${ENGRAM_REDIS_START_TIMEOUT:-120}
    read -ra nodes <<<"$(_ha_node_ports)"
    mapfile -t sentinels < <(_ha_sentinel_ports)
    redis_auth
    mkdir -p "$HA_DIR" "$RUN_DIR" "$LOG_DIR"
    for index in 0 1; do
        sentinel_node_pid "$index" >/dev/null && continue
        [[ $(redis_state "${nodes[$index]}") == none ]] ||
            fail "sentinel: something else answers on 127.0.0.1:${nodes[$index]}; set ENGRAM_REDIS_URL or ENGRAM_REDIS_REPLICA_PORT"
        _ha_write_node_conf "$index" "${nodes[$index]}" "${nodes[0]}"
        echo "redis-ha: starting data node $index on 127.0.0.1:${nodes[$index]}"
        (exec nohup redis-server "$HA_DIR/node-$index.conf" --daemonize no >>"$LOG_DIR/redis-ha-$index.log" 2>&1 </dev/null) &
        echo $! >"$RUN_DIR/redis-ha-$index.pid"
    done
    for index in "${!sentinels[@]}"; do
        live_pid "$RUN_DIR/sentinel-$index.pid" redis-server >/dev/null && continue
        _ha_write_sentinel_conf "$index" "${sentinels[$index]}" "${nodes[0]}"
        echo "redis-ha: starting Sentinel $index on 127.0.0.1:${sentinels[$index]}"
        (exec nohup redis-server "$HA_DIR/sentinel-$index.conf" --sentinel --daemonize no \
            >>"$LOG_DIR/sentinel-$index.log" 2>&1 </dev/null) &
        echo $! >"$RUN_DIR/sentinel-$index.pid"
    done
    until _ha_agreed "${sentinels[@]}"; do
        if ((SECONDS - started > timeout)); then
            tail -n 10 "$LOG_DIR"/sentinel-*.log "$LOG_DIR"/redis-ha-*.log >&2
            fail "redis-ha: the Sentinels did not agree on a primary with its replica in ${timeout}s"
        fi
        sleep 0.2
    done
    echo "redis-ha: primary 127.0.0.1:$(_ha_primary_of "${sentinels[0]}") ($HA_MASTER), replica in sync, ${#sentinels[@]} Sentinels"
}

sentinel_status() {
    local nodes sentinels index up=0 total=0 primary
    read -ra nodes <<<"$(_ha_node_ports)"
    mapfile -t sentinels < <(_ha_sentinel_ports)
    redis_auth
    for index in 0 1; do
        total=$((total + 1))
        if [[ $(redis_state "${nodes[$index]}") == ours ]]; then
            up=$((up + 1))
            echo "redis-ha: node $index on ${nodes[$index]}: $(rcli -p "${nodes[$index]}" role | head -n 1)"
        else
            echo "redis-ha: node $index on ${nodes[$index]}: down"
        fi
    done
    for index in "${!sentinels[@]}"; do
        total=$((total + 1))
        primary=$(_ha_primary_of "${sentinels[$index]}")
        if [[ -n $primary ]]; then
            up=$((up + 1))
            echo "redis-ha: Sentinel $index on ${sentinels[$index]}: primary $HA_MASTER at 127.0.0.1:$primary"
        else
            echo "redis-ha: Sentinel $index on ${sentinels[$index]}: down"
        fi
    done
    ((up == total)) && return 0
    ((up == 0)) && return 1
    return 2
}

_ha_stop_pid() {
    local pid
    pid=$(live_pid "$1" redis-server) || { rm -f "$1" && return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 120); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$1" && return 0; }
        sleep 0.25
    done
    echo "redis-ha: pid $pid still alive after 30s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$1"
}

sentinel_stop() {
    local pidfile
    for pidfile in "$RUN_DIR"/sentinel-*.pid "$RUN_DIR"/redis-ha-*.pid; do
        [[ -e $pidfile ]] && _ha_stop_pid "$pidfile"
    done
    return 0
}
