"""HoST evaluation metrics on hand-built trajectories."""

from __future__ import annotations

import math

import torch

from upright.tasks.standup import metrics


def test_success_requires_rise_and_no_fall_afterwards():
    h = torch.tensor(
        [
            [0.1, 0.3, 0.75, 0.72, 0.71],  # stands, stays above 0.5 -> success
            [0.1, 0.3, 0.75, 0.45, 0.75],  # stands then falls below 0.5 -> fail
            [0.1, 0.3, 0.6, 0.65, 0.69],  # never above 0.7 -> fail
            [0.4, 0.45, 0.71, 0.55, 0.51],  # dips before rising don't count -> success
        ]
    )
    assert metrics.success(h).tolist() == [True, False, False, True]
    assert metrics.first_standing_step(h).tolist() == [2, 2, 5, 2]


def test_feet_movement_counts_only_standing_steps_in_cm2():
    h = torch.tensor([[0.1, 0.8, 0.8, 0.8]])
    feet = torch.zeros(1, 4, 2, 3)
    feet[0, 1, 0, 0] = 0.50  # moves before/at standing start (step 1): not counted
    feet[0, 2, 0, 0] = 0.51  # 1 cm after standing -> 1 cm²
    feet[0, 3, 0, 0] = 0.51
    feet[0, 3, 1, 1] = 0.02  # other foot 2 cm -> 4 cm²
    value = metrics.feet_movement(feet, h)
    # standing steps after the first standing step: t = 2, 3 -> (1 + 4) / (2 + 1)
    assert math.isclose(value.item(), 5.0 / 3.0, rel_tol=1e-5)
    assert math.isnan(metrics.feet_movement(feet, torch.zeros(1, 4)).item())


def test_smoothness_second_difference():
    q = torch.zeros(1, 5, 2)
    q[0, :, 0] = torch.tensor([0.0, 0.0, 0.1, 0.3, 0.6])  # second differences 0.1, 0.1, 0.1
    actuated = torch.tensor([[True, True, True, True, False]])
    value = metrics.smoothness(q, actuated)
    # only steps t=2,3 have t, t-1, t-2 actuated... t=4 is passive; mask covers t=2 (0.1²) and t=3 (0.1²)
    assert math.isclose(value.item(), 0.01 * 180 / math.pi, rel_tol=1e-5)


def test_energy_before_standing_in_kj():
    h = torch.tensor([[0.1, 0.2, 0.8, 0.8]])
    dq = torch.full((1, 4, 2), 2.0)
    tau = torch.full((1, 4, 2), -50.0)
    # 2 steps before standing x 2 joints x |2|*|50| W x 0.02 s = 8 J = 0.008 kJ
    assert math.isclose(metrics.energy(dq, tau, h).item(), 0.008, rel_tol=1e-6)
