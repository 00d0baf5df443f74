#!/usr/bin/env bash
# conn_memory.sh — memory per idle open connection, memory given back after they close, and idle
# memory, tollgate against nginx (issue 34, points 2 and 3). Bytes, not timings: the figures hold
# on a shared machine (the probe's latency does not).
#
# Scenarios (SCENARIOS, default all five):
#   idle      each server started fresh with the h1 config below (nginx: worker_connections 1024),
#             no request ever made (the one connection that finds the port open sends nothing):
#             total PSS of all its processes (nginx: master + worker, tollgate: its one process),
#             read SETTLE s (default 3) after its port answers. This is "idle memory" (point 3);
#   h1        HTTP/1.1 over plain TCP, CONNS_H1 connections (default 5,000);
#   h1_tls    HTTP/1.1 over TLS (ALPN http/1.1), CONNS_H1 connections;
#   h2        HTTP/2 over plain TCP with prior knowledge (h2c), CONNS_H2 connections (default 1,000);
#   h2_tls    HTTP/2 over TLS (ALPN h2), CONNS_H2 connections.
# CONNS sets both counts at once.
#
# Per connection scenario and server (tollgate, nginx; ONLY picks one), with the server started
# fresh each time:
#   1. SETTLE s after the port answers, total PSS and RSS of the server's processes (the sum over
#      the process and its descendants of Pss/Rss in /proc/PID/smaps_rollup): "at start";
#   2. a probe client (its own process, one keep-alive connection, the scenario's protocol) sends a
#      request every PROBE_MS ms (default 10) until the end, and reports p50/p99/max latency
#      (goal: p99 < 50 ms) and answers other than 200; 1 s after it starts, RSS and PSS again:
#      "warm", the server with the code that serves a request paged in and one connection open;
#   3. ROUNDS rounds (default 4), each: open the connections BATCH at a time (default 100; all
#      of a batch answered before the next opens), each making one real request, GET / proxied to
#      the upstream, its 200 read fully, then left open and idle; IDLE_WAIT s later (default 3:
#      tollgate's idle HTTP/1.1 connections let their buffers go after 0.5 to 1 s, and jemalloc
#      gives the pages back within 1 s more; nginx frees them at once) PSS again; then close them all (client side, FIN), wait CLOSE_WAIT s (default 5; longer
#      than tollgate's allocator takes to purge freed pages, jemalloc's dirty_decay_ms of 1 s), read RSS.
#      Per idle connection = (PSS held - PSS before opening) / connections, of round 1. Memory not
#      given back shows as RSS after close / RSS when warm, per round (goal: within 1.2). Warm,
#      not at start: the code a first request pages in (file-backed, ~1 MB for tollgate's one
#      static binary) is a server's once, not memory held for connections that are gone.
# The client is python3 (non-blocking sockets, selectors, the ssl module; HTTP/2 frames and HPACK
# literals encoded by hand), raises its own RLIMIT_NOFILE to the hard limit, and is not measured;
# the opener runs at nice 10, so that its own CPU (TLS handshakes) shows less in the probe's latency.
#
# Both servers get the same settings: one worker (nginx `worker_processes 1`, tollgate
# `workers = 1`), `keepalive_timeout 300s` (idle connections stay for the whole run; nginx 1.22
# applies it to HTTP/2 too), nginx `keepalive_requests 1000000` (tollgate has no such limit), no
# access log, upstream keepalive 64 to the bench_upstream example (one-thread hyper, "hello\n").
# TLS: one self-signed ECDSA P-256 certificate made with openssl in the temp dir, TLS 1.2 and 1.3 on
# both (nginx's other TLS defaults: tickets, no session cache; tollgate: tickets and its session
# cache). HTTP/2: nginx `listen ... http2` (plain and TLS), tollgate's listeners serve it by default.
# nginx: `worker_rlimit_nofile` = the hard limit and `worker_connections` = connections + 512;
# nginx allocates and touches its connection and event structures (~0.4 KB each) for all of
# worker_connections at start, so they are in its PSS "at start", not in the per-connection delta.
# tollgate raises its own soft RLIMIT_NOFILE to the hard one.
#
# Run (needs nginx, openssl and python3; installs nginx-light, openssl and python3 with apt-get when
# missing; builds tollgate and the bench_upstream example with cargo unless BUILD=0):
#   benches/conn_memory.sh
#   SCENARIOS="idle h1" ONLY=tollgate benches/conn_memory.sh
#   CONNS=500 ROUNDS=2 benches/conn_memory.sh                     # a quick look
#   ONLY=tollgate TOLLGATE_BIN=/path/to/other/tollgate benches/conn_memory.sh   # another build
# Prints a Markdown table: per scenario and server, KB (1024 bytes) per idle connection and the
# ratio tollgate/nginx, the probe's latency, RSS after close / when warm per round, PSS at start.
# A benchmark, not a test: `cargo test` does not run it. All traffic stays on 127.0.0.1.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCENARIOS="${SCENARIOS:-idle h1 h1_tls h2 h2_tls}"
CONNS_H1="${CONNS_H1:-${CONNS:-5000}}"
CONNS_H2="${CONNS_H2:-${CONNS:-1000}}"
ONLY="${ONLY:-tollgate nginx}"
BUILD="${BUILD:-1}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
TOLLGATE_BIN="${TOLLGATE_BIN:-$TARGET_DIR/release/tollgate}"
UPSTREAM_BIN="${UPSTREAM_BIN:-$TARGET_DIR/release/examples/bench_upstream}"
NGINX="${NGINX:-/usr/sbin/nginx}"
export BATCH="${BATCH:-100}" ROUNDS="${ROUNDS:-4}" SETTLE="${SETTLE:-3}" IDLE_WAIT="${IDLE_WAIT:-2}"
export CLOSE_WAIT="${CLOSE_WAIT:-5}" PROBE_MS="${PROBE_MS:-10}"

