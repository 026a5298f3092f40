"""``recipe=getup`` end to end through the real CLI: train two iterations, then the exported ONNX and the checkpoint
run in evaluation (HoST protocol) and in play, each of which builds the get-up env from the policy alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from train_testlib import two_iteration_run

from upright.training.onnx_export import read_metadata

SMALL = [
    "task=standup",
    "recipe=getup",
    "env.num_envs=8",
    "env.episode_length_s=0.5",
    "train.num_steps_per_env=8",
    "train.save_interval=1",
    "sim.num_threads=1",
]


@pytest.fixture(scope="module")
def getup_run(tmp_path_factory):
    return two_iteration_run(tmp_path_factory.mktemp("getup"), "standup", SMALL)


def test_getup_run_exports_a_self_describing_policy(getup_run):
    run_dir, proc = getup_run
    assert "ONNX export failed" not in proc.stdout
    meta = read_metadata(run_dir / "policy.onnx")
    # the recipe's actor reads its last 6 frames of the 75-value observation (upright.tasks.standup.spec.GETUP)
    assert meta["mdp"] == "getup" and meta["observation_dim"] == 6 * 75 and meta["privileged_inputs"] == []
    assert meta["observation_history_length"] == 6 and meta["observation_history_start"] == "first_frame"
    assert meta["action_mode"] == "relative" and meta["action_scale"] == pytest.approx(0.6)
    assert meta["training_assistance"].startswith("none")
    # Kp = I·ω²: mjlab_playground's 5 Hz knee Kp (24.7746 N·m/rad) scaled to the recipe's 10.8 Hz
    knee_kp = 24.7746 * (10.8 / 5.0) ** 2
    assert meta["kp"][g := meta["joint_names"].index("left_knee_joint")] == pytest.approx(knee_kp, abs=1e-2), g
    lines = [line for line in proc.stdout.splitlines() if line.startswith("it ")]
    assert "getup=" in lines[-1]


@pytest.mark.parametrize("source", ["model_1.pt", "policy.onnx"])
def test_evaluation_builds_the_getup_env_from_the_policy_and_starts_from_the_posture(getup_run, source):
    from upright.tasks.standup.getup import events
    from upright.tasks.standup.getup.env import GetupEnv
    from upright.training.evaluate import make_eval_env, run_episodes

    run_dir, _ = getup_run
    env, policy, beta, _ = make_eval_env(
        str(run_dir / source), num_envs=4, episode_length_s=1.0, overrides=["sim.num_threads=1"]
    )
    try:
        assert isinstance(env, GetupEnv) and beta == pytest.approx(0.6)
        assert torch.all(env.start_kind == events.POSTURE)
        result = run_episodes(env, policy, 4)
        assert result["E_succ"].shape == (4,) and bool(torch.isfinite(result["peak_height"]).all())
    finally:
        env.close()


def test_checkpoint_and_onnx_give_the_same_actions(getup_run):
    from upright.training.evaluate import make_eval_env

    run_dir, _ = getup_run
    env, ckpt, _, _ = make_eval_env(str(run_dir / "model_1.pt"), num_envs=4, overrides=["sim.num_threads=1"])
    try:
        from upright.viewer.policy import load_policy

        onnx = load_policy(str(run_dir / "policy.onnx"), env, "standup")
        obs = env.get_observations()["actor"]
        np.testing.assert_allclose(ckpt(obs).numpy(), onnx(obs).numpy(), atol=1e-5)
    finally:
        env.close()


def test_play_runs_a_getup_policy_with_the_default_config(getup_run):
    from hydra import compose, initialize

    from upright.tasks.standup.getup.env import GetupEnv
    from upright.viewer.config import register_play_config
    from upright.viewer.session import PolicySession

    run_dir, _ = getup_run
    register_play_config()
    with initialize(version_base=None, config_path=None):
        cfg = compose(config_name="play", overrides=["task=standup", f"policy={run_dir / 'policy.onnx'}"])
    s = PolicySession(cfg)
    try:
        assert isinstance(s.env, GetupEnv) and s.beta == pytest.approx(0.6)
        assert not s.env.cfg.getup.fall_termination  # as evaluation: a fall stays on screen until the time-out
        for _ in range(3):
            s.step()
    finally:
        s.close()


def test_the_default_recipe_of_task_standup_is_the_getup_recipe():
    """``python train.py task=standup`` trains the get-up MDP with the T1's action authority (issue 32 item 6)."""
    from hydra import compose, initialize

    from upright.conf import register_configs

    register_configs()
    with initialize(version_base=None, config_path=None):
        default = compose("config", overrides=["task=standup"])
        host = compose("config", overrides=["task=standup", "recipe=host"])
        kneel = compose("config", overrides=["task=standup", "recipe=vlm_kneel"])
    assert default.env.mdp == "getup" and host.env.mdp == "host"
    assert default.env.getup.natural_freq_hz == 10.8 and default.env.getup.rewards.joint_vel_hinge == 0.0
    assert (default.env.num_envs, default.train.num_steps_per_env) == (8192, 12)
    # the line's MDP levers (6-frame actor, episodes ended by a fall after the rise); the kneel must not end at a kneel
    assert default.env.getup.actor_history == 6 and default.env.getup.fall_termination is True
    assert kneel.env.getup.fall_termination is False
    assert host.env.num_envs != 8192 and host.train.num_steps_per_env == 50
