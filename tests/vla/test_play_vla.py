"""``play.py task=lift policy=<VLA> instruction=...``: the viewer recognises VLA chunk policies, calls them with the
batch the VLA evaluation builds, resets their chunk queue at each new episode, and refuses a camera policy on an env
without cameras in one line; a policy server (``policy=ws://HOST:PORT``) is a VLA too. Real lift env, real TinyVLA,
the committed residual pair."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from train_testlib import ROOT

from upright.policy_io.source import PolicyLoadError
from upright.tasks.lift.config import LiftEnvCfg
from upright.tasks.lift.env import LiftEnv
from upright.tasks.standup.config import SimCfg
from upright.viewer.policy import load_policy
from upright.viewer.vla_policy import VLAPolicyFn, is_vla
from upright.vla.tiny import TinyVLA, TinyVLAConfig

RESIDUAL = ROOT / "upright" / "assets" / "policies" / "panda_lift_residual"


def _env(n: int = 2) -> LiftEnv:
    cfg = LiftEnvCfg(num_envs=n)
    cfg.curriculum.enabled = False
    cfg.domain_rand.enabled = False
    return LiftEnv(cfg, SimCfg(num_threads=1), seed=0)


def test_is_vla_tells_vla_files_from_rl_policies(tmp_path):
    assert (
        is_vla(str(RESIDUAL)) and is_vla(str(RESIDUAL / "policy.onnx")) and is_vla(str(RESIDUAL / "base_policy.onnx"))
    )
    torch.manual_seed(0)
    TinyVLA(TinyVLAConfig(cameras=())).save(tmp_path / "model.pt")
    assert is_vla(str(tmp_path)) and is_vla(str(tmp_path / "model.pt"))
    rl = tmp_path / "run"
    rl.mkdir()
    (rl / "model_10.pt").write_bytes(b"")
    assert not is_vla(str(rl)) and not is_vla("zero")
    assert not is_vla(str(ROOT / "upright" / "assets" / "policies" / "g1_standup_ground" / "policy.onnx"))


def test_vla_policy_builds_the_batch_from_the_env_and_resets_its_queue_per_episode():
    env = _env()
    fn = load_policy(str(RESIDUAL), env, "lift", instruction="lift the red cube")
    assert isinstance(fn, VLAPolicyFn) and fn.instruction == "lift the red cube"
    resets = []
    original = fn.policy.reset
    fn.policy.reset = lambda ids=None: (resets.append(None if ids is None else ids.tolist()), original(ids))
    obs = env.get_observations()["actor"]
    a = fn(obs)
    assert a.shape == (2, 8) and torch.isfinite(a).all() and resets == [[0, 1]]  # both episodes just started
    env.step(a)
    fn(env.get_observations()["actor"])
    assert resets == [[0, 1]]  # mid-episode: no reset
    env.reset_envs(torch.tensor([1]))
    fn(env.get_observations()["actor"])
    assert resets == [[0, 1], [1]]  # env 1 started over: only its queue is reset
    env.close()


def test_viewer_takes_a_policy_server():
    from upright.tasks.lift.vla_io import TASK
    from upright.vla.evaluate_lift import make_batch
    from upright.vla.server_thread import BackgroundServer

    assert is_vla("ws://127.0.0.1:8000")
    torch.manual_seed(0)
    model = TinyVLA(TinyVLAConfig(cameras=(), state_dim=49, state_key="observation.policy_obs", chunk_size=4)).eval()
    env = _env()
    with BackgroundServer(model) as server:
        fn = load_policy(server.url, env, "lift")
        spec = {"state_key": "observation.policy_obs", "cameras": []}
        want = model.predict_action_chunk(make_batch(env, env.get_observations(), spec, TASK, []))[:, 0]
        torch.testing.assert_close(fn(env.get_observations()["actor"]), want, atol=1e-5, rtol=1e-5)
        fn.policy.close()
    with pytest.raises(PolicyLoadError, match="no openpi policy server at ws://127.0.0.1:1") as err:
        load_policy("ws://127.0.0.1:1", env, "lift")
    assert "\n" not in str(err.value)
    env.close()


def test_camera_vla_on_an_env_without_cameras_is_refused_in_one_line(tmp_path):
    torch.manual_seed(0)
    TinyVLA(TinyVLAConfig(cameras=("front",))).save(tmp_path / "model.pt")
    env = _env(1)
    with pytest.raises(PolicyLoadError) as err:
        load_policy(str(tmp_path), env, "lift")
    assert "env.camera.enabled=true" in str(err.value) and "\n" not in str(err.value)
    env.close()


def test_play_cli_runs_the_residual_vla_with_an_instruction(tmp_path):
    video = tmp_path / "vla.mp4"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "play.py"),
            "task=lift",
            f"policy={RESIDUAL}",
            "instruction=lift the red cube",
            f"video={video}",
            "duration=0.4",
        ],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0 and video.stat().st_size > 1000, proc.stdout[-2000:] + proc.stderr[-3000:]
