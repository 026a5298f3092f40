"""What every reach term reads (:class:`ReachState`): torch tensors of N envs, world frame (the Panda's base is at
the world origin), SI units."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class ReachState:
    """One env step's state of N envs."""

    q: torch.Tensor
    """(N, 9) joint positions: 7 arm hinges (rad), 2 finger slides (m)."""
    dq: torch.Tensor
    """(N, 9) joint velocities, rad/s and m/s."""
    home_q: torch.Tensor
    """(9,) the home pose, rad / m."""
    gripper_pos: torch.Tensor
    """(N, 3) gripper site position (between the fingertips), m."""
    target_pos: torch.Tensor
    """(N, 3) the commanded point, m."""
    action: torch.Tensor
    """(N, 8) this env step's clipped action."""
    last_action: torch.Tensor
    """(N, 8) the previous env step's clipped action."""

    @property
    def position_error(self) -> torch.Tensor:
        """(N,) distance from the gripper site to the target, m."""
        return (self.target_pos - self.gripper_pos).norm(dim=-1)
