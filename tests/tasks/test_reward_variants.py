"""Which reward terms and weights each terrain/posture gets (spec §3), and the prone config's route to the
env and the PPO (group weights, Kp/Kd ranges, ungated pull force)."""

import pytest
import torch

from upright.managers.reward import RewardManager
from upright.tasks.standup.curriculum import CurriculumCfg, StandupCurriculum
from upright.tasks.standup.rewards import GROUPS, standup_reward_terms
from upright.tasks.standup.state import StandupState
from upright.tasks.standup.terrains import standup_env_cfg


def _terms(terrain, posture="supine"):
    return {t.key: t for t in standup_reward_terms(terrain, posture)}


GROUND = set(_terms("ground"))


@pytest.mark.parametrize(
    ("terrain", "posture", "added", "removed", "knee", "target", "h1", "h2", "relative"),
    [
        ("ground", "supine", set(), set(), -0.25, 0.75, 0.45, 0.65, False),
        (
            "platform",
            "supine",
            {"style/feet_stumble", "style/lower_body_deviation"},
            set(),
            -10.0,
            0.75,
            0.45,
            0.65,
            False,
        ),
        (
            "wall",
            "supine",
            {"style/feet_stumble", "style/lower_body_deviation"},
            set(),
            -10.0,
            0.725,
            0.45,
            0.65,
            False,
        ),
        ("slope", "supine", {"style/feet_stumble"}, set(), -10.0, 0.70, 0.4, 0.6, True),
        (
            "ground",
            "prone",
            {"style/hip_pitch_deviation", "style/thigh_orientation", "post_task/lower_body_deviation"},
            {"style/shank_orientation", "style/ankle_parallel"},
            -0.25,
            0.75,
            0.45,
            0.65,
            False,
        ),
    ],
)
def test_terms_per_variant(terrain, posture, added, removed, knee, target, h1, h2, relative):
    terms = _terms(terrain, posture)
    assert set(terms) == (GROUND | added) - removed
    assert terms["style/knee_deviation"].weight == knee
    assert terms["post_task/base_height"].params["target"] == target
    assert terms["post_task/base_height"].params["stage_height"] == h2
    assert terms["style/base_ang_vel"].params["stage_height"] == h1
    for term in terms.values():  # every gated term uses the variant's height measure
        if "stage_height" in term.params:
            assert term.params.get("relative_to_feet", False) == relative, term.key
    if "style/feet_stumble" in terms:
        assert (terms["style/feet_stumble"].weight, terms["style/feet_stumble"].params["ratio"]) == (-25.0, 3.0)
    if "style/lower_body_deviation" in terms:
        assert terms["style/lower_body_deviation"].weight == 1.0


def test_prone_weights_and_thresholds():
    prone, supine = _terms("ground", "prone"), _terms("ground", "supine")
    assert prone["style/hip_pitch_deviation"].weight == -10.0
    assert prone["style/thigh_orientation"].weight == 10.0
    assert prone["post_task/lower_body_deviation"].weight == 10.0
    assert (prone["style/base_ang_vel"].weight, supine["style/base_ang_vel"].weight) == (25.0, 1.0)
    for key in ("style/hip_yaw_deviation", "style/hip_roll_deviation"):
        p, s = prone[key].params, supine[key].params
        assert (p["max_threshold"], p["min_threshold"]) == (0.9, 0.8)
        assert (s["max_threshold"], s["min_threshold"]) == (1.4, 0.9)
    # slope-prone combines both sets of changes
    slope_prone = _terms("slope", "prone")
    assert "style/feet_stumble" in slope_prone and "style/thigh_orientation" in slope_prone
    assert slope_prone["style/thigh_orientation"].params["relative_to_feet"] is True


def test_every_variant_computes_on_a_zero_state():
    for terrain, posture in [
        ("ground", "supine"),
        ("ground", "prone"),
        ("platform", "supine"),
        ("wall", "supine"),
        ("slope", "supine"),
        ("slope", "prone"),
    ]:
        rewards, parts = RewardManager(standup_reward_terms(terrain, posture), GROUPS, 0.02).compute(
            StandupState.zeros(2), 2, "cpu"
        )
        assert rewards.shape == (2, 4) and torch.isfinite(rewards).all()
        assert len(parts) == len(standup_reward_terms(terrain, posture))


def test_bad_variant_is_refused_with_the_valid_choices():
    with pytest.raises(ValueError, match="Valid terrains"):
        standup_reward_terms("stairs")
    with pytest.raises(ValueError, match="terrain=wall has no posture=prone"):
        standup_reward_terms("wall", "prone")


def test_prone_env_config_kp_kd_ranges_and_ungated_pull():
    prone, supine = standup_env_cfg("ground", "prone"), standup_env_cfg("ground", "supine")
    assert prone.domain_rand.kp_factor == (0.85, 1.25) and prone.domain_rand.kd_factor == (0.85, 1.25)
    assert supine.domain_rand.kp_factor == (0.85, 1.15)
    assert prone.curriculum.gravity_gate is None and supine.curriculum.gravity_gate == -0.8
    lying = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])  # lying on the back, upright
    actuated = torch.tensor([True, True])
    ungated = StandupCurriculum(prone.curriculum, 2).pull_force(lying, actuated)
    gated = StandupCurriculum(supine.curriculum, 2).pull_force(lying, actuated)
    torch.testing.assert_close(ungated, torch.tensor([200.0, 200.0]))
    torch.testing.assert_close(gated, torch.tensor([0.0, 200.0]))
    with pytest.raises(ValueError, match="gravity_gate"):
        StandupCurriculum(CurriculumCfg(gravity_gate=-2.0), 1)


def test_hydra_posture_sets_group_weights_and_prone_env_values():
    from hydra import compose, initialize

    from upright.conf import register_configs

    register_configs()
    with initialize(version_base=None, config_path=None):
        prone = compose("config", overrides=["task=standup", "recipe=host", "posture=prone"])
        supine = compose("config", overrides=["task=standup", "recipe=host", "terrain=platform"])
        explicit = compose(
            "config", overrides=["task=standup", "recipe=host", "posture=prone", "train.group_weights=[2,1,1,1]"]
        )
    assert list(prone.train.group_weights) == [1.0, 0.1, 1.0, 1.0]
    assert list(supine.train.group_weights) == [2.5, 0.1, 1.0, 1.0]
    assert list(explicit.train.group_weights) == [2.0, 1.0, 1.0, 1.0]
    dr = prone.env.domain_rand
    assert list(dr.kp_factor) == [0.85, 1.25] and list(dr.kd_factor) == [0.85, 1.25]
    assert prone.env.curriculum.gravity_gate is None and supine.env.curriculum.gravity_gate == -0.8
