#!/usr/bin/env bash
# callgrind.sh — user-space instructions per request, tollgate against nginx, counted by valgrind's
# callgrind (deterministic, unlike timings on a shared machine): each proxy runs under callgrind
# twice per scenario, once for FEW and once for MANY requests, and (total(MANY) - total(FEW)) /
# (MANY - FEW) is what one request costs, start-up and shut-down cancelled out. Allocations per
# request are counted the same way: calls into malloc, calloc, realloc, posix_memalign and
# aligned_alloc (nginx takes its per-request pools from posix_memalign), and into the entry points
# Rust's global allocator calls when it is jemalloc (tikv-jemallocator: _rjem_malloc, _rjem_mallocx,
# _rjem_calloc, _rjem_realloc, _rjem_rallocx) or mimalloc (mi_malloc_aligned, mi_zalloc_aligned,
# mi_realloc_aligned), so that the count means the same whichever allocator the binary has.
#
# Scenarios (SCENARIOS, default the first four):
#   plain         proxied to a keep-alive upstream (the bench_upstream example);
#   limit_pass    through a zone keyed by X-API-Key, every request admitted (1,000 keys round robin);
#   limit_reject  one client at 1r/s nodelay: every request but the first answered 429 by the proxy;
#   https         plain over TLS 1.3 with keep-alive, one self-signed ECDSA P-256 certificate (made with
#                 openssl) for both, both with TLS_AES_128_GCM_SHA256 (tollgate's first choice; nginx
#                 is told with ssl_conf_command, as python's client would pick AES-256 from nginx): the
#                 user-space cost of TLS on a request. The handshakes are in FEW and MANY alike (CONNS
#                 connections each) and cancel out;
#   limit_close   as limit_reject, refused with no answer (tollgate's `limit_action = "close"`,
#                 nginx's `limit_req_status 444`): each refusal costs a new connection, whose
#                 accept is counted too (the client reconnects);
#   limit_tarpit  as limit_reject, each refusal held 1 ms then answered 429 and closed
#                 (`limit_action = "tarpit"`; nginx has no such thing and is left out);
#   jwt           plain, through a location with `auth.jwt` (one P-256 key in a file), every request
#                 carrying the same ES256 token (benches/jwt_token.sh): checked once, then remembered;
#                 nginx (open source: no JWT check) proxies as in plain;
#   traced        plain, with `[trace]` sending spans to the upstream (which takes the POSTs as it
#                 takes any request) at `sample = TRACE_SAMPLE` (default 0.01); nginx proxies as in
#                 plain: the cost of traces, the exporter thread's included;
#   logged        plain, with an access log written to a file in both, in one nginx `log_format`
#                 template (nginx's combined plus the upstream's address, status and times): the
#                 cost of a log line;
#   file_1k       a 1,024-byte static file, `/files/1k.bin` under a `root` (nginx `sendfile on;
#                 tcp_nopush on;`, tollgate's default sendfile): the user-space cost of a file answer.
# Both proxies: one worker, no access log, upstream keepalive; tollgate sends its RateLimit headers,
# nginx sends none (as in proxy_vs_nginx.sh). The client (python3, CONNS keep-alive connections,
# requests in turn) is not measured.
#
# Run (needs valgrind, nginx and python3; installs valgrind and nginx-light with apt-get if missing):
#   benches/callgrind.sh
#   SCENARIOS=plain FEW=200 MANY=1200 benches/callgrind.sh
#   ONLY=tollgate TOLLGATE_BIN=/path/to/other/tollgate benches/callgrind.sh   # e.g. a baseline build
#   SCENARIOS=plain ONLY="tollgate nginx floor" benches/callgrind.sh
#   KEEP=1 ... benches/callgrind.sh   # keeps the callgrind outputs for callgrind_annotate
# The floor (examples/bench_floor.rs, plain only) is the least a tokio proxy does per request: the
# runtime and four socket calls, each head passed on as it came, unparsed; it is what no tokio-based
# proxy can go under.
# Prints a Markdown table: instructions and allocations per request of each proxy, and the ratio.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCENARIOS="${SCENARIOS:-plain limit_pass limit_reject https}"
# The `logged` scenario's line, for both (LOG_FORMAT=combined, with ONLY=tollgate: tollgate's own).
LOG_FORMAT="${LOG_FORMAT:-}"
[ -n "$LOG_FORMAT" ] || LOG_FORMAT='$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" $upstream_addr $upstream_status $request_time $upstream_response_time'
FEW="${FEW:-500}"
MANY="${MANY:-2500}"
CONNS="${CONNS:-4}"
ONLY="${ONLY:-}"
BUILD="${BUILD:-1}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
TOLLGATE_BIN="${TOLLGATE_BIN:-$TARGET_DIR/release/tollgate}"
UPSTREAM_BIN="${UPSTREAM_BIN:-$TARGET_DIR/release/examples/bench_upstream}"
FLOOR_BIN="${FLOOR_BIN:-$TARGET_DIR/release/examples/bench_floor}"
NGINX="${NGINX:-/usr/sbin/nginx}"

