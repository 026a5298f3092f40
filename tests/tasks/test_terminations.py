"""Unit tests of the standup terminations on hand-built states."""

import torch

from upright.tasks.standup.state import StandupState
from upright.tasks.standup.terminations import time_out, velocity_explosion


def test_velocity_explosion():
    s = StandupState.zeros(6)
    s.episode_step[:] = torch.tensor([31, 30, 100, 100, 100, 100])
    s.dq[0, 3] = 301.0  # after the unactuated phase -> terminate
    s.dq[1, 3] = 301.0  # still unactuated (step 30) -> no
    s.dq[2, 5] = -301.0
    s.base_lin_vel[3] = torch.tensor([12.0, 12.0, 12.0])  # |v| = 20.8 m/s
    s.base_lin_vel[4] = torch.tensor([10.0, 10.0, 10.0])  # |v| = 17.3 m/s
    s.dq[5, :] = 299.0
    out = velocity_explosion(s, max_joint_vel=300.0, max_base_lin_vel=20.0, unactuated_steps=30)
    assert out.dtype == torch.bool
    assert out.tolist() == [True, False, True, True, False, False]


def test_time_out():
    out = time_out(torch.tensor([0, 499, 500, 501]), max_episode_length=500)
    assert out.tolist() == [False, False, True, True]
