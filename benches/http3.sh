#!/usr/bin/env bash
# http3.sh — HTTP/3 against tollgate's own HTTP/2 over TLS, through the real gateway
# (`tollgate -c FILE`), with the same client (examples/bench_h3_load.rs: hyper for h2, quinn and
# h3 for h3; no wrk or h2load here speaks HTTP/3), the same concurrency and the same upstream
# (examples/bench_upstream.rs, `hello\n`).
#
# One gateway, `workers = 1` (HTTP/3's connections are served by one worker; HTTP/2's would spread
# over several, so one worker keeps the comparison fair), `listen_tls = [{ addr, quic = true }]`,
# access log off, one location proxying to the upstream. Runs are interleaved, h2 h3 h3 h2 h2 h3 …,
# RUNS times each, DURATION seconds each, after a warm-up of each. For each run: requests per
# second, p50 and p99 latency (the client's), and tollgate's CPU time per request (/proc, user +
# system). Prints every run, the medians and the ratios h3/h2, as Markdown.
#
# Issue 38's goal: HTTP/3 CPU per request at most 2x HTTP/2's, and a p99 no worse.
#
# SCENARIO=download measures bulk download instead: each request fetches a 64 MiB file the gateway
# serves from disk (`root`; no upstream), one connection with one request at a time by default;
# it prints throughput (MiB/s) and tollgate's CPU time per MiB sent.
#
# Run (about 2 × RUNS × DURATION seconds plus the build):
#   benches/http3.sh
#   RUNS=5 DURATION=8 CONNECTIONS=4 STREAMS=16 benches/http3.sh
#   BUILD=0 benches/http3.sh        # binaries already built
#   SCENARIO=download RUNS=5 DURATION=8 benches/http3.sh
#
# Environment (defaults in brackets): SCENARIO [requests] (or download), RUNS [5], DURATION [8],
# WARMUP [2], CONNECTIONS [4; 1 for download], STREAMS [16; 1 for download] (requests in flight
# per connection), BUILD [1].
# All traffic goes to 127.0.0.1 only. A benchmark, not a test: CI does not run it.

set -euo pipefail

BENCH=http3
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=benches/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SCENARIO="${SCENARIO:-requests}"
RUNS="${RUNS:-5}"
DURATION="${DURATION:-8}"
WARMUP="${WARMUP:-2}"
case "$SCENARIO" in
requests) CONNECTIONS="${CONNECTIONS:-4}" STREAMS="${STREAMS:-16}" URL_PATH=/ ;;
download) CONNECTIONS="${CONNECTIONS:-1}" STREAMS="${STREAMS:-1}" URL_PATH=/bulk/64m ;;
*) echo "SCENARIO is requests or download, not $SCENARIO" >&2 && exit 2 ;;
esac
BUILD="${BUILD:-1}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
USED_PORTS=" "
PORT_LO=10000
PORT_HI=32767
CLK_TCK="$(getconf CLK_TCK 2>/dev/null || echo 100)"

if [ "$BUILD" = 1 ]; then
    # The binary alone first, as benches/callgrind.sh builds it (without the dev-dependencies'
    # features), then the examples.
    (cd "$ROOT" && cargo build --release --bin tollgate)
    (cd "$ROOT" && cargo build --release --example bench_upstream --example bench_h3_load)
fi
TOLLGATE="$TARGET_DIR/release/tollgate"
UPSTREAM="$TARGET_DIR/release/examples/bench_upstream"
CLIENT="$TARGET_DIR/release/examples/bench_h3_load"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/http3.XXXXXX")"
UPSTREAM_PID=""
GATEWAY_PID=""
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    stop_pid "$GATEWAY_PID" tollgate
    stop_pid "$UPSTREAM_PID" upstream
    [ "$status" -eq 0 ] || show_logs "$WORK/tollgate.log" "$WORK/upstream.log"
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=a.test \
    -addext subjectAltName=DNS:a.test -keyout "$WORK/a.key" -out "$WORK/a.pem" 2>/dev/null

mkdir "$WORK/bulk"
head -c $((64 << 20)) /dev/urandom >"$WORK/bulk/64m"

UP_PORT="$(free_port)"
"$UPSTREAM" "127.0.0.1:$UP_PORT" >"$WORK/upstream.log" 2>&1 &
UPSTREAM_PID=$!
TLS_PORT="$(free_port)"
cat >"$WORK/gateway.toml" <<EOF
[server]
listen_tls = [{ addr = "127.0.0.1:$TLS_PORT", quic = true }]
workers = 1
[log]
access = "off"
[tls]
[[tls.certificates]]
cert = "$WORK/a.pem"
key = "$WORK/a.key"
[upstreams.app]
servers = ["127.0.0.1:$UP_PORT"]
[[location]]
match = "/"
upstream = "app"
[[location]]
match = "/bulk/"
root = "$WORK"
EOF
"$TOLLGATE" -c "$WORK/gateway.toml" >"$WORK/tollgate.log" 2>&1 &
GATEWAY_PID=$!
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$TLS_PORT") 2>/dev/null; }
for _ in $(seq 100); do
    listening && break
    sleep 0.05
