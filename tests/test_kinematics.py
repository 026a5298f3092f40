"""The numpy kinematic chain a lift policy file carries (upright.policy_io.kinematics) against MuJoCo on the Panda of
the lift scene: site pose and Jacobian, gravity torques, and the IK step the env and the daemon share."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from upright.policy_io.kinematics import KinematicChain
from upright.tasks.lift.ik import DifferentialIK, chain_from_model
from upright.tasks.lift.scene import lift_scene


@pytest.fixture(scope="module")
def panda():
    model = lift_scene(0.005)
    chain = KinematicChain.from_metadata(json.loads(json.dumps(chain_from_model(model).to_metadata())))
    return DifferentialIK(model), chain


def _q9(q_arm: np.ndarray, finger: np.ndarray) -> np.ndarray:
    return np.concatenate([q_arm, finger[:, None], finger[:, None]], axis=1)


def test_the_chain_from_its_json_reproduces_mujocos_site_frames_and_gravity(panda):
    ik, chain = panda
    rng = np.random.default_rng(0)
    q = rng.uniform(-2.0, 2.0, (30, 7))
    finger = rng.uniform(0.0, 0.04, 30)
    for mujoco_value, ours in zip(ik.site_frames(q), chain.site_frames(_q9(q, finger), columns=7)):
        np.testing.assert_allclose(ours, mujoco_value, atol=1e-12)
    gravity = ik.gravity_torques(torch.tensor(q), torch.tensor(finger)).double().numpy()  # float32 from mj_rne
    ours = chain.gravity_torques(_q9(q, finger))
    assert np.abs(gravity).max() > 20.0  # the shoulder holds tens of N·m
    np.testing.assert_allclose(ours[:, :7], gravity, atol=2e-5 * np.abs(gravity).max())
    # the fingers' coordinates do not move the site: their Jacobian columns are 0
    assert np.abs(chain.site_frames(_q9(q, finger))[2][:, :, 7:]).max() == 0.0


def test_the_ik_step_is_the_same_from_either_kinematics(panda):
    from upright.policy_io.kinematics import dls_joint_step

    ik, chain = panda
    rng = np.random.default_rng(1)
    q = ik.home[None] + rng.normal(0.0, 0.3, (10, 7))
    d = rng.uniform(-0.015, 0.015, (10, 3))
    env_step = ik.joint_step(torch.tensor(q), torch.tensor(d)).double().numpy()
    frames = chain.site_frames(_q9(q, np.zeros(10)), columns=7)
    ours = dls_joint_step(q, d, frames, ik.home, ik.home_rotation, ik.weights, ik.damping, ik.null_gain)
    np.testing.assert_allclose(ours, env_step, atol=1e-6)  # the env's is float32


def test_a_malformed_chain_is_one_line_naming_the_key(panda):
    _, chain = panda
    good = chain.to_metadata()
    with pytest.raises(ValueError, match=r"kinematic_chain lacks \['gravity'\]"):
        KinematicChain.from_metadata({k: v for k, v in good.items() if k != "gravity"})
    bad = json.loads(json.dumps(good))
    bad["links"][3]["axis"] = [0.0, 1.0]
    with pytest.raises(ValueError, match="link 'link3': axis has shape"):
        KinematicChain.from_metadata(bad)
    bad = json.loads(json.dumps(good))
    bad["links"][2]["parent"] = 5
    with pytest.raises(ValueError, match="not an earlier link"):
        KinematicChain.from_metadata(bad)
