"""G1 self-collisions: the sampled pair list is complete and pruned only where the joints keep geoms apart,
and a leg curled into the trunk is stopped by it (with the legacy 41-pair list it passes through)."""

from __future__ import annotations

from unittest import mock

import mujoco
import numpy as np
import pytest

from upright.robots import g1, g1_collision_pairs, self_collision
from upright.robots.menagerie import model_path


def _menagerie_spec() -> mujoco.MjSpec:
    return mujoco.MjSpec.from_file(str(model_path(g1.MENAGERIE_NAME, g1.ENTRY_FILE)))


@pytest.fixture(scope="module")
def pairs() -> set[frozenset[str]]:
    return {frozenset(p) for p in g1.self_collision_pairs()}


@pytest.fixture(scope="module")
def model():
    return g1.g1_spec().compile()


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("left_shin_collision", "torso_collision"),  # shin against the chest when the leg curls up
        ("right_shin_collision", "pelvis_collision"),
        ("left_linkage_brace_collision", "torso_collision"),  # knee link
        ("right_linkage_brace_collision", "pelvis_collision"),
        ("left_foot4_collision", "pelvis_collision"),  # foot under the pelvis (heel to buttock)
        ("right_foot3_collision", "torso_collision"),
        ("left_foot4_collision", "left_hand_collision"),  # foot against the arms
        ("right_foot4_collision", "left_elbow_yaw_collision"),
        ("left_thigh_collision", "torso_collision"),
        ("left_foot4_collision", "right_foot4_collision"),  # kept from the legacy list
        ("left_hand_collision", "torso_collision"),
    ],
)
def test_known_necessary_pairs_present(pairs, a, b):
    assert frozenset((a, b)) in pairs


def test_list_is_well_formed_and_has_no_parent_child_pair(model, pairs):
    listed = g1.self_collision_pairs()
    assert len(pairs) == len(listed) == model.npair  # no duplicates; all compiled as <pair>
    for a, b in listed:
        ga, gb = model.geom(a), model.geom(b)  # KeyError if a name is not a geom
        assert model.geom_contype[ga.id] and model.geom_conaffinity[gb.id], (a, b)
        ba, bb = int(model.geom_bodyid[ga.id]), int(model.geom_bodyid[gb.id])
        assert ba != bb, (a, b)
        assert model.body_parentid[ba] != bb and model.body_parentid[bb] != ba, f"parent-child pair {a}-{b}"
    compiled = {
        frozenset((model.geom(int(model.pair_geom1[i])).name, model.geom(int(model.pair_geom2[i])).name))
        for i in range(model.npair)
    }
    assert compiled == pairs


def test_model_excludes_are_the_only_other_exclusion():
    """Candidates = all pairs on different bodies minus parent-child and the MJCF's own <exclude> body pairs
    (pelvis-hip_roll and elbow-wrist_pitch, which overlap at every joint angle)."""
    model, excluded_bodies = self_collision.survey_model(_menagerie_spec())
    assert excluded_bodies == {
        frozenset(("pelvis", "left_hip_roll_link")),
        frozenset(("pelvis", "right_hip_roll_link")),
        frozenset(("left_elbow_link", "left_wrist_pitch_link")),
        frozenset(("right_elbow_link", "right_wrist_pitch_link")),
    }
    candidates, excluded = self_collision.classify_pairs(model, excluded_bodies)
    assert {r for _, _, r in excluded} == {"parent-child", "model exclude"}
    listed = {frozenset(p) for p in g1_collision_pairs.PAIRS}
    names = {frozenset((model.geom(a).name, model.geom(b).name)) for a, b in candidates}
    assert listed <= names  # every listed pair is a candidate
    assert len(names) - len(listed) < 0.15 * len(names)  # the joints keep few pairs apart


def test_fresh_sampling_finds_no_touching_pair_that_the_list_lacks(pairs):
    """A smaller independent run (other seed): every candidate pair that comes within 1 cm is listed."""
    survey = self_collision.sample_min_distances(
        _menagerie_spec(), num_samples=30_000, seed=12345, record_distance=0.01
    )
    close = {frozenset(p) for p in survey.within(0.01)}
    assert close, "the sampling found no close pair at all: the check is vacuous"
    missing = close - pairs
    assert not missing, f"pairs within 1 cm that the list lacks: {sorted(tuple(sorted(p)) for p in missing)}"
    # and the run is not vacuous: it sees most listed pairs touch
    assert len(close) > 0.8 * len(pairs)


def _curl_left_leg(pairs_fn, seconds: float = 2.0) -> tuple[float, str]:
    """Pelvis welded to the world, no gravity; PD drives the left leg from the default pose to hip pitch fully
    flexed (lower limit), hip yaw 1.5 rad, knee 1.5 rad. Returns the deepest penetration (m, >= 0) of a
    left-leg geom (thigh, shin, knee brace, foot) into the pelvis or torso, and that pair."""
    with mock.patch.object(g1, "self_collision_pairs", pairs_fn):
        spec = g1.g1_spec()
    spec.delete(spec.joint("floating_base_joint"))
    m = spec.compile()
    m.opt.gravity[:] = 0.0
    d = mujoco.MjData(m)
    info = g1.robot_info()
    d.qpos[:] = info.default_pose
    target = info.default_pose.copy()
    hip = g1.JOINT_NAMES.index("left_hip_pitch_joint")
    target[hip] = m.jnt_range[m.joint("left_hip_pitch_joint").id, 0]
    target[g1.JOINT_NAMES.index("left_hip_yaw_joint")] = 1.5
    target[g1.JOINT_NAMES.index("left_knee_joint")] = 1.5
    d.ctrl[:] = target
    leg = [
        m.geom(f"left_{n}_collision").id for n in ("thigh", "shin", "linkage_brace", *(f"foot{k}" for k in range(1, 8)))
    ]
    trunk = [m.geom("pelvis_collision").id, m.geom("torso_collision").id]
    fromto = np.zeros(6)
    deepest, where = 0.0, ""
    for _ in range(int(seconds / m.opt.timestep)):
        mujoco.mj_step(m, d)
        for a in leg:
            for b in trunk:
                dist = mujoco.mj_geomDistance(m, d, a, b, 0.05, fromto)
                if -dist > deepest:
                    deepest, where = -dist, f"{m.geom(a).name}-{m.geom(b).name}"
    return deepest, where


def test_curled_leg_is_stopped_by_the_trunk():
    deepest, where = _curl_left_leg(g1.self_collision_pairs)
    assert deepest < 0.02, f"the leg passes {deepest * 100:.1f} cm into the trunk ({where})"
    # control: with the legacy pairs (no leg-trunk contact) the same command drives the shin through the torso
    legacy, where = _curl_left_leg(g1.legacy_self_collision_pairs)
    assert legacy > 0.05, (legacy, where)
