"""Batched physics backends behind one interface (:class:`upright.sim.base.BatchedSim`)."""

from __future__ import annotations

import mujoco
import torch

from upright.sim.base import BatchedSim, SimState

BACKENDS = ("native",)
"""Backend names accepted by :func:`make_sim` (``sim.backend=...``)."""


def make_sim(
    backend: str, model: mujoco.MjModel, num_envs: int, num_threads: int = 0, device: str | torch.device = "cpu"
) -> BatchedSim:
    """Create a batched simulator by name.

    Raises:
        ValueError: unknown backend (the message lists the valid ones).
    """
    if backend == "native":
        from upright.sim.native import NativeSim

        return NativeSim(model, num_envs, num_threads=num_threads, device=device)
    raise ValueError(f"Unknown sim backend '{backend}'. Valid backends: {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "BatchedSim", "SimState", "make_sim"]