BENCH=conn_memory
# shellcheck source=benches/common.sh
source "$ROOT/benches/common.sh"

missing=()
[[ " $ONLY " != *" nginx "* ]] || [ -x "$NGINX" ] || missing+=(nginx-light)
command -v openssl >/dev/null || missing+=(openssl)
command -v python3 >/dev/null || missing+=(python3)
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]} from Debian"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "$BUILD" = 1 ]; then
    # The binary alone first: built with the examples, it would get the dev-dependencies'
    # features (tokio's test-util), which no release has.
    (cd "$ROOT" && cargo build --release --bin tollgate)
    (cd "$ROOT" && cargo build --release --example bench_upstream)
fi
NOFILE="$(ulimit -Hn)"
[ "$NOFILE" = unlimited ] && NOFILE=1048576
for n in "$CONNS_H1" "$CONNS_H2"; do
    [ "$NOFILE" -gt $((n + 600)) ] || die "the hard RLIMIT_NOFILE ($NOFILE) is too low for $n connections"
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/conn_memory.XXXXXX")"
chmod 755 "$WORK" # nginx's worker runs as an unprivileged user and makes its temp dirs here
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do stop_pid "$pid" server; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

USED_PORTS=" "
PORT_LO=10000
PORT_HI=32767
if read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && [ "$eph_lo" -gt 11024 ]; then
    PORT_HI=$((eph_lo - 1))
