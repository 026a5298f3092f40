"""The daemon imports only the shared term definitions from upright: never training, the simulator, MuJoCo,
the robot model or the env (sim_robot and sim_camera, which may, are not imported by the daemon); its chunked-policy
path imports the VLA runtime (ONNX, remote client, TinyVLA) and nothing of training either; its camera sources import
OpenCV only when a V4L2 camera is opened."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
import upright.deploy.cli, upright.deploy.controller, upright.deploy.loop, upright.deploy.metadata
import upright.deploy.policy, upright.deploy.robot, upright.deploy.logger_process, upright.deploy.operator
import upright.deploy.chunk_runner, upright.deploy.chunk_policy, upright.vla.onnx_policy, upright.vla.remote
import upright.deploy.camera, upright.deploy.shared_frames, upright.deploy.logger_client
import upright.vla.tiny, upright.vla.evaluate_lift
upright.deploy.cli.main(["ctl", "status", "--socket", "/nonexistent/upright.sock"])
forbidden = ("upright.training", "upright.sim", "upright.robots", "upright.tasks.standup.env",
             "upright.tasks.registry", "upright.deploy.sim_robot", "upright.deploy.sim_camera", "mujoco", "rsl_rl",
             "hydra", "cv2")
print(sorted(m for m in sys.modules if m.startswith(forbidden)))
"""


def test_daemon_import_closure():
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout
