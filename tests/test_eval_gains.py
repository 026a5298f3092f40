"""Evaluation and play drive the motors with the gains a get-up policy was trained with (a policy trained at 10.8 Hz
was evaluated at the recipe's default 5 Hz before 2026-11-26: docs/experiments/2026-11-26_getup_recipe.md §11)."""

from __future__ import annotations

import numpy as np
import pytest
from train_testlib import two_iteration_run

from upright.tasks.standup.getup.actions import getup_robot_info
from upright.training.policy_loading import policy_env_settings

FREQ = 10.8


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    args = [
        "task=standup",
        "recipe=getup",
        f"env.getup.natural_freq_hz={FREQ}",
        "env.num_envs=8",
        "train.num_steps_per_env=4",
        "train.save_interval=1",
        "sim.num_threads=1",
        "train.update_threads=1",
    ]
    run_dir, _ = two_iteration_run(tmp_path_factory.mktemp("gains"), "standup", args)
    return run_dir


@pytest.mark.slow
def test_evaluation_env_has_the_trained_gains_for_a_checkpoint_and_an_onnx_file(run):
    from upright.training.evaluate import make_eval_env

    want = getup_robot_info(FREQ, 2.0)
    pol = want.policy_joint_ids
    for source in (run / "model_1.pt", run / "policy.onnx"):
        want_settings = {"getup.natural_freq_hz": FREQ, "getup.damping_ratio": 2.0, "getup.actor_history": 6}
        assert policy_env_settings(str(source)) == want_settings
        env, *_ = make_eval_env(str(source), num_envs=2, episode_length_s=0.1, domain_rand=False, seed=0)
        try:
            np.testing.assert_allclose(env.model.actuator_gainprm[pol, 0], want.kp[pol], rtol=1e-6)
            assert float(env.cfg.getup.natural_freq_hz) == FREQ
        finally:
            env.close()


def test_host_and_unreadable_policies_carry_no_env_settings(tmp_path):
    assert policy_env_settings("upright/assets/policies/g1_standup_ground") == {}
    assert policy_env_settings("zero") == {}
    assert policy_env_settings(str(tmp_path / "missing.pt")) == {}


def test_a_one_frame_getup_checkpoint_is_evaluated_with_one_frame_under_the_six_frame_recipe():
    """The committed ``g1_getup_std03_s3`` checkpoint's actor reads one frame; ``recipe=getup`` reads 6 since
    2026-11-28, so evaluation must build its env from the checkpoint's run config, not from the recipe."""
    import pathlib

    import torch

    from upright.training.evaluate import make_eval_env

    ckpt = pathlib.Path(__file__).resolve().parents[1] / "checkpoints" / "g1_getup_std03_s3" / "model_1025.pt"
    assert policy_env_settings(str(ckpt))["getup.actor_history"] == 1
    env, policy, *_ = make_eval_env(str(ckpt), num_envs=2, episode_length_s=0.1, domain_rand=False, seed=0)
    try:
        obs = env.get_observations()["actor"]
        assert int(env.cfg.getup.actor_history) == 1 and obs.shape == (2, 75)
        assert policy(obs).shape == (2, 23) and bool(torch.isfinite(policy(obs)).all())
    finally:
        env.close()
