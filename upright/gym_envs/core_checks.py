"""Input checks of the gymnasium wrappers in :mod:`upright.gym_envs.core`: the ``overrides`` of a ``gymnasium.make``
against a task's env config (:func:`check_overrides`, used by each task's adapter), and what :meth:`reset` /
:meth:`step` and the constructors accept: actions of the action space's shape, one seed for the batch, one reward
weight per reward group. Each raises :class:`ValueError` with a message that names the expected value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch


def check_overrides(cfg: Any, overrides: dict[str, Any], reserved: Sequence[str] = ()) -> None:
    """Check the dotted keys of ``overrides`` against the fields of dataclass ``cfg`` (a task's env config).

    Raises:
        ValueError: a key in ``reserved`` (a make kwarg of its own), or an unknown key (the message names the valid
            fields at its level).
    """
    import dataclasses

    for key in overrides:
        if key in reserved:
            raise ValueError(f"overrides[{key!r}]: pass {key}= to make() instead")
        node, path = cfg, ""
        for part in key.split("."):
            names = [f.name for f in dataclasses.fields(node)] if dataclasses.is_dataclass(node) else []
            if part not in names:
                where = f"env.{path}" if path else "env"
                raise ValueError(f"unknown override {key!r}: {where} has no field {part!r}; valid: {', '.join(names)}")
            node = getattr(node, part)
            path = f"{path}.{part}" if path else part


def _as_actions(actions: Any, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """Actions (numpy array, tensor or nested sequence) as a float32 tensor of ``shape`` on ``device``.

    Raises:
        ValueError: another shape, or a non-finite value (the message names the expected shape).
    """
    a = torch.as_tensor(actions, dtype=torch.float32)
    if tuple(a.shape) != shape:
        raise ValueError(f"actions must have shape {shape} (the action space's), got {tuple(a.shape)}")
    if not bool(torch.isfinite(a).all()):
        raise ValueError("actions contain NaN or inf; clip or fix the policy output before step()")
    return a.to(device)


def _seed_from(seed: Any) -> int | None:
    """One int seed from a vector reset's ``seed`` (int, None, or a list whose first entry seeds the batch).

    Raises:
        ValueError: a negative seed, or a list of several distinct seeds (one batched simulation has one generator).
    """
    if seed is None:
        return None
    if isinstance(seed, (list, tuple, np.ndarray)):
        values = [None if s is None else int(s) for s in seed]
        if len(set(values)) > 1 and not (values and all(v == values[0] + i for i, v in enumerate(values))):
            raise ValueError(
                "upright's vector env is one batched simulation with one random generator: pass one int seed "
                f"(or a list [s, s+1, ...] as gymnasium makes from it), got {list(seed)!r}"
            )
        seed = values[0] if values else None
        if seed is None:
            return None
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    return seed


def _weights(weights: Sequence[float] | None, groups: int, device: torch.device) -> torch.Tensor | None:
    """(G,) float32 reward weights, or None for the plain sum.

    Raises:
        ValueError: not one finite weight per reward group.
    """
    if weights is None:
        return None
    w = torch.as_tensor([float(x) for x in weights], dtype=torch.float32)
    if w.numel() != groups or not bool(torch.isfinite(w).all()):
        raise ValueError(f"reward_weights needs {groups} finite numbers (one per reward group), got {list(weights)!r}")
    return w.to(device)
