#!/usr/bin/env bash
# proxy_vs_nginx.sh — load comparison of tollgate against nginx as reverse proxies,
# plain and with rate limiting on.
#
# Scenarios (SCENARIO=proxy|limit_pass|limit_reject|proxy_auto|proxy_adaptive|https|https_handshake|gzip_json|all;
# default proxy, the figure docs/benchmarks.md quotes):
#   proxy         plain reverse proxy, no limiting;
#   limit_pass    limiter on, keyed by the X-API-Key header, everything allowed: wrk (a Lua script)
#                 sends one of API_KEYS distinct keys per request, round robin. nginx:
#                 `limit_req_zone $http_x_api_key zone=k:10m rate=1000000r/s;`
#                 `limit_req zone=k burst=1000000 nodelay;` — tollgate: `[zones.k] key = "$http_x_api_key"`
#                 `rate = "1000000r/s"`, `limit = [{ zone = "k", burst = 1000000, nodelay = true }]`
#                 (the most either accepts); both then proxy to the upstream;
#   limit_reject  one key rejected: every request comes from 127.0.0.1, keyed by `$binary_remote_addr`
#                 at `1r/s` nodelay, so all but about one request a second are answered 429 by the
#                 proxy itself (nginx: `limit_req_status 429`). wrk counts them as "Non-2xx"; req/s
#                 counts every response. nginx's error-log line per rejection is not written
#                 (`limit_req_log_level info` below the log's `warn`): tollgate writes nothing for a
#                 rejection with its access log off, so both do the same work;
#   proxy_auto    the proxy scenario with tollgate's upstream gate on (`max_in_flight = 1000`, more
#                 than CONNECTIONS, so nothing waits): the cost of the gate's shared count, one CAS
#                 when a request starts and one when it ends. nginx is the plain proxy, as in `proxy`;
#                 compare this scenario's tollgate/nginx ratio with `proxy`'s;
#   proxy_adaptive the proxy scenario with `max_in_flight = "auto"`: the gradient controller finds the
#                 limit from the upstream's latency and requests over it wait at tollgate's gate (the
#                 tiny upstream answers in microseconds, so the limit settles low and the queue is
#                 used): what "auto" costs against an upstream that needs no protection;
#   https         the proxy scenario over TLS with keep-alive: both proxies terminate TLS 1.3 with the
#                 same self-signed ECDSA P-256 certificate (made with openssl in the temp dir); nginx
#                 with `ssl_protocols TLSv1.2 TLSv1.3` (1.22 offers 1.2 alone by default) and its
#                 other TLS defaults (session tickets, no session cache), tollgate `listen_tls` with
#                 `[[tls.certificates]]` (tickets and a session cache). wrk resumes its sessions, as
#                 browsers do. The upstream is plain HTTP, as before;
#   https_handshake  the https scenario with a new connection, and so a handshake, per request (wrk
#                 sends `Connection: close`, and resumes the session each time: TLS 1.3 resumption
#                 with a fresh key exchange, `psk_dhe_ke`): proxy CPU per request is then mostly
#                 the handshake's;
#   gzip_json     compression on the fly: wrk asks `/json` with `Accept-Encoding: gzip`, which
#                 bench_upstream answers with 100,000 bytes of application/json, and each proxy
#                 gzips it: nginx `gzip on; gzip_types application/json; gzip_comp_level 1;`,
#                 tollgate `compress = { encodings = ["gzip"], types = ["application/json"] }`
#                 (zlib-rs level 2, which makes what zlib level 1 makes). Proxy CPU per request is then mostly gzip's; divided by 100
#                 it is ns per input byte;
#   file_1k, file_100k, file_10m  static files: wrk asks `/files/1k.bin` (1,024 bytes), `100k.bin`
#                 (102,400) or `10m.bin` (10,485,760) with keep-alive, served from the same
#                 directory by nginx (`root`, `sendfile on; tcp_nopush on;`) and tollgate (`root`,
#                 `[server] sendfile = true`, its default). Bytes per second = req/s x the size;
#   file_10m_copy file_10m with tollgate's `sendfile = false` (nginx as in file_10m): what
#                 sendfile gives;
#   basic_auth    a login on every request: wrk asks `/auth/` with `Authorization: Basic` for a user
#                 whose htpasswd line `htpasswd -B` (bcrypt, cost 5, Debian's default) wrote; nginx
#                 `auth_basic` + `auth_basic_user_file`, tollgate `auth = { basic = { … } }` on a
#                 location `/auth/`, both then proxy. nginx checks the hash on every request,
#                 tollgate once per login (it remembers logins that passed);
#   jwt           a bearer token on every request: wrk asks `/jwt/` with `Authorization: Bearer`, an
#                 ES256 token (openssl P-256 key, kid, exp a day ahead); tollgate `auth = { jwt = {
#                 jwks = … } }` then proxies; nginx (no JWT check in its open-source build) proxies
#                 `/jwt/` as it is: the ratio is what checking the token adds over nginx's proxying;
#   forward_auth  every request asks an auth service first: wrk asks `/fwd/`; nginx `auth_request
#                 /_check` (a location proxying to the bench upstream's `/check`, body off, kept
#                 alive), tollgate `auth = { request = { url = "http://UPSTREAM/check" } }`; the
#                 upstream answers both questions and the requests. Each request is two upstream
#                 exchanges for either proxy;
#   all           every one in turn, each with freshly started proxies.
# tollgate sends its default rate-limit headers (`ratelimit_headers = "draft"`: RateLimit-Policy and
# RateLimit on every limited response); nginx sends none. TOLLGATE_RATELIMIT_HEADERS=none compares
# the limiting alone.
#
# What it does:
#   1. installs nginx (nginx-light) and wrk from Debian when they are missing (apt-get; needs root);
#   2. builds `target/release/tollgate` and the `bench_upstream` example (cargo build --release);
#   3. starts one bench_upstream (a one-thread hyper server answering "hello\n") on a free loopback
#      port; then, for each scenario, nginx and tollgate as reverse proxies to it, each on its own
#      loopback port, with configs written to a temp dir: upstream keepalive 64, no access log, no
#      caching, nginx's buffering defaults, the same forwarding headers (Host, X-Real-IP,
#      X-Forwarded-For/-Proto/-Host), and the scenario's limit;
#   4. checks that each proxy answers 200 "hello" through the upstream (and, limiting, that it
#      limits as the scenario says), warms each up (2 s), then runs wrk interleaved,
#      nginx tollgate nginx tollgate …, RUNS times each;
#   5. prints every run (req/s, p50, p99, CPU time per request of proxy and upstream, non-2xx
#      answers, socket errors), the medians, the ratios tollgate/nginx, and each proxy's peak RSS
#      (VmHWM; nginx: master + workers), as a Markdown block per scenario ready to paste into a note;
#   6. stops the proxies after each scenario, and every process it started on exit, on failure and
#      on Ctrl-C.
# All traffic goes to 127.0.0.1 only. It is a benchmark, not a test: CI does not run it.
#
# Run (from anywhere; takes about 2 × RUNS × DURATION seconds plus build time):
#   benches/proxy_vs_nginx.sh
#   RUNS=3 DURATION=5 benches/proxy_vs_nginx.sh
#   SCENARIO=all RUNS=3 DURATION=5 benches/proxy_vs_nginx.sh
#   ONLY=nginx benches/proxy_vs_nginx.sh          # only one side: ONLY=nginx or ONLY=tollgate
#   BASELINE=e0efbbf RUNS=9 benches/proxy_vs_nginx.sh   # also tollgate at that revision (below)
#   BASELINE=. TOLLGATE_TOML='[trace]
#   otlp = "http://@UPSTREAM@/v1/traces"
#   sample = 0.01' benches/proxy_vs_nginx.sh         # what tracing costs: the same binary without it
#
# Environment (defaults in brackets):
#   SCENARIO [proxy]    proxy, limit_pass, limit_reject, proxy_auto, proxy_adaptive, https,
#                       https_handshake, gzip_json or all (above)
#   API_KEYS [10000]    distinct X-API-Key values wrk sends in limit_pass
#   TOLLGATE_RATELIMIT_HEADERS [draft]   tollgate's `ratelimit_headers` in the limit scenarios
#   RUNS [5]            measured runs per proxy, interleaved
#   DURATION [8]        seconds per measured run (a bare number of seconds)
#   WARMUP [2]          seconds of warm-up per proxy before the measured runs (0: none)
#   CONNECTIONS [64]    wrk -c
#   THREADS [1]         wrk -t
#   PIN [1]             1: with taskset and at least 2 CPUs, run wrk on WRK_CPUS and the proxies and
#                       the upstream on SERVER_CPUS (the setup for a 2-core machine); 0: no pinning
#   WRK_CPUS [0]        taskset CPU list for wrk
#   SERVER_CPUS [1]     taskset CPU list for the upstream, nginx and tollgate
#   NGINX_WORKERS [auto] nginx worker_processes
#   ONLY []             "nginx" or "tollgate": measure one side only (no ratios)
#   BUILD [1]           0: do not run cargo; use the binaries already built
#   TOLLGATE_BIN, UPSTREAM_BIN   use these binaries instead of target/release/{tollgate,examples/bench_upstream}
#   STARTUP_TIMEOUT [30] seconds to wait for each server to answer
#   BASELINE []         a git revision: also build tollgate at that revision (in a temporary
#                       `git worktree`, into $CARGO_TARGET_DIR/baseline) and run it as a third
#                       proxy, `tollgate_base`, interleaved with the others; the report adds the
#                       ratio tollgate/tollgate_base of the medians (CPU per request: what a change
#                       costs the request path). Needs the tollgate side (not ONLY=nginx).
#                       `.`: the same binary as tollgate, nothing built (with TOLLGATE_TOML or
#                       TOLLGATE_LOG: what a setting costs).
#   TOLLGATE_LOG [access = "off"]   the body of the `tollgate` proxy's `[log]` (tollgate_base keeps
#                       its log off), e.g. `access = "@WORKDIR@/access.log"` and a `format`
#   TOLLGATE_TOML []    TOML appended to the `tollgate` proxy's config alone, e.g. a `[trace]`.
#                       In both, @UPSTREAM@ is the bench upstream's address (it answers an OTLP
#                       post as any other) and @WORKDIR@ the temp dir.
#   KEEP [0]            1: keep the temp dir (configs, logs, raw wrk output) and print its path
#                       (it is also kept, and its path printed, when the script fails)
#
# nginx runs with its defaults except what a proxy benchmark needs (worker_connections raised so that
# CONNECTIONS fit) and the scenario's limit; note its defaults keepalive_requests 1000 (client and
# upstream side) stay as shipped.

