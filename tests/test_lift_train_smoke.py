"""``python train.py task=lift`` through its real CLI: 2 PPO iterations with a few envs, checkpoint and ONNX with
metadata; unknown and standup-only overrides refused in one line."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
import torch
from train_testlib import ROOT, run_train, two_iteration_run

from upright.training.onnx_export import read_metadata

SMALL = [
    "task=lift",
    "env.num_envs=16",
    "train.num_steps_per_env=8",
    "train.save_interval=1",
    "sim.num_threads=1",
    "train.update_threads=1",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return two_iteration_run(tmp_path_factory.mktemp("lift"), "lift", SMALL)


def test_two_iterations_checkpoint_and_progress(run):
    run_dir, proc = run
    data = torch.load(run_dir / "model_1.pt", weights_only=False)
    assert data["infos"]["completed_iterations"] == 2
    assert data["infos"]["env_state"]["curriculum"]["level"].shape == (16,)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("it ")]
    assert [line.split()[1] for line in lines] == ["1/2", "2/2"]
    assert "reach=" in lines[0] and "lift=" in lines[0] and "regularization=" in lines[0] and "level" in lines[0]


def test_onnx_runs_with_its_metadata(run):
    run_dir, _ = run
    meta = read_metadata(run_dir / "policy.onnx")
    assert meta["task"] == "lift" and meta["observation_dim"] == 49 and len(meta["joint_names"]) == 8
    session = ort.InferenceSession(str(run_dir / "policy.onnx"), providers=["CPUExecutionProvider"])
    out = session.run(None, {meta["input_name"]: np.zeros((1, 49), np.float32)})[0]
    assert out.shape == (1, 8) and np.isfinite(out).all()


def test_cartesian_recipe_sets_its_values_and_explicit_overrides_win():
    from hydra import compose, initialize

    from upright.conf import RECIPES, register_configs, with_task_groups
    from upright.conf.validate import validate_overrides

    assert validate_overrides(["task=lift", "recipe=cartesian"]) is None
    register_configs()
    with initialize(version_base=None, config_path=None):
        cfg = compose("config", overrides=with_task_groups(["task=lift", "recipe=cartesian", "env.rewards.carry=8"]))
        plain = compose("config", overrides=with_task_groups(["task=lift"]))
    assert cfg.env.action_mode == "ee_delta" and cfg.env.ee_gravity_compensation is True
    assert cfg.env.curriculum.grasped_start_fraction == 0.25 and cfg.train.schedule == "fixed"
    assert cfg.env.rewards.carry == 8.0  # the command line wins over the recipe
    assert plain.env.action_mode == "delta" and plain.env.rewards.carry != RECIPES["cartesian"]["env.rewards.carry"]


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("env.no_such_key=1", "Could not override 'env.no_such_key'"),
        ("terrain=platform", "applies to task=standup only"),
        ("recipe=getup", "recipe=getup is a task=standup recipe; for task=lift use recipe=cartesian"),
    ],
)
def test_bad_overrides_refused(tmp_path, arg, message):
    proc = run_train(["task=lift", arg], tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]


@pytest.mark.slow
def test_export_and_play_video(run, tmp_path):
    run_dir, _ = run
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "upright.training.export",
            "--checkpoint",
            str(run_dir / "model_1.pt"),
            "--out",
            str(tmp_path / "exported"),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = read_metadata(tmp_path / "exported" / "policy.onnx")
    assert meta["task"] == "lift" and meta["action_scale"] == 0.04
    video = tmp_path / "play.mp4"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "play.py"),
            "task=lift",
            f"policy={tmp_path / 'exported'}",
            f"video={video}",
            "duration=0.5",
        ],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0 and video.stat().st_size > 1000, proc.stdout[-2000:] + proc.stderr[-3000:]


def test_daemon_refuses_a_lift_policy_in_one_line(run):
    from upright.deploy.metadata import load_policy_spec
    from upright.policy_io.schema import ENV_ACTION_MODES, PolicyMetadataError, action_mode_of

    run_dir, _ = run
    meta = read_metadata(run_dir / "policy.onnx")
    assert meta["action_mode"] == "delta" and action_mode_of(meta, "f", ENV_ACTION_MODES) == "delta"
    with pytest.raises(PolicyMetadataError, match="simulation only"):
        action_mode_of(meta, "f")  # the daemon's modes
    with pytest.raises(PolicyMetadataError) as err:
        load_policy_spec(run_dir / "policy.onnx")
    assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def ee_run(tmp_path_factory):
    return two_iteration_run(
        tmp_path_factory.mktemp("lift_ee"),
        "lift",
        [
            *SMALL,
            "env.action_mode=ee_delta",
            "env.ee_min_height=0.03",
            "env.ee_gravity_compensation=true",
            "env.ee_max_lead=0.05",
            "env.ee_max_lead_down=0.04",
        ],
    )


@pytest.mark.slow
def test_ee_delta_run_exports_a_4_action_policy_that_evaluate_and_play_run(ee_run, tmp_path):
    run_dir, _ = ee_run
    meta = read_metadata(run_dir / "policy.onnx")
    assert meta["action_mode"] == "ee_delta" and meta["observation_dim"] == 45 and meta["ee_action_scale"] == 0.015
    assert meta["ee_action_names"] == ["site_dx", "site_dy", "site_dz", "finger"] and meta["ee_min_height"] == 0.03
    from upright.training.lift_evaluate import policy_action_overrides

    assert meta["ee_gravity_compensation"] is True and meta["ee_max_lead"] == 0.05 and meta["ee_max_lead_down"] == 0.04
    expected = [
        "env.action_mode=ee_delta",
        "env.ee_action_scale=0.015",
        "env.ee_min_height=0.03",
        "env.ee_gravity_compensation=true",
        "env.ee_max_lead=0.05",
        "env.ee_max_lead_down=0.04",
        "env.ee_observe_lead=false",
    ]
    assert policy_action_overrides(str(run_dir / "policy.onnx")) == expected  # from the metadata
    checkpoint = sorted(run_dir.glob("model_*.pt"))[-1]
    assert policy_action_overrides(str(checkpoint)) == expected  # from the run config
    session = ort.InferenceSession(str(run_dir / "policy.onnx"), providers=["CPUExecutionProvider"])
    assert session.run(None, {meta["input_name"]: np.zeros((1, 45), np.float32)})[0].shape == (1, 4)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # evaluate takes the action mode from the file (no env.action_mode override given)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "upright.training.lift_evaluate",
            "--policy",
            str(run_dir),
            "--episodes",
            "2",
            "--num-envs",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
    )
    assert proc.returncode == 0 and "| 2 |" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    video = tmp_path / "play.mp4"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "play.py"),
            "task=lift",
            f"policy={run_dir / 'policy.onnx'}",
            f"video={video}",
            "duration=0.3",
        ],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0 and video.stat().st_size > 1000, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "ee_delta" in proc.stdout  # the viewer says it plays with the policy's action mode