fi
wait_port() { # wait_port PORT PID
    local i
    for ((i = 0; i < 300; i++)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        kill -0 "$2" 2>/dev/null || die "the server (pid $2) exited before listening on $1"
        sleep 0.1
    done
    die "nothing listens on $1"
}

TLS_DIR="$WORK/tls"
mkdir -p "$TLS_DIR"
chmod 755 "$TLS_DIR"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$TLS_DIR/key.pem" -out "$TLS_DIR/cert.pem" -days 2 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 >"$TLS_DIR/openssl.log" 2>&1 ||
    { cat "$TLS_DIR/openssl.log" >&2; die "openssl could not make the test certificate"; }
chmod 644 "$TLS_DIR/key.pem"

cat >"$WORK/client.py" <<'EOF'
"""conn_memory.sh's client: idle connections in batches, a latency probe, and the servers' memory.

  client.py run PORT PROTO TLS CONNS SERVER_PID   -> one JSON line on stdout
  client.py probe PORT PROTO TLS                   -> on SIGTERM, one JSON line of latencies (ms)
PROTO is h1 or h2 (h2c with prior knowledge without TLS, ALPN h2 with it). Settings come from the
environment: BATCH, ROUNDS, SETTLE, IDLE_WAIT, CLOSE_WAIT, PROBE_MS.
"""
import json, os, resource, selectors, signal, socket, ssl, struct, subprocess, sys, time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def tls_context(proto):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"] if proto == "h2" else ["http/1.1"])
    return ctx


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def h2_request(stream, tls):
    # HPACK (RFC 7541): :method GET (2), :scheme http/https (6/7), :path / (4) from the static
    # table; :authority (name 1) as a literal without indexing, so no dynamic table is needed.
    block = bytes([0x82, 0x87 if tls else 0x86, 0x84, 0x01, 9]) + b"localhost"
    return frame(1, 0x5, stream, block)  # HEADERS, END_STREAM | END_HEADERS


H1_REQUEST = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"


class Conn:
    """One client connection: connect, TLS handshake, then requests one at a time."""

    def __init__(self, port, proto, ctx):
        self.proto, self.ctx, self.tls = proto, ctx, ctx is not None
        self.sock = socket.socket()
        self.sock.setblocking(False)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        err = self.sock.connect_ex(("127.0.0.1", port))
        if err not in (0, 115):  # EINPROGRESS
            raise OSError(err, os.strerror(err))
        self.state, self.want = "connect", selectors.EVENT_WRITE
        self.out, self.inbuf, self.stream = b"", b"", 1
        self.status, self.started, self.finished = None, False, False

    def request(self):
        """Queues the next request (on a connection that is done with the previous one)."""
        if self.proto == "h2":
            req = h2_request(self.stream, self.tls)
            if not self.started:
                # The preface and an empty SETTINGS frame come first.
                req = PREFACE + frame(4, 0, 0) + req
        else:
            req = H1_REQUEST
        self.started = True
        self.out += req
        self.status, self.finished = None, False
        self.state, self.want = "send", selectors.EVENT_WRITE

    def step(self):
        """Moves on as far as the socket allows; returns True once the response is read."""
        try:
            if self.state == "connect":
                err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, os.strerror(err))
                if self.tls:
                    self.sock = self.ctx.wrap_socket(self.sock, server_hostname="localhost",
                                                     do_handshake_on_connect=False)
                    self.state = "handshake"
                else:
                    self.request()
            if self.state == "handshake":
                self.sock.do_handshake()
                want = "h2" if self.proto == "h2" else "http/1.1"
                if self.sock.selected_alpn_protocol() not in (want, None if want == "http/1.1" else want):
                    raise OSError("ALPN: server chose %r" % self.sock.selected_alpn_protocol())
                self.request()
            if self.state == "send":
                while self.out:
                    self.out = self.out[self.sock.send(self.out):]
                if self.finished:
                    self.state = "done"
                    return True
                self.state, self.want = "recv", selectors.EVENT_READ
            if self.state == "recv":
                while True:
                    data = self.sock.recv(65536)
                    if not data:
                        raise OSError("connection closed by the server")
                    self.inbuf += data
                    self.finished = self.parse()
                    if self.out:  # h2: an ACK to send back first
                        self.state, self.want = "send", selectors.EVENT_WRITE
                        return self.step()
                    if self.finished:
                        self.state = "done"
                        return True
        except ssl.SSLWantReadError:
            self.want = selectors.EVENT_READ
        except ssl.SSLWantWriteError:
            self.want = selectors.EVENT_WRITE
        except BlockingIOError:
            pass
        return False

    def parse(self):
        return self.parse_h2() if self.proto == "h2" else self.parse_h1()

    def parse_h1(self):
        end = self.inbuf.find(b"\r\n\r\n")
        if end < 0:
            return False
        head = self.inbuf[:end].decode("latin-1").split("\r\n")
        self.status = int(head[0].split()[1])
        fields = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in head[1:])}
        body = self.inbuf[end + 4:]
        if "content-length" in fields:
            n = int(fields["content-length"])
            if len(body) < n:
                return False
            self.inbuf = body[n:]
            return True
        if fields.get("transfer-encoding", "").lower() == "chunked":
            at = body.find(b"0\r\n\r\n")
            if at < 0:
                return False
            self.inbuf = body[at + 5:]
            return True
        raise OSError("response without Content-Length or chunked body")

    def parse_h2(self):
        while len(self.inbuf) >= 9:
            n = int.from_bytes(self.inbuf[:3], "big")
            if len(self.inbuf) < 9 + n:
                return False
            kind, flags = self.inbuf[3], self.inbuf[4]
            stream = int.from_bytes(self.inbuf[5:9], "big") & 0x7FFFFFFF
            payload, self.inbuf = self.inbuf[9:9 + n], self.inbuf[9 + n:]
            if kind == 4 and not flags & 1:  # SETTINGS: acknowledged
                self.out += frame(4, 1, 0)
            elif kind == 6 and not flags & 1:  # PING
                self.out += frame(6, 1, 0, payload)
            elif kind == 7:
                raise OSError("GOAWAY %r" % payload[:8])
            elif kind == 3 and stream == self.stream:
                raise OSError("RST_STREAM %r" % payload)
            elif kind == 1 and stream == self.stream:
                block = payload
                if flags & 0x8:  # PADDED
                    block = block[1:len(block) - block[0]]
                if flags & 0x20:  # PRIORITY
                    block = block[5:]
                # :status 200 is static entry 8; anything else is reported as not 200.
                self.status = 200 if block[:1] == b"\x88" else -1
            if stream == self.stream and kind in (0, 1) and flags & 1:  # END_STREAM
                self.stream += 2
                return True
        return False

    def close(self):
        self.sock.close()


