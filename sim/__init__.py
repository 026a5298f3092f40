"""Batched physics backends behind one interface (:class:`upright.sim.base.BatchedSim`)."""

from __future__ import annotations

import mujoco
import torch

from upright.sim.base import GEOMETRY_FIELDS, PER_ENV_FIELDS, BatchedSim, SimState

BACKENDS = ("native", "mjx")
"""Backend names accepted by :func:`make_sim` (``sim.backend=...``)."""

MJX_INSTALL_HINT = 'pip install -e ".[mjx]" (CPU JAX) or pip install -e ".[cuda]" (CUDA GPUs)'
"""How to install the MJX backend's dependencies."""


def make_sim(
    backend: str, model: mujoco.MjModel, num_envs: int, num_threads: int = 0, device: str | torch.device = "cpu",
    extra_fields: tuple[str, ...] = (),
) -> BatchedSim:
    """Create a batched simulator by name.

    ``num_threads`` applies to the native backend only; MJX runs on the JAX device matching ``device``.
    ``extra_fields``: model fields beyond :data:`PER_ENV_FIELDS` that vary per env (e.g. :data:`GEOMETRY_FIELDS`);
    the native backend varies any field MuJoCo's batch can expand, MJX holds these as batched inputs.

    Raises:
        ValueError: unknown backend (the message lists the valid ones).
        ImportError: ``mjx`` without jax / mujoco-mjx installed (the message names the extra).
    """
    if backend == "native":
        from upright.sim.native import NativeSim

        return NativeSim(model, num_envs, num_threads=num_threads, device=device)
    if backend == "mjx":
        try:
            from upright.sim.mjx import MjxSim
        except ImportError as e:
            raise ImportError(f"sim.backend=mjx needs jax and mujoco-mjx: {MJX_INSTALL_HINT} ({e})") from e
        return MjxSim(model, num_envs, device=device, extra_fields=extra_fields)
    raise ValueError(f"Unknown sim backend '{backend}'. Valid backends: {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "GEOMETRY_FIELDS", "PER_ENV_FIELDS", "BatchedSim", "SimState", "make_sim"]
