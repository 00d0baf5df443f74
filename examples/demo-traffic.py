#!/usr/bin/env python3
"""Mixed traffic through tollgate, for the admin page to show (python3, standard library only).

Starts an upstream of its own on 127.0.0.1:3088 (fast pages, slow pages, pages that fail,
pages that hang), runs tollgate on examples/demo.toml (gateway 127.0.0.1:8088, admin page
http://127.0.0.1:9099/), and plays clients for a few minutes:

  visitors   six clients browsing at about 1.5 r/s each: 200, a 301, some 404
  greedy     one client at 15 r/s, 90 s in every 4 minutes: over per_ip's 5r/s, so 429s
  api        one client at about 7 r/s on /api/: over api's 4r/s, so delays, then 429s
  brute      three clients failing /login: 401s, then 429s, then a ban (403)
  slow       pages the upstream answers in 0.5-1.5 s
  trouble    90 s in every 5 minutes, pages that fail (500, 503) and pages that hang
             (504 after 2 s)

Run it from the repository's root after `cargo build --release` (or `cargo build`):

  python3 examples/demo-traffic.py                      # three minutes
  python3 examples/demo-traffic.py --seconds 900 --screenshot docs/admin.png   # 15 minutes

Open http://127.0.0.1:9099/ while it runs. It stops tollgate and its upstream when done
(or on Ctrl-C).
"""

import argparse
import collections
import http.client
import http.server
import importlib.util
import os
import random
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GATEWAY = ("127.0.0.1", 8088)
ADMIN = ("127.0.0.1", 9099)
# The key the screenshot looks up: the first brute-force client's address.
BRUTE_LOOKUP = "10.4.0.1"
UPSTREAM = ("127.0.0.1", 3088)


