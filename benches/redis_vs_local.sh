#!/usr/bin/env bash
# redis_vs_local.sh — load comparison of a rate-limit zone kept in Redis (`backend = "redis"`) against
# the same zone kept locally (`backend = "local"`), through the real gateway (`tollgate -c FILE`).
#
# Parts (PART=decide|flood|all; default all):
#   decide  decisions per second and the latency they add. One location, `return = { status = 200 }`,
#           answered by tollgate itself (no upstream), limited by one leaky_bucket zone that admits
#           everything: `[zones.k] key = "$http_x_api_key"` `rate = "1000000r/s"`,
#           `limit = [{ zone = "k", burst = 1000000, nodelay = true }]`. wrk (a Lua script) sends one
#           of API_KEYS distinct X-API-Key values per request, round robin, as proxy_vs_nginx.sh's
#           limit_pass does. Three gateways, each on its own loopback port:
#             local  the zone with `backend = "local"`;
#             redis  the zone with `backend = "redis"`, `[redis] url = "redis://127.0.0.1:PORT"`,
#                    `timeout = "50ms"`, `on_error = "deny"`: a Redis failure answers 503, so any
#                    non-2xx answer (which must be none) shows it;
#             leased the redis zone with `lease = LEASE` (default 20): a request Redis admits takes
#                    LEASE units of its key at once, and the key's next LEASE - 1 requests are
#                    decided by the gateway alone ("Leases" in docs/config.md);
#             none   no zone at all (the baseline: what answering costs without any limit).
#           Runs are interleaved, local redis leased none local redis leased none …, RUNS times
#           each; each run also counts Redis's script calls (`INFO commandstats`), so the redis
#           runs show one Redis round trip per request, the leased runs about 1/LEASE, the others
#           none. A lease's unspent units expire a window of the rate (here a second) after they
#           were taken, so the leased zone reaches 1/LEASE calls per request only when each key
#           gets at least LEASE requests a second: req/s / API_KEYS >= LEASE (the report prints
#           it). With the default 10000 keys that needs 200000 req/s; `API_KEYS=100` shows the
#           leases at work at any speed this machine reaches;
#   flood   Redis round trips per request under a one-key flood: `[zones.f] key = "$binary_remote_addr"`
#           (every wrk request comes from 127.0.0.1, so one key) at `rate = "1r/m"`, nodelay,
#           `backend = "redis"`; wrk runs DURATION seconds; the calls of `cmdstat_evalsha` and
#           `cmdstat_eval` are read before and after. Expected near zero calls per request: after
#           Redis rejects the key, tollgate rejects it by itself until it may pass again (a minute).
#   all     decide, then flood.
# Every gateway runs `workers = 1` with its access log off and its default rate-limit headers
# (`ratelimit_headers = "draft"` unless RATELIMIT_HEADERS says otherwise; "none" sends none).
#
# What it does:
#   1. installs wrk and redis-server (and redis-tools, curl) from Debian when they are missing
#      (apt-get; needs root);
#   2. builds `target/release/tollgate` (cargo build --release; fat LTO, a few minutes);
#   3. starts a redis-server for the run on a free loopback port (`--bind 127.0.0.1 --save ""
#      --appendonly no`, its dir in a temp dir), then the gateways, each on its own free loopback
#      port, with configs written to the temp dir;
#   4. checks that each gateway answers 200, that the zoned ones send rate-limit headers, and that the
#      redis gateway's decision reached Redis and the local one's did not, warms each up (WARMUP s),
#      then runs wrk (for flood, with a Lua script that counts the answers by status: 429 expected);
#   5. prints every run (req/s, p50, p99, CPU time per request of tollgate and redis-server, Redis
#      script calls per request, non-2xx answers, socket errors), the medians, the ratio redis/local
#      of req/s and the p50/p99 differences, and the flood's requests, statuses, Redis calls and
#      calls per request, as Markdown ready to paste into a note;
#   6. stops every process it started on exit, on failure and on Ctrl-C.
# All traffic goes to 127.0.0.1 only. It is a benchmark, not a test: CI does not run it.
#
# Run (from anywhere; takes about 3 × RUNS × DURATION + DURATION seconds plus warm-up and build time):
#   benches/redis_vs_local.sh
#   RUNS=5 DURATION=5 benches/redis_vs_local.sh
#   PART=flood DURATION=10 benches/redis_vs_local.sh
#   CONNECTIONS=128 PART=decide benches/redis_vs_local.sh
#
# Environment (defaults in brackets):
#   PART [all]          decide, flood or all (above)
#   API_KEYS [10000]    distinct X-API-Key values wrk sends in decide
#   LEASE [20]          the leased gateway's `lease`
#   RATELIMIT_HEADERS [draft]   the gateways' `ratelimit_headers`
#   RUNS [5]            measured runs per gateway in decide, interleaved
#   DURATION [5]        seconds per measured run, and of the flood (a bare number of seconds)
#   WARMUP [2]          seconds of warm-up per gateway before the measured runs (0: none)
#   CONNECTIONS [32]    wrk -c
#   THREADS [1]         wrk -t
#   PIN [1]             1: with taskset and at least 2 CPUs, run wrk on WRK_CPUS, the gateways on
#                       SERVER_CPUS and redis-server on REDIS_CPUS; 0: no pinning
#   WRK_CPUS [0]        taskset CPU list for wrk
#   SERVER_CPUS [1]     taskset CPU list for tollgate
#   REDIS_CPUS [SERVER_CPUS]   taskset CPU list for redis-server. By default it shares the gateway's
#                       core, so that wrk's core is the same in every run and whatever Redis costs
#                       lands on the server side (as it would on a gateway host with a local Redis)
#   BUILD [1]           0: do not run cargo; use the binary already built
#   TOLLGATE_BIN        use this binary instead of target/release/tollgate
#   REDIS_SERVER, REDIS_CLI     use these instead of redis-server and redis-cli from PATH
#   STARTUP_TIMEOUT [30] seconds to wait for each server to answer
#   KEEP [0]            1: keep the temp dir (configs, logs, raw wrk output) and print its path
#                       (it is also kept, and its path printed, when the script fails)

