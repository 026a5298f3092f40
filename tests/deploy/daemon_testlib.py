"""Helpers of the deploy tests that run processes: sim-robot and the daemon through their real CLIs, ``ctl``, and an
offscreen render of the Panda's camera (split from ``deploy_testlib.py``)."""

from __future__ import annotations

import json as _json
import os as _os
import pathlib
import signal as _signal
import subprocess as _subprocess
import sys as _sys
import time

import numpy as np

E2E_SAFETY = ["--sim"]
"""The documented sim timing (``run --sim``, README): sim-robot runs in lockstep, so a loaded machine (2 cores, often
a training run) slows the run down without changing it; the real-robot timing checks are tested in test_loop.py."""

E2E_NICE = -10
"""Niceness increment of sim-robot and the daemon (``nice -n -10``; so also of the daemon's logger and inference thread)
in the end to end tests, where the test may lower it (root, or an RLIMIT_NICE that allows it; else they keep the test's
own). The daemon is deployed with SCHED_FIFO on a CPU of its own (upright/deploy/systemd: ``--rt-priority 80 --cpu
1``) and
sim-robot stands in for hardware that the host's load does not slow; at nice 0 next to busy processes (training runs,
``benchmarks/cpu_load.py``) sim-robot's camera rendered frames older than ``--max-frame-age-s`` and the daemon's
inference thread left the chunk queue empty for 25 ticks (issue 33.8). CPU weight at nice -10: ~9x a nice-0 process."""


def _e2e_nice() -> list[str]:
    """``nice -n E2E_NICE``, to put before a command, when this process may lower its children's niceness that far
    (root, or RLIMIT_NICE); else nothing."""
    import resource
    import shutil

    soft = resource.getrlimit(resource.RLIMIT_NICE)[0]
    target = _os.getpriority(_os.PRIO_PROCESS, 0) + E2E_NICE
    allowed = _os.geteuid() == 0 or soft == resource.RLIM_INFINITY or target >= 20 - soft
    nice = shutil.which("nice")
    return [nice, "-n", str(E2E_NICE)] if allowed and nice else []


def start_sim_robot(tmp: pathlib.Path, *extra: str, buses: int = 5) -> tuple[_subprocess.Popen, pathlib.Path]:
    """``upright-deploy sim-robot`` in its own session; waits for its ``buses`` links (5: the G1, 1: the Panda)."""
    links = tmp / "links"
    log = open(tmp / "sim_robot.log", "w")
    proc = _subprocess.Popen(
        [*_e2e_nice(), _sys.executable, "-m", "upright.deploy.cli", "sim-robot", "--link-dir", str(links), *extra],
        stdout=log,
        stderr=_subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not all((links / f"bus{i}").exists() for i in range(buses)):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("sim-robot did not start: " + (tmp / "sim_robot.log").read_text())
        time.sleep(0.1)
    return proc, links


def start_daemon(tmp: pathlib.Path, policy: pathlib.Path, links: pathlib.Path, *extra: str) -> _subprocess.Popen:
    log = open(tmp / "daemon.log", "w")
    return _subprocess.Popen(
        [*_e2e_nice(), _sys.executable, "-m", "upright.deploy.cli", "run", "--policy", str(policy), "--port-dir",
         str(links), "--dataset", str(tmp / "dataset"), "--socket", str(tmp / "ctl.sock"), "--no-keyboard",
         *E2E_SAFETY, *extra],
        stdout=log, stderr=_subprocess.STDOUT, stdin=_subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def stop(proc: _subprocess.Popen, sig=_signal.SIGTERM, timeout: float = 30) -> int:
    if proc.poll() is None:
        try:
            _os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
    return proc.wait(timeout)


def ctl(tmp: pathlib.Path, *args: str) -> dict:
    """`upright-deploy ctl ...` through the real CLI; returns the JSON reply."""
    proc = _subprocess.run(
        [_sys.executable, "-m", "upright.deploy.cli", "ctl", "--socket", str(tmp / "ctl.sock"), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return _json.loads(proc.stdout)


def ctl_run(tmp: pathlib.Path, *args: str, env: dict | None = None) -> _subprocess.CompletedProcess:
    """`upright-deploy ctl ...` through the real CLI (any exit status); stdout/stderr as text."""
    return _subprocess.run(
        [_sys.executable, "-m", "upright.deploy.cli", "ctl", "--socket", str(tmp / "ctl.sock"), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )


def wait_for_mode(tmp: pathlib.Path, mode: str, timeout: float = 60) -> dict:
    from upright.deploy.operator_socket import send_command

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reply = send_command(str(tmp / "ctl.sock"), {"cmd": "status"})
            if reply["mode"] == mode:
                return reply
        except ConnectionError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"daemon never reached {mode}: " + (tmp / "daemon.log").read_text()[-3000:])


# ------------------------------------------------------------------ cameras
_RENDER = """
import sys
from upright.gl import choose_offscreen_gl
choose_offscreen_gl()
import mujoco, numpy as np
from upright.deploy.sim_robot import panda_lift_scene
from upright.tasks.lift.camera import draw
z = np.load(sys.argv[1])
h, w = (int(v) for v in z["size"])
scene = panda_lift_scene()
m = scene.model
d = mujoco.MjData(m)
r = mujoco.Renderer(m, height=h, width=w)
out = []
for q in z["qpos"]:
    d.qpos[:] = q
    mujoco.mj_kinematics(m, d)
    mujoco.mj_camlight(m, d)
    out.append(draw(r, d, str(z["camera"])))
np.save(sys.argv[2], np.array(out, np.uint8))
"""


def render_lift_camera(tmp: pathlib.Path, qpos: np.ndarray, camera: str, size: tuple[int, int]) -> np.ndarray:
    """(N, H, W, 3) uint8 images of ``camera`` of sim-robot's Panda lift scene at the (N, nq) ``qpos``, drawn as
    sim-robot draws them (upright/tasks/lift/camera.draw), in a subprocess (MuJoCo reads MUJOCO_GL once, at import)."""
    src, dst = tmp / "render_in.npz", tmp / "render_out.npy"
    np.savez(src, qpos=np.atleast_2d(qpos), camera=camera, size=np.array(size))
    proc = _subprocess.run(
        [_sys.executable, "-c", _RENDER, str(src), str(dst)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return np.load(dst)


def offscreen_gl_available() -> bool:
    """Whether MuJoCo can render offscreen here (EGL or OSMesa, or MUJOCO_GL already set)."""
    import os

    from upright.gl import gl_backend_works, has_display

    if os.environ.get("MUJOCO_GL"):
        return gl_backend_works(os.environ["MUJOCO_GL"])
    return has_display() or gl_backend_works("egl") or gl_backend_works("osmesa")
