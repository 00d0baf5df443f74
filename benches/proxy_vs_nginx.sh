#!/usr/bin/env bash
# proxy_vs_nginx.sh — load comparison of tollgate against nginx as reverse proxies (DESIGN.md §10).
#
# What it does:
#   1. installs nginx (nginx-light) and wrk from Debian when they are missing (apt-get; needs root);
#   2. builds `target/release/tollgate` and the `bench_upstream` example (cargo build --release);
#   3. starts one bench_upstream (a one-thread hyper server answering "hello\n") on a free loopback
#      port, then nginx and tollgate as reverse proxies to it, each on its own loopback port, with
#      configs written to a temp dir: upstream keepalive 64, no access log, no caching, nginx's
#      buffering defaults, the same forwarding headers (Host, X-Real-IP, X-Forwarded-For/-Proto/-Host);
#   4. checks that each proxy answers 200 "hello" through the upstream, warms each up (2 s), then runs
#      wrk interleaved, nginx tollgate nginx tollgate …, RUNS times each;
#   5. prints every run (req/s, p50, p99, CPU time per request of proxy and upstream, errors), the
#      medians, the ratios tollgate/nginx, and each proxy's peak RSS (VmHWM; nginx: master + workers),
#      as a Markdown block ready to paste into a note;
#   6. stops every process it started on exit, on failure and on Ctrl-C.
# All traffic goes to 127.0.0.1 only. It is a benchmark, not a test: CI does not run it.
#
# Run (from anywhere; takes about 2 × RUNS × DURATION seconds plus build time):
#   benches/proxy_vs_nginx.sh
#   RUNS=3 DURATION=5 benches/proxy_vs_nginx.sh
#   ONLY=nginx benches/proxy_vs_nginx.sh          # only one side: ONLY=nginx or ONLY=tollgate
#
# Environment (defaults in brackets):
#   RUNS [5]            measured runs per proxy, interleaved
#   DURATION [8]        seconds per measured run (a bare number of seconds)
#   WARMUP [2]          seconds of warm-up per proxy before the measured runs (0: none)
#   CONNECTIONS [64]    wrk -c
#   THREADS [1]         wrk -t
#   PIN [1]             1: with taskset and at least 2 CPUs, run wrk on WRK_CPUS and the proxies and
#                       the upstream on SERVER_CPUS (DESIGN §10's setup on a 2-core machine); 0: no pinning
#   WRK_CPUS [0]        taskset CPU list for wrk
#   SERVER_CPUS [1]     taskset CPU list for the upstream, nginx and tollgate
#   NGINX_WORKERS [auto] nginx worker_processes
#   ONLY []             "nginx" or "tollgate": measure one side only (no ratios)
#   BUILD [1]           0: do not run cargo; use the binaries already built
#   TOLLGATE_BIN, UPSTREAM_BIN   use these binaries instead of target/release/{tollgate,examples/bench_upstream}
#   STARTUP_TIMEOUT [30] seconds to wait for each server to answer
#   KEEP [0]            1: keep the temp dir (configs, logs, raw wrk output) and print its path
#                       (it is also kept, and its path printed, when the script fails)
#
# nginx runs with its defaults except what a proxy benchmark needs (worker_connections raised so that
# CONNECTIONS fit); note its defaults keepalive_requests 1000 (client and upstream side) stay as shipped.

set -euo pipefail

# ---------------------------------------------------------------------------------------------------
# Settings

RUNS="${RUNS:-5}"
DURATION="${DURATION:-8}"
WARMUP="${WARMUP:-2}"
CONNECTIONS="${CONNECTIONS:-64}"
THREADS="${THREADS:-1}"
PIN="${PIN:-1}"
WRK_CPUS="${WRK_CPUS:-0}"
SERVER_CPUS="${SERVER_CPUS:-1}"
NGINX_WORKERS="${NGINX_WORKERS:-auto}"
ONLY="${ONLY:-}"
BUILD="${BUILD:-1}"
STARTUP_TIMEOUT="${STARTUP_TIMEOUT:-30}"
KEEP="${KEEP:-0}"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$ROOT/$TARGET_DIR" ;; esac
TOLLGATE_BIN="${TOLLGATE_BIN:-$TARGET_DIR/release/tollgate}"
UPSTREAM_BIN="${UPSTREAM_BIN:-$TARGET_DIR/release/examples/bench_upstream}"