set -euo pipefail

BENCH=redis_vs_local
# shellcheck source=benches/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# ---------------------------------------------------------------------------------------------------
# Settings

PART="${PART:-all}"
RUNS="${RUNS:-5}"
DURATION="${DURATION:-5}"
WARMUP="${WARMUP:-2}"
CONNECTIONS="${CONNECTIONS:-32}"
THREADS="${THREADS:-1}"
PIN="${PIN:-1}"
WRK_CPUS="${WRK_CPUS:-0}"
SERVER_CPUS="${SERVER_CPUS:-1}"
REDIS_CPUS="${REDIS_CPUS:-$SERVER_CPUS}"
BUILD="${BUILD:-1}"
STARTUP_TIMEOUT="${STARTUP_TIMEOUT:-30}"
KEEP="${KEEP:-0}"
API_KEYS="${API_KEYS:-10000}"
LEASE="${LEASE:-20}"
RATELIMIT_HEADERS="${RATELIMIT_HEADERS:-draft}"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$ROOT/$TARGET_DIR" ;; esac
TOLLGATE_BIN="${TOLLGATE_BIN:-$TARGET_DIR/release/tollgate}"


is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
is_pos() { [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ]; }
is_pos "$RUNS" || die "RUNS must be a positive integer, not '$RUNS'"
is_pos "$DURATION" || die "DURATION must be whole seconds >= 1, not '$DURATION'"
is_uint "$WARMUP" || die "WARMUP must be whole seconds, not '$WARMUP'"
is_pos "$CONNECTIONS" || die "CONNECTIONS must be a positive integer, not '$CONNECTIONS'"
is_pos "$THREADS" || die "THREADS must be a positive integer, not '$THREADS'"
[ "$CONNECTIONS" -ge "$THREADS" ] || die "CONNECTIONS ($CONNECTIONS) must be >= THREADS ($THREADS)"
is_uint "$STARTUP_TIMEOUT" || die "STARTUP_TIMEOUT must be whole seconds"
is_pos "$API_KEYS" || die "API_KEYS must be a positive integer, not '$API_KEYS'"
is_pos "$LEASE" && [ "$LEASE" -le 10000 ] || die "LEASE must be 1 to 10000, not '$LEASE'"
case "$RATELIMIT_HEADERS" in draft | legacy | both | none) ;;
    *) die "RATELIMIT_HEADERS must be draft, legacy, both or none" ;;
esac
case "$PART" in
    decide | flood) PARTS=("$PART") ;;
    all) PARTS=(decide flood) ;;
    *) die "PART must be decide, flood or all, not '$PART'" ;;
esac
wants_part() {
    local p
    for p in "${PARTS[@]}"; do [ "$p" = "$1" ] && return 0; done
    return 1
}

# The decide part's gateways, in the order their runs interleave.
VARIANTS=(local redis leased none)

# ---------------------------------------------------------------------------------------------------
# Cleanup: every process we start is recorded here and stopped on exit, whatever the reason.

WORKDIR=""
REDIS_PID=""
WRK_PID=""
declare -A TG_PID=() TG_PORT=()


stop_gateways() {
    local v
    for v in "${!TG_PID[@]}"; do
        stop_pid "${TG_PID[$v]}" "tollgate ($v)"
        unset "TG_PID[$v]"
    done
}

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    set +e
    stop_pid "$WRK_PID" wrk
    stop_gateways
    stop_pid "$REDIS_PID" redis-server
    if [ -n "$WORKDIR" ] && [ -d "$WORKDIR" ]; then
        if [ "$KEEP" = 1 ] || { [ "$status" -ne 0 ] && [ "$status" -ne 130 ] && [ "$status" -ne 143 ]; }; then
            say "kept configs, logs and raw wrk output in $WORKDIR"
        else
            rm -rf "$WORKDIR"
        fi
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------------------------------
# Tools

install_tools() {
    local missing=()
    command -v wrk >/dev/null 2>&1 || missing+=(wrk)
    [ -n "${REDIS_SERVER:-}" ] || command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
    [ -n "${REDIS_CLI:-}" ] || command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    [ "${#missing[@]}" -eq 0 ] && return 0
    say "installing ${missing[*]} from Debian"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "${missing[*]} missing and not root (no sudo)"
        sudo=(sudo)
    fi
    command -v apt-get >/dev/null 2>&1 || die "${missing[*]} missing and no apt-get: install them by hand"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
    # The Debian package starts a system redis-server on 6379; we start our own and leave it be.
}

