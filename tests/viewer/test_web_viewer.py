"""The web viewer end to end: play.py viewer=web in a subprocess, its page in headless Chromium.

The page loads, a screenshot shows a non-blank 3D canvas, Pause/Reset/Play in the page act on the sim
(checked through the viewer's JSON status endpoint). Needs Debian's ``chromium``; skipped without it.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest
from viewer_testlib import PLAY, free_port, play_env

SUPINE_QUAT = (math.sqrt(0.5), 0.0, -math.sqrt(0.5), 0.0)


def _status(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


def _wait_status(url: str, pred, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        s = _status(url)
        if pred(s) or time.monotonic() > deadline:
            return s
        time.sleep(0.1)


@pytest.fixture(scope="module")
def web_viewer(tmp_path_factory):
    from upright.viewer.browser import find_chromium

    if find_chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium on CI: .ci/run must apt-get install chromium")
        pytest.skip("no Chromium (Debian: apt-get install -y chromium)")
    port, status_port = free_port(), free_port()
    while status_port == port:
        status_port = free_port()
    cwd = tmp_path_factory.mktemp("web")
    args = [
        "task=standup",
        "policy=random",
        "viewer=web",
        "web.host=127.0.0.1",
        f"web.port={port}",
        f"web.status_port={status_port}",
    ]
    log = open(cwd / "play.log", "w")
    proc = subprocess.Popen(
        [sys.executable, str(PLAY), *args], cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=play_env()
    )
    status_url = f"http://127.0.0.1:{status_port}/status"
    deadline = time.monotonic() + 90
    while True:
        try:
            _status(status_url)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"play.py viewer=web did not come up: {(cwd / 'play.log').read_text()[-3000:]}")
            time.sleep(0.3)
    page_url = _status(status_url)["url"].replace("localhost", "127.0.0.1")  # viser moves on if the port is taken
    yield proc, page_url, status_url, cwd
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    log.close()


@pytest.mark.slow
def test_web_viewer_page_canvas_and_reset(web_viewer):
    from upright.viewer.browser import HeadlessChromium

    proc, url, status_url, cwd = web_viewer
    with HeadlessChromium(width=1024, height=700) as browser:
        browser.navigate(url)
        browser.wait_for("document.querySelector('canvas') !== null", timeout=30)
        browser.wait_for(
            "Array.from(document.querySelectorAll('button')).some(b => b.textContent.trim() === 'Reset')", timeout=30
        )
        assert browser.wait_for("document.body.innerText.includes('head height')", timeout=30)
        _wait_status(status_url, lambda s: s["connected_clients"] >= 1)

        # a non-blank 3D canvas: the viewport left of the control panel shows the floor and the robot
        # (viser fades the scene in as the meshes arrive, so poll the screenshot for a while)
        canvas = browser.evaluate(
            "(() => { const r = document.querySelector('canvas').getBoundingClientRect();"
            " return [r.x, r.y, r.width, r.height]; })()"
        )
        panel_left = browser.evaluate(
            "(() => { const b = Array.from(document.querySelectorAll('button'))"
            ".find(b => b.textContent.trim() === 'Reset');"
            " let e = b; while (e.parentElement && e.parentElement.getBoundingClientRect().width < 600)"
            " e = e.parentElement;"
            " return e.getBoundingClientRect().x; })()"
        )
        x, y, w, h = (int(v) for v in canvas)
        assert w > 300 and h > 300, canvas
        right = max(x + 100, min(int(panel_left) - 10, x + w))
        deadline, std, colors = time.monotonic() + 25, 0.0, 0
        while time.monotonic() < deadline:
            png = browser.screenshot()
            shot = browser.screenshot_array()[..., :3].astype(np.float64)
            region = shot[y + int(0.4 * h) : y + h, x:right]
            std, colors = float(region.std()), len(np.unique(region.reshape(-1, 3), axis=0))
            if std > 12.0 and colors > 200:
                break
            time.sleep(0.5)
        (cwd / "screenshot.png").write_bytes(png)
        assert std > 12.0 and colors > 200, (
            f"canvas looks blank (std {std:.1f}, {colors} colours); see {cwd / 'screenshot.png'}"
        )

        # the sim runs; Pause stops it, Reset starts a new episode at the reset state
        running = _wait_status(status_url, lambda s: s["episode_time"] > 0.3)
        assert running["episode_time"] > 0.3 and not running["paused"]
        browser.click_text("button", "Pause")
        paused = _wait_status(status_url, lambda s: s["paused"])
        assert paused["paused"]
        time.sleep(0.3)
        assert _status(status_url)["steps"] == _status(status_url)["steps"]
        browser.click_text("button", "Reset")
        after = _wait_status(status_url, lambda s: s["reset_count"] >= 1)
        assert after["reset_count"] == 1
        assert after["episode_time"] == 0.0 and after["episode"] == paused["episode"] + 1
        qpos = np.array(after["qpos"])
        assert qpos[2] == pytest.approx(0.5, abs=1e-6)  # env.init_height, before the drop
        assert np.allclose(qpos[3:7], SUPINE_QUAT, atol=1e-6)
        assert np.abs(np.array(paused["qpos"]) - qpos).max() > 1e-3  # it really moved back
        # Play resumes from the reset state
        browser.click_text("button", "Play")
        resumed = _wait_status(status_url, lambda s: s["episode_time"] > 0.1 and not s["paused"])
        assert not resumed["paused"] and resumed["episode_time"] > 0.1

    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 0
    assert "Web viewer: http://localhost:" in (cwd / "play.log").read_text()
