"""Termination terms and the manager that combines them.

A :class:`TerminationTerm` is ``func(state, **params) -> (N,) bool``: True where the env reached a terminal state
this env step. The manager ORs its terms; the time limit is not a term (the env core compares the episode clock
with its ``max_episode_length`` and reports it as ``time_outs``, a truncation, so PPO bootstraps through it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(frozen=True)
class TerminationTerm:
    """One termination condition.

    Attributes:
        name: term name (TensorBoard ``Episode_Termination/<name>``: the fraction of the finished episodes it ended,
            logged by :class:`upright.envs.ManagerBasedRlEnv`).
        func: ``func(state, **params)`` -> (N,) bool tensor.
        params: keyword arguments of ``func``.
    """

    name: str
    func: Callable[..., torch.Tensor]
    params: dict[str, Any] = field(default_factory=dict)


class TerminationManager:
    """ORs the terms of a task.

    Args:
        terms: the task's termination terms (names unique).

    Raises:
        ValueError: two terms share a name.
    """

    def __init__(self, terms: Sequence[TerminationTerm]):
        names = [t.name for t in terms]
        if len(set(names)) != len(names):
            raise ValueError(f"termination term names must be unique, got {names}")
        self.terms = tuple(terms)
        self.last: dict[str, torch.Tensor] = {}
        """(N,) bool of each term at the last :meth:`compute`."""

    def compute(self, state: Any, num_envs: int, device: torch.device | str) -> torch.Tensor:
        """(N,) bool: the envs any term ends now.

        Raises:
            ValueError: a term returned something other than (N,) (the message names it).
        """
        out = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.last = {}
        for term in self.terms:
            hit = term.func(state, **term.params)
            if tuple(hit.shape) != (num_envs,):
                raise ValueError(
                    f"termination term '{term.name}' must return (N,) = ({num_envs},), got {tuple(hit.shape)}"
                )
            hit = hit.to(device, torch.bool)
            self.last[term.name] = hit
            out |= hit
        return out