install_tools
WRK="$(command -v wrk)"
REDIS_SERVER="${REDIS_SERVER:-$(command -v redis-server)}"
REDIS_CLI="${REDIS_CLI:-$(command -v redis-cli)}"
[ -x "$REDIS_SERVER" ] || die "no redis-server at '$REDIS_SERVER'"
[ -x "$REDIS_CLI" ] || die "no redis-cli at '$REDIS_CLI'"

# Pinning: wrk on one core, the gateways (and by default redis-server) on the other.
WRK_CMD=("$WRK")
SERVER_PREFIX=()
REDIS_PREFIX=()
PIN_NOTE="no CPU pinning"
if [ "$PIN" = 1 ]; then
    if ! command -v taskset >/dev/null 2>&1; then
        say "PIN=1 but taskset is missing: not pinning"
        PIN_NOTE="no CPU pinning (taskset missing)"
    elif [ "$(nproc --all 2>/dev/null || echo 1)" -lt 2 ]; then
        say "PIN=1 but fewer than 2 CPUs: not pinning"
        PIN_NOTE="no CPU pinning (fewer than 2 CPUs)"
    else
        WRK_CMD=(taskset -c "$WRK_CPUS" "$WRK")
        SERVER_PREFIX=(taskset -c "$SERVER_CPUS")
        REDIS_PREFIX=(taskset -c "$REDIS_CPUS")
        PIN_NOTE="wrk pinned to CPU $WRK_CPUS; tollgate to CPU $SERVER_CPUS; redis-server to CPU $REDIS_CPUS (taskset)"
    fi
fi
say "$PIN_NOTE"

ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# ---------------------------------------------------------------------------------------------------
# Build

if [ "$BUILD" = 1 ]; then
    cd "$ROOT"
    say "cargo build --release --bin tollgate"
    cargo build --release --bin tollgate
fi
[ -x "$TOLLGATE_BIN" ] || die "no tollgate binary at $TOLLGATE_BIN"

# ---------------------------------------------------------------------------------------------------
# Helpers

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/redis_vs_local.XXXXXX")"

USED_PORTS=" "
# Listening ports are drawn below the kernel's ephemeral range, so that no client socket of wrk or of
# a gateway (its Redis connection) can take one between our check and the server's bind.
PORT_LO=10000
PORT_HI=32767
if read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && [ "$eph_lo" -gt 11024 ]; then
    PORT_HI=$((eph_lo - 1))
fi


# wait_ready NAME PORT PID STATUSES LOG...: until http://127.0.0.1:PORT/ answers one of STATUSES
# (space-separated), or fail (showing the end of each LOG).
wait_ready() {
    local name="$1" port="$2" pid="$3" statuses="$4" deadline code
    shift 4
    deadline=$((SECONDS + STARTUP_TIMEOUT))
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            say "$name exited during start-up"
            show_logs "$@"
            die "$name did not start"
        fi
        code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$port/" 2>/dev/null || true)"
        case " $statuses " in *" $code "*) return 0 ;; esac
        if [ "$SECONDS" -ge "$deadline" ]; then
            say "$name on 127.0.0.1:$port: last answer was status '${code:-none}'"
            show_logs "$@"
            die "$name did not answer ${statuses// / or } within ${STARTUP_TIMEOUT}s"
        fi
        sleep 0.2
    done
}

# CPU time (clock ticks, user + system) used so far by the given processes.
CLK_TCK="$(getconf CLK_TCK 2>/dev/null || echo 100)"
# Peak resident set size (VmHWM, kB) of one process.
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# ---------------------------------------------------------------------------------------------------
# Redis