die() {
    echo "proxy_vs_nginx: error: $*" >&2
    exit 1
}
say() { echo "proxy_vs_nginx: $*" >&2; }

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
is_pos() { [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ]; }
is_pos "$RUNS" || die "RUNS must be a positive integer, not '$RUNS'"
is_pos "$DURATION" || die "DURATION must be whole seconds >= 1, not '$DURATION'"
is_uint "$WARMUP" || die "WARMUP must be whole seconds, not '$WARMUP'"
is_pos "$CONNECTIONS" || die "CONNECTIONS must be a positive integer, not '$CONNECTIONS'"
is_pos "$THREADS" || die "THREADS must be a positive integer, not '$THREADS'"
[ "$CONNECTIONS" -ge "$THREADS" ] || die "CONNECTIONS ($CONNECTIONS) must be >= THREADS ($THREADS)"
is_uint "$STARTUP_TIMEOUT" || die "STARTUP_TIMEOUT must be whole seconds"

case "$ONLY" in
    "") PROXIES=(nginx tollgate) ;;
    nginx) PROXIES=(nginx) ;;
    tollgate) PROXIES=(tollgate) ;;
    *) die "ONLY must be empty, 'nginx' or 'tollgate', not '$ONLY'" ;;
esac
wants() {
    local p
    for p in "${PROXIES[@]}"; do [ "$p" = "$1" ] && return 0; done
    return 1
}

# ---------------------------------------------------------------------------------------------------
# Cleanup: every process we start is recorded here and stopped on exit, whatever the reason.

WORKDIR=""
UPSTREAM_PID=""
NGINX_PID=""
TOLLGATE_PID=""
WRK_PID=""
NGINX_WORKER_PIDS=()

stop_pid() { # stop_pid PID NAME: TERM, wait up to 5 s, then KILL
    local pid="$1" name="$2" i
    [ -n "$pid" ] || return 0
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        say "$name (pid $pid) ignored SIGTERM for 5 s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local status=$? pid
    trap - EXIT INT TERM
    set +e
    stop_pid "$WRK_PID" wrk
    stop_pid "$TOLLGATE_PID" tollgate
    stop_pid "$NGINX_PID" nginx
    # Workers exit with their master; make sure none outlives it (checking the pid is still a worker).
    for pid in "${NGINX_WORKER_PIDS[@]}"; do
        if grep -qs 'nginx: worker' "/proc/$pid/cmdline" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null
        fi
    done
    stop_pid "$UPSTREAM_PID" bench_upstream
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
    if wants nginx && ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
        missing+=(nginx)
    fi
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    [ "${#missing[@]}" -eq 0 ] && return 0
    say "installing ${missing[*]} from Debian"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "${missing[*]} missing and not root (no sudo)"
        sudo=(sudo)
    fi
    command -v apt-get >/dev/null 2>&1 || die "${missing[*]} missing and no apt-get: install them by hand"
    local pkgs=() p
    for p in "${missing[@]}"; do
        case "$p" in nginx) pkgs+=(nginx-light) ;; *) pkgs+=("$p") ;; esac
    done
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    if ! "${sudo[@]}" apt-get install -y -qq "${pkgs[@]}"; then
        # Debian releases without nginx-light ship the plain package.
        pkgs=("${pkgs[@]/nginx-light/nginx}")
        "${sudo[@]}" apt-get install -y -qq "${pkgs[@]}"
    fi
}

install_tools
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
WRK="$(command -v wrk)"

# Pinning (DESIGN §10): wrk on one core, the proxy and the upstream on the other.
WRK_CMD=("$WRK")
SERVER_PREFIX=()
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
        PIN_NOTE="wrk pinned to CPU $WRK_CPUS; upstream and proxies pinned to CPU $SERVER_CPUS (taskset)"
    fi