say() { echo "callgrind: $*" >&2; }
die() { say "$*"; exit 1; }
[ "$MANY" -gt "$FEW" ] || die "MANY ($MANY) must be more than FEW ($FEW)"

missing=()
command -v valgrind >/dev/null || missing+=(valgrind)
[[ -n "$ONLY" && " $ONLY " != *" nginx "* ]] || [ -x "$NGINX" ] || missing+=(nginx-light)
command -v python3 >/dev/null || missing+=(python3)
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]} from Debian"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "$BUILD" = 1 ]; then
    # The binary alone first: built with the examples, it would get the dev-dependencies'
    # features (tokio's test-util, whose clock costs more), which no release has.
    (cd "$ROOT" && cargo build --release --bin tollgate)
    (cd "$ROOT" && cargo build --release --example bench_upstream --example bench_floor)
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/callgrind.XXXXXX")"
chmod 755 "$WORK"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ "${KEEP:-0}" = 1 ]; then say "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {
    local i
    for ((i = 0; i < 600; i++)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    die "nothing listens on $1"
}

cat >"$WORK/client.py" <<'EOF'
import http.client, ssl, sys
port, requests, conns, scenario = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if scenario == "https":
    tls = ssl.create_default_context()
    tls.check_hostname = False
    tls.verify_mode = ssl.CERT_NONE
    pool = [http.client.HTTPSConnection("127.0.0.1", port, context=tls) for _ in range(conns)]
else:
    pool = [http.client.HTTPConnection("127.0.0.1", port) for _ in range(conns)]
statuses = {}
for i in range(requests):
    headers = {"Host": "bench"}
    if scenario == "limit_pass":
        headers["X-API-Key"] = "key-%028d" % (i % 1000)
    if scenario == "jwt":
        headers["Authorization"] = "Bearer " + open(sys.argv[5]).read()
    conn = pool[i % conns]
    try:
        conn.request("GET", "/files/1k.bin" if scenario == "file_1k" else "/", headers=headers)
        response = conn.getresponse()
        response.read()
        status = response.status
    except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
        # Closed unanswered (a 444): the next request on it connects again.
        conn.close()
        status = 444
    statuses[status] = statuses.get(status, 0) + 1
suites = sorted({conn.sock.cipher()[0] for conn in pool if scenario == "https" and conn.sock})
print(" ".join(["%d:%d" % kv for kv in sorted(statuses.items())] + suites))
EOF

# One self-signed ECDSA P-256 certificate for 127.0.0.1, for the https scenario.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -days 2 -subj /CN=localhost \
    -addext subjectAltName=IP:127.0.0.1 >"$WORK/openssl.log" 2>&1 ||
    { cat "$WORK/openssl.log" >&2; die "openssl could not make the test certificate"; }
chmod 644 "$WORK/key.pem"

# The jwt scenario's key set and token.
# shellcheck source=benches/jwt_token.sh
source "$ROOT/benches/jwt_token.sh"
make_jwt "$WORK/jwt" || die "the jwt scenario's token could not be made"

# The file_1k scenario's tree.
mkdir -p "$WORK/www/files"
head -c 1024 /dev/urandom >"$WORK/www/files/1k.bin"
chmod -R a+rX "$WORK/www"

UP_PORT="$(port)"
"$UPSTREAM_BIN" "127.0.0.1:$UP_PORT" >"$WORK/upstream.log" 2>&1 &
PIDS+=($!)
wait_port "$UP_PORT"