redis_cli() { "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

# Script calls Redis has run so far: the calls of EVALSHA and EVAL in `INFO commandstats`
# (lines such as `cmdstat_evalsha:calls=12,usec=…`).
script_calls() {
    local out
    out="$(redis_cli info commandstats 2>&1)" || die "redis-cli info commandstats failed: $out"
    tr -d '\r' <<<"$out" | awk -F'[:,=]' '
        $1 == "cmdstat_evalsha" || $1 == "cmdstat_eval" { for (i = 2; i < NF; i++) if ($i == "calls") s += $(i + 1) }
        END { print s + 0 }'
}

start_redis() {
    local deadline
    REDIS_PORT="$(free_port)"
    mkdir -p "$WORKDIR/redis"
    say "starting redis-server on 127.0.0.1:$REDIS_PORT"
    "${REDIS_PREFIX[@]}" "$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$WORKDIR/redis" >"$WORKDIR/redis.log" 2>&1 &
    REDIS_PID=$!
    deadline=$((SECONDS + STARTUP_TIMEOUT))
    until [ "$(redis_cli ping 2>/dev/null || true)" = PONG ]; do
        if ! kill -0 "$REDIS_PID" 2>/dev/null; then
            show_logs "$WORKDIR/redis.log"
            die "redis-server did not start"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            show_logs "$WORKDIR/redis.log"
            die "redis-server did not answer PING within ${STARTUP_TIMEOUT}s"
        fi
        sleep 0.1
    done
    REDIS_VERSION="$(redis_cli info server | tr -d '\r' | awk -F: '$1 == "redis_version" { print $2 }')"
    say "redis-server $REDIS_VERSION, pid $REDIS_PID"
}

# ---------------------------------------------------------------------------------------------------
# Gateways: NAME is local, redis or none (decide) or flood

# shellcheck disable=SC2016 # the $ names are the template's variables, written as they are
gateway_zone() {
    case "$1" in
        local) printf '[zones.k]\nkey = "$http_x_api_key"\nrate = "1000000r/s"\nbackend = "local"\n' ;;
        redis) printf '[zones.k]\nkey = "$http_x_api_key"\nrate = "1000000r/s"\nbackend = "redis"\n' ;;
        leased) printf '[zones.k]\nkey = "$http_x_api_key"\nrate = "1000000r/s"\nbackend = "redis"\nlease = %s\n' "$LEASE" ;;
        flood) printf '[zones.f]\nkey = "$binary_remote_addr"\nrate = "1r/m"\nbackend = "redis"\n' ;;
        none) ;;
    esac
}
gateway_limit() {
    case "$1" in
        local | redis | leased) echo 'limit = [{ zone = "k", burst = 1000000, nodelay = true }]' ;;
        flood) echo 'limit = [{ zone = "f", nodelay = true }]' ;;
        none) ;;
    esac
}
gateway_redis() {
    case "$1" in
        redis | leased | flood)
            # heartbeat: each Redis gateway announces itself once a minute (an EVALSHA that
            # INFO commandstats counts with the zone's; at most 2 in any run).
            printf '[redis]\nurl = "redis://127.0.0.1:%s"\ntimeout = "50ms"\non_error = "deny"\nheartbeat = "1m"\n' "$REDIS_PORT"
            ;;
    esac
}

start_gateway() { # start_gateway NAME READY_STATUSES
    local name="$1" ready="$2" port conf
    port="$(free_port)"
    conf="$WORKDIR/$name.toml"
    cat >"$conf" <<EOF
# written by benches/redis_vs_local.sh ($name)
[server]
listen = ["127.0.0.1:$port"]
workers = 1
ratelimit_headers = "$RATELIMIT_HEADERS"

[log]
access = "off"

$(gateway_redis "$name")

$(gateway_zone "$name")

[[location]]
match = "/"
return = { status = 200 }
$(gateway_limit "$name")
EOF
    "$TOLLGATE_BIN" -t -c "$conf" >"$WORKDIR/$name-t.log" 2>&1 ||
        { cat "$WORKDIR/$name-t.log" >&2; die "tollgate rejected $conf"; }
    say "starting tollgate ($name) on 127.0.0.1:$port ($conf)"
    "${SERVER_PREFIX[@]}" "$TOLLGATE_BIN" -c "$conf" >"$WORKDIR/$name.log" 2>&1 &
    TG_PID[$name]=$!
    TG_PORT[$name]="$port"
    wait_ready "tollgate ($name)" "$port" "${TG_PID[$name]}" "$ready" "$WORKDIR/$name.log"
    say "tollgate ($name) pid ${TG_PID[$name]}"
}

# check_decide NAME: a request with an API key is admitted (200), with rate-limit headers when the
# gateway has a zone, and reaches Redis (one script call) exactly when the zone is in Redis; or fail.
# The first request of a redis gateway also loads the script (EVALSHA answered NOSCRIPT, SCRIPT LOAD,
# EVALSHA again: two calls counted): the second one is checked.
check_decide() {
    local name="$1" port="${TG_PORT[$1]}" calls0 calls1 code has_headers=0 want_calls i
    for ((i = 1; i <= 2; i++)); do
        calls0="$(script_calls)"
        code="$(curl -s -o /dev/null -D "$WORKDIR/$name-probe.headers" -w '%{http_code}' --max-time 2 \
            -H "X-API-Key: probe-key-$i" "http://127.0.0.1:$port/" || true)"
        calls1="$(script_calls)"
        [ "$code" = 200 ] || die "tollgate ($name): a request with an API key got status '$code', not 200"
    done
    grep -qi '^\(ratelimit\|x-ratelimit-limit\):' "$WORKDIR/$name-probe.headers" && has_headers=1
    if [ "$RATELIMIT_HEADERS" != none ]; then
        case "$name" in
            none) [ "$has_headers" = 0 ] || die "tollgate (none): rate-limit headers without a zone" ;;
            *) [ "$has_headers" = 1 ] || die "tollgate ($name): no rate-limit headers: is the zone applied?" ;;
        esac
    fi
    # A new key: one call for redis and for leased (which takes its lease then). A heartbeat
    # landing in between may add one.
    want_calls=0
    case "$name" in redis | leased) want_calls=1 ;; esac
    [ $((calls1 - calls0)) -ge "$want_calls" ] && [ $((calls1 - calls0)) -le $((want_calls + 1)) ] ||
        die "tollgate ($name): one request made $((calls1 - calls0)) Redis script call(s), not $want_calls"
}