fi
say "$PIN_NOTE"

ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# ---------------------------------------------------------------------------------------------------
# Build

if [ "$BUILD" = 1 ]; then
    cd "$ROOT"
    if wants tollgate; then
        say "cargo build --release --bin tollgate --example bench_upstream"
        cargo build --release --bin tollgate --example bench_upstream
    else
        say "cargo build --release --example bench_upstream"
        cargo build --release --example bench_upstream
    fi
fi
[ -x "$UPSTREAM_BIN" ] || die "no upstream binary at $UPSTREAM_BIN"
if wants tollgate; then
    [ -x "$TOLLGATE_BIN" ] || die "no tollgate binary at $TOLLGATE_BIN"
fi

# ---------------------------------------------------------------------------------------------------
# Helpers

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/proxy_vs_nginx.XXXXXX")"
chmod 755 "$WORKDIR" # nginx workers run as an unprivileged user and create temp dirs here

USED_PORTS=" "
port_busy() {
    local port="$1"
    case "$USED_PORTS" in *" $port "*) return 0 ;; esac
    if command -v ss >/dev/null 2>&1; then
        ss -Htan 2>/dev/null | awk '{print $4}' | grep -Eq "[:.]$port\$"
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
    fi
}
# Listening ports are drawn below the kernel's ephemeral range, so that no client socket of wrk or of
# a proxy can take one between our check and the server's bind.
PORT_LO=10000
PORT_HI=32767
if read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && [ "$eph_lo" -gt 11024 ]; then
    PORT_HI=$((eph_lo - 1))
fi
free_port() { # prints an unused loopback TCP port
    local port i
    for ((i = 0; i < 200; i++)); do
        port=$((PORT_LO + RANDOM % (PORT_HI - PORT_LO + 1)))
        if ! port_busy "$port"; then
            USED_PORTS+="$port "
            echo "$port"
            return 0
        fi
    done
    die "no free port found"
}

# wait_ready NAME PORT PID LOG...: until http://127.0.0.1:PORT/ answers 200 "hello", or fail
# (showing the end of each LOG).
show_logs() {
    local log
    for log in "$@"; do
        [ -s "$log" ] || continue
        say "last lines of $log:"
        tail -n 20 "$log" >&2 || true
    done
}
wait_ready() {
    local name="$1" port="$2" pid="$3" deadline code body
    shift 3
    deadline=$((SECONDS + STARTUP_TIMEOUT))
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            say "$name exited during start-up"
            show_logs "$@"
            die "$name did not start"
        fi
        rm -f "$WORKDIR/probe.body"
        code="$(curl -s -o "$WORKDIR/probe.body" -w '%{http_code}' --max-time 1 \
            "http://127.0.0.1:$port/" 2>/dev/null || true)"
        body="$(cat "$WORKDIR/probe.body" 2>/dev/null || true)"
        if [ "$code" = 200 ] && [ "$body" = hello ]; then
            return 0
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            say "$name on 127.0.0.1:$port: last answer was status '${code:-none}' body '${body:0:200}'"
            show_logs "$@"
            die "$name did not answer 200 \"hello\" within ${STARTUP_TIMEOUT}s"
        fi
        sleep 0.2
    done
}

# CPU time (clock ticks, user + system) used so far by the given processes.
CLK_TCK="$(getconf CLK_TCK 2>/dev/null || echo 100)"
cpu_ticks() {
    local pid total=0 stat rest
    local -a f
    for pid in "$@"; do
        stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
        rest="${stat##*) }" # drop "pid (comm) ", comm may hold spaces
        read -r -a f <<<"$rest"
        total=$((total + f[11] + f[12]))
    done
    echo "$total"
}
# Per-CPU jiffies: prints "cpuN total idle" lines from /proc/stat (idle includes iowait).
cpu_snapshot() { awk '/^cpu[0-9]+ / { t = 0; for (i = 2; i <= NF; i++) t += $i; print $1, t, $5 + $6 }' /proc/stat; }
# busy_pct FILE_BEFORE FILE_AFTER: prints "a/b/..." busy percent of each CPU between the snapshots.
busy_pct() {
    awk 'NR == FNR { t[$1] = $2; i[$1] = $3; next }
         { dt = $2 - t[$1]; di = $3 - i[$1]
           s = s (s == "" ? "" : "/") (dt > 0 ? sprintf("%.0f", 100 * (1 - di / dt)) : "?") }
         END { print s }' "$1" "$2"
}
# Peak resident set size (VmHWM, kB) of one process.
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

