"""Three fidelity fixes of the standup task (issue: the MuJoCo task was harder than HoST's), each tested on the real
G1 scene: HoST's soft joint limits, no restitution turned into the damping of resting contacts, no torso payload.

Each test fails with the old behaviour: soft limits about the range's centre put a straight knee outside them; the
restitution mapped to every contact's damping ratio makes resting feet bounce; the payload was -2..+5 kg.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from upright.robots import g1
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.env import StandupEnv
from upright.tasks.standup.getup.events import standing_heights
from upright.tasks.standup.randomization import DomainRandCfg
from upright.tasks.standup.rewards.regularization import joint_pos_limits


def make_env(n: int = 1, seed: int = 0, **kwargs) -> StandupEnv:
    return StandupEnv(StandupEnvCfg(num_envs=n, obs_noise=False, **kwargs), SimCfg(num_threads=1), seed=seed)


def test_soft_limits_scale_each_bound_as_host_so_a_straight_knee_is_free():
    env = make_env(domain_rand=DomainRandCfg(enabled=False))
    m = env.model
    knee = g1.POLICY_JOINT_NAMES.index("left_knee_joint")
    jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "left_knee_joint")
    lower, upper = m.jnt_range[jid]
    assert lower < 0 < upper  # the G1 knee's range starts just below 0 rad
    assert float(env.q_soft_lower[knee]) == pytest.approx(0.9 * lower, rel=1e-6)
    assert float(env.q_soft_upper[knee]) == pytest.approx(0.9 * upper, rel=1e-6)
    s = env.state
    s.q = env.default_pose[env._policy_ids].repeat(1, 1)
    s.q[:, [knee, g1.POLICY_JOINT_NAMES.index("right_knee_joint")]] = 0.0
    assert float(joint_pos_limits(s)) == 0.0  # about the centre, lower would be +0.061 rad: -0.12 per knee


def _airborne_substeps(dr: DomainRandCfg, drop: float = 0.01, seconds: float = 0.35) -> int:
    """Drop the G1 standing in its default pose from ``drop`` m above the floor, HoST's gains holding the pose; count
    the physics substeps after the first touch in which no foot touches the floor (the feet bounced off it)."""
    env = make_env(1, seed=4, domain_rand=dr, unactuated_steps=0)
    m = env.model
    pose = {int(a): float(q) for a, q in zip(env._q_adr, env.default_pose)}
    pelvis_z, _ = standing_heights(m, pose, env._torso_body)
    qpos = torch.zeros(1, m.nq)
    qpos[0, 2], qpos[0, 3] = pelvis_z + drop, 1.0
    qpos[0, env._q_adr] = env.default_pose
    env.sim.reset_envs(torch.tensor([0]), qpos, torch.zeros(1, m.nv))
    ctrl = env.default_pose.expand(1, -1)
    forces = []
    for _ in range(round(seconds / m.opt.timestep)):
        env.sim.step(ctrl, 1)
        forces.append(float(env._foot_contact(env.sim.state.sensordata)[0, :, 2].sum()))
    f = np.array(forces)
    assert f.max() > 0, "the feet never touched the floor"
    return int(np.count_nonzero(f[int(np.argmax(f > 0)) :] == 0))


def test_resting_feet_do_not_bounce_with_default_randomisation():
    """Restitution 1 sampled: the default keeps the compiled contacts and the feet stay down; the old mapping of the
    restitution to every contact's damping ratio (opt-in now) lifts them off the floor repeatedly after a 1 cm drop."""
    assert _airborne_substeps(DomainRandCfg(restitution=(1.0, 1.0), average_with_terrain=False)) == 0
    bouncy = DomainRandCfg(restitution=(0.65, 0.65), average_with_terrain=False, restitution_as_damping=True)
    assert _airborne_substeps(bouncy) >= 3


def test_no_torso_payload_by_default_as_host_trained():
    assert tuple(DomainRandCfg().torso_payload) == (0.0, 0.0)
    env = make_env(8, seed=2)
    r, m = env.randomizer, env.model
    assert torch.all(r.payload == 0)
    torso = env._torso_body
    col = int((r._robot_bodies == torso).nonzero()[0, 0])
    expected = float(m.body_mass[torso]) * r.link_mass_scale[:, col].double()
    torch.testing.assert_close(env.sim.model_field("body_mass")[:, torso].double(), expected, rtol=1e-6, atol=1e-6)
