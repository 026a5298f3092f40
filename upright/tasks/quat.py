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


def quat_to_matrix(quat: torch.Tensor) -> torch.Tensor:
    """Rotation matrices R(q) (body-to-world) of (N, 4) unit quaternions (w, x, y, z), as (N, 3, 3)."""
    w, x, y, z = quat.unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    ).reshape(*quat.shape[:-1], 3, 3)  # fmt: skip
