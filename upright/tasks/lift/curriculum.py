"""The lift curriculum: per-env levels (:class:`upright.managers.curriculum.LevelCurriculum`) mapped to the reset
ranges of the cube and the target.

Rules, applied at each episode end of an env: :func:`~upright.managers.curriculum.raise_on_success` (``step_up``) and
:func:`~upright.managers.curriculum.lower_on_failure` (``step_down``), where success is the cube having come within
the success threshold of the target during the episode. Level ℓ gives the cube's start xy half-width
``lerp(cube_xy_start, env.cube_xy_range, ℓ)``, the target's xy half-width ``lerp(target_xy_start,
env.target_xy_range, ℓ)`` and the target height range ``[lerp(target_height_min_start, h0, ℓ),
lerp(target_height_max_start, h1, ℓ)]`` (``target_height_min_start`` None: h0 at every level).
"""

from __future__ import annotations

import torch

from upright.managers.curriculum import CurriculumRule, LevelCurriculum, lerp, lower_on_failure, raise_on_success
from upright.tasks.lift.config import LiftEnvCfg


def lift_curriculum(cfg: LiftEnvCfg, num_envs: int, device) -> LevelCurriculum:
    """The curriculum of ``cfg.curriculum``.

    Raises:
        ValueError: a step < 0, or a level-0 range wider than the full one (the message names the key).
    """
    c = cfg.curriculum
    if c.step_up < 0 or c.step_down < 0:
        raise ValueError(f"env.curriculum.step_up and step_down must be >= 0, got {c.step_up}, {c.step_down}")
    for key, start, end in (
        ("cube_xy_start", c.cube_xy_start, cfg.cube_xy_range),
        ("target_xy_start", c.target_xy_start, cfg.target_xy_range),
        ("target_height_max_start", c.target_height_max_start, cfg.target_height[1]),
        ("target_height_min_start", c.target_height_min_start or 0.0, cfg.target_height[0]),
    ):
        if start > end:
            raise ValueError(f"env.curriculum.{key}={start} exceeds the full range {end}; lower it")
    if c.target_height_min_start is not None and c.target_height_min_start > c.target_height_max_start:
        raise ValueError(
            f"env.curriculum.target_height_min_start={c.target_height_min_start} exceeds "
            f"target_height_max_start={c.target_height_max_start}; lower it"
        )
    rules = [
        CurriculumRule("raise_on_success", raise_on_success, {"step": c.step_up}),
        CurriculumRule("lower_on_failure", lower_on_failure, {"step": c.step_down}),
    ]
    return LevelCurriculum(num_envs, rules, init=c.init_level, enabled=c.enabled, device=device)


def reset_ranges(cfg: LiftEnvCfg, level: torch.Tensor) -> dict[str, torch.Tensor]:
    """Reset ranges at each env's ``level`` (M,): ``cube_xy``, ``target_xy`` half-widths, ``target_height_min`` and
    ``target_height_max`` (each (M,), m)."""
    c = cfg.curriculum
    h0 = float(cfg.target_height[0])
    low = h0 if c.target_height_min_start is None else c.target_height_min_start
    return {
        "target_height_min": lerp(low, h0, level),
        "cube_xy": lerp(c.cube_xy_start, cfg.cube_xy_range, level),
        "target_xy": lerp(c.target_xy_start, cfg.target_xy_range, level),
        "target_height_max": lerp(c.target_height_max_start, cfg.target_height[1], level),
    }
