"""Per-env curriculum levels and the rules that move them.

A level is a float in [0, 1] kept per env (N,): 0 is the easiest setting, 1 the task as specified. A task maps
levels to its parameters with :func:`lerp` (e.g. the cube's start range widening from 5 cm to 20 cm), and moves
them at episode ends with rules: small functions ``rule(level, outcome, **params) -> new level`` of the resetting
envs. :class:`LevelCurriculum` holds the levels, applies its rules, and is saved in checkpoints;
:func:`load_per_env` restores a per-env checkpoint tensor, also for another number of envs (every task's curriculum
uses it, standup's HoST pull force and β included).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


def raise_on_success(level: torch.Tensor, success: torch.Tensor, step: float = 0.05) -> torch.Tensor:
    """Envs whose episode succeeded move ``step`` up, capped at 1.

    Args:
        level: (M,) float levels of the resetting envs.
        success: (M,) bool, whether each episode succeeded.
        step: increase per success (> 0).
    """
    return torch.where(success, (level + step).clamp(max=1.0), level)


def lower_on_failure(level: torch.Tensor, success: torch.Tensor, step: float = 0.02) -> torch.Tensor:
    """Envs whose episode failed move ``step`` down, floored at 0 (keeps each env near the edge of its ability)."""
    return torch.where(success, level, (level - step).clamp(min=0.0))


def load_per_env(target: torch.Tensor, saved: torch.Tensor) -> None:
    """Restore a per-env (N, ...) checkpoint tensor in place: copied when ``saved`` has ``target``'s shape, else
    (saved for another number of envs, e.g. a training checkpoint exported or evaluated with 1 env) every entry
    set to the mean of ``saved`` (0 if it is empty). ``saved`` is moved to ``target``'s device and dtype."""
    saved = saved.to(target.device, target.dtype)
    if saved.shape == target.shape:
        target.copy_(saved)
    else:
        target.fill_(float(saved.mean()) if saved.numel() else 0.0)


def lerp(start: float, end: float, level: torch.Tensor) -> torch.Tensor:
    """``start + (end - start) * level``, (N,) float: the parameter value at each env's level."""
    return start + (end - start) * level


@dataclass(frozen=True)
class CurriculumRule:
    """A rule and its parameters, applied in list order at episode ends."""

    name: str
    func: Callable[..., torch.Tensor]
    params: dict[str, Any] = field(default_factory=dict)


class LevelCurriculum:
    """Per-env levels in [0, 1] moved by rules at episode ends.

    Args:
        num_envs: N.
        rules: the rules, applied in order.
        init: starting level of every env.
        enabled: False keeps every level at 1 (the full task: evaluation and play) and ignores :meth:`on_episode_end`.
        device: torch device.

    Raises:
        ValueError: ``init`` outside [0, 1].
    """

    def __init__(
        self,
        num_envs: int,
        rules: Sequence[CurriculumRule],
        init: float = 0.0,
        enabled: bool = True,
        device: torch.device | str = "cpu",
    ):
        if not 0.0 <= init <= 1.0:
            raise ValueError(f"curriculum init level must be in [0, 1], got {init}")
        self.rules = list(rules)
        self.enabled = enabled
        self.level = torch.full((num_envs,), init if enabled else 1.0, device=device)
        """(N,) float32 level of each env."""
        self.num_updates = 0
        """Episode ends processed."""

    def on_episode_end(self, env_ids: torch.Tensor, success: torch.Tensor) -> None:
        """Apply every rule to the envs ``env_ids`` (M,) whose episodes just ended with outcome ``success`` (M,)
        bool."""
        if not self.enabled or env_ids.numel() == 0:
            return
        level = self.level[env_ids]
        for rule in self.rules:
            level = rule.func(level, success, **rule.params)
        self.level[env_ids] = level
        self.num_updates += int(env_ids.numel())

    def state_dict(self) -> dict:
        """The levels (for checkpoints)."""
        return {"level": self.level.clone(), "num_updates": self.num_updates}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` (a disabled curriculum keeps level 1). Saved levels for another number of envs
        (e.g. exporting or evaluating a checkpoint with 1 env) set every env to their mean level."""
        if not self.enabled:
            return
        load_per_env(self.level, state["level"])
        self.num_updates = int(state.get("num_updates", 0))