# ---------------------------------------------------------------------------------------------------
# wrk

# wrk's Lua script for decide: one of API_KEYS keys per request, round robin (each wrk thread has its
# own Lua state and so its own round).
write_keys_script() {
    cat >"$1" <<EOF
-- written by benches/redis_vs_local.sh
local count = $API_KEYS
local keys = {}
for i = 1, count do keys[i] = string.format("key-%028d", i - 1) end
local n = 0
local headers = {}
request = function()
    n = n % count + 1
    headers["X-API-Key"] = keys[n]
    return wrk.format(nil, nil, headers)
end
EOF
}

# wrk's Lua script for flood: counts the answers by status, printed as "status N COUNT" lines at the
# end (so that 429s and 503s are told apart).
write_status_script() {
    cat >"$1" <<'EOF'
-- written by benches/redis_vs_local.sh
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) statuses = {} end
function response(status, headers, body) statuses[status] = (statuses[status] or 0) + 1 end
function done(summary, latency, requests)
    local total = {}
    for _, t in ipairs(threads) do
        for s, n in pairs(t:get("statuses")) do total[s] = (total[s] or 0) + n end
    end
    for s, n in pairs(total) do io.write(string.format("status %d %d\n", s, n)) end
end
EOF
}

# run_wrk NAME SECONDS OUTFILE [wrk args…]: wrk in the background so that a signal reaches our trap
# at once.
run_wrk() {
    local name="$1" secs="$2" out="$3" port rc=0
    shift 3
    port="${TG_PORT[$name]}"
    timeout --kill-after=5 $((secs + 30)) "${WRK_CMD[@]}" --latency -t"$THREADS" -c"$CONNECTIONS" \
        -d"${secs}s" "$@" "http://127.0.0.1:$port/" >"$out" 2>&1 &
    WRK_PID=$!
    wait "$WRK_PID" || rc=$?
    WRK_PID=""
    if [ "$rc" -ne 0 ]; then
        cat "$out" >&2
        die "wrk against tollgate ($name) exited with status $rc"
    fi
}