nginx_pids() {
    local w
    echo "$NGINX_PID"
    for w in $(pgrep -P "$NGINX_PID" 2>/dev/null || true); do echo "$w"; done
}
proxy_pids() { # proxy_pids NAME
    case "$1" in
        nginx) nginx_pids ;;
        tollgate) echo "$TOLLGATE_PID" ;;
    esac
}
proxy_port() {
    case "$1" in
        nginx) echo "$NGINX_PORT" ;;
        tollgate) echo "$TOLLGATE_PORT" ;;
    esac
}

# ---------------------------------------------------------------------------------------------------
# Start the upstream and the proxies

UPSTREAM_PORT="$(free_port)"
say "starting bench_upstream on 127.0.0.1:$UPSTREAM_PORT"
"${SERVER_PREFIX[@]}" "$UPSTREAM_BIN" "127.0.0.1:$UPSTREAM_PORT" >"$WORKDIR/upstream.log" 2>&1 &
UPSTREAM_PID=$!
wait_ready bench_upstream "$UPSTREAM_PORT" "$UPSTREAM_PID" "$WORKDIR/upstream.log"

if wants nginx; then
    NGINX_PORT="$(free_port)"
    NGINX_CONF="$WORKDIR/nginx.conf"
    nginx_v="$("$NGINX" -V 2>&1)"
    extra_temp=""
    for m in fastcgi uwsgi scgi; do
        case "$nginx_v" in *"--without-http_${m}_module"*) ;;
            *) extra_temp+="    ${m}_temp_path $WORKDIR/${m}_temp;"$'\n' ;;
        esac
    done
    cat >"$NGINX_CONF" <<EOF
# written by benches/proxy_vs_nginx.sh
worker_processes $NGINX_WORKERS;
pid $WORKDIR/nginx.pid;
error_log $WORKDIR/nginx-error.log warn;

events {
    worker_connections $((CONNECTIONS * 2 + 1024));
}

http {
    access_log off;
    client_body_temp_path $WORKDIR/client_body_temp;
    proxy_temp_path $WORKDIR/proxy_temp;
$extra_temp
    upstream app {
        server 127.0.0.1:$UPSTREAM_PORT;
        keepalive 64;
    }

    server {
        listen 127.0.0.1:$NGINX_PORT;

        location / {
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host \$http_host;
            proxy_set_header X-Real-IP \$remote_addr;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto \$scheme;
            proxy_set_header X-Forwarded-Host \$host;
        }
    }
}
EOF
    "$NGINX" -t -q -c "$NGINX_CONF" -p "$WORKDIR" >"$WORKDIR/nginx-t.log" 2>&1 ||
        { cat "$WORKDIR/nginx-t.log" >&2; die "nginx rejected $NGINX_CONF"; }
    say "starting nginx on 127.0.0.1:$NGINX_PORT ($NGINX_CONF)"
    "${SERVER_PREFIX[@]}" "$NGINX" -c "$NGINX_CONF" -p "$WORKDIR" -g 'daemon off;' \
        >"$WORKDIR/nginx.log" 2>&1 &
    NGINX_PID=$!
    wait_ready nginx "$NGINX_PORT" "$NGINX_PID" "$WORKDIR/nginx.log" "$WORKDIR/nginx-error.log"
    mapfile -t NGINX_WORKER_PIDS < <(pgrep -P "$NGINX_PID" || true)
    say "nginx master $NGINX_PID, ${#NGINX_WORKER_PIDS[@]} worker(s): ${NGINX_WORKER_PIDS[*]}"
fi