class Upstream(http.server.BaseHTTPRequestHandler):
    """The app behind the gateway: what a path asks for is what it gets."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):
        path = self.path
        status, body = 200, b"ok\n"
        if path.startswith("/slow"):
            time.sleep(random.uniform(0.5, 1.5))
        elif path.startswith("/hang"):
            time.sleep(4)
        elif path.startswith("/fail"):
            status, body = random.choice([(500, b"boom\n"), (503, b"busy\n")])
        elif path.startswith("/missing"):
            status, body = 404, b"not found\n"
        else:
            time.sleep(random.uniform(0.002, 0.03))
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the gateway gave up on a hanging page

    def log_message(self, *args):
        pass


class Client:
    """One client the script plays: its address (in X-Forwarded-For) and a connection."""

    def __init__(self, address, counts):
        self.address = address
        self.counts = counts
        self.conn = None

    def get(self, path):
        for _ in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(*GATEWAY, timeout=10)
                self.conn.request("GET", path, headers={"X-Forwarded-For": self.address})
                response = self.conn.getresponse()
                response.read()
                self.counts[response.status] += 1
                if response.getheader("Connection", "").lower() == "close":
                    self.close()
                return response.status
            except (OSError, http.client.HTTPException):
                self.close()
        self.counts["error"] += 1
        return None

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def paced(stop, rate, step):
    """Calls `step` about `rate` times a second until `stop` is set."""
    while not stop.is_set():
        began = time.monotonic()
        step()
        left = random.expovariate(rate) - (time.monotonic() - began)
        if left > 0:
            stop.wait(left)


def waves(run, period, start, end):
    """True from `start` to `end` seconds into every `period` of the run: an attack, an
    outage, that comes and goes."""
    return lambda: start <= run.elapsed() % period < end


class Run:
    def __init__(self, seconds):
        self.began = time.monotonic()
        self.seconds = seconds

    def elapsed(self):
        return time.monotonic() - self.began


def players(run, counts):
    """(name, rate per second, step) for every thread."""
    def visitor(i):
        client = Client(f"10.1.0.{i}", counts)
        pages = ["/", "/static/app.css", "/products/1", "/products/2", "/cart", "/old", "/missing/page"]
        weights = [30, 25, 20, 15, 6, 2, 2]
        return lambda: client.get(random.choices(pages, weights)[0])

    greedy = Client("10.2.0.1", counts)
    greedy_on = waves(run, 240, 60, 150)
    api_on = waves(run, 180, 20, 170)
    trouble_on = waves(run, 300, 150, 240)
    slow = Client("10.5.0.1", counts)
    trouble = Client("10.6.0.1", counts)
    hang = Client("10.6.0.2", counts)

    def api():
        client = Client("10.3.0.1", counts)
        return lambda: client.get("/api/items") if api_on() else None

    def brute(i):
        client = Client(f"10.4.0.{i}", counts)
        return lambda: client.get("/login") if run.elapsed() > 15 * i else None

    return (
        [(f"visitor {i}", 1.5, visitor(i)) for i in range(1, 7)]
        + [("greedy", 15, lambda: greedy.get(f"/products/{random.randint(1, 9)}") if greedy_on() else None)]
        + [(f"api {i}", 2.4, api()) for i in range(3)]
        + [(f"brute {i}", 0.5, brute(i)) for i in range(1, 4)]
        + [("slow", 1, lambda: slow.get("/slow/report"))]
        + [("trouble", 3, lambda: trouble.get("/fail/checkout") if trouble_on() else None)]
        + [("hang", 0.3, lambda: hang.get("/hang/export") if trouble_on() else None)]
    )


def binary(given):
    if given:
        return given
    for build in ("release", "debug"):
        path = os.path.join(ROOT, "target", build, "tollgate")
        if os.path.exists(path):
            return path
    sys.exit("no tollgate binary: run `cargo build --release` first, or pass --binary")


def wait_for_admin(gateway):
    for _ in range(100):
        if gateway.poll() is not None:
            sys.exit(f"tollgate exited with {gateway.returncode}")
        try:
            conn = http.client.HTTPConnection(*ADMIN, timeout=1)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.1)
    sys.exit("the admin API did not answer")


def screenshot(path, wait):
    """A PNG of the admin page, open `wait` seconds first (examples/admin-screenshot.py)."""
    if not (shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")):
        print("no chromium: no screenshot", file=sys.stderr)
        return
    sys.dont_write_bytecode = True  # no __pycache__ in examples/
    spec = importlib.util.spec_from_file_location(
        "admin_screenshot", os.path.join(ROOT, "examples", "admin-screenshot.py"))
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    try:
        # The shot shows "Look up a key" filled in for one of the brute-force clients.
        helper.shoot(f"http://{ADMIN[0]}:{ADMIN[1]}/", path, wait, (1280, 1700), BRUTE_LOOKUP)
        print(f"screenshot: {path}")
    except (OSError, subprocess.SubprocessError) as err:
        print(f"no screenshot: {err}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=180, help="how long to drive traffic")
    parser.add_argument("--binary", help="the tollgate binary (default: target/release, then target/debug)")
    parser.add_argument("--screenshot", help="a PNG of the admin page at the end (needs chromium)")
    parser.add_argument("--page-seconds", type=float, default=150,
                        help="how long the page is open before the screenshot (its zone charts are the tab's)")
    args = parser.parse_args()

    upstream = http.server.ThreadingHTTPServer(UPSTREAM, Upstream)
    upstream.daemon_threads = True
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    config = os.path.join(ROOT, "examples", "demo.toml")
    gateway = subprocess.Popen([binary(args.binary), "-c", config])
    stop = threading.Event()
    threads = []
    try:
        wait_for_admin(gateway)
        print(f"driving traffic for {args.seconds:.0f} s; the admin page: http://{ADMIN[0]}:{ADMIN[1]}/")
        run = Run(args.seconds)
        counts = collections.Counter()
        for name, rate, step in players(run, counts):
            thread = threading.Thread(target=paced, args=(stop, rate, step), name=name, daemon=True)
            thread.start()
            threads.append(thread)
        if args.screenshot:
            # Shot while the traffic still runs, the page open long enough to chart it.
            stop.wait(max(0, args.seconds - args.page_seconds - 10))
            screenshot(args.screenshot, args.page_seconds)
        stop.wait(max(0, args.seconds - run.elapsed()))
        stop.set()
        for thread in threads:
            thread.join(timeout=15)
        print("responses by status:", dict(sorted(counts.items(), key=str)))
    except KeyboardInterrupt:
        stop.set()
    finally:
        gateway.terminate()
        try:
            gateway.wait(timeout=40)
        except subprocess.TimeoutExpired:
            gateway.kill()
        upstream.shutdown()


if __name__ == "__main__":
    main()