tollgate_conf() { # scenario port
    local hold=""
    [ "$1" != limit_tarpit ] || hold='tarpit_hold = "1ms"'
    cat <<EOF
[server]
$(if [ "$1" = https ]; then echo "listen_tls = [\"127.0.0.1:$2\"]"; else echo "listen = [\"127.0.0.1:$2\"]"; fi)
workers = 1
$hold
[log]
$(if [ "$1" = logged ]; then printf 'access = "%s"\nformat = '"'"'%s'"'"'\n' "$WORK/tollgate-access.log" "$LOG_FORMAT"; else echo 'access = "off"'; fi)
$(if [ "$1" = traced ]; then printf '[trace]\notlp = "http://127.0.0.1:%s/v1/traces"\nsample = %s\n' "$UP_PORT" "${TRACE_SAMPLE:-0.01}"; fi)
$(if [ "$1" = https ]; then printf '[[tls.certificates]]\ncert = "%s"\nkey = "%s"\n' "$WORK/cert.pem" "$WORK/key.pem"; fi)
[upstreams.app]
servers = ["127.0.0.1:$UP_PORT"]
keepalive = 64
EOF
    case "$1" in
        limit_pass) printf '[zones.k]\nkey = "$http_x_api_key"\nrate = "1000000r/s"\n' ;;
        limit_reject | limit_close | limit_tarpit)
            printf '[zones.r]\nkey = "$binary_remote_addr"\nrate = "1r/s"\n' ;;
    esac
    [ "$1" != file_1k ] || printf '[[location]]\nmatch = "/files/"\nroot = "%s"\n\n' "$WORK/www"
    printf '[[location]]\nmatch = "/"\nupstream = "app"\n'
    [ "$1" != jwt ] || printf 'auth = { jwt = { jwks = "%s" } }\n' "$WORK/jwt/jwks.json"
    case "$1" in
        limit_pass) printf 'limit = [{ zone = "k", burst = 1000000, nodelay = true }]\n' ;;
        limit_reject) printf 'limit = [{ zone = "r", nodelay = true }]\n' ;;
        limit_close) printf 'limit = [{ zone = "r", nodelay = true }]\nlimit_action = "close"\n' ;;
        limit_tarpit) printf 'limit = [{ zone = "r", nodelay = true }]\nlimit_action = "tarpit"\n' ;;
    esac
}

nginx_conf() { # scenario port dir
    local zone="" limit="" files="" listen="listen 127.0.0.1:$2;"
    [ "$1" != file_1k ] || files="sendfile on; tcp_nopush on; location /files/ { root $WORK/www; }"
    [ "$1" != logged ] || files="access_log $WORK/nginx-access.log t;"
    if [ "$1" = https ]; then
        listen="listen 127.0.0.1:$2 ssl; ssl_certificate $WORK/cert.pem; ssl_certificate_key $WORK/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3; ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;"
    fi
    case "$1" in
        limit_pass)
            zone="limit_req_zone \$http_x_api_key zone=k:10m rate=1000000r/s;"
            limit="limit_req zone=k burst=1000000 nodelay;" ;;
        limit_reject)
            zone="limit_req_zone \$binary_remote_addr zone=r:10m rate=1r/s;"
            limit="limit_req zone=r nodelay; limit_req_status 429; limit_req_log_level info;" ;;
        limit_close)
            zone="limit_req_zone \$binary_remote_addr zone=r:10m rate=1r/s;"
            limit="limit_req zone=r nodelay; limit_req_status 444; limit_req_log_level info;" ;;
    esac
    cat <<EOF
worker_processes 1;
error_log $3/error.log warn;
pid $3/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    log_format t '$LOG_FORMAT';
    $zone
    upstream app { server 127.0.0.1:$UP_PORT; keepalive 64; }
    server {
        $listen
        $files
        location / {
            $limit
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host \$host;
            proxy_set_header X-Real-IP \$remote_addr;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_pass http://app;
        }
    }
}
EOF
}