def drive(conns, deadline=120):
    """Runs conns until each has its response; returns their statuses."""
    sel = selectors.DefaultSelector()
    pending = {}
    for c in conns:
        pending[c.sock.fileno()] = c
        sel.register(c.sock.fileno(), c.want)
    limit = time.monotonic() + deadline
    while pending:
        if time.monotonic() > limit:
            raise OSError("%d connections got no response in %d s" % (len(pending), deadline))
        for key, _ in sel.select(1.0):
            c = pending[key.fd]
            if c.step():
                sel.unregister(key.fd)
                del pending[key.fd]
            else:
                sel.modify(key.fd, c.want)
    sel.close()
    return [c.status for c in conns]


def memory(root):
    """Total Rss and Pss (KiB) of a process and all its descendants, from smaps_rollup."""
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                todo += [int(p) for p in f.read().split()]
    rss = pss = 0
    for pid in pids:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
    return {"rss": rss, "pss": pss, "procs": len(pids)}


def env(name, default):
    return float(os.environ.get(name, default))


def run(port, proto, tls, conns, pid):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < conns + 64:
        raise SystemExit("RLIMIT_NOFILE hard limit %d is below %d connections" % (hard, conns))
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ctx = tls_context(proto) if tls else None
    batch, rounds = int(env("BATCH", 100)), int(env("ROUNDS", 4))
    time.sleep(env("SETTLE", 3))
    start = memory(pid)
    probe = subprocess.Popen([sys.executable, __file__, "probe", str(port), proto, str(int(tls))],
                             stdout=subprocess.PIPE)
    time.sleep(1)  # its connection open before the rounds' first reading
    # What a server holds once it has served (its request code paged in, one connection open):
    # the rounds' memory given back is measured against this.
    warm = memory(pid)
    result = {"start": start, "warm": warm, "conns": conns, "rounds": [], "statuses": {}}
    # The servers and the probe come first: the opener's own CPU (TLS handshakes in Python) is
    # not to show as the servers' latency on a machine with few cores.
    os.nice(10)
    for _ in range(rounds):
        before, opened, t0 = memory(pid), [], time.monotonic()
        for _ in range(0, conns, batch):
            fresh = [Conn(port, proto, ctx) for _ in range(min(batch, conns - len(opened)))]
            opened += fresh
            for s in drive(fresh):
                result["statuses"][str(s)] = result["statuses"].get(str(s), 0) + 1
        open_s = time.monotonic() - t0
        time.sleep(env("IDLE_WAIT", 3))
        held = memory(pid)
        for c in opened:
            c.close()
        time.sleep(env("CLOSE_WAIT", 5))
        after = memory(pid)
        result["rounds"].append({"before": before, "held": held, "after": after, "open_s": open_s})
    probe.send_signal(signal.SIGTERM)
    result["probe"] = json.loads(probe.communicate()[0])
    print(json.dumps(result))


