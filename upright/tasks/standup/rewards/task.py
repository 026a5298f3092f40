"""Task-group reward terms: the standing-up objective.

The task group reward is the PRODUCT of these terms (the ``task`` group of
:data:`upright.tasks.standup.rewards.GROUPS`, combined by :class:`upright.managers.reward.RewardManager`), range
0..1, not multiplied by dt. Each term returns (N,) float32, unweighted.

Source: HoST's task rewards (Huang et al., "Learning Humanoid Standing-up Control across Diverse Postures", RSS 2025,
arXiv 2502.08378); code: InternRobotics/HoST at commit 70bb580949a3, ``legged_gym/legged_gym/envs/base/host_ground.py``
(``compute_reward`` and the task reward functions) with the ground config
``legged_gym/legged_gym/envs/g1/g1_config_ground.py``.
"""

from __future__ import annotations

import math

import torch

from upright.tasks.standup.rewards.tolerance import tolerance
from upright.tasks.standup.state import StandupState


def head_height(
    state: StandupState,
    target: float = 1.0,
    margin: float = 1.0,
    value_at_margin: float = 0.1,
) -> torch.Tensor:
    """f_tol(h_head, [target, inf), margin, value_at_margin), h_head = head z - mean foot z (m).

    Returns:
        (N,) in (0, 1]; 1 once the head is at least ``target`` m above the feet.
    """
    return tolerance(state.head_height, target, math.inf, margin, value_at_margin).float()


def orientation(
    state: StandupState,
    target: float = 0.99,
    margin: float = 1.0,
    value_at_margin: float = 0.05,
) -> torch.Tensor:
    """f_tol(-g_z, [target, inf), margin, value_at_margin), g = projected gravity in the base frame.

    -g_z is 1 when the pelvis is upright, -1 when upside down.

    Returns:
        (N,) in (0, 1].
    """
    return tolerance(-state.projected_gravity[:, 2], target, math.inf, margin, value_at_margin).float()
