"""A headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON messages
ending in NUL on file descriptors 3 and 4), so the page tests and ``python -m bench pages`` need no websocket
client, no selenium and no browser download: Debian's ``chromium`` and this file.

    with Chromium() as b:                 # skips nothing itself: ``chromium_binary()`` is None without one
        got = b.open("graph.html")        # waits for the page's scripts (``<html data-ready>``), returns it
        b.evaluate("document.title"); b.screenshot()   # PNG bytes
        b.errors, b.requests              # console errors and exceptions; every URL the page asked for

The network is off three ways: the flags (no background networking, no component update, no sync), every
host name resolving nowhere (``--host-resolver-rules``), and the page's network emulated offline; a request
the page makes anyway is still recorded in ``requests``.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
         "--no-default-browser-check", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--remote-debugging-pipe"]


def chromium_binary() -> str | None:
    """The browser the tests drive: $CHROMIUM, else chromium (Debian's) or google-chrome on PATH."""
    given = os.environ.get("CHROMIUM")
    if given:
        return given if Path(given).exists() else None
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


class Chromium:
    def __init__(self, binary: str | None = None, width: int = 1280, height: int = 800, timeout: float = 30.0):
        self.binary = binary or chromium_binary()
        if self.binary is None:
            raise RuntimeError("no Chromium: install Debian's chromium (apt-get install chromium)")
        self.width, self.height, self.timeout = width, height, timeout
        self.errors: list[str] = []
        self.requests: list[str] = []
        self._next = 0
        self._buf = b""

    def __enter__(self) -> "Chromium":
        self._dir = tempfile.mkdtemp(prefix="chromium-")
        to_chrome, self._write = os.pipe()
        self._read, from_chrome = os.pipe()

        def fds():  # the child's 3 and 4 are the protocol's pipe
            os.dup2(to_chrome, 3)
            os.dup2(from_chrome, 4)

        self._proc = subprocess.Popen([self.binary, *FLAGS, f"--user-data-dir={self._dir}",
                                       f"--window-size={self.width},{self.height}", "about:blank"],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, preexec_fn=fds, pass_fds=(3, 4))
        os.close(to_chrome)
        os.close(from_chrome)
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            self.call(method, session=True)
        self.call("Network.emulateNetworkConditions", session=True, offline=True, latency=0,
                  downloadThroughput=-1, uploadThroughput=-1)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.call("Browser.close")
        except Exception:  # noqa: BLE001 -- gone already: killed below
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._read, self._write):
            os.close(fd)
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- the protocol ---------------------------------------------------------------------------------
    def call(self, method: str, session: bool = False, **params):
        self._next += 1
        msg = {"id": self._next, "method": method, "params": params}
        if session:
            msg["sessionId"] = self._session
        os.write(self._write, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            got = self._message(deadline)
            if got.get("id") == self._next:
                if "error" in got:
                    raise RuntimeError(f"{method}: {got['error']}")
                return got.get("result", {})
            self._event(got)

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its pipe (exited)")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def _event(self, msg: dict) -> None:
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append("exception: " + (d.get("exception", {}).get("description") or d.get("text", "")))
        elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
            self.errors.append("log: " + p["entry"]["text"])
        elif method == "Network.requestWillBeSent":
            self.requests.append(p["request"]["url"])

    # -- pages ------------------------------------------------------------------------------------------
    def evaluate(self, expression: str):
        got = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                        awaitPromise=True)
        if "exceptionDetails" in got:
            raise RuntimeError(f"{expression[:80]}: {got['exceptionDetails'].get('text')}")
        return got["result"].get("value")

    def open(self, path, wait: str = "document.documentElement.dataset.ready") -> dict:
        """Load a file and wait until ``wait`` (a JS expression) is truthy; ``{"ready": its value,
        "wall_s": seconds from navigation to ready}``. The events recorded so far are cleared."""
        self.errors.clear()
        self.requests.clear()
        t0 = time.monotonic()
        self.call("Page.navigate", session=True, url=Path(path).resolve().as_uri())
        deadline = t0 + self.timeout
        while True:
            got = self.evaluate(f"document.readyState === 'complete' && ({wait})")
            if got:
                return {"ready": got, "wall_s": time.monotonic() - t0}
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path}: {wait} not true after {self.timeout:.0f} s; errors: {self.errors}")
            time.sleep(0.02)

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", session=True, format="png")["data"])