# Is anything else using the CPUs? (Other builds on the machine make every figure noisy.)
idle_check() {
    cpu_snapshot >"$WORKDIR/idle0"
    sleep 1
    cpu_snapshot >"$WORKDIR/idle1"
    IDLE_BUSY="$(busy_pct "$WORKDIR/idle0" "$WORKDIR/idle1")"
    IDLE_MAX="$(tr '/' '\n' <<<"$IDLE_BUSY" | sort -n | tail -n 1)"
    CPU_NAMES="$(awk '{ s = s (s == "" ? "" : "/") $1 } END { print s }' "$WORKDIR/idle1")"
    if [ "${IDLE_MAX//\?/0}" -gt 10 ]; then
        say "warning: CPUs already busy ($IDLE_BUSY %) before any load: other work on this machine will add noise"
    fi
}
idle_note() {
    echo "$IDLE_BUSY %$([ "${IDLE_MAX//\?/0}" -gt 10 ] && echo ' -- NOT idle: other work on the machine, figures are noisy')"
}

# ---------------------------------------------------------------------------------------------------
# Part decide

# measure_decide: warm-up, then RUNS interleaved runs per gateway into $RESULTS:
# run name rps p50 p99 tollgate_cpu_us_per_req redis_cpu_us_per_req redis_calls_per_req non2xx
# socket_errors busy% requests redis_calls
measure_decide() {
    local run v out cpu0 cpu1 r0 r1 c0 c1 busy rps p50 p99 reqs non2xx sock tcpu rcpu cpr total_secs
    RESULTS="$WORKDIR/decide.tsv"
    : >"$RESULTS"
    if [ "$WARMUP" -gt 0 ]; then
        for v in "${VARIANTS[@]}"; do
            say "decide: warm-up: $v ${WARMUP}s"
            run_wrk "$v" "$WARMUP" "$WORKDIR/warmup-$v.txt" -s "$WORKDIR/api_keys.lua"
        done
    fi
    idle_check
    total_secs=$((RUNS * ${#VARIANTS[@]} * DURATION))
    say "decide: measuring: $RUNS run(s) of ${DURATION}s per gateway, interleaved (about ${total_secs}s)"
    for ((run = 1; run <= RUNS; run++)); do
        for v in "${VARIANTS[@]}"; do
            out="$WORKDIR/run-$run-$v.txt"
            c0="$(script_calls)"
            cpu0="$(cpu_ticks "${TG_PID[$v]}")"
            r0="$(cpu_ticks "$REDIS_PID")"
            cpu_snapshot >"$WORKDIR/stat0"
            run_wrk "$v" "$DURATION" "$out" -s "$WORKDIR/api_keys.lua"
            cpu_snapshot >"$WORKDIR/stat1"
            cpu1="$(cpu_ticks "${TG_PID[$v]}")"
            r1="$(cpu_ticks "$REDIS_PID")"
            c1="$(script_calls)"
            busy="$(busy_pct "$WORKDIR/stat0" "$WORKDIR/stat1")"
            read -r rps p50 p99 reqs non2xx sock < <(parse_wrk "$out")
            read -r tcpu rcpu cpr < <(awk -v a="$((cpu1 - cpu0))" -v b="$((r1 - r0))" -v c="$((c1 - c0))" \
                -v n="$reqs" -v hz="$CLK_TCK" 'BEGIN {
                    if (n > 0) printf "%.1f %.1f %.4f\n", a * 1e6 / hz / n, b * 1e6 / hz / n, c / n
                    else print "-1 -1 -1" }')
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$v" "$rps" "$p50" "$p99" \
                "$tcpu" "$rcpu" "$cpr" "$non2xx" "$sock" "$busy" "$reqs" "$((c1 - c0))" >>"$RESULTS"
            say "decide: run $run $v: $rps req/s, p50 ${p50}us, p99 ${p99}us, non-2xx $non2xx, socket errors $sock, Redis calls/req $cpr, CPUs busy $busy %"
        done
    done
    declare -gA RSS_KB=()
    for v in "${VARIANTS[@]}"; do RSS_KB[$v]="$(hwm_kb "${TG_PID[$v]}")"; done
    REDIS_RSS_KB="$(hwm_kb "$REDIS_PID")"
}

median_of() { # median_of NAME COLUMN (3 = rps, 4 = p50, 5 = p99, 6 = tollgate cpu, 7 = redis cpu, 8 = calls/req)
    awk -F'\t' -v p="$1" -v c="$2" '$2 == p { print $c }' "$RESULTS" | sort -g | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) { print "nan"; exit }
            if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2
        }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }
diff_us() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.0f us", a - b }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }

git_rev="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "no commit")"
if [ -n "$(git -C "$ROOT" status --porcelain 2>/dev/null | head -n 1)" ]; then git_rev+=" (dirty tree)"; fi
cpu_model="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)"

# Flags a run that did not do what it means (marked ! in the table): any non-2xx answer or socket
# error, no request at all, or Redis script calls other than one per request (redis), at most one
# per request (leased) or none (local, none). Requests still in flight when wrk stops reached Redis
# without being counted by wrk: up to CONNECTIONS more calls than requests; the Redis gateways'
# heartbeats add up to 2 calls to any run.
# shellcheck disable=SC2016 # awk's fields, not the shell's
bad_run_awk='{ bad = ($9 > 0 || $10 > 0 || $3 <= 0)
               if ($2 == "redis") bad = bad || ($13 < $12 || $13 > $12 + slack + 2)
               else if ($2 == "leased") bad = bad || $13 > $12 + slack + 2
               else bad = bad || $13 > 2 }'

report_decide() {
    local v any_errors cmd
    any_errors="$(awk -F'\t' -v slack="$CONNECTIONS" "$bad_run_awk"' { n += bad } END { print n + 0 }' "$RESULTS")"
    cmd="PART=decide RUNS=$RUNS DURATION=$DURATION CONNECTIONS=$CONNECTIONS THREADS=$THREADS PIN=$PIN API_KEYS=$API_KEYS LEASE=$LEASE"
    [ "$RATELIMIT_HEADERS" != draft ] && cmd+=" RATELIMIT_HEADERS=$RATELIMIT_HEADERS"
    cmd+=" benches/redis_vs_local.sh"
    echo
    echo "### tollgate: leaky_bucket zone in Redis vs local, every request admitted ($(date -u '+%Y-%m-%d %H:%M UTC'))"
    echo
    echo "- command: \`$cmd\`"
    echo "- load: \`wrk --latency -t$THREADS -c$CONNECTIONS -d${DURATION}s\`, $RUNS run(s) per gateway interleaved (${VARIANTS[*]}), ${WARMUP}s warm-up each;"
    echo "  wrk sends \`X-API-Key: key-<28 digits>\`, $API_KEYS values round robin (Lua script), to every gateway"
    echo "- machine: $(nproc --all 2>/dev/null || echo '?') CPU(s)${cpu_model:+, $cpu_model}; $PIN_NOTE"
    echo "- CPUs busy before the load (1 s, $CPU_NAMES): $(idle_note)"
    echo "- tollgate: $git_rev, \`workers = 1\`, access log off, ratelimit_headers \"$RATELIMIT_HEADERS\"; location \`return = { status = 200 }\`"
    echo "- zone: \`[zones.k] key = \"\$http_x_api_key\" rate = \"1000000r/s\"\` + \`limit = [{ zone = \"k\", burst = 1000000, nodelay = true }]\`;"
    echo "  local: \`backend = \"local\"\`; redis: \`backend = \"redis\"\`, \`[redis] url = \"redis://127.0.0.1:$REDIS_PORT\" timeout = \"50ms\" on_error = \"deny\" heartbeat = \"1m\"\`"
    echo "  (a Redis failure answers 503, counted in non-2xx); leased: as redis, with \`lease = $LEASE\`; none: no zone"
    echo "- redis-server $REDIS_VERSION on 127.0.0.1 (\`--save \"\" --appendonly no\`), peak RSS $(mib "$REDIS_RSS_KB")"
    echo "- CPU us/req: CPU time (user+sys, /proc, ${CLK_TCK} Hz ticks) of the process during the run / requests"
    echo "  (redis-server's is charged to every run: about 0 outside the redis runs); Redis calls/req: EVALSHA + EVAL"
    echo "  calls (INFO commandstats) during the run / requests; busy %: each CPU's non-idle share ($CPU_NAMES)"
    echo
    echo "| run | zone | req/s | p50 us | p99 us | tollgate CPU us/req | redis CPU us/req | Redis calls/req | non-2xx | socket errors | busy % |"
    echo "|----:|:-----|------:|-------:|-------:|--------------------:|-----------------:|----------------:|--------:|--------------:|-------:|"
    awk -F'\t' -v slack="$CONNECTIONS" "$bad_run_awk"' {
        printf "| %s | %s | %.0f | %.0f | %.0f | %s | %s | %s | %s | %s%s | %s |\n",
            $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, (bad ? " !" : ""), $11 }' "$RESULTS"
    for v in "${VARIANTS[@]}"; do
        printf '| median | %s | %.0f | %.0f | %.0f | %s | %s | %s | | | |\n' "$v" "$(median_of "$v" 3)" \
            "$(median_of "$v" 4)" "$(median_of "$v" 5)" "$(median_of "$v" 6)" "$(median_of "$v" 7)" "$(median_of "$v" 8)"
    done
    echo
    echo "redis vs local (medians):"
    echo "- req/s redis/local: $(ratio "$(median_of redis 3)" "$(median_of local 3)")x  (higher is better)"
    echo "- p50 redis - local: $(diff_us "$(median_of redis 4)" "$(median_of local 4)")"
    echo "- p99 redis - local: $(diff_us "$(median_of redis 5)" "$(median_of local 5)")"
    echo "- tollgate CPU per request redis/local: $(ratio "$(median_of redis 6)" "$(median_of local 6)")x; redis-server adds $(median_of redis 7) us/req"
    echo
    leased_report
    echo
    echo "each zone vs no zone (medians):"
    for v in local redis leased; do
        echo "- $v: req/s $(ratio "$(median_of "$v" 3)" "$(median_of none 3)")x of none; p50 $(diff_us "$(median_of "$v" 4)" "$(median_of none 4)"), p99 $(diff_us "$(median_of "$v" 5)" "$(median_of none 5)")"
    done
    echo
    echo "non-2xx answers (must be 0; a 503 is a Redis failure under on_error = \"deny\"):"
    for v in "${VARIANTS[@]}"; do
        echo "- $v: $(awk -F'\t' -v p="$v" '$2 == p { s += $9 } END { print s + 0 }' "$RESULTS") in $(awk -F'\t' -v p="$v" '$2 == p { s += $12 } END { print s + 0 }' "$RESULTS") requests"
    done
    echo
    echo "peak RSS (VmHWM): $(for v in "${VARIANTS[@]}"; do printf '%s %s; ' "$v" "$(mib "${RSS_KB[$v]}")"; done | sed 's/; $//')"
    if [ "$any_errors" -gt 0 ]; then
        echo
        echo "WARNING: $any_errors run(s) had non-2xx answers, socket errors, no requests, or Redis calls other than"
        echo "one per request (redis), at most one (leased) or none (local, none) (marked !): their numbers do not"
        echo "compare what they should."
    fi
}