def probe(port, proto, tls):
    """One connection, a request every PROBE_MS; on SIGTERM prints the latencies' summary."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    ctx = tls_context(proto) if tls else None
    c = Conn(port, proto, ctx)
    drive([c])
    lat, bad, every = [], 0, env("PROBE_MS", 10) / 1000
    while not stop:
        c.request()
        t0 = time.perf_counter()
        try:
            status = drive([c], deadline=10)[0]
        except OSError:
            bad += 1
            c.close()
            c = Conn(port, proto, ctx)
            drive([c])
            continue
        lat.append((time.perf_counter() - t0) * 1000)
        bad += status != 200
        time.sleep(every)
    lat.sort()
    pick = lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))], 2) if lat else -1
    print(json.dumps({"n": len(lat), "bad": bad, "p50": pick(0.5), "p99": pick(0.99), "max": pick(1.0)}))


def table(results, scenarios, servers):
    """The Markdown table of the result files RESULTS/SCENARIO.SERVER.json."""
    def load(scen, server):
        try:
            with open(os.path.join(results, "%s.%s.json" % (scen, server))) as f:
                return json.load(f)
        except FileNotFoundError:
            return None
    kb = lambda b: "%.1f" % (b / 1024)
    print("| scenario | server | connections | KB per idle connection | probe p50 / p99 / max ms "
          "(requests, not 200) | RSS after close / when warm, per round | idle PSS KB at start | statuses |")
    print("|:--|:--|--:|--:|:--|:--|--:|:--|")
    for scen in scenarios:
        per = {}
        for server in servers:
            r = load(scen, server)
            if r is None:
                continue
            if scen == "idle":
                print("| idle | %s | 0 | | | | %d (%d process%s) | |"
                      % (server, r["start"]["pss"], r["start"]["procs"], "" if r["start"]["procs"] == 1 else "es"))
                per[server] = r["start"]["pss"] * 1024
                continue
            first = r["rounds"][0]
            per[server] = (first["held"]["pss"] - first["before"]["pss"]) * 1024 / r["conns"]
            p = r["probe"]
            ratios = " / ".join("%.2f" % (x["after"]["rss"] / r["warm"]["rss"]) for x in r["rounds"])
            statuses = " ".join("%s:%d" % kv for kv in sorted(r["statuses"].items()))
            print("| %s | %s | %d | %s | %s / %s / %s (%d, %d) | %s | %d | %s |"
                  % (scen, server, r["conns"], kb(per[server]), p["p50"], p["p99"], p["max"],
                     p["n"], p["bad"], ratios, r["start"]["pss"], statuses))
        if "tollgate" in per and "nginx" in per and per["nginx"] > 0:
            ratio = "%.2fx" % (per["tollgate"] / per["nginx"])
            cells = ("", ratio) if scen == "idle" else (ratio, "")
            print("| %s | tollgate/nginx | | %s | | | %s | |" % ((scen,) + cells))


if __name__ == "__main__":
    a = sys.argv
    if a[1] == "table":
        table(a[2], a[3].split(), a[4].split())
    elif a[1] == "idle":
        time.sleep(env("SETTLE", 3))
        print(json.dumps({"start": memory(int(a[2]))}))
    elif a[1] == "run":
        run(int(a[2]), a[3], a[4] == "1", int(a[5]), int(a[6]))
    else:
        probe(int(a[2]), a[3], a[4] == "1")
EOF

tollgate_conf() { # scenario port
    local listen=listen
    case "$1" in *_tls) listen=listen_tls ;; esac
    cat <<EOF
[server]
$listen = ["127.0.0.1:$2"]
workers = 1
keepalive_timeout = "300s"
[log]
access = "off"
[upstreams.app]
servers = ["127.0.0.1:$UP_PORT"]
keepalive = 64
[[location]]
match = "/"
upstream = "app"
EOF
    case "$1" in
        *_tls) printf '[[tls.certificates]]\ncert = "%s"\nkey = "%s"\n' "$TLS_DIR/cert.pem" "$TLS_DIR/key.pem" ;;
    esac
}

nginx_conf() { # scenario port dir worker_connections
    local listen="listen 127.0.0.1:$2" tls=""
    case "$1" in *_tls) listen+=" ssl" ;; esac
    case "$1" in h2*) listen+=" http2" ;; esac
    case "$1" in
        *_tls) tls="ssl_certificate $TLS_DIR/cert.pem; ssl_certificate_key $TLS_DIR/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;" ;;
    esac
    cat <<EOF
worker_processes 1;
worker_rlimit_nofile $NOFILE;
error_log $3/error.log warn;
pid $3/nginx.pid;
events { worker_connections $4; }
http {
    access_log off;
    keepalive_timeout 300s;
    keepalive_requests 1000000;
    upstream app { server 127.0.0.1:$UP_PORT; keepalive 64; }
    server {
        $listen;
        $tls
        location / {
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

# measure SCENARIO SERVER: starts the server fresh, writes $WORK/results/SCENARIO.SERVER.json.
measure() {
    local scen="$1" server="$2" p dir pid conns proto tls=0 conf_scen
    p="$(free_port)"
    dir="$WORK/$scen-$server"
    mkdir -p "$dir"
    chmod 777 "$dir"
    conns="$CONNS_H1"
    proto=h1
    case "$scen" in h2*) conns="$CONNS_H2" proto=h2 ;; esac
    case "$scen" in *_tls) tls=1 ;; esac
    conf_scen="$scen"
    [ "$scen" != idle ] || conf_scen=h1
    if [ "$server" = tollgate ]; then
        tollgate_conf "$conf_scen" "$p" >"$dir/gateway.toml"
        "$TOLLGATE_BIN" -c "$dir/gateway.toml" >"$dir/log" 2>&1 &
    else
        local wc=$((conns + 512))
        [ "$scen" != idle ] || wc=1024
        nginx_conf "$conf_scen" "$p" "$dir" "$wc" >"$dir/nginx.conf"
        "$NGINX" -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' >"$dir/log" 2>&1 &
    fi
    pid=$!
    PIDS+=("$pid")
    wait_port "$p" "$pid"
    say "$scen: $server (pid $pid) on port $p"
    if [ "$scen" = idle ]; then
        python3 "$WORK/client.py" idle "$pid" >"$WORK/results/$scen.$server.json"
    elif ! python3 "$WORK/client.py" run "$p" "$proto" "$tls" "$conns" "$pid" \
        >"$WORK/results/$scen.$server.json"; then
        show_logs "$dir/log" "$dir/error.log"
        die "$scen: the client failed against $server"
    fi
    stop_pid "$pid" "$server"
}

mkdir -p "$WORK/results"
UP_PORT="$(free_port)"
"$UPSTREAM_BIN" "127.0.0.1:$UP_PORT" >"$WORK/upstream.log" 2>&1 &
PIDS+=($!)
wait_port "$UP_PORT" "$!"

for scen in $SCENARIOS; do
    case "$scen" in idle | h1 | h1_tls | h2 | h2_tls) ;; *) die "unknown scenario $scen" ;; esac
    for server in $ONLY; do
        case "$server" in tollgate | nginx) measure "$scen" "$server" ;; *) die "unknown server $server" ;; esac
    done
done
python3 "$WORK/client.py" table "$WORK/results" "$SCENARIOS" "$ONLY"
