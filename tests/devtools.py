"""A headless Chromium tab driven through the DevTools protocol (websocket-client, which jupyter_server brings): the
tests that need more than ``--dump-dom`` (printing a page to PDF, a live JupyterLab) use it."""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator

CHROMIUM = next(
    (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None
)
A4 = {"paperWidth": 210 / 25.4, "paperHeight": 297 / 25.4}  # inches, as Page.printToPDF takes them


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Page:
    """The first tab of a Chromium listening on ``port``: ``call`` a DevTools method, ``evaluate`` an expression."""

    def __init__(self, port: int) -> None:
        import websocket

        def tab():
            try:
                tabs = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=2))
            except OSError:
                return None
            return next((item for item in tabs if item["type"] == "page"), None)

        self.socket = websocket.create_connection(wait(tab, 30, "Chromium")["webSocketDebuggerUrl"], timeout=120)
        self.ids = iter(range(1, 1_000_000))

    def call(self, method: str, **params) -> dict:
        number = next(self.ids)
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == number:
                assert "error" not in message, message["error"]
                return message.get("result", {})

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        return result.get("result", {}).get("value")

    def print_pdf(self, **options) -> bytes:
        """The page printed on A4 with 12 mm margins (``options`` change them), as "Save as PDF" prints it."""
        margins = {f"margin{side}": 12 / 25.4 for side in ("Top", "Bottom", "Left", "Right")}
        return base64.b64decode(self.call("Page.printToPDF", **{**A4, **margins, **options})["data"])


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 900, *arguments: str) -> Iterator[Page]:
    """A headless Chromium ``width`` x ``height`` with a fresh profile, its tab as a :class:`Page`; every request to the
    network goes to a closed port."""
    assert CHROMIUM is not None, "CI is set and no Chromium is installed (.ci/run installs Debian's chromium)"
    port = free_port()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        browser = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={profile}",
                f"--remote-debugging-port={port}",
                "--proxy-server=http://127.0.0.1:9",
                f"--window-size={width},{height}",
                *arguments,
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            yield Page(port)
        finally:
            browser.kill()
            browser.wait(timeout=30)