# The leased zone against the local one and against issue 15's target: at least 0.8x the local
# zone's req/s with at most 1/LEASE Redis calls per request.
# A run starts with no lease (those of the run before have expired) and ends with a partly spent
# one per key: a run's calls are at most requests / LEASE plus one per key (API_KEYS) and the
# heartbeats (2); what the leases themselves cost is requests / LEASE.
leased_report() {
    local rps_ratio cpr per_key excess calls_met met
    rps_ratio="$(ratio "$(median_of leased 3)" "$(median_of local 3)")"
    cpr="$(median_of leased 8)"
    per_key="$(awk -v r="$(median_of leased 3)" -v k="$API_KEYS" 'BEGIN { printf "%.0f", r / k }')"
    excess="$(awk -F'\t' -v n="$LEASE" '$2 == "leased" { e = $13 - $12 / n; if (e > m) m = e } END { printf "%.0f", m }' "$RESULTS")"
    calls_met="$(awk -F'\t' -v n="$LEASE" -v k="$API_KEYS" '$2 == "leased" && $13 > $12 / n + k + 2 { bad = 1 } END { print bad ? 0 : 1 }' "$RESULTS")"
    met="$(awk -v q="$rps_ratio" -v c="$calls_met" 'BEGIN { print (q >= 0.8 && c == 1) ? "met" : "NOT met" }')"
    echo "leased (lease = $LEASE) vs local (medians):"
    echo "- req/s leased/local: ${rps_ratio}x; p50 leased - local: $(diff_us "$(median_of leased 4)" "$(median_of local 4)"); p99: $(diff_us "$(median_of leased 5)" "$(median_of local 5)")"
    echo "- Redis calls per request: $cpr (1/LEASE = $(awk -v n="$LEASE" 'BEGIN { printf "%.4f", 1 / n }'); redis: $(median_of redis 8))"
    echo "- tollgate CPU per request leased/local: $(ratio "$(median_of leased 6)" "$(median_of local 6)")x; redis-server adds $(median_of leased 7) us/req"
    echo "- each key got about $per_key requests a second (req/s / API_KEYS); a lease lasts a second, so calls per"
    echo "  request reach 1/LEASE only when that is at least LEASE ($LEASE)"
    echo "- calls beyond requests/LEASE in a leased run: at most $excess (the run's first lease and last, partly"
    echo "  spent one, of each key: at most API_KEYS + 2 = $((API_KEYS + 2)))"
    echo "- target (>= 0.8x local req/s, 1/LEASE Redis calls per request but for those): $met"
}

