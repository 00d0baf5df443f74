#!/usr/bin/env python3
"""A screenshot of the admin page after it has been open a while (python3 standard library,
and Chromium).

`chromium --screenshot` shoots as soon as the page has loaded, before the page has polled
more than once; this opens the page in headless Chromium, leaves it polling for `--wait`
seconds (so the per-zone charts, which the tab draws from what it has seen, have points),
then takes the PNG through the DevTools protocol.

  python3 examples/admin-screenshot.py http://127.0.0.1:9099/ docs/admin.png --wait 60
  python3 examples/admin-screenshot.py http://127.0.0.1:9099/ docs/admin.png --lookup 10.4.0.1 --height 1700
"""

import argparse
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse


class DevTools:
    """The least of a WebSocket client (RFC 6455) that the DevTools protocol needs."""

    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            byte = self.sock.recv(1)
            if not byte:
                raise OSError("DevTools closed during the handshake")
            head += byte
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise OSError(head.decode(errors="replace"))
        self.next_id = 0

    def _exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise OSError("DevTools closed")
            data += chunk
        return data

    def _send(self, text):
        payload = text.encode()
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def _message(self):
        parts = []
        while True:
            first, second = self._exact(2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._exact(8))[0]
            payload = self._exact(n)
            opcode = first & 0x0F
            if opcode == 0x8:
                raise OSError("DevTools closed the socket")
            if opcode in (0x0, 0x1, 0x2):
                parts.append(payload)
                if first & 0x80:
                    return json.loads(b"".join(parts))

    def call(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._send(json.dumps(message))
        while True:
            answer = self._message()
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise OSError(f"{method}: {answer['error']}")
                return answer.get("result", {})


def chromium():
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not found:
        sys.exit("no chromium on PATH")
    return found


def shoot(url, path, wait, size=(1280, 1100), lookup=None):
    """Opens `url`, waits `wait` seconds, and writes a PNG of the window to `path`; with
    `lookup`, the key is typed into "Look up a key" first."""
    with tempfile.TemporaryDirectory() as profile:
        browser = subprocess.Popen(
            [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--hide-scrollbars", f"--window-size={size[0]},{size[1]}", "--remote-debugging-port=0",
             "--remote-allow-origins=*", f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        try:
            address = None
            for line in browser.stderr:
                if "DevTools listening on " in line:
                    address = line.split("DevTools listening on ", 1)[1].strip()
                    break
            if not address:
                sys.exit("chromium did not say where DevTools listen")
            # Keep draining, or Chromium blocks on a full pipe.
            threading.Thread(target=lambda: [None for _ in browser.stderr], daemon=True).start()
            tools = DevTools(address)
            target = tools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = tools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            tools.call("Emulation.setDeviceMetricsOverride",
                       {"width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": False},
                       session)
            tools.call("Page.navigate", {"url": url}, session)
            time.sleep(wait)
            if lookup:
                typed = json.dumps(lookup)
                script = (f"document.getElementById('lookup-key').value = {typed};"
                          "document.getElementById('lookup-form').requestSubmit();")
                tools.call("Runtime.evaluate", {"expression": script}, session)
                time.sleep(2)
            shot = tools.call("Page.captureScreenshot", {"format": "png"}, session)
            with open(path, "wb") as out:
                out.write(base64.b64decode(shot["data"]))
        finally:
            browser.terminate()
            browser.wait(timeout=20)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url")
    parser.add_argument("png")
    parser.add_argument("--wait", type=float, default=60, help="seconds the page polls before the shot")
    parser.add_argument("--lookup", help="a key to type into \"Look up a key\" before the shot")
    parser.add_argument("--height", type=int, default=1100, help="the window's height")
    args = parser.parse_args()
    shoot(args.url, args.png, args.wait, (1280, args.height), args.lookup)
    print(f"screenshot: {args.png}")


if __name__ == "__main__":
    main()
