#!/usr/bin/env python3
"""delayed_ack.py: a kept-alive upstream connection and a server that writes each response
in two writes with Nagle's algorithm on (its head, then its body; many small frameworks do).

The second write waits until the first is acknowledged; if the proxy's kernel delays that
ACK (Linux: up to 40 ms), so does every response. This measures the time per request,
through nginx (upstream keepalive) and through tollgate, of REQUESTS sequential requests
on one client connection, interleaved in ROUNDS, and prints their medians.

Usage: benches/delayed_ack.py TOLLGATE_BINARY  (nginx from /usr/sbin/nginx)
"""

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REQUESTS = int(os.environ.get("REQUESTS", "50"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nagle_upstream(port):
    """Answers each request with its head and its body in two writes, Nagle on."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(64)

    def serve(conn):
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    conn.close()
                    return
                buf += data
            buf = buf[buf.index(b"\r\n\r\n") + 4:]
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\n")
            conn.sendall(b"hello\n")

    def accept():
        while True:
            conn, _ = server.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()


def wait_listening(port):
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return
        except OSError:
            time.sleep(0.01)
    sys.exit(f"nothing listens on {port}")


def timed_requests(port):
    """Milliseconds per request, REQUESTS requests on one kept-alive connection."""
    conn = socket.create_connection(("127.0.0.1", port))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = []
    for _ in range(REQUESTS):
        start = time.perf_counter()
        conn.sendall(b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
        got = b""
        while not got.endswith(b"hello\n"):
            data = conn.recv(65536)
            if not data:
                sys.exit("the proxy closed the connection")
            got += data
        times.append((time.perf_counter() - start) * 1000)
    conn.close()
    return times


def main():
    tollgate = sys.argv[1]
    up, nginx_port, tollgate_port = free_port(), free_port(), free_port()
    nagle_upstream(up)
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(f"{d}/tmp")
        with open(f"{d}/nginx.conf", "w") as f:
            f.write(f"""daemon off; master_process off; worker_processes 1;
error_log {d}/error.log warn; pid {d}/nginx.pid;
events {{ worker_connections 64; }}
http {{ access_log off; client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp;
  fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;
  upstream app {{ server 127.0.0.1:{up}; keepalive 8; }}
  server {{ listen 127.0.0.1:{nginx_port};
    location / {{ proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }} }} }}
""")
        with open(f"{d}/gateway.toml", "w") as f:
            f.write(f"""[server]
listen = ["127.0.0.1:{tollgate_port}"]
workers = 1
[log]
access = "off"
[upstreams.app]
servers = ["127.0.0.1:{up}"]
keepalive = 8
[[location]]
match = "/"
upstream = "app"
""")
        procs = [
            subprocess.Popen(["/usr/sbin/nginx", "-p", d, "-c", f"{d}/nginx.conf", "-e", f"{d}/error.log"]),
            subprocess.Popen([tollgate, "-c", f"{d}/gateway.toml"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        ]
        try:
            wait_listening(nginx_port)
            wait_listening(tollgate_port)
            medians = {"nginx": [], "tollgate": []}
            for _ in range(ROUNDS):
                for name, port in (("nginx", nginx_port), ("tollgate", tollgate_port)):
                    # The first request opens the upstream connection; the rest reuse it.
                    medians[name].append(statistics.median(timed_requests(port)[1:]))
            for name, values in medians.items():
                print(f"{name:9} median ms per request over {ROUNDS} rounds of {REQUESTS}: "
                      f"{statistics.median(values):.2f}  (rounds: {', '.join(f'{v:.2f}' for v in values)})")
        finally:
            for p in procs:
                p.terminate()
                p.wait()


main()
