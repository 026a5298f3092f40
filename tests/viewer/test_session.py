"""PolicySession: evaluation settings (β fixed, no observation noise), reset, variant switching."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hydra import compose, initialize


def _cfg(overrides):
    from upright.viewer.config import register_play_config

    register_play_config()
    with initialize(version_base=None, config_path=None):
        return compose(config_name="play", overrides=["task=standup", *overrides])


def test_policy_session_evaluation_settings_and_reset():
    from upright.viewer.session import PolicySession

    s = PolicySession(_cfg(["recipe=host", "policy=random", "beta=0.6", "env.episode_length_s=0.2"]))
    try:
        assert s.env.num_envs == 1 and s.env.cfg.obs_noise is False
        assert s.env.cfg.domain_rand.enabled is False and s.env.randomizer.enabled is False  # play: nominal model
        assert float(s.env.beta[0]) == pytest.approx(0.6)
        infos = [s.step() for _ in range(12)]  # 10 steps per episode: one episode ends
        assert sum(i.done for i in infos) == 1 and s.episode == 1 and s.episodes_done == 1
        assert set(infos[0].reward_groups) == {"task", "regularization", "style", "post_task"}
        assert all(math.isfinite(i.head_height) for i in infos)
        assert float(s.env.beta[0]) == pytest.approx(0.6)  # held fixed
        s.reset()
        st = s.status()
        assert st["episode_time"] == 0.0 and st["reset_count"] == 1 and st["qpos"][2] == pytest.approx(0.5)
        assert np.allclose(s.data.qpos, s.env.sim.state.qpos[0].numpy(), atol=1e-6)
    finally:
        s.close()


def test_randomize_keeps_observation_noise():
    from upright.viewer.session import PolicySession

    s = PolicySession(_cfg(["recipe=host", "policy=zero", "randomize=true"]))
    try:
        assert s.env.cfg.obs_noise is True and float(s.env.beta[0]) == 1.0  # β default: env.curriculum.beta_init
        assert s.env.randomizer.enabled is True  # randomize=true keeps domain randomisation
    finally:
        s.close()


def test_variant_switch_rebuilds_the_env(monkeypatch):
    from upright.viewer import variants
    from upright.viewer.session import PolicySession

    two = (
        variants.Variant("ground/supine", "supine", "ground"),
        variants.Variant("ground/high-drop", "supine", "ground", {"init_height": 0.8}),
    )
    monkeypatch.setitem(variants.TASK_VARIANTS, "standup", two)
    s = PolicySession(_cfg(["policy=zero"]))
    try:
        assert s.variant_name == "ground/supine" and s.data.qpos[2] == pytest.approx(0.5)
        assert s.set_variant(1) is True
        assert s.variant_name == "ground/high-drop" and s.env.cfg.init_height == 0.8
        assert s.data.qpos[2] == pytest.approx(0.8) and s.status()["variant"] == "ground/high-drop"
        s.step()
    finally:
        s.close()


def test_a_host_policy_under_the_default_getup_recipe_plays_hosts_mdp_without_the_pull():
    """The default recipe is the get-up MDP; the committed HoST policy still plays HoST's env, with the curriculum (the
    torso pull) off as play always has it."""
    from upright.viewer.session import PolicySession

    s = PolicySession(_cfg(["policy=upright/assets/policies/g1_standup_ground", "env.episode_length_s=0.2"]))
    try:
        assert s.env.cfg.mdp == "host" and s.env.cfg.curriculum.enabled is False
        assert len({v.terrain for v in s.variants}) == 4  # HoST's terrains stay switchable
    finally:
        s.close()


def test_a_getup_policy_switches_only_among_flat_ground_variants():
    from upright.viewer.session import PolicySession

    s = PolicySession(_cfg(["recipe=host", "policy=upright/assets/policies/g1_getup", "env.episode_length_s=0.2"]))
    try:
        assert s.env.cfg.mdp == "getup" and {v.terrain for v in s.variants} == {"ground"} and len(s.variants) == 2
        for _ in range(3):  # PageDown cycles supine <-> prone and never reaches a terrain the MDP refuses
            assert s.set_variant(s.variant_index + 1)
    finally:
        s.close()
