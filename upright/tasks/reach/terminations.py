"""The reach task's termination term: a simulation that diverged. The episode otherwise ends at its time limit."""

from __future__ import annotations

import torch

from upright.tasks.reach.state import ReachState


def non_finite(state: ReachState) -> torch.Tensor:
    """(N,) bool: a joint position or velocity is NaN or infinite."""
    return ~(torch.isfinite(state.q).all(dim=-1) & torch.isfinite(state.dq).all(dim=-1))
