"""A small headless-Chromium driver over the DevTools protocol (no chromedriver, no extra Python package:
``websockets`` comes with viser). Used by the web viewer's tests and to take screenshots of it.

    with HeadlessChromium() as browser:
        browser.navigate("http://localhost:8080")
        browser.wait_for("document.querySelector('canvas') !== null")
        browser.click_text("button", "Reset")
        png = browser.screenshot()

Debian: ``apt-get install -y chromium``. WebGL runs on SwiftShader (software), hence
``--enable-unsafe-swiftshader`` next to ``--disable-gpu``.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
import urllib.request

import numpy as np

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-unsafe-swiftshader",
    "--use-angle=swiftshader",
    "--mute-audio",
    "--hide-scrollbars",
)


class BrowserError(RuntimeError):
    """Chromium is missing, did not start, or a DevTools command failed."""


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome binary (``CHROMIUM`` env var first), or None."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class HeadlessChromium:
    """Start headless Chromium with a fresh profile and drive its first tab.

    Args:
        binary: Chromium executable (default: :func:`find_chromium`).
        width, height: window size, px.
        timeout: seconds to wait for Chromium to come up.

    Raises:
        BrowserError: no Chromium, or it did not open its DevTools port in time.
    """

    def __init__(self, binary: str | None = None, width: int = 1280, height: int = 800, timeout: float = 30.0):
        from websockets.sync.client import connect

        binary = binary or find_chromium()
        if not binary:
            raise BrowserError("no Chromium found (Debian: apt-get install -y chromium; or set CHROMIUM=/path)")
        self.profile = pathlib.Path(tempfile.mkdtemp(prefix="upright-chromium-"))
        self.log_path = self.profile.parent / (self.profile.name + ".log")
        self._log = open(self.log_path, "wb")
        args = [
            binary,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={self.profile}",
            "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._id = 0
        self.ws = None
        try:
            port = self._devtools_port(timeout)
            deadline = time.monotonic() + timeout
            while True:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            if not pages:
                raise BrowserError("Chromium has no page target")
            self.ws = connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout)
            self.send("Page.enable")
            self.send("Runtime.enable")
            self.send(
                "Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False
            )
        except Exception:
            self.close()
            raise

    def _devtools_port(self, timeout: float) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrowserError(f"Chromium exited with {self.proc.returncode}: {self.log_tail()}")
            if marker.is_file():
                text = marker.read_text().split()
                if text:
                    return int(text[0])
            time.sleep(0.05)
        raise BrowserError(f"Chromium did not open its DevTools port within {timeout:.0f} s: {self.log_tail()}")

    def log_tail(self, n: int = 1500) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""

    # ------------------------------------------------------------------ protocol
    def send(self, method: str, timeout: float = 30.0, **params) -> dict:
        """Send one DevTools command and return its result (events in between are skipped).

        Raises:
            BrowserError: the command failed or timed out.
        """
        self._id += 1
        msg_id = self._id
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"{method}: no answer within {timeout:.0f} s")
            try:
                reply = json.loads(self.ws.recv(timeout=left))
            except TimeoutError:
                raise BrowserError(f"{method}: no answer within {timeout:.0f} s") from None
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def evaluate(self, expression: str, timeout: float = 30.0):
        """Evaluate JavaScript in the page and return its (JSON) value (promises are awaited)."""
        result = self.send(
            "Runtime.evaluate", timeout=timeout, expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"JavaScript error: {result['exceptionDetails'].get('text')} in {expression[:80]!r}")
        return result.get("result", {}).get("value")

    def navigate(self, url: str, timeout: float = 30.0) -> None:
        """Open ``url`` and wait for the document to finish loading."""
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", timeout=timeout)

    def wait_for(self, expression: str, timeout: float = 30.0, interval: float = 0.2):
        """Poll ``expression`` until it is truthy; return its value.

        Raises:
            BrowserError: still falsy after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out after {timeout:.0f} s waiting for {expression!r}")
            time.sleep(interval)

    # ------------------------------------------------------------------ actions
    def rect(self, selector: str, text: str | None = None) -> dict | None:
        """Bounding box {x, y, width, height} of the first element matching ``selector`` (and containing ``text``)."""
        js = (
            f"(() => {{ const els = Array.from(document.querySelectorAll({json.dumps(selector)}));"
            f" const t = {json.dumps(text)};"
            " const el = els.find(e => t === null || (e.textContent || '').trim() === t)"
            "   || els.find(e => t !== null && (e.textContent || '').includes(t));"
            " if (!el) return null; el.scrollIntoView({block: 'center'}); const r = el.getBoundingClientRect();"
            " return {x: r.x, y: r.y, width: r.width, height: r.height}; })()"
        )
        return self.evaluate(js)

    def click_text(self, selector: str, text: str, timeout: float = 15.0) -> None:
        """Click (real mouse events) the centre of the first ``selector`` element whose text is ``text``.

        Raises:
            BrowserError: no such element within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while (r := self.rect(selector, text)) is None or r["width"] == 0:
            if time.monotonic() > deadline:
                raise BrowserError(f"no {selector} with text {text!r} on the page")
            time.sleep(0.2)
        x, y = r["x"] + r["width"] / 2, r["y"] + r["height"] / 2
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        self.send("Input.dispatchMouseEvent", type="mousePressed", x=x, y=y, button="left", clickCount=1)
        self.send("Input.dispatchMouseEvent", type="mouseReleased", x=x, y=y, button="left", clickCount=1)

    def screenshot(self) -> bytes:
        """PNG of the viewport."""
        return base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"])

    def screenshot_array(self) -> np.ndarray:
        """The viewport as an (H, W, 3|4) uint8 array."""
        import imageio.v3 as iio

        return np.asarray(iio.imread(self.screenshot(), extension=".png"))

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Close the connection, stop Chromium and delete the profile."""
        if self.ws is not None:
            try:
                self.ws.close()
            except Exception:  # noqa: BLE001  best effort: the browser is being torn down anyway
                pass
            self.ws = None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
        try:
            self.log_path.unlink()
        except OSError:
            pass

    def __enter__(self) -> HeadlessChromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m upright.viewer.browser URL OUT.png [--wait S]``: a screenshot of a page (e.g. the web viewer)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("url")
    parser.add_argument("out")
    parser.add_argument("--wait", type=float, default=5.0, help="seconds to let the page render")
    parser.add_argument("--size", default="1280x800", help="window size WxH")
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    with HeadlessChromium(width=width, height=height) as browser:
        browser.navigate(args.url)
        time.sleep(args.wait)
        pathlib.Path(args.out).write_bytes(browser.screenshot())
    print(f"Wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