set -euo pipefail

BENCH=proxy_vs_nginx
# shellcheck source=benches/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

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
SCENARIO="${SCENARIO:-proxy}"
API_KEYS="${API_KEYS:-10000}"
TOLLGATE_RATELIMIT_HEADERS="${TOLLGATE_RATELIMIT_HEADERS:-draft}"
BASELINE="${BASELINE:-}"
TOLLGATE_LOG="${TOLLGATE_LOG:-access = \"off\"}"
TOLLGATE_TOML="${TOLLGATE_TOML:-}"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$ROOT/$TARGET_DIR" ;; esac
TOLLGATE_BIN="${TOLLGATE_BIN:-$TARGET_DIR/release/tollgate}"
BASE_BIN="$TARGET_DIR/baseline/release/tollgate"
[ "$BASELINE" != . ] || BASE_BIN="$TOLLGATE_BIN"
UPSTREAM_BIN="${UPSTREAM_BIN:-$TARGET_DIR/release/examples/bench_upstream}"


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
case "$TOLLGATE_RATELIMIT_HEADERS" in draft | legacy | both | none) ;;
    *) die "TOLLGATE_RATELIMIT_HEADERS must be draft, legacy, both or none" ;;
esac

case "$SCENARIO" in
    proxy | limit_pass | limit_reject | proxy_auto | proxy_adaptive | https | https_handshake | gzip_json | \
        file_1k | file_100k | file_10m | file_10m_copy | basic_auth | forward_auth | jwt)
        SCENARIOS=("$SCENARIO") ;;
    all) SCENARIOS=(proxy limit_pass limit_reject proxy_auto proxy_adaptive https https_handshake gzip_json
        file_1k file_100k file_10m file_10m_copy basic_auth forward_auth jwt) ;;
    *) die "SCENARIO must be proxy, limit_pass, limit_reject, proxy_auto, proxy_adaptive, https, https_handshake, gzip_json, file_1k, file_100k, file_10m, file_10m_copy, basic_auth, forward_auth, jwt or all, not '$SCENARIO'" ;;
esac

case "$ONLY" in
    "") PROXIES=(nginx tollgate) ;;
    nginx) PROXIES=(nginx) ;;
    tollgate) PROXIES=(tollgate) ;;
    *) die "ONLY must be empty, 'nginx' or 'tollgate', not '$ONLY'" ;;
esac
if [ -n "$BASELINE" ]; then
    [ "$ONLY" != nginx ] || die "BASELINE compares two tollgates: not with ONLY=nginx"
    PROXIES+=(tollgate_base)
fi
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
TOLLGATE_BASE_PID=""
WRK_PID=""
NGINX_WORKER_PIDS=()


# Stops the proxies (after each scenario, and on exit).
stop_proxies() {
    local pid
    stop_pid "$TOLLGATE_PID" tollgate
    TOLLGATE_PID=""
    stop_pid "$TOLLGATE_BASE_PID" tollgate_base
    TOLLGATE_BASE_PID=""
    stop_pid "$NGINX_PID" nginx
    NGINX_PID=""
    # Workers exit with their master; make sure none outlives it (checking the pid is still a worker).
    for pid in "${NGINX_WORKER_PIDS[@]}"; do
        if grep -qs 'nginx: worker' "/proc/$pid/cmdline" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    NGINX_WORKER_PIDS=()
}

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    set +e
    stop_pid "$WRK_PID" wrk
    stop_proxies
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
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
    command -v htpasswd >/dev/null 2>&1 || missing+=(apache2-utils)
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

