"""HoST's evaluation metrics of standing up (Huang et al., RSS 2025, Table III; spec §7).

All functions take per-env trajectories recorded at the control rate (dt = 0.02 s) with time on
axis 1: shapes (N, T) or (N, T, ...). They return one value per env (N,) so that a caller can
average over episodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

SUCCESS_HEIGHT = 0.7
"""E_succ: the pelvis must rise above this height, m (HoST ground ``eval``)."""
FALL_HEIGHT = 0.5
"""E_succ: ...and never drop below this height afterwards, m."""


@dataclass(frozen=True)
class SuccessCriterion:
    """E_succ of one terrain: the height rises above ``stand_height`` and never drops below ``fall_height`` after.

    The height is pelvis z (world, m, ground at z = 0), or pelvis z minus the mean foot z when
    ``relative_to_feet`` (slope). Source: HoST spec §7 (``scripts/eval/eval_*.py``).
    """

    stand_height: float
    """Height the pelvis must exceed, m."""
    fall_height: float
    """Height it must never drop below afterwards, m."""
    relative_to_feet: bool = False
    """Measure the pelvis relative to the mean foot height instead of world z."""

    def height(self, base_pos: torch.Tensor, feet_pos: torch.Tensor) -> torch.Tensor:
        """(...) height this criterion tests, m, from ``base_pos`` (..., 3) and ``feet_pos`` (..., 2, 3), world
        frame."""
        h = base_pos[..., 2]
        return h - feet_pos[..., 2].mean(dim=-1) if self.relative_to_feet else h


SUCCESS_CRITERIA: dict[str, SuccessCriterion] = {
    "ground": SuccessCriterion(SUCCESS_HEIGHT, FALL_HEIGHT),
    "platform": SuccessCriterion(0.7, 0.3),
    "wall": SuccessCriterion(0.6, 0.1),
    "slope": SuccessCriterion(0.6, 0.1, relative_to_feet=True),
}
"""E_succ per terrain (spec §7): ground > 0.7 then never < 0.5 m; platform > 0.7 / 0.3; wall > 0.6 / 0.1;
slope pelvis-above-feet > 0.6 / 0.1."""


def first_standing_step(base_height: torch.Tensor, success_height: float = SUCCESS_HEIGHT) -> torch.Tensor:
    """(N,) int64 index of the first step with pelvis height > ``success_height``; T if never."""
    above = base_height > success_height
    t = base_height.shape[1]
    idx = torch.where(above.any(dim=1), above.float().argmax(dim=1), torch.full_like(above[:, 0], t, dtype=torch.long))
    return idx.long()


def success(
    base_height: torch.Tensor, success_height: float = SUCCESS_HEIGHT, fall_height: float = FALL_HEIGHT
) -> torch.Tensor:
    """E_succ per episode: (N,) bool, pelvis z ever > ``success_height`` and never < ``fall_height`` afterwards.

    Args:
        base_height: (N, T) pelvis height, m.
    """
    start = first_standing_step(base_height, success_height)
    steps = torch.arange(base_height.shape[1], device=base_height.device)
    after = steps.unsqueeze(0) >= start.unsqueeze(1)
    fell = ((base_height < fall_height) & after).any(dim=1)
    return (start < base_height.shape[1]) & ~fell


def feet_movement(
    feet_pos: torch.Tensor, base_height: torch.Tensor, success_height: float = SUCCESS_HEIGHT
) -> torch.Tensor:
    """E_feet per episode: (N,) sum over the standing steps of the squared per-step displacement of both
    feet (cm²), divided by (number of standing steps + 1). NaN for episodes that never stand.

    Args:
        feet_pos: (N, T, 2, 3) ankle (foot) positions, world frame, m.
        base_height: (N, T) pelvis height, m.
    """
    start = first_standing_step(base_height, success_height)
    disp = ((feet_pos[:, 1:] - feet_pos[:, :-1]) * 100.0).pow(2).sum(dim=(-1, -2))  # (N, T-1) cm²
    steps = torch.arange(1, feet_pos.shape[1], device=feet_pos.device)
    standing = steps.unsqueeze(0) > start.unsqueeze(1)
    total = (disp * standing).sum(dim=1)
    value = total / (standing.sum(dim=1) + 1)
    return torch.where(start < base_height.shape[1], value, torch.full_like(value, math.nan))


def smoothness(q: torch.Tensor, actuated: torch.Tensor) -> torch.Tensor:
    """E_smth per episode: (N,) mean over actuated steps of Σ_j (q_t − 2 q_{t−1} + q_{t−2})², × 180/π.

    Args:
        q: (N, T, J) joint positions, rad.
        actuated: (N, T) bool, the policy was in control at step t (after the passive start).
    """
    second = q[:, 2:] - 2.0 * q[:, 1:-1] + q[:, :-2]
    per_step = second.pow(2).sum(dim=-1) * (180.0 / math.pi)  # (N, T-2)
    mask = actuated[:, 2:] & actuated[:, 1:-1] & actuated[:, :-2]
    return (per_step * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)


def energy(
    dq: torch.Tensor,
    tau: torch.Tensor,
    base_height: torch.Tensor,
    dt: float = 0.02,
    success_height: float = SUCCESS_HEIGHT,
) -> torch.Tensor:
    """E_engy per episode: (N,) Σ_t Σ_j |q̇||τ|·dt over the steps before first standing, in kJ.

    The spec gives Σ|q̇||τ|·0.02 (J); Table III's values (~1) match kJ, so this returns kJ.

    Args:
        dq: (N, T, J) joint velocities, rad/s.
        tau: (N, T, J) joint torques, N·m.
        base_height: (N, T) pelvis height, m.
    """
    start = first_standing_step(base_height, success_height)
    steps = torch.arange(dq.shape[1], device=dq.device)
    before = steps.unsqueeze(0) < start.unsqueeze(1)
    power = (dq.abs() * tau.abs()).sum(dim=-1)  # (N, T) W
    return (power * before).sum(dim=1) * dt / 1000.0


PAPER_TABLE_III = {
    "ground": {"E_succ": 99.5, "E_feet": 1.52, "E_smth": 2.90, "E_engy": 1.35},
    "platform": {"E_succ": 99.8, "E_feet": 1.16, "E_smth": 3.39, "E_engy": 0.58},
    "wall": {"E_succ": 94.2, "E_feet": 1.14, "E_smth": 4.66, "E_engy": 1.08},
    "slope": {"E_succ": 98.5, "E_feet": 5.71, "E_smth": 5.31, "E_engy": 0.83},
}
"""HoST paper Table III (simulation): success %, E_feet, E_smth, E_engy."""