if wants tollgate; then
    TOLLGATE_PORT="$(free_port)"
    TOLLGATE_CONF="$WORKDIR/gateway.toml"
    cat >"$TOLLGATE_CONF" <<EOF
# written by benches/proxy_vs_nginx.sh
[server]
listen = ["127.0.0.1:$TOLLGATE_PORT"]

[log]
access = "off"

[upstreams.app]
servers = ["127.0.0.1:$UPSTREAM_PORT"]
keepalive = 64

[[location]]
match = "/"
upstream = "app"
EOF
    say "starting tollgate on 127.0.0.1:$TOLLGATE_PORT ($TOLLGATE_CONF)"
    "${SERVER_PREFIX[@]}" "$TOLLGATE_BIN" -c "$TOLLGATE_CONF" >"$WORKDIR/tollgate.log" 2>&1 &
    TOLLGATE_PID=$!
    wait_ready tollgate "$TOLLGATE_PORT" "$TOLLGATE_PID" "$WORKDIR/tollgate.log"
    say "tollgate pid $TOLLGATE_PID"
fi

# ---------------------------------------------------------------------------------------------------
# Measure

# run_wrk PROXY SECONDS OUTFILE: wrk in the background so that a signal reaches our trap at once.
run_wrk() {
    local proxy="$1" secs="$2" out="$3" port rc=0
    port="$(proxy_port "$proxy")"
    timeout --kill-after=5 $((secs + 30)) "${WRK_CMD[@]}" --latency -t"$THREADS" -c"$CONNECTIONS" \
        -d"${secs}s" "http://127.0.0.1:$port/" >"$out" 2>&1 &
    WRK_PID=$!
    wait "$WRK_PID" || rc=$?
    WRK_PID=""
    if [ "$rc" -ne 0 ]; then
        cat "$out" >&2
        die "wrk against $proxy exited with status $rc"
    fi
}

# parse_wrk FILE: prints "rps p50_us p99_us requests errors" (latencies in microseconds).
parse_wrk() {
    awk '
        function us(v,   n, u) {
            n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
            if (u == "us") return n
            if (u == "ms") return n * 1000
            if (u == "s")  return n * 1000000
            if (u == "m")  return n * 60000000
            if (u == "h")  return n * 3600000000
            return -1
        }
        /^Requests\/sec:/               { rps = $2 }
        /requests in/                   { reqs = $1 }
        /Latency Distribution/          { dist = 1; next }
        dist && $1 == "50%"             { p50 = us($2) }
        dist && $1 == "99%"             { p99 = us($2) }
        /Non-2xx or 3xx responses:/     { errs += $NF }
        /Socket errors:/                { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) errs += $i + 0 }
        END {
            if (rps == "") rps = 0
            if (reqs == "") reqs = 0
            if (p50 == "") p50 = -1
            if (p99 == "") p99 = -1
            printf "%s %s %s %s %d\n", rps, p50, p99, reqs, errs
        }
    ' "$1"
}

# run proxy rps p50 p99 proxy_cpu_us_per_req upstream_cpu_us_per_req errors busy%_per_cpu
RESULTS="$WORKDIR/results.tsv"
: >"$RESULTS"

if [ "$WARMUP" -gt 0 ]; then
    for p in "${PROXIES[@]}"; do
        say "warm-up: $p ${WARMUP}s"
        run_wrk "$p" "$WARMUP" "$WORKDIR/warmup-$p.txt"
    done
fi

# Is anything else using the CPUs? (Other builds on the machine make every figure noisy.)
cpu_snapshot >"$WORKDIR/idle0"
sleep 1
cpu_snapshot >"$WORKDIR/idle1"
IDLE_BUSY="$(busy_pct "$WORKDIR/idle0" "$WORKDIR/idle1")"
IDLE_MAX="$(tr '/' '\n' <<<"$IDLE_BUSY" | sort -n | tail -n 1)"
if [ "${IDLE_MAX//\?/0}" -gt 10 ]; then
    say "warning: CPUs already busy ($IDLE_BUSY %) before any load: other work on this machine will add noise"
fi