# Pinning: wrk on one core, the proxy and the upstream on the other.
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
        # The binary alone first: built with the example, it would get the
        # dev-dependencies' features (tokio's test-util), which no release has.
        say "cargo build --release --bin tollgate; cargo build --release --example bench_upstream"
        cargo build --release --bin tollgate
        cargo build --release --example bench_upstream
    else
        say "cargo build --release --example bench_upstream"
        cargo build --release --example bench_upstream
    fi
fi
if [ -n "$BASELINE" ] && [ "$BASELINE" != . ] && [ "$BUILD" = 1 ]; then
    base_src="$(mktemp -d "${TMPDIR:-/tmp}/tollgate_base.XXXXXX")"
    say "git worktree add $base_src $BASELINE; cargo build --release --bin tollgate (into $TARGET_DIR/baseline)"
    git -C "$ROOT" worktree add --detach "$base_src" "$BASELINE"
    build_rc=0
    (cd "$base_src" && CARGO_TARGET_DIR="$TARGET_DIR/baseline" cargo build --release --bin tollgate) || build_rc=$?
    git -C "$ROOT" worktree remove --force "$base_src" || true
    [ "$build_rc" = 0 ] || die "building tollgate at $BASELINE failed"
fi
if [ -n "$BASELINE" ]; then
    [ -x "$BASE_BIN" ] || die "no baseline tollgate binary at $BASE_BIN"
fi
[ -x "$UPSTREAM_BIN" ] || die "no upstream binary at $UPSTREAM_BIN"
if wants tollgate; then
    [ -x "$TOLLGATE_BIN" ] || die "no tollgate binary at $TOLLGATE_BIN"
fi

