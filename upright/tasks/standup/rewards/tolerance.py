"""dm_control-style tolerance with a Gaussian sigmoid, as used by HoST's task and shank rewards.

Source: HoST's ``tolerance`` (a torch port of dm_control's), called by the task and shank rewards of
``legged_gym/legged_gym/envs/base/host_ground.py`` (InternRobotics/HoST at commit 70bb580949a3; Huang et al., "Learning
Humanoid Standing-up Control across Diverse Postures", RSS 2025, arXiv 2502.08378); dm_control
``rewards.tolerance(sigmoid="gaussian")``.
"""

from __future__ import annotations

import math

import torch


def tolerance(x: torch.Tensor, lower: float, upper: float, margin: float, value_at_margin: float) -> torch.Tensor:
    """1 inside [lower, upper], decaying as a Gaussian outside.

    Outside the bounds the value is ``exp(-0.5 (d s)^2)`` with ``d = distance to the nearest bound /
    margin`` and ``s = sqrt(-2 ln value_at_margin)``, so it equals ``value_at_margin`` at one margin
    from the bound.

    Args:
        x: any shape, float.
        lower, upper: bounds (``upper`` may be ``math.inf``); same units as ``x``.
        margin: > 0, same units as ``x``.
        value_at_margin: in (0, 1).

    Returns:
        Tensor shaped like ``x``, values in (0, 1].
    """
    if margin <= 0:
        raise ValueError(f"margin must be > 0, got {margin}")
    if not 0.0 < value_at_margin < 1.0:
        raise ValueError(f"value_at_margin must be in (0, 1), got {value_at_margin}")
    scale = math.sqrt(-2.0 * math.log(value_at_margin))
    distance = torch.clamp(lower - x, min=0.0) + torch.clamp(x - upper, min=0.0)
    d = distance / margin
    return torch.exp(-0.5 * (d * scale) ** 2)
