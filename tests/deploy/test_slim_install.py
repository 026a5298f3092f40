"""The robot computer's slim install (pyproject's base dependencies: numpy, onnxruntime, pyserial, pyarrow) runs the
daemon with an MLP policy: its import chain pulls none of the training side's modules, and, end to end, the daemon
installed alone in a clean venv drives sim-robot (run by this interpreter, with MuJoCo) over pseudo-terminals, reaches
POLICY and writes its LeRobot dataset (docs/deploy.md, "Installing on the robot computer")."""

from __future__ import annotations

import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest
from daemon_testlib import _e2e_nice, start_sim_robot, stop, wait_for_mode

ROOT = pathlib.Path(__file__).resolve().parents[2]
POLICY = pathlib.PurePosixPath("upright/assets/policies/g1_standup_ground/policy.onnx")
"""The committed G1 stand-up policy (HoST's recipe), relative to the repository root and to site-packages."""

LIFT_POLICY = pathlib.PurePosixPath("upright/assets/policies/panda_lift/policy.onnx")
"""The committed lift policy (``ee_delta``: the daemon's IK from the file's kinematic chain)."""

HEAVY = ("torch", "mujoco", "hydra", "omegaconf", "rsl_rl", "viser", "jax", "tensordict", "onnx")
"""What the daemon's import chain for an MLP policy must not import (the `train` extra's; onnxruntime is the base's)."""

BASE = ("numpy", "onnxruntime", "pyserial", "pyarrow")
"""pyproject's base dependencies, the slim install."""

DAEMON_CHAIN = """
import json, sys
import upright.deploy, upright.deploy.cli, upright.deploy.cli_run
# what cmd_run imports for an MLP policy, in its order, and the logger process's modules
from upright.dataset_io.check import check_dataset
from upright.deploy.camera import parse_camera_args
from upright.deploy.chunk_policy import is_chunk_policy_source
from upright.deploy.controller import Controller
from upright.deploy.metadata import load_policy_spec
from upright.deploy.observation import ObservationBuilder
from upright.deploy.operator_socket import resolve_group
from upright.deploy.robot_config import load_robot_config
from upright.deploy.safety import SafetyConfig
from upright.dataset_io.lock import DatasetLockedError
from upright.deploy.logger_client import LoggerClient
from upright.deploy.loop import run_loop
from upright.deploy.operator import OperatorServer
from upright.deploy.robot import SerialRobot
from upright.policy_io.mlp import OnnxPolicy
import upright.deploy.logger_process, upright.deploy.logger_writer, upright.deploy.recover
# and what it runs before the loop: the metadata, the checks, the dry run, one frame and one inference
policy = sys.argv[1]
assert not is_chunk_policy_source(policy)
spec = load_policy_spec(policy, load_robot_config("unitree_g1_29dof"))
import numpy as np
builder = ObservationBuilder(spec)
j = spec.num_joints
frame = builder.frame(spec.default_joint_pos, np.zeros(j), np.zeros(3), np.array([1.0, 0, 0, 0]), np.zeros(j))
action = OnnxPolicy(spec)(builder.push(frame))
assert action.shape[-1] == j
# a lift (ee_delta) policy: its IK from the file's chain, the object pose source, one frame, one inference, one step
from upright.deploy.ee_action import EeDeltaRule
from upright.deploy.object_pose import ObjectPoseSource
lift = load_policy_spec(sys.argv[2], load_robot_config("franka_emika_panda"), object_pose=True)
rule = EeDeltaRule(lift.metadata, lift.kp, lift.action_scale)
home = lift.default_joint_pos
q9 = rule.measured_q9(home)
builder = ObservationBuilder(lift)
frame = builder.frame(q9, np.zeros(9), np.zeros(3), np.array([1.0, 0, 0, 0]), np.zeros(4), home_q=q9, ctrl=home,
                      gripper_pos=rule.site(home), cube_pos=np.array([0.7, 0, 0.03]),
                      cube_quat=np.array([1.0, 0, 0, 0]), target_pos=np.array([0.7, 0, 0.3]))
action = OnnxPolicy(lift)(builder.push(frame))
targets = rule.applied(rule.step(home, np.clip(action.reshape(-1), -1, 1), home))
assert action.shape[-1] == 4 and targets.shape == (8,) and np.isfinite(targets).all()
print(json.dumps(sorted(sys.modules)))
"""