# Calls into the C allocator's entry points in a callgrind output file.
cat >"$WORK/allocs.awk" <<'EOF'
/^c?fn=\([0-9]+\) / {
    id = $1; sub(/^c?fn=/, "", id)
    name = $0; sub(/^c?fn=\([0-9]+\) /, "", name)
    names[id] = name
}
/^cfn=/ { id = $1; sub(/^cfn=/, "", id); callee = names[id] }
/^calls=/ && callee ~ /^((_rjem_)?(malloc|calloc|realloc|posix_memalign|aligned_alloc)|_rjem_(mallocx|rallocx)|mi_(malloc|zalloc|realloc)_aligned)$/ {
    n = $1; sub(/^calls=/, "", n); total += n
}
END { print total + 0 }
EOF

# run PROXY SCENARIO REQUESTS: prints the proxy's total user-space instructions and allocations.
run() {
    local proxy="$1" scen="$2" requests="$3" p dir out pid answered
    p="$(port)"
    dir="$WORK/$proxy-$scen-$requests"
    mkdir -p "$dir"
    chmod 777 "$dir"
    out="$dir/callgrind.out"
    if [ "$proxy" = tollgate ]; then
        tollgate_conf "$scen" "$p" >"$dir/gateway.toml"
        valgrind --tool=callgrind --callgrind-out-file="$out" \
            "$TOLLGATE_BIN" -c "$dir/gateway.toml" >"$dir/log" 2>&1 &
    elif [ "$proxy" = floor ]; then
        valgrind --tool=callgrind --callgrind-out-file="$out" \
            "$FLOOR_BIN" "127.0.0.1:$p" "127.0.0.1:$UP_PORT" >"$dir/log" 2>&1 &
    else
        nginx_conf "$scen" "$p" "$dir" >"$dir/nginx.conf"
        valgrind --tool=callgrind --callgrind-out-file="$out" \
            "$NGINX" -p "$dir" -c "$dir/nginx.conf" -g 'daemon off; master_process off;' >"$dir/log" 2>&1 &
    fi
    pid=$!
    PIDS+=("$pid")
    wait_port "$p"
    answered="$(python3 "$WORK/client.py" "$p" "$requests" "$CONNS" "$scen" "$WORK/jwt/token")"
    if [ "$proxy" = nginx ]; then kill -QUIT "$pid"; else kill -TERM "$pid"; fi
    wait "$pid" || true
    say "$proxy $scen $requests requests: statuses $answered"
    echo "$(awk '/^(summary|totals):/ { print $2; exit }' "$out") $(awk -f "$WORK/allocs.awk" "$out")"
}

proxies="tollgate nginx"
[ -z "$ONLY" ] || proxies="$ONLY"
echo "| scenario | proxy | instructions per request ($MANY - $FEW requests, $CONNS connections) | allocations per request |"
echo "|:--|:--|--:|--:|"
for scen in $SCENARIOS; do
    declare -A per=()
    for proxy in $proxies; do
        if [ "$proxy" = floor ] && [ "$scen" != plain ]; then continue; fi
        if [ "$proxy" = nginx ] && [ "$scen" = limit_tarpit ]; then continue; fi
        read -r few few_allocs <<<"$(run "$proxy" "$scen" "$FEW")"
        read -r many many_allocs <<<"$(run "$proxy" "$scen" "$MANY")"
        per[$proxy]="$(awk -v a="$many" -v b="$few" -v n="$((MANY - FEW))" 'BEGIN { printf "%.0f", (a - b) / n }')"
        allocs="$(awk -v a="$many_allocs" -v b="$few_allocs" -v n="$((MANY - FEW))" 'BEGIN { printf "%.2f", (a - b) / n }')"
        echo "| $scen | $proxy | ${per[$proxy]} | $allocs |"
    done
    if [ -n "${per[tollgate]:-}" ] && [ -n "${per[nginx]:-}" ]; then
        echo "| $scen | tollgate/nginx | $(awk -v a="${per[tollgate]}" -v b="${per[nginx]}" 'BEGIN { printf "%.2fx", a / b }') | |"
    fi
    if [ -n "${per[floor]:-}" ] && [ -n "${per[nginx]:-}" ]; then
        echo "| $scen | floor/nginx | $(awk -v a="${per[floor]}" -v b="${per[nginx]}" 'BEGIN { printf "%.2fx", a / b }') | |"
    fi
    unset per
done
