"""Quaternion helpers on torch tensors. Convention: (w, x, y, z), unit norm, body-to-world."""

from __future__ import annotations

import torch


def quat_rotate_inverse(quat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Express world-frame vectors in the body frame: R(q)^T v.

    Args:
        quat: (N, 4) body orientations (w, x, y, z).
        vec: (N, 3) world-frame vectors.

    Returns:
        (N, 3) body-frame vectors.
    """
    w = quat[:, :1]
    u = quat[:, 1:]
    t = 2.0 * torch.cross(u, vec, dim=-1)
    return vec - w * t + torch.cross(u, t, dim=-1)


def quat_rotate(quat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Express body-frame vectors in the world frame: R(q) v. Shapes as :func:`quat_rotate_inverse`."""
    w = quat[:, :1]
    u = quat[:, 1:]
    t = 2.0 * torch.cross(u, vec, dim=-1)
    return vec + w * t + torch.cross(u, t, dim=-1)
