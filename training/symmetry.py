"""Left/right symmetry data augmentation for PPO (``train.symmetry=true``), through rsl-rl's ``Symmetry`` extension.

rsl-rl (``rsl_rl/extensions/symmetry.py``; Mittal et al., "Symmetry Considerations for Learning Task Symmetric Robot
Policies", ICRA 2024) calls :func:`augment` on every mini-batch and appends the mirrored samples; the task's env
knows its own mirror: it provides ``mirror_observations(obs: TensorDict) -> TensorDict`` (every observation group,
same shapes) and ``mirror_actions(actions: Tensor (B, A)) -> Tensor (B, A)``. ``recipe=getup``'s env does
(:mod:`upright.tasks.standup.getup.symmetry`).
"""

from __future__ import annotations

from typing import Any

import torch

MIRROR_METHODS = ("mirror_observations", "mirror_actions")
"""What an env must provide for ``train.symmetry=true``."""

SYMMETRY_FUNC = "upright.training.symmetry:augment"
"""The augmentation function, as rsl-rl's ``symmetry_cfg["data_augmentation_func"]`` names it."""


def check_env(env: Any) -> None:
    """Raise ValueError (one line, with the fix) if ``env`` cannot mirror its samples."""
    missing = [m for m in MIRROR_METHODS if not callable(getattr(env, m, None))]
    if missing:
        raise ValueError(f"train.symmetry=true needs an env that mirrors its samples ({', '.join(missing)} missing on "
                         f"{type(env).__name__}); use recipe=getup, or set train.symmetry=false")  # fmt: skip


def augment(env: Any, obs=None, actions: torch.Tensor | None = None):
    """Originals then their mirror images: obs (B, ...) -> (2B, ...), actions (B, A) -> (2B, A); None stays None."""
    obs_aug = None if obs is None else torch.cat([obs, env.mirror_observations(obs)], dim=0)
    act_aug = None if actions is None else torch.cat([actions, env.mirror_actions(actions)], dim=0)
    return obs_aug, act_aug