def test_the_daemon_imports_nothing_of_the_train_extra():
    """In a fresh interpreter: the daemon's modules, a policy's metadata, checks and dry run, one observation frame and
    one inference (of the G1 policy, and of the lift policy with its IK step) leave no module of :data:`HEAVY` in
    ``sys.modules`` (nor does ``import upright`` alone)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", DAEMON_CHAIN, str(ROOT / POLICY), str(ROOT / LIFT_POLICY)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules = set(json.loads(proc.stdout.splitlines()[-1]))
    assert "onnxruntime" in modules and "upright.deploy.controller" in modules
    pulled = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert not pulled, f"the daemon's import chain pulls {sorted({m.split('.')[0] for m in pulled})}: {pulled[:10]}"
    bare = subprocess.run(
        [sys.executable, "-c", "import sys, upright; print(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=env,
    )  # fmt: skip
    assert bare.returncode == 0, bare.stderr
    assert not [m for m in bare.stdout.split() if m.split(".")[0] in HEAVY]


def _run(argv, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, argv))}: {proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_the_daemon_runs_from_a_slim_venv(tmp_path):
    """A venv without system site packages, upright installed (not editable, no dependencies) beside the four base
    dependencies only: torch, MuJoCo, Hydra, onnx and gymnasium do not import there; its ``upright-deploy run`` runs the
    committed G1 policy on sim-robot (this interpreter) in POLICY for about 2.7 s and writes its dataset."""
    started = time.monotonic()
    src = tmp_path / "src"  # a copy: the build's build/ and *.egg-info stay out of the repository
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "upright", src / "upright", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    _run([sys.executable, "-m", "venv", str(venv)], timeout=120, env=env)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run([*pip, "--no-deps", str(src)], timeout=300, env=env, cwd=tmp_path)
    _run([*pip, *BASE], timeout=300, env=env, cwd=tmp_path)
    for module in ("torch", "mujoco", "hydra", "onnx", "gymnasium"):
        proc = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, text=True, env=env)
        assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, f"{module} imports in the slim venv"
    site = _run([str(python), "-c", "import upright, pathlib; print(pathlib.Path(upright.__file__).parent.parent)"],
                env=env, cwd=tmp_path).stdout.strip()  # fmt: skip
    assert pathlib.Path(site).resolve() != ROOT.resolve() and "site-packages" in site, site
    policy = pathlib.Path(site) / POLICY  # the package data of the installed wheel
    assert policy.is_file()
    installed_s = time.monotonic() - started

    # without MuJoCo, sim-robot says which extra it needs
    proc = subprocess.run([str(venv / "bin" / "upright-deploy"), "sim-robot", "--link-dir", str(tmp_path / "x")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "pip install 'upright[train]'" in proc.stderr, proc.stderr
    # and so does run with a chunked (VLA) policy (the committed TinyVLA base of the residual lift policy)
    vla = pathlib.Path(site) / "upright/assets/policies/panda_lift_residual/base_policy.onnx"
    proc = subprocess.run([str(venv / "bin" / "upright-deploy"), "run", "--policy", str(vla), "--robot",
                           "franka_emika_panda", "--instruction", "lift the cube", "--no-log", "--no-keyboard"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "needs torch: pip install 'upright[train]'" in proc.stderr, proc.stderr
    # the policy server, too: one line that names the extra, no traceback
    proc = subprocess.run([str(venv / "bin" / "upright-policy-server"), "--policy", "linear"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "upright-policy-server needs torch" in proc.stderr and "pip install 'upright[train]'" in proc.stderr

    sim, links = start_sim_robot(tmp_path, "--lockstep-dt", "0.002")  # this interpreter: MuJoCo
    log = open(tmp_path / "daemon.log", "w")
    daemon = subprocess.Popen(
        [*_e2e_nice(), str(venv / "bin" / "upright-deploy"), "run", "--sim", "--policy", str(policy), "--port-dir",
         str(links), "--dataset", str(tmp_path / "dataset"), "--socket", str(tmp_path / "ctl.sock"), "--no-keyboard",
         "--auto-start", "--ramp-s", "0.2", "--auto-engage", "0.1", "--tilt-limit", "none", "--duration", "3"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        wait_for_mode(tmp_path, "POLICY", timeout=120)
        code = daemon.wait(180)
    finally:
        stop(daemon)
        stop(sim)
    text = (tmp_path / "daemon.log").read_text()
    assert code == 0, text[-3000:]
    assert "HOLD -> POLICY" in text and "Traceback" not in text, text[-3000:]

    from upright.dataset_io.check import check_dataset
    from upright.dataset_io.lerobot import load_frames

    check_dataset(tmp_path / "dataset")
    frames = load_frames(tmp_path / "dataset").to_pydict()
    policy_ticks = sum(c == 0 for c in frames["control_source"])  # 0: the policy
    assert policy_ticks >= 100, policy_ticks  # ~2.7 s at 50 Hz after the 0.2 s ramp and 0.1 s of HOLD
    policy_obs = [o for o, c in zip(frames["observation.policy_obs"], frames["control_source"]) if c == 0]
    assert {len(o) for o in policy_obs} == {76}  # HoST's frame, as the daemon built it (numpy, no torch)
    assert all(math.isfinite(v) for o in policy_obs for v in o)
    info = json.loads((tmp_path / "dataset" / "meta" / "info.json").read_text())
    assert info["robot_type"] == "unitree_g1_29dof" and info["total_episodes"] >= 1
    print(f"slim venv: installed in {installed_s:.1f} s, whole test {time.monotonic() - started:.1f} s")