# ---------------------------------------------------------------------------------------------------
# Helpers

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/proxy_vs_nginx.XXXXXX")"
# The file scenarios' files (root WORKDIR/www, URI /files/NAME), readable by nginx's
# workers whatever user they run as.
mkdir -p "$WORKDIR/www/files"
head -c 1024 /dev/urandom >"$WORKDIR/www/files/1k.bin"
head -c 102400 /dev/urandom >"$WORKDIR/www/files/100k.bin"
head -c 10485760 /dev/urandom >"$WORKDIR/www/files/10m.bin"
chmod 755 "$WORKDIR" "$WORKDIR/www" "$WORKDIR/www/files"
chmod 644 "$WORKDIR"/www/files/*.bin
# The jwt scenario's key set and token (benches/jwt_token.sh).
# shellcheck source=benches/jwt_token.sh
source "$(dirname "${BASH_SOURCE[0]}")/jwt_token.sh"
make_jwt "$WORKDIR/jwt" || die "the jwt scenario's token could not be made"

# The basic_auth scenario's login: bench / secret, bcrypt at htpasswd's default cost (5).
htpasswd -cbB "$WORKDIR/users.htpasswd" bench secret 2>/dev/null || die "htpasswd failed"
chmod 644 "$WORKDIR/users.htpasswd"
chmod 755 "$WORKDIR" # nginx workers run as an unprivileged user and create temp dirs here

USED_PORTS=" "
# Listening ports are drawn below the kernel's ephemeral range, so that no client socket of wrk or of
# a proxy can take one between our check and the server's bind.
PORT_LO=10000
PORT_HI=32767
if read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && [ "$eph_lo" -gt 11024 ]; then
    PORT_HI=$((eph_lo - 1))
fi

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
        code="$(curl -s -k -o "$WORKDIR/probe.body" -w '%{http_code}' --max-time 1 \
            "$SCHEME://127.0.0.1:$port/" 2>/dev/null || true)"
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
# Peak resident set size (VmHWM, kB) of one process.
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# Proportional set size (kB) of the given processes together: what they cost the machine, each
# shared page split among those that map it.
pss_kb() {
    local pid files=()
    for pid in "$@"; do files+=("/proc/$pid/smaps_rollup"); done
    awk '/^Pss:/ { s += $2 } END { print s + 0 }' "${files[@]}" 2>/dev/null || echo 0
}
# idle_pss PROXY: its PSS once started and past its first request, before any load.
idle_pss() {
    local -a pids
    sleep 0.5
    mapfile -t pids < <(proxy_pids "$1")
    IDLE_PSS_KB[$1]="$(pss_kb "${pids[@]}")"
}

nginx_pids() {
    local w
    echo "$NGINX_PID"
    for w in $(pgrep -P "$NGINX_PID" 2>/dev/null || true); do echo "$w"; done
}
proxy_pids() { # proxy_pids NAME
    case "$1" in
        nginx) nginx_pids ;;
        tollgate) echo "$TOLLGATE_PID" ;;
        tollgate_base) echo "$TOLLGATE_BASE_PID" ;;
    esac
}
proxy_port() {
    case "$1" in
        nginx) echo "$NGINX_PORT" ;;
        tollgate) echo "$TOLLGATE_PORT" ;;
        tollgate_base) echo "$TOLLGATE_BASE_PORT" ;;
    esac
}

# ---------------------------------------------------------------------------------------------------
# Scenarios: what each proxy is configured with, and what wrk sends

scenario_title() {
    case "$1" in
        proxy) echo "reverse proxy to one keep-alive upstream" ;;
        limit_pass) echo "limiting on, $API_KEYS API keys, every request allowed, then proxied" ;;
        limit_reject) echo "limiting on, one key at 1r/s: nearly every request rejected (429)" ;;
        proxy_auto) echo "reverse proxy, tollgate's upstream gate on (max_in_flight = 1000, nothing waits)" ;;
        proxy_adaptive) echo "reverse proxy, tollgate's upstream gate on (max_in_flight = \"auto\", requests wait)" ;;
        https) echo "reverse proxy, HTTPS to the proxy (TLS 1.3, ECDSA P-256), keep-alive" ;;
        https_handshake) echo "reverse proxy, HTTPS to the proxy, a new connection and full handshake per request" ;;
        gzip_json) echo "reverse proxy gzipping a 100,000-byte JSON answer on the fly (nginx level 1, tollgate level 2: the same output size)" ;;
        file_1k | file_100k | file_10m) echo "a static file of $(file_size "$1") bytes, keep-alive (sendfile on)" ;;
        file_10m_copy) echo "a static file of $(file_size "$1") bytes, keep-alive (tollgate: sendfile off)" ;;
        basic_auth) echo "reverse proxy behind a basic-auth login (bcrypt, cost 5) sent with every request" ;;
        forward_auth) echo "reverse proxy asking an auth service (the upstream's /check) before every request" ;;
        jwt) echo "reverse proxy checking an ES256 bearer token on every request (tollgate; nginx proxies unchecked)" ;;
    esac
}
scenario_limit_note() {
    case "$1" in
        proxy) ;;
        https | https_handshake)
            echo "no limit; TLS: nginx \`listen ... ssl\`, \`ssl_protocols TLSv1.2 TLSv1.3\`, tollgate \`listen_tls\`"
            echo "  (rustls), one self-signed ECDSA P-256 certificate for both; wrk resumes sessions"
            ;;
        gzip_json)
            echo "no limit; wrk asks \`/json\` with \`Accept-Encoding: gzip\`: 100,000 bytes of application/json from"
            echo "  the upstream, gzipped by the proxy: nginx \`gzip on; gzip_types application/json; gzip_comp_level 1;\`,"
            echo "  tollgate \`compress = { encodings = [\"gzip\"], types = [\"application/json\"] }\` (zlib-rs level 2);"
            echo "  proxy CPU us/req / 100 = ns per input byte"
            ;;
        file_*)
            echo "no limit; nginx \`sendfile on; tcp_nopush on;\` and \`location /files/ { root ...; }\`, tollgate"
            echo "  \`[[location]] match = \"/files/\" root = \"...\"\` (sendfile $([ "$1" = file_10m_copy ] && echo off || echo on));"
            echo "  bytes per second = req/s x $(file_size "$1")"
            ;;
        basic_auth)
            echo "no limit; \`location /auth/\`: nginx \`auth_basic \"bench\"; auth_basic_user_file ...;\`, tollgate"
            echo "  \`auth = { basic = { realm = \"bench\", users = \"...\" } }\`; one line made by \`htpasswd -B\` (bcrypt,"
            echo "  cost 5); wrk sends the right \`Authorization: Basic\` with every request"
            ;;
        jwt)
            echo "no limit; \`location /jwt/\`: tollgate \`auth = { jwt = { jwks = \"...\" } }\` (one P-256 key), wrk sends"
            echo "  the same ES256 token with every request (checked once, then remembered by its SHA-256);"
            echo "  nginx proxies \`/jwt/\` without a check (open-source nginx has no auth_jwt)"
            ;;
        forward_auth)
            echo "no limit; \`location /fwd/\`: nginx \`auth_request /_check;\` with \`location = /_check\` proxying to"
            echo "  the upstream's \`/check\` (\`proxy_pass_request_body off\`, HTTP/1.1 kept alive), tollgate"
            echo "  \`auth = { request = { url = \"http://127.0.0.1:PORT/check\" } }\`; the service answers 200"
            ;;
        proxy_auto)
            echo "nginx as in \`proxy\`; tollgate \`[upstreams.app] max_in_flight = 1000\` (the gate counts every"
            echo "  request, none waits): compare the ratio with the \`proxy\` scenario's"
            ;;
        proxy_adaptive)
            echo "nginx as in \`proxy\`; tollgate \`[upstreams.app] max_in_flight = \"auto\"\`, \`queue = 1000\`"
            echo "  (the limit follows the upstream's latency; what is over it waits at the gate)"
            ;;
        limit_pass)
            echo "nginx \`limit_req_zone \$http_x_api_key zone=k:10m rate=1000000r/s\` + \`limit_req zone=k burst=1000000 nodelay\`;"
            echo "  tollgate \`[zones.k] key = \"\$http_x_api_key\" rate = \"1000000r/s\" size = \"10m\"\` +"
            echo "  \`limit = [{ zone = \"k\", burst = 1000000, nodelay = true }]\`, ratelimit_headers \"$TOLLGATE_RATELIMIT_HEADERS\";"
            echo "  wrk sends \`X-API-Key: key-<28 digits>\`, $API_KEYS values round robin (Lua script)"
            ;;
        limit_reject)
            echo "nginx \`limit_req_zone \$binary_remote_addr zone=r:10m rate=1r/s\` + \`limit_req zone=r nodelay\`,"
            echo "  \`limit_req_status 429\`, \`limit_req_log_level info\` (no error-log line per rejection);"
            echo "  tollgate \`[zones.r] key = \"\$binary_remote_addr\" rate = \"1r/s\" size = \"10m\"\` +"
            echo "  \`limit = [{ zone = \"r\", nodelay = true }]\` (429, problem+json), ratelimit_headers \"$TOLLGATE_RATELIMIT_HEADERS\""
            ;;
    esac
}

# The size of a file scenario's file, in bytes, and its name.
file_size() {
    case "$1" in
        file_1k) echo 1024 ;;
        file_100k) echo 102400 ;;
        file_10m | file_10m_copy) echo 10485760 ;;
    esac
}
file_name() {
    case "$1" in
        file_1k) echo 1k.bin ;;
        file_100k) echo 100k.bin ;;
        file_10m | file_10m_copy) echo 10m.bin ;;
    esac
}

# nginx: lines for the http block, and for the location.
nginx_http_limit() {
    case "$1" in
        file_*)
            echo "    sendfile on;"
            echo "    tcp_nopush on;"
            ;;
        limit_pass) echo "    limit_req_zone \$http_x_api_key zone=k:10m rate=1000000r/s;" ;;
        limit_reject) echo "    limit_req_zone \$binary_remote_addr zone=r:10m rate=1r/s;" ;;
    esac
}
nginx_location_limit() {
    case "$1" in
        limit_pass) echo "            limit_req zone=k burst=1000000 nodelay;" ;;
        limit_reject)
            echo "            limit_req zone=r nodelay;"
            echo "            limit_req_status 429;"
            # Rejections are logged at `info`, below the error log's `warn`: not written.
            echo "            limit_req_log_level info;"
            ;;
        gzip_json)
            echo "            gzip on;"
            echo "            gzip_types application/json;"
            echo "            gzip_comp_level 1;"
            ;;
    esac
}

# nginx: a location's forwarding to the upstream, the same in every location that proxies.
nginx_proxying() {
    cat <<'LINES'
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Real-IP $remote_addr;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $host;
LINES
}

# nginx: the listen line, with TLS in the https scenarios.
nginx_listen() {
    case "$1" in
        https*)
            echo "        listen 127.0.0.1:$NGINX_PORT ssl;"
            echo "        ssl_certificate $TLS_DIR/cert.pem;"
            echo "        ssl_certificate_key $TLS_DIR/key.pem;"
            # nginx 1.22 offers TLS 1.2 alone by default (1.23.4 added 1.3): both serve both.
            echo "        ssl_protocols TLSv1.2 TLSv1.3;"
            ;;
        *) echo "        listen 127.0.0.1:$NGINX_PORT;" ;;
    esac
}

# tollgate: its listen line (and certificate) for [server].
tollgate_listen() {
    case "$1" in
        https*) echo "listen_tls = [\"127.0.0.1:$2\"]" ;;
        *) echo "listen = [\"127.0.0.1:$2\"]" ;;
    esac
}
tollgate_certificates() {
    case "$1" in
        https*) printf '[[tls.certificates]]\ncert = "%s"\nkey = "%s"\n\n' "$TLS_DIR/cert.pem" "$TLS_DIR/key.pem" ;;
    esac
}

# The scheme clients use in a scenario.
scheme_of() {
    case "$1" in https*) echo https ;; *) echo http ;; esac
}

# One self-signed ECDSA P-256 certificate for 127.0.0.1, shared by both proxies.
make_certificate() {
    TLS_DIR="$WORKDIR/tls"
    [ -s "$TLS_DIR/cert.pem" ] && return 0
    mkdir -p "$TLS_DIR"
    chmod 755 "$TLS_DIR"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$TLS_DIR/key.pem" -out "$TLS_DIR/cert.pem" -days 2 -subj /CN=localhost \
        -addext subjectAltName=DNS:localhost,IP:127.0.0.1 >"$TLS_DIR/openssl.log" 2>&1 ||
        { cat "$TLS_DIR/openssl.log" >&2; die "openssl could not make the test certificate"; }
    chmod 644 "$TLS_DIR/key.pem"
}

# tollgate: lines for [server], the upstream, the zones, and the location.
tollgate_upstream_gate() {
    case "$1" in
        proxy_auto) echo "max_in_flight = 1000" ;;
        proxy_adaptive) printf 'max_in_flight = "auto"\nqueue = 1000\n' ;;
    esac
}
tollgate_server_limit() {
    case "$1" in
        limit_pass | limit_reject) echo "ratelimit_headers = \"$TOLLGATE_RATELIMIT_HEADERS\"" ;;
        file_10m_copy) echo "sendfile = false" ;;
    esac
}
tollgate_zones() {
    # shellcheck disable=SC2016 # the $ names are the template's variables, written as they are
    case "$1" in
        limit_pass)
            printf '[zones.k]\nkey = "$http_x_api_key"\nrate = "1000000r/s"\nsize = "10m"\n\n'
            ;;
        limit_reject)
            printf '[zones.r]\nkey = "$binary_remote_addr"\nrate = "1r/s"\nsize = "10m"\n\n'
            ;;
    esac
}
tollgate_location_limit() {
    case "$1" in
        limit_pass) echo 'limit = [{ zone = "k", burst = 1000000, nodelay = true }]' ;;
        limit_reject) echo 'limit = [{ zone = "r", nodelay = true }]' ;;
        gzip_json) echo 'compress = { encodings = ["gzip"], types = ["application/json"] }' ;;
    esac
}

# wrk's Lua script for limit_pass: one of API_KEYS keys per request, round robin (each wrk thread
# has its own Lua state and so its own round).
write_wrk_script() {
    cat >"$1" <<EOF
-- written by benches/proxy_vs_nginx.sh
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

# ---------------------------------------------------------------------------------------------------
# Start the upstream (once) and the proxies (per scenario, in the scenario's directory SDIR)

SCHEME=http # the scheme clients use: https in the https scenarios
UPSTREAM_PORT="$(free_port)"
say "starting bench_upstream on 127.0.0.1:$UPSTREAM_PORT"
"${SERVER_PREFIX[@]}" "$UPSTREAM_BIN" "127.0.0.1:$UPSTREAM_PORT" >"$WORKDIR/upstream.log" 2>&1 &
UPSTREAM_PID=$!
wait_ready bench_upstream "$UPSTREAM_PORT" "$UPSTREAM_PID" "$WORKDIR/upstream.log"

start_nginx() { # start_nginx SCENARIO
    local scen="$1" nginx_v extra_temp="" m
    NGINX_PORT="$(free_port)"
    NGINX_CONF="$SDIR/nginx.conf"
    nginx_v="$("$NGINX" -V 2>&1)"
    for m in fastcgi uwsgi scgi; do
        case "$nginx_v" in *"--without-http_${m}_module"*) ;;
            *) extra_temp+="    ${m}_temp_path $SDIR/${m}_temp;"$'\n' ;;
        esac
    done
    cat >"$NGINX_CONF" <<EOF
# written by benches/proxy_vs_nginx.sh (scenario $scen)
worker_processes $NGINX_WORKERS;
pid $SDIR/nginx.pid;
error_log $SDIR/nginx-error.log warn;

events {
    worker_connections $((CONNECTIONS * 2 + 1024));
}

http {
    access_log off;
    client_body_temp_path $SDIR/client_body_temp;
    proxy_temp_path $SDIR/proxy_temp;
$extra_temp$(nginx_http_limit "$scen")
    upstream app {
        server 127.0.0.1:$UPSTREAM_PORT;
        keepalive 64;
    }

    server {
$(nginx_listen "$scen")

        location /files/ {
            root $WORKDIR/www;
        }

        location /auth/ {
            auth_basic "bench";
            auth_basic_user_file $WORKDIR/users.htpasswd;
$(nginx_proxying)
        }

        location /fwd/ {
            auth_request /_check;
$(nginx_proxying)
        }

        location /jwt/ {
$(nginx_proxying)
        }

        location = /_check {
            internal;
            proxy_pass http://app/check;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-URI \$request_uri;
        }

        location / {
$(nginx_location_limit "$scen")
$(nginx_proxying)
        }
    }
}
EOF
    "$NGINX" -t -q -c "$NGINX_CONF" -p "$SDIR" >"$SDIR/nginx-t.log" 2>&1 ||
        { cat "$SDIR/nginx-t.log" >&2; die "nginx rejected $NGINX_CONF"; }
    say "starting nginx on 127.0.0.1:$NGINX_PORT ($NGINX_CONF)"
    "${SERVER_PREFIX[@]}" "$NGINX" -c "$NGINX_CONF" -p "$SDIR" -g 'daemon off;' \
        >"$SDIR/nginx.log" 2>&1 &
    NGINX_PID=$!
    wait_ready nginx "$NGINX_PORT" "$NGINX_PID" "$SDIR/nginx.log" "$SDIR/nginx-error.log"
    mapfile -t NGINX_WORKER_PIDS < <(pgrep -P "$NGINX_PID" || true)
    idle_pss nginx
    say "nginx master $NGINX_PID, ${#NGINX_WORKER_PIDS[@]} worker(s): ${NGINX_WORKER_PIDS[*]}"
}

tollgate_own() { # tollgate_own NAME TEXT BASE_TEXT: TEXT for the tollgate proxy, BASE_TEXT for tollgate_base
    local text="$2"
    [ "$1" = tollgate ] || text="$3"
    text="${text//@UPSTREAM@/127.0.0.1:$UPSTREAM_PORT}"
    printf '%s\n' "${text//@WORKDIR@/$WORKDIR}"
}

start_tollgate() { # start_tollgate SCENARIO [NAME BINARY]: NAME tollgate or tollgate_base
    local scen="$1" name="${2:-tollgate}" bin="${3:-$TOLLGATE_BIN}" port conf pid
    port="$(free_port)"
    conf="$SDIR/$name.toml"
    cat >"$conf" <<EOF
# written by benches/proxy_vs_nginx.sh (scenario $scen)
[server]
$(tollgate_listen "$scen" "$port")
$(tollgate_server_limit "$scen")

$(tollgate_certificates "$scen")
[log]
$(tollgate_own "$name" "$TOLLGATE_LOG" 'access = "off"')

[upstreams.app]
servers = ["127.0.0.1:$UPSTREAM_PORT"]
keepalive = 64
$(tollgate_upstream_gate "$scen")

$(tollgate_zones "$scen")
[[location]]
match = "/files/"
root = "$WORKDIR/www"

[[location]]
match = "/auth/"
upstream = "app"
auth = { basic = { realm = "bench", users = "$WORKDIR/users.htpasswd" } }

[[location]]
match = "/fwd/"
upstream = "app"
auth = { request = { url = "http://127.0.0.1:$UPSTREAM_PORT/check" } }

[[location]]
match = "/jwt/"
upstream = "app"
auth = { jwt = { jwks = "$WORKDIR/jwt/jwks.json", issuer = "https://id.bench", audience = "api", require = { scope = "api:read" } } }

[[location]]
match = "/"
upstream = "app"
$(tollgate_location_limit "$scen")

$(tollgate_own "$name" "$TOLLGATE_TOML" "")
EOF
    say "starting $name on 127.0.0.1:$port ($conf)"
    "${SERVER_PREFIX[@]}" "$bin" -c "$conf" >"$SDIR/$name.log" 2>&1 &
    pid=$!
    if [ "$name" = tollgate_base ]; then
        TOLLGATE_BASE_PID=$pid
        TOLLGATE_BASE_PORT=$port
    else
        TOLLGATE_PID=$pid
        TOLLGATE_PORT=$port
    fi
    wait_ready "$name" "$port" "$pid" "$SDIR/$name.log"
    idle_pss "$name"
    say "$name pid $pid"
}

# check_limiting SCENARIO PROXY: the proxy limits (or compresses) as the scenario says, or fail.
check_limiting() {
    local scen="$1" proxy="$2" port code codes="" i
    port="$(proxy_port "$proxy")"
    case "$scen" in
        limit_pass)
            code="$(curl -s -o "$SDIR/probe.body" -w '%{http_code}' --max-time 2 \
                -H 'X-API-Key: key-0000000000000000000000000000' "http://127.0.0.1:$port/" || true)"
            if [ "$code" != 200 ] || [ "$(cat "$SDIR/probe.body")" != hello ]; then
                die "$proxy ($scen): a request with an API key got status '$code', not 200 \"hello\""
            fi
            ;;
        limit_reject)
            # wait_ready's request took this second's one pass: the next ones are rejected.
            for ((i = 0; i < 3; i++)); do
                codes+="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/" || true) "
            done
            case "$codes" in *429*) ;; *) die "$proxy ($scen): no 429 in three quick requests (got: $codes)" ;; esac
            ;;
        basic_auth)
            code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/auth/" || true)"
            [ "$code" = 401 ] || die "$proxy ($scen): /auth/ without a login got status '$code', not 401"
            code="$(curl -s -o "$SDIR/probe.body" -w '%{http_code}' --max-time 2 -u bench:secret \
                "http://127.0.0.1:$port/auth/" || true)"
            if [ "$code" != 200 ] || [ "$(cat "$SDIR/probe.body")" != hello ]; then
                die "$proxy ($scen): /auth/ with the login got status '$code', not 200 \"hello\""
            fi
            ;;
        jwt)
            if [ "$proxy" != nginx ]; then
                code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/jwt/" || true)"
                [ "$code" = 401 ] || die "$proxy ($scen): /jwt/ without a token got status '$code', not 401"
            fi
            code="$(curl -s -o "$SDIR/probe.body" -w '%{http_code}' --max-time 2 \
                -H "Authorization: Bearer $(cat "$WORKDIR/jwt/token")" "http://127.0.0.1:$port/jwt/" || true)"
            if [ "$code" != 200 ] || [ "$(cat "$SDIR/probe.body")" != hello ]; then
                die "$proxy ($scen): /jwt/ with the token got status '$code', not 200 \"hello\""
            fi
            ;;
        forward_auth)
            code="$(curl -s -o "$SDIR/probe.body" -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/fwd/" || true)"
            if [ "$code" != 200 ] || [ "$(cat "$SDIR/probe.body")" != hello ]; then
                die "$proxy ($scen): /fwd/ got status '$code', not 200 \"hello\""
            fi
            ;;
        file_*)
            code="$(curl -s -o "$SDIR/probe.body" -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port$URL_PATH" || true)"
            if [ "$code" != 200 ] || [ "$(stat -c %s "$SDIR/probe.body")" != "$(file_size "$scen")" ]; then
                die "$proxy ($scen): $URL_PATH got status '$code' or not $(file_size "$scen") bytes"
            fi
            ;;
        gzip_json)
            code="$(curl -s -D "$SDIR/probe.head" -o "$SDIR/probe.body" -w '%{http_code}' --max-time 2 \
                -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/json" || true)"
            if [ "$code" != 200 ] || ! grep -qi '^content-encoding: *gzip' "$SDIR/probe.head"; then
                die "$proxy ($scen): /json got status '$code' without Content-Encoding: gzip"
            fi
            if [ "$(gzip -dc <"$SDIR/probe.body" | wc -c)" != 100000 ]; then
                die "$proxy ($scen): /json does not gunzip to the upstream's 100,000 bytes"
            fi
            ;;
    esac
}

# ---------------------------------------------------------------------------------------------------
# Measure

# run_wrk PROXY SECONDS OUTFILE: wrk in the background so that a signal reaches our trap at once.
run_wrk() {
    local proxy="$1" secs="$2" out="$3" port rc=0
    port="$(proxy_port "$proxy")"
    timeout --kill-after=5 $((secs + 30)) "${WRK_CMD[@]}" --latency -t"$THREADS" -c"$CONNECTIONS" \
        -d"${secs}s" "${WRK_SCRIPT[@]}" "$SCHEME://127.0.0.1:$port$URL_PATH" >"$out" 2>&1 &
    WRK_PID=$!
    wait "$WRK_PID" || rc=$?
    WRK_PID=""
    if [ "$rc" -ne 0 ]; then
        cat "$out" >&2
        die "wrk against $proxy exited with status $rc"
    fi
}


# measure SCENARIO: warm-up, then RUNS interleaved runs per proxy into $SDIR/results.tsv:
# run proxy rps p50 p99 proxy_cpu_us_per_req upstream_cpu_us_per_req non2xx socket_errors busy% requests
# proxy_user_us_per_req
measure() {
    local scen="$1" run p out cpu0 cpu1 usr0 usr1 up0 up1 busy rps p50 p99 reqs non2xx sock pcpu ucpu pusr
    local total_secs
    local -a pids
    RESULTS="$SDIR/results.tsv"
    : >"$RESULTS"
    if [ "$WARMUP" -gt 0 ]; then
        for p in "${PROXIES[@]}"; do
            say "$scen: warm-up: $p ${WARMUP}s"
            run_wrk "$p" "$WARMUP" "$SDIR/warmup-$p.txt"
        done
    fi

    # Is anything else using the CPUs? (Other builds on the machine make every figure noisy.)
    cpu_snapshot >"$SDIR/idle0"
    sleep 1
    cpu_snapshot >"$SDIR/idle1"
    IDLE_BUSY="$(busy_pct "$SDIR/idle0" "$SDIR/idle1")"
    IDLE_MAX="$(tr '/' '\n' <<<"$IDLE_BUSY" | sort -n | tail -n 1)"
    if [ "${IDLE_MAX//\?/0}" -gt 10 ]; then
        say "warning: CPUs already busy ($IDLE_BUSY %) before any load: other work on this machine will add noise"
    fi

    total_secs=$((RUNS * ${#PROXIES[@]} * DURATION))
    say "$scen: measuring: $RUNS run(s) of ${DURATION}s per proxy, interleaved (about ${total_secs}s)"
    for ((run = 1; run <= RUNS; run++)); do
        for p in "${PROXIES[@]}"; do
            out="$SDIR/run-$run-$p.txt"
            mapfile -t pids < <(proxy_pids "$p")
            cpu0="$(cpu_ticks "${pids[@]}")"
            usr0="$(user_ticks "${pids[@]}")"
            up0="$(cpu_ticks "$UPSTREAM_PID")"
            cpu_snapshot >"$SDIR/stat0"
            run_wrk "$p" "$DURATION" "$out"
            cpu_snapshot >"$SDIR/stat1"
            cpu1="$(cpu_ticks "${pids[@]}")"
            usr1="$(user_ticks "${pids[@]}")"
            up1="$(cpu_ticks "$UPSTREAM_PID")"
            busy="$(busy_pct "$SDIR/stat0" "$SDIR/stat1")"
            read -r rps p50 p99 reqs non2xx sock < <(parse_wrk "$out")
            read -r pcpu ucpu pusr < <(awk -v a="$((cpu1 - cpu0))" -v b="$((up1 - up0))" \
                -v u="$((usr1 - usr0))" -v n="$reqs" -v hz="$CLK_TCK" 'BEGIN {
                    if (n > 0) printf "%.1f %.1f %.1f\n", a * 1e6 / hz / n, b * 1e6 / hz / n, u * 1e6 / hz / n
                    else print "-1 -1 -1" }')
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$p" "$rps" "$p50" "$p99" \
                "$pcpu" "$ucpu" "$non2xx" "$sock" "$busy" "$reqs" "$pusr" >>"$RESULTS"
            say "$scen: run $run $p: $rps req/s, p50 ${p50}us, p99 ${p99}us, non-2xx $non2xx, socket errors $sock, CPUs busy $busy %"
        done
    done

    # Peak RSS, read while the processes are still alive.
    local sum pid kb
    local -a parts
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
    if wants tollgate_base; then
        RSS_KB[tollgate_base]="$(hwm_kb "$TOLLGATE_BASE_PID")"
        RSS_NOTE[tollgate_base]="one process, tollgate at $BASELINE"
    fi
    UPSTREAM_RSS_KB="$(hwm_kb "$UPSTREAM_PID")"
}

# ---------------------------------------------------------------------------------------------------
# Report

median_of() { # median_of PROXY COLUMN (3 = rps, 4 = p50, 5 = p99, 6 = proxy cpu, 7 = upstream cpu,
    # 12 = proxy user-space cpu)
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

# Flags a run that did not do what its scenario means (marked ! in the table): any socket error or no
# request at all; a non-2xx answer, except in limit_reject, where instead more than one request a
# second must not have passed.
unexpected_runs() {
    awk -F'\t' -v scen="$1" -v secs="$DURATION" '
        { bad = ($9 > 0 || $3 <= 0)
          if (scen == "limit_reject") bad = bad || ($11 - $8 > secs + 1); else bad = bad || $8 > 0
          n += bad }
        END { print n + 0 }' "$RESULTS"
}

report() { # report SCENARIO
    local scen="$1" p cpu_names any_errors cmd nginx_workers note
    nginx_workers="${#NGINX_WORKER_PIDS[@]}"
    cpu_names="$(awk '{ s = s (s == "" ? "" : "/") $1 } END { print s }' "$SDIR/stat1")"
    any_errors="$(unexpected_runs "$scen")"
    cmd="SCENARIO=$scen RUNS=$RUNS DURATION=$DURATION CONNECTIONS=$CONNECTIONS THREADS=$THREADS PIN=$PIN"
    [ "$scen" = limit_pass ] && cmd+=" API_KEYS=$API_KEYS"
    [ "$scen" != proxy ] && cmd+=" TOLLGATE_RATELIMIT_HEADERS=$TOLLGATE_RATELIMIT_HEADERS"
    [ -n "$ONLY" ] && cmd+=" ONLY=$ONLY"
    [ -n "$BASELINE" ] && cmd+=" BASELINE=$BASELINE"
    [ "$TOLLGATE_LOG" != 'access = "off"' ] && cmd+=" TOLLGATE_LOG='$TOLLGATE_LOG'"
    [ -n "$TOLLGATE_TOML" ] && cmd+=" TOLLGATE_TOML='$TOLLGATE_TOML'"
    cmd+=" benches/proxy_vs_nginx.sh"
    {
        echo
        echo "### tollgate vs nginx ($scen): $(scenario_title "$scen") ($(date -u '+%Y-%m-%d %H:%M UTC'))"
        echo
        echo "- command: \`$cmd\`"
        echo "- load: \`wrk --latency -t$THREADS -c$CONNECTIONS -d${DURATION}s\`, $RUNS run(s) per proxy interleaved (${PROXIES[*]}), ${WARMUP}s warm-up each"
        echo "- machine: $(nproc --all 2>/dev/null || echo '?') CPU(s)${cpu_model:+, $cpu_model}; $PIN_NOTE"
        echo "- CPUs busy before the load (1 s, $cpu_names): $IDLE_BUSY %$([ "${IDLE_MAX//\?/0}" -gt 10 ] && echo ' -- NOT idle: other work on the machine, figures are noisy')"
        echo "- upstream: bench_upstream (hyper 1, one thread), 200 $([ "$scen" = gzip_json ] && echo "100,000 bytes of JSON (/json)" || echo "\"hello\\n\""); peak RSS $(mib "$UPSTREAM_RSS_KB")"
        if wants nginx; then
            echo "- nginx: $nginx_version, worker_processes $NGINX_WORKERS ($nginx_workers worker(s)), upstream keepalive 64, access_log off"
        fi
        if wants tollgate; then
            echo "- tollgate: $git_rev, $TOLLGATE_THREADS thread(s), upstream keepalive 64, access log off"
        fi
        note="$(scenario_limit_note "$scen")"
        [ -n "$note" ] && echo "- limit: $note"
        echo "- CPU us/req: CPU time (user+sys, /proc, ${CLK_TCK} Hz ticks) of the process(es) during the run / requests;"
        echo "  user us/req: the user-space part of the proxy's (the rest is the kernel's, mostly TCP);"
        echo "  busy %: each CPU's non-idle share during the run ($cpu_names), from /proc/stat"
        echo
        echo "| run | proxy | req/s | p50 us | p99 us | proxy CPU us/req | proxy user us/req | upstream CPU us/req | non-2xx | socket errors | busy % |"
        echo "|----:|:------|------:|-------:|-------:|-----------------:|------------------:|--------------------:|--------:|--------------:|-------:|"
        awk -F'\t' -v scen="$scen" -v secs="$DURATION" '{
            bad = ($9 > 0 || $3 <= 0)
            if (scen == "limit_reject") bad = bad || ($11 - $8 > secs + 1); else bad = bad || $8 > 0
            printf "| %s | %s | %.0f | %.0f | %.0f | %s | %s | %s | %s | %s%s | %s |\n",
                $1, $2, $3, $4, $5, $6, $12, $7, $8, $9, (bad ? " !" : ""), $10 }' "$RESULTS"
        for p in "${PROXIES[@]}"; do
            printf '| median | %s | %.0f | %.0f | %.0f | %s | %s | %s | | | |\n' "$p" "$(median_of "$p" 3)" \
                "$(median_of "$p" 4)" "$(median_of "$p" 5)" "$(median_of "$p" 6)" "$(median_of "$p" 12)" \
                "$(median_of "$p" 7)"
        done
        echo
        if wants nginx && wants tollgate; then
            echo "tollgate/nginx (medians):"
            echo "- req/s: $(ratio "$(median_of tollgate 3)" "$(median_of nginx 3)")x  (higher is better)"
            echo "- p99:   $(ratio "$(median_of tollgate 5)" "$(median_of nginx 5)")x  (lower is better)"
            echo "- p50:   $(ratio "$(median_of tollgate 4)" "$(median_of nginx 4)")x  (lower is better)"
            echo "- proxy CPU per request: $(ratio "$(median_of tollgate 6)" "$(median_of nginx 6)")x  (lower is better)"
            echo "- proxy user-space CPU per request: $(ratio "$(median_of tollgate 12)" "$(median_of nginx 12)")x  (lower is better)"
            echo "- peak RSS: $(ratio "${RSS_KB[tollgate]}" "${RSS_KB[nginx]}")x  (lower is better)"
            echo "- idle PSS: $(ratio "${IDLE_PSS_KB[tollgate]}" "${IDLE_PSS_KB[nginx]}")x  (lower is better)"
            echo
        fi
        if wants tollgate_base; then
            echo "tollgate/tollgate_base ($git_rev against $BASELINE, medians):"
            echo "- proxy CPU per request: $(ratio "$(median_of tollgate 6)" "$(median_of tollgate_base 6)")x  (lower is better; 1.01 is 1 % more)"
            echo "- req/s: $(ratio "$(median_of tollgate 3)" "$(median_of tollgate_base 3)")x  (higher is better)"
            echo "- p99:   $(ratio "$(median_of tollgate 5)" "$(median_of tollgate_base 5)")x  (lower is better)"
            echo
        fi
        echo "peak RSS (VmHWM):"
        for p in "${PROXIES[@]}"; do
            echo "- $p: $(mib "${RSS_KB[$p]}") (${RSS_KB[$p]} kB; ${RSS_NOTE[$p]})"
        done
        echo "idle PSS (smaps_rollup, all its processes, after start and one request, before the load):"
        for p in "${PROXIES[@]}"; do
            echo "- $p: $(mib "${IDLE_PSS_KB[$p]}") (${IDLE_PSS_KB[$p]} kB)"
        done
        if [ "$scen" != limit_reject ]; then
            for p in "${PROXIES[@]}"; do
                if awk -v u="$(median_of "$p" 7)" 'BEGIN { exit !(u < 1) }'; then
                    echo
                    echo "WARNING: the upstream used under 1 us of CPU per request through $p: is $p forwarding at all?"
                fi
            done
        fi
        if [ "$any_errors" -gt 0 ]; then
            echo
            if [ "$scen" = limit_reject ]; then
                echo "WARNING: $any_errors run(s) had socket errors, no requests, or more than one request a second"
                echo "passed (marked !): the limit did not hold, so their numbers do not compare rejections."
            else
                echo "WARNING: $any_errors run(s) had non-2xx responses, socket errors or no requests (marked !);"
                echo "their numbers do not compare a working proxy."
            fi
        fi
    }
    if wants nginx && wants tollgate; then
        # scenario, req/s nginx and tollgate, their ratio, runs flagged, p99 µs nginx and
        # tollgate (benches/nginx_chart.sh draws it).
        printf '%s\t%.0f\t%.0f\t%s\t%s\t%.0f\t%.0f\n' "$scen" "$(median_of nginx 3)" "$(median_of tollgate 3)" \
            "$(ratio "$(median_of tollgate 3)" "$(median_of nginx 3)")" "$any_errors" \
            "$(median_of nginx 5)" "$(median_of tollgate 5)" >>"$WORKDIR/summary.tsv"
    fi
}

# ---------------------------------------------------------------------------------------------------
# Run every scenario: fresh proxies, check, measure, report, stop

declare -A RSS_KB RSS_NOTE IDLE_PSS_KB
for scen in "${SCENARIOS[@]}"; do
    SDIR="$WORKDIR/$scen"
    mkdir -p "$SDIR"
    chmod 755 "$SDIR"
    WRK_SCRIPT=()
    URL_PATH=/
    if [ "$scen" = gzip_json ]; then
        URL_PATH=/json
        WRK_SCRIPT=(-H "Accept-Encoding: gzip")
    fi
    case "$scen" in file_*) URL_PATH="/files/$(file_name "$scen")" ;; esac
    [ "$scen" = forward_auth ] && URL_PATH=/fwd/
    if [ "$scen" = jwt ]; then
        URL_PATH=/jwt/
        WRK_SCRIPT=(-H "Authorization: Bearer $(cat "$WORKDIR/jwt/token")")
    fi
    if [ "$scen" = basic_auth ]; then
        URL_PATH=/auth/
        WRK_SCRIPT=(-H "Authorization: Basic $(printf 'bench:secret' | base64)")
    fi
    if [ "$scen" = limit_pass ]; then
        write_wrk_script "$SDIR/api_keys.lua"
        WRK_SCRIPT=(-s "$SDIR/api_keys.lua")
    fi
    SCHEME="$(scheme_of "$scen")"
    case "$scen" in https*) make_certificate ;; esac
    [ "$scen" = https_handshake ] && WRK_SCRIPT=(-H "Connection: close")
    say "scenario $scen: $(scenario_title "$scen")"
    if wants nginx; then
        start_nginx "$scen"
        check_limiting "$scen" nginx
    fi
    if wants tollgate; then
        start_tollgate "$scen"
        check_limiting "$scen" tollgate
    fi
    if wants tollgate_base; then
        start_tollgate "$scen" tollgate_base "$BASE_BIN"
        check_limiting "$scen" tollgate_base
    fi
    measure "$scen"
    report "$scen"
    stop_proxies
done

if [ "${#SCENARIOS[@]}" -gt 1 ] && [ -s "$WORKDIR/summary.tsv" ]; then
    echo
    echo "### Summary: median req/s per scenario"
    echo
    echo "| scenario | nginx req/s | tollgate req/s | tollgate/nginx | runs flagged |"
    echo "|:---------|------------:|---------------:|---------------:|-------------:|"
    awk -F'\t' '{ printf "| %s | %s | %s | %sx | %s |\n", $1, $2, $3, $4, $5 }' "$WORKDIR/summary.tsv"
fi
