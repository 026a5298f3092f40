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
        assert policy_env_settings(str(source)) == {"getup.natural_freq_hz": FREQ, "getup.damping_ratio": 2.0}
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
