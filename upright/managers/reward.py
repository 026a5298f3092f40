"""Reward terms, reward groups and the manager that combines them, for multi-critic PPO.

Each :class:`RewardTerm` belongs to one :class:`RewardGroup`; the manager returns one column per group (N, G),
one critic each (:mod:`upright.training.multi_critic_ppo`). A group either SUMS ``weight * value`` over its terms
or takes their PRODUCT (HoST's task group), and optionally multiplies each addend by the env step dt (mjlab and
legged_gym scale rewards by dt so that an episode's return does not depend on the control rate). Group weights of
the advantages are a PPO setting (``train.group_weights``), not applied here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

COMBINE_MODES = ("sum", "product")


@dataclass(frozen=True)
class RewardGroup:
    """One reward group (one critic).

    Attributes:
        name: group name (TensorBoard ``Episode_Reward/group/<name>``).
        combine: ``sum`` of ``weight * value`` (times dt if ``scale_by_dt``) or ``product`` of ``weight * value``
            (never times dt; 0 terms give 0).
        scale_by_dt: multiply each addend of a ``sum`` group by the env step dt.
    """

    name: str
    combine: str = "sum"
    scale_by_dt: bool = True

    def __post_init__(self) -> None:
        if self.combine not in COMBINE_MODES:
            raise ValueError(
                f"Reward group '{self.name}': combine must be one of {COMBINE_MODES}, got '{self.combine}'"
            )


@dataclass(frozen=True)
class RewardTerm:
    """One named reward term: ``weight * func(state, **params)``.

    Attributes:
        name: term name, unique within its group (TensorBoard key ``"{group}/{name}"``).
        func: returns the unweighted (N,) float tensor.
        group: name of its :class:`RewardGroup`.
        weight: scale, sign included (0 drops the term from the sum but it is still evaluated and logged).
        params: keyword arguments of ``func``.
    """

    name: str
    func: Callable[..., torch.Tensor]
    group: str
    weight: float
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """``"{group}/{name}"``."""
        return f"{self.group}/{self.name}"


class RewardManager:
    """Evaluates reward terms and combines them into per-group rewards.

    Args:
        terms: the terms; ``"{group}/{name}"`` keys must be unique.
        groups: the groups, in column order.
        dt: env step, s (scales the addends of ``scale_by_dt`` groups).

    Raises:
        ValueError: a term names an unknown group, duplicate keys or group names, or no groups.
    """

    def __init__(self, terms: Sequence[RewardTerm], groups: Sequence[RewardGroup], dt: float):
        names = [g.name for g in groups]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"Reward groups must be a non-empty list of unique names, got {names}")
        for t in terms:
            if t.group not in names:
                raise ValueError(f"Reward term '{t.name}': group '{t.group}' is not one of {names}")
        keys = [t.key for t in terms]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ValueError(f"Duplicate reward term keys: {duplicates}")
        self.terms = list(terms)
        self.groups = list(groups)
        self.dt = float(dt)

    @property
    def group_names(self) -> list[str]:
        """Group names in column order."""
        return [g.name for g in self.groups]

    @property
    def keys(self) -> list[str]:
        """``"{group}/{name}"`` of every term, in term order."""
        return [t.key for t in self.terms]

    def compute(
        self, state: Any, num_envs: int, device: torch.device | str
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Evaluate all terms on ``state``.

        Returns:
            rewards: (N, G) float32, one column per group.
            contributions: ``{"{group}/{name}": (N,)}``: the term's addend (sum groups) or factor (product groups).
        """
        rewards = torch.zeros(num_envs, len(self.groups), device=device)
        products = {i: torch.ones(num_envs, device=device) for i, g in enumerate(self.groups) if g.combine == "product"}
        seen: set[int] = set()
        contributions: dict[str, torch.Tensor] = {}
        for term in self.terms:
            g = self.group_names.index(term.group)
            group = self.groups[g]
            value = term.func(state, **term.params).float()
            if group.combine == "product":
                contribution = term.weight * value
                products[g] = products[g] * contribution
                seen.add(g)
            else:
                contribution = term.weight * (self.dt if group.scale_by_dt else 1.0) * value
                rewards[:, g] += contribution
            contributions[term.key] = contribution
        for g in seen:
            rewards[:, g] = products[g]
        return rewards, contributions