run_decide() {
    local v
    write_keys_script "$WORKDIR/api_keys.lua"
    for v in "${VARIANTS[@]}"; do
        start_gateway "$v" 200
        check_decide "$v"
    done
    measure_decide
    report_decide
    stop_gateways
}

# ---------------------------------------------------------------------------------------------------
# Part flood

run_flood() {
    local c0 c1 rps p50 p99 reqs non2xx sock calls per per_call s200 s429 s503 sother
    local out="$WORKDIR/flood.txt"
    write_status_script "$WORKDIR/statuses.lua"
    # The readiness request takes the key's one request of the minute (200); the flood's first
    # requests then go to Redis, which rejects them, and the rest should not.
    start_gateway flood "200 429"
    idle_check
    say "flood: one key at 1r/m through Redis, ${DURATION}s"
    c0="$(script_calls)"
    run_wrk flood "$DURATION" "$out" -s "$WORKDIR/statuses.lua"
    c1="$(script_calls)"
    read -r rps p50 p99 reqs non2xx sock < <(parse_wrk "$out")
    calls=$((c1 - c0))
    per="$(awk -v c="$calls" -v n="$reqs" 'BEGIN { if (n > 0) printf "%.2g", c / n; else print "n/a" }')"
    per_call="$(awk -v c="$calls" -v n="$reqs" 'BEGIN { if (c > 0) printf "%.0f", n / c; else print "-" }')"
    s200="$(awk '$1 == "status" && $2 == 200 { print $3 }' "$out")"
    s429="$(awk '$1 == "status" && $2 == 429 { print $3 }' "$out")"
    s503="$(awk '$1 == "status" && $2 == 503 { print $3 }' "$out")"
    sother="$(awk '$1 == "status" && $2 != 200 && $2 != 429 && $2 != 503 { s += $3 } END { print s + 0 }' "$out")"
    say "flood: $reqs requests, $rps req/s, Redis script calls $calls ($per per request)"
    echo
    echo "### tollgate: Redis round trips under a one-key flood ($(date -u '+%Y-%m-%d %H:%M UTC'))"
    echo
    echo "- command: \`PART=flood DURATION=$DURATION CONNECTIONS=$CONNECTIONS THREADS=$THREADS PIN=$PIN benches/redis_vs_local.sh\`"
    echo "- load: \`wrk --latency -t$THREADS -c$CONNECTIONS -d${DURATION}s\` (Lua script counting statuses), every request from 127.0.0.1"
    echo "- machine: $(nproc --all 2>/dev/null || echo '?') CPU(s)${cpu_model:+, $cpu_model}; $PIN_NOTE"
    echo "- CPUs busy before the load (1 s, $CPU_NAMES): $(idle_note)"
    echo "- tollgate: $git_rev, \`workers = 1\`, access log off; \`[zones.f] key = \"\$binary_remote_addr\" rate = \"1r/m\" backend = \"redis\"\`"
    echo "  + \`limit = [{ zone = \"f\", nodelay = true }]\`, \`[redis] timeout = \"50ms\" on_error = \"deny\"\`;"
    echo "  the readiness probe took the key's one request of the minute just before the flood (so 200 = 0 expected)"
    echo "- redis-server $REDIS_VERSION; Redis script calls: EVALSHA + EVAL calls in \`INFO commandstats\` (redis-cli) before and after"
    echo
    echo "| requests sent | req/s | p50 us | p99 us | 200 | 429 | 503 | other | socket errors | Redis script calls | calls per request | requests per call |"
    echo "|--------------:|------:|-------:|-------:|----:|----:|----:|------:|--------------:|-------------------:|------------------:|------------------:|"
    printf '| %s | %.0f | %.0f | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$reqs" "$rps" "$p50" "$p99" \
        "${s200:-0}" "${s429:-0}" "${s503:-0}" "$sother" "$sock" "$calls" "$per" "$per_call"
    echo
    echo "Expected: calls per request near zero. The flood's first requests (up to one per connection, sent"
    echo "before Redis's first rejection comes back) each cost a call; after that tollgate rejects the key by"
    echo "itself until it may pass again, a minute after its admitted request. 503 = 0 (no Redis failure);"
    echo "200 = 0 (the minute's one request was taken just before)."
    if [ "${s503:-0}" -gt 0 ] || [ "$sock" -gt 0 ] || [ "$reqs" -le 0 ]; then
        echo
        echo "WARNING: 503s (Redis failures), socket errors or no requests: the flood did not measure what it should."
    fi
    stop_gateways
}

# ---------------------------------------------------------------------------------------------------
# Run

start_redis
wants_part decide && run_decide
wants_part flood && run_flood
exit 0
