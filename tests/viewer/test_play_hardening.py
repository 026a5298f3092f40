"""Issue 13 (items 5 and 8): play.py's web viewer stays on this machine unless asked, and a policy that outputs NaN
stops play with a message naming the step. Real play.py processes and real sockets."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from viewer_testlib import PLAY, free_port, play_env, run_play


def non_loopback_ipv4() -> str | None:
    """An address of this machine on a real interface (None if it has none)."""
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return next((a for a in out if a.count(".") == 3 and not a.startswith("127.")), None)


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=3):
            return True
    except OSError:
        return False


def start_web(tmp_path, *extra: str):
    port, status_port = free_port(), free_port()
    while status_port == port:
        status_port = free_port()
    log = open(tmp_path / "play.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            str(PLAY),
            "task=standup",
            "policy=zero",
            "viewer=web",
            f"web.port={port}",
            f"web.status_port={status_port}",
            *extra,
        ],
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=play_env(),
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{status_port}/status", timeout=5) as r:
                status = json.load(r)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"play.py viewer=web did not come up: {(tmp_path / 'play.log').read_text()[-3000:]}")
            time.sleep(0.3)
    return proc, int(status["url"].rsplit(":", 1)[1]), status_port


def stop(proc):
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    "opt_in", [None, "web.host=0.0.0.0", "viewer.host=0.0.0.0"], ids=["default", "web.host", "alias"]
)
def test_web_viewer_is_local_unless_opted_in_with_a_warning(tmp_path, opt_in):
    """Issue 13.5: by default neither the page nor the status port answers on a non-loopback address of this machine;
    ``web.host=0.0.0.0`` (or ``viewer.host=0.0.0.0``) opens both, and says it has no authentication."""
    ip = non_loopback_ipv4()
    if ip is None:
        pytest.skip("this machine has no non-loopback IPv4 address to test from")
    proc, port, status_port = start_web(tmp_path, *([opt_in] if opt_in else []))
    try:
        assert reachable("127.0.0.1", port) and reachable("127.0.0.1", status_port)
        outside = reachable(ip, port), reachable(ip, status_port)
    finally:
        stop(proc)
    log = (tmp_path / "play.log").read_text()
    if opt_in is None:
        assert outside == (False, False), log
        assert "WARNING" not in log
    else:
        assert outside == (True, True), log
        assert f"WARNING: the web viewer listens on 0.0.0.0:{port} with no authentication" in log


def write_nan_policy(path, obs_dim: int, metadata: dict):
    """actions = sqrt(obs @ 0 - 1): NaN from the first step, with the task's metadata."""
    from upright.training.onnx_export import attach_metadata

    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["obs", "W"], ["z"]),
            helper.make_node("Sub", ["z", "one"], ["m"]),
            helper.make_node("Sqrt", ["m"], ["actions"]),
        ],
        "nan_policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, obs_dim])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, 23])],
        [
            numpy_helper.from_array(np.zeros((obs_dim, 23), np.float32), "W"),
            numpy_helper.from_array(np.ones(23, np.float32), "one"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    attach_metadata(path, metadata)
    return path


def test_nan_policy_stops_play_naming_the_step(tmp_path, standup_env, standup_meta):
    """Issue 13.8: a policy that outputs NaN used to give a video and exit 0 (only MuJoCo's warning)."""
    write_nan_policy(tmp_path / "nan.onnx", int(standup_env.get_observations()["actor"].shape[-1]), standup_meta)
    proc = run_play(
        ["task=standup", "policy=nan.onnx", "video=out.mp4", "duration=1", "render.width=160", "render.height=120"],
        tmp_path,
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: the policy's action has NaN/inf (23 of 23 values) at step 1 (t = 0.02 s"), lines
    assert "no video written" in lines[-1] and "Traceback" not in proc.stderr
    assert not (tmp_path / "out.mp4").exists()