total_secs=$((RUNS * ${#PROXIES[@]} * DURATION))
say "measuring: $RUNS run(s) of ${DURATION}s per proxy, interleaved (about ${total_secs}s)"
for ((run = 1; run <= RUNS; run++)); do
    for p in "${PROXIES[@]}"; do
        out="$WORKDIR/run-$run-$p.txt"
        mapfile -t pids < <(proxy_pids "$p")
        cpu0="$(cpu_ticks "${pids[@]}")"
        up0="$(cpu_ticks "$UPSTREAM_PID")"
        cpu_snapshot >"$WORKDIR/stat0"
        run_wrk "$p" "$DURATION" "$out"
        cpu_snapshot >"$WORKDIR/stat1"
        cpu1="$(cpu_ticks "${pids[@]}")"
        up1="$(cpu_ticks "$UPSTREAM_PID")"
        busy="$(busy_pct "$WORKDIR/stat0" "$WORKDIR/stat1")"
        read -r rps p50 p99 reqs errs < <(parse_wrk "$out")
        read -r pcpu ucpu < <(awk -v a="$((cpu1 - cpu0))" -v b="$((up1 - up0))" -v n="$reqs" \
            -v hz="$CLK_TCK" 'BEGIN {
                if (n > 0) printf "%.1f %.1f\n", a * 1e6 / hz / n, b * 1e6 / hz / n
                else print "-1 -1" }')
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$p" "$rps" "$p50" "$p99" "$pcpu" "$ucpu" \
            "$errs" "$busy" >>"$RESULTS"
        say "run $run $p: $rps req/s, p50 ${p50}us, p99 ${p99}us, errors $errs, CPUs busy $busy %"
    done
done

# Peak RSS, read while the processes are still alive.
declare -A RSS_KB RSS_NOTE
if wants nginx; then
    sum=0
    parts=()
    while read -r pid; do
        [ -n "$pid" ] || continue
        kb="$(hwm_kb "$pid")"
        sum=$((sum + kb))
        parts+=("$kb")
    done < <(nginx_pids)
    RSS_KB[nginx]="$sum"
    RSS_NOTE[nginx]="master + $((${#parts[@]} - 1)) worker(s), kB each: ${parts[*]}"
fi
if wants tollgate; then
    RSS_KB[tollgate]="$(hwm_kb "$TOLLGATE_PID")"
    TOLLGATE_THREADS="$(awk '/^Threads:/ {print $2}' "/proc/$TOLLGATE_PID/status" 2>/dev/null || echo '?')"
    RSS_NOTE[tollgate]="one process, $TOLLGATE_THREADS thread(s)"
fi
UPSTREAM_RSS_KB="$(hwm_kb "$UPSTREAM_PID")"

# ---------------------------------------------------------------------------------------------------
# Report

median_of() { # median_of PROXY COLUMN (3 = rps, 4 = p50, 5 = p99, 6 = proxy cpu, 7 = upstream cpu)
    awk -F'\t' -v p="$1" -v c="$2" '$2 == p { print $c }' "$RESULTS" | sort -g | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) { print "nan"; exit }
            if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2
        }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }

nginx_version="$("$NGINX" -v 2>&1 | sed 's/^nginx version: //')"
git_rev="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "no commit")"
if [ -n "$(git -C "$ROOT" status --porcelain 2>/dev/null | head -n 1)" ]; then git_rev+=" (dirty tree)"; fi
cpu_model="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)"
nginx_workers="${#NGINX_WORKER_PIDS[@]}"
cpu_names="$(awk '{ s = s (s == "" ? "" : "/") $1 } END { print s }' "$WORKDIR/stat1")"
any_errors="$(awk -F'\t' '$8 > 0 || $3 <= 0 { n++ } END { print n + 0 }' "$RESULTS")"
cmd="RUNS=$RUNS DURATION=$DURATION CONNECTIONS=$CONNECTIONS THREADS=$THREADS PIN=$PIN"
[ -n "$ONLY" ] && cmd+=" ONLY=$ONLY"
cmd+=" benches/proxy_vs_nginx.sh"

{
    echo
    echo "### tollgate vs nginx: reverse proxy to one keep-alive upstream ($(date -u '+%Y-%m-%d %H:%M UTC'))"
    echo
    echo "- command: \`$cmd\`"
    echo "- load: \`wrk --latency -t$THREADS -c$CONNECTIONS -d${DURATION}s\`, $RUNS run(s) per proxy interleaved (${PROXIES[*]}), ${WARMUP}s warm-up each"
    echo "- machine: $(nproc --all 2>/dev/null || echo '?') CPU(s)${cpu_model:+, $cpu_model}; $PIN_NOTE"
    echo "- CPUs busy before the load (1 s, $cpu_names): $IDLE_BUSY %$([ "${IDLE_MAX//\?/0}" -gt 10 ] && echo ' -- NOT idle: other work on the machine, figures are noisy')"
    echo "- upstream: bench_upstream (hyper 1, one thread), 200 \"hello\\n\"; peak RSS $(mib "$UPSTREAM_RSS_KB")"
    if wants nginx; then
        echo "- nginx: $nginx_version, worker_processes $NGINX_WORKERS ($nginx_workers worker(s)), upstream keepalive 64, access_log off"
    fi
    if wants tollgate; then
        echo "- tollgate: $git_rev, $TOLLGATE_THREADS thread(s), upstream keepalive 64, access log off"
    fi
    echo "- CPU us/req: CPU time (user+sys, /proc, ${CLK_TCK} Hz ticks) of the process(es) during the run / requests;"
    echo "  busy %: each CPU's non-idle share during the run ($cpu_names), from /proc/stat"
    echo
    echo "| run | proxy | req/s | p50 us | p99 us | proxy CPU us/req | upstream CPU us/req | errors | busy % |"
    echo "|----:|:------|------:|-------:|-------:|-----------------:|--------------------:|-------:|-------:|"
    awk -F'\t' '{ printf "| %s | %s | %.0f | %.0f | %.0f | %s | %s | %s%s | %s |\n",
                  $1, $2, $3, $4, $5, $6, $7, $8, ($8 > 0 ? " !" : ""), $9 }' "$RESULTS"
    for p in "${PROXIES[@]}"; do
        printf '| median | %s | %.0f | %.0f | %.0f | %s | %s | | |\n' "$p" "$(median_of "$p" 3)" \
            "$(median_of "$p" 4)" "$(median_of "$p" 5)" "$(median_of "$p" 6)" "$(median_of "$p" 7)"
    done
    echo
    if wants nginx && wants tollgate; then
        echo "tollgate/nginx (medians):"
        echo "- req/s: $(ratio "$(median_of tollgate 3)" "$(median_of nginx 3)")x  (higher is better)"
        echo "- p99:   $(ratio "$(median_of tollgate 5)" "$(median_of nginx 5)")x  (lower is better)"
        echo "- p50:   $(ratio "$(median_of tollgate 4)" "$(median_of nginx 4)")x  (lower is better)"
        echo "- proxy CPU per request: $(ratio "$(median_of tollgate 6)" "$(median_of nginx 6)")x  (lower is better)"
        echo "- peak RSS: $(ratio "${RSS_KB[tollgate]}" "${RSS_KB[nginx]}")x  (lower is better)"
        echo
    fi
    echo "peak RSS (VmHWM):"
    for p in "${PROXIES[@]}"; do
        echo "- $p: $(mib "${RSS_KB[$p]}") (${RSS_KB[$p]} kB; ${RSS_NOTE[$p]})"
    done
    for p in "${PROXIES[@]}"; do
        if awk -v u="$(median_of "$p" 7)" 'BEGIN { exit !(u < 1) }'; then
            echo
            echo "WARNING: the upstream used under 1 us of CPU per request through $p: is $p forwarding at all?"
        fi
    done
    if [ "$any_errors" -gt 0 ]; then
        echo
        echo "WARNING: $any_errors run(s) had non-2xx responses, socket errors or no requests (marked !);"
        echo "their numbers do not compare a working proxy."
    fi
}
