"""Batched physics backends behind one interface (:class:`upright.sim.base.BatchedSim`)."""

from __future__ import annotations

import mujoco
import torch

from upright.sim.base import GEOMETRY_FIELDS, PER_ENV_FIELDS, BackendUnsupportedError, BatchedSim, SimState

BACKENDS = ("native", "mjx", "warp")
"""Backend names accepted by :func:`make_sim` (``sim.backend=...``)."""

MJX_INSTALL_HINT = 'pip install -e ".[mjx]" (CPU JAX) or pip install -e ".[cuda]" (CUDA GPUs)'
"""How to install the MJX backend's dependencies."""

WARP_INSTALL_HINT = 'pip install -e ".[warp]"'
"""How to install the MuJoCo Warp backend's dependencies (mujoco-warp, which brings warp-lang)."""


def make_sim(
    backend: str,
    model: mujoco.MjModel,
    num_envs: int,
    num_threads: int = 0,
    device: str | torch.device = "cpu",
    extra_fields: tuple[str, ...] = (),
) -> BatchedSim:
    """Create a batched simulator by name.

    ``num_threads`` applies to the native backend only; MJX runs on the JAX device matching ``device``, MuJoCo Warp
    (``warp``) on the Warp device matching it (``cpu`` or ``cuda:k``; its buffer sizes come from
    ``UPRIGHT_WARP_NCONMAX`` / ``UPRIGHT_WARP_NJMAX``, see :mod:`upright.sim.warp`).
    ``extra_fields``: model fields beyond :data:`PER_ENV_FIELDS` that vary per env (e.g. :data:`GEOMETRY_FIELDS`);
    the native backend varies any field MuJoCo's batch can expand, MJX holds these as batched inputs, Warp as
    per-world model arrays.

    Raises:
        ValueError: unknown backend (the message lists the valid ones).
        ImportError: ``mjx`` without jax / mujoco-mjx, or ``warp`` without mujoco-warp installed (the message
            names the extra).
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
    if backend == "warp":
        try:
            from upright.sim.warp import WarpSim
        except ImportError as e:
            raise ImportError(f"sim.backend=warp needs mujoco-warp: {WARP_INSTALL_HINT} ({e})") from e
        return WarpSim(model, num_envs, device=device, extra_fields=extra_fields)
    raise ValueError(f"Unknown sim backend '{backend}'. Valid backends: {', '.join(BACKENDS)}")


def warp_cuda_available() -> bool:
    """True when ``mujoco_warp`` imports and Warp sees a CUDA device (what the ``auto`` render/camera backends ask).

    Never raises: a missing package or a broken driver means no usable device.
    """
    try:
        import warp as wp

        wp.config.quiet = True
        import mujoco_warp  # noqa: F401
    except ImportError:
        return False
    try:
        return bool(wp.get_cuda_device_count())
    except Exception:  # noqa: BLE001 - a broken driver means no usable CUDA device
        return False


__all__ = [
    "BACKENDS",
    "BackendUnsupportedError",
    "GEOMETRY_FIELDS",
    "PER_ENV_FIELDS",
    "BatchedSim",
    "SimState",
    "make_sim",
    "warp_cuda_available",
]