done
listening || die "tollgate is not listening on $TLS_PORT"

# run PROTO SECONDS: prints "requests errors p50_us p99_us cpu_us_per_request mib_per_s cpu_us_per_mib"
run() {
    local proto="$1" seconds="$2" cpu0 cpu1 out
    cpu0="$(cpu_ticks "$GATEWAY_PID")"
    out="$("$CLIENT" "$proto" "127.0.0.1:$TLS_PORT" a.test "$CONNECTIONS" "$STREAMS" "$seconds" "$URL_PATH")"
    cpu1="$(cpu_ticks "$GATEWAY_PID")"
    awk -v out="$out" -v c="$((cpu1 - cpu0))" -v hz="$CLK_TCK" 'BEGIN {
        split(out, f, " "); cpu = c / hz * 1e6; mib = f[5] / 1048576
        printf "%s %s %s %s %.1f %.1f %.1f\n", f[1], f[2], f[3], f[4], (f[1] > 0 ? cpu / f[1] : -1),
            (f[6] > 0 ? mib / f[6] : 0), (mib > 0 ? cpu / mib : -1) }'
}

for proto in h2 h3; do
    read -r requests errors _ <<<"$(run "$proto" "$WARMUP")"
    [ "$requests" -gt 0 ] || die "no $proto answer in the warm-up"
    [ "$errors" -eq 0 ] || die "$errors $proto requests failed in the warm-up"
done

RESULTS="$WORK/results"
: >"$RESULTS"
for ((r = 1; r <= RUNS; r++)); do
    order="h2 h3"
    [ $((r % 2)) -eq 0 ] && order="h3 h2"
    for proto in $order; do
        read -r requests errors p50 p99 cpu rate cpu_mib <<<"$(run "$proto" "$DURATION")"
        echo "$proto $r $((requests / DURATION)) $p50 $p99 $cpu $errors $rate $cpu_mib" >>"$RESULTS"
        bulk=""
        [ "$SCENARIO" = download ] && bulk=", $rate MiB/s, $cpu_mib µs CPU/MiB"
        say "run $r $proto: $((requests / DURATION)) req/s, p50 ${p50} µs, p99 ${p99} µs, ${cpu} µs CPU/request$bulk, $errors errors"
    done
done

median() { # median PROTO COLUMN
    awk -v p="$1" -v c="$2" '$1 == p { print $c }' "$RESULTS" | sort -n |
        awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

echo
if [ "$SCENARIO" = download ]; then
    echo "Bulk download of a 64 MiB file, HTTP/3 against HTTP/2 over TLS, tollgate \`workers = 1\`, $CONNECTIONS connections × $STREAMS requests in flight, $RUNS interleaved runs of ${DURATION} s (medians):"
    echo
    echo "| protocol | MiB/s | tollgate CPU µs/MiB |"
    echo "|:--|--:|--:|"
    for proto in h2 h3; do
        echo "| $proto | $(median "$proto" 8) | $(median "$proto" 9) |"
    done
    awk -v a="$(median h3 8)" -v b="$(median h2 8)" -v c="$(median h3 9)" -v d="$(median h2 9)" 'BEGIN {
        printf "| h3 / h2 | %.2fx | %.2fx |\n", a / b, c / d }'
    exit 0
fi
echo "HTTP/3 against HTTP/2 over TLS, tollgate \`workers = 1\`, $CONNECTIONS connections × $STREAMS requests in flight, $RUNS interleaved runs of ${DURATION} s (medians):"
echo
echo "| protocol | req/s | p50 µs | p99 µs | tollgate CPU µs/request |"
echo "|:--|--:|--:|--:|--:|"
for proto in h2 h3; do
    echo "| $proto | $(median "$proto" 3) | $(median "$proto" 4) | $(median "$proto" 5) | $(median "$proto" 6) |"
done
awk -v a="$(median h3 3)" -v b="$(median h2 3)" -v c="$(median h3 6)" -v d="$(median h2 6)" \
    -v e="$(median h3 5)" -v f="$(median h2 5)" 'BEGIN {
    printf "| h3 / h2 | %.2fx | | %.2fx | %.2fx |\n", a / b, e / f, c / d }'
