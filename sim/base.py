"""The batched-physics interface every backend implements (native MuJoCo now, MJX later).

Task code talks only to :class:`BatchedSim`: it writes controls, steps, resets rows and reads
state as torch tensors. It never imports MuJoCo's batch API, JAX or a backend module.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import mujoco
import torch


@dataclass
class SimState:
    """State of all envs after the last call, as torch tensors (float32, on the sim's device).

    N = number of envs. Frames and units follow MuJoCo's ``mjData``.
    """

    qpos: torch.Tensor
    """(N, nq) generalised positions: free joint (pos m, quat wxyz), then hinge angles (rad)."""
    qvel: torch.Tensor
    """(N, nv) generalised velocities: free joint (lin vel world frame m/s, ang vel body frame rad/s), hinges rad/s."""
    sensordata: torch.Tensor
    """(N, nsensordata) sensor readings, current at the new state."""
    site_xpos: torch.Tensor
    """(N, nsite, 3) site positions, world frame, m."""
    actuator_force: torch.Tensor
    """(N, nu) actuator forces of the last substep, N·m for joint actuators."""


class BatchedSim(ABC):
    """N copies of one ``MjModel`` stepped together.

    Args:
        model: the compiled scene (robot + terrain), shared by all envs.
        num_envs: number of envs N (> 0).
        device: torch device for the state tensors.
    """

    def __init__(self, model: mujoco.MjModel, num_envs: int, device: str | torch.device = "cpu"):
        if num_envs <= 0:
            raise ValueError(f"num_envs must be > 0, got {num_envs}")
        self.model = model
        """The shared compiled model (per-env fields may differ, see :meth:`model_field`)."""
        self.num_envs = num_envs
        """Number of envs N."""
        self.device = torch.device(device)
        """Torch device of :attr:`state`."""

    @property
    def dt(self) -> float:
        """Physics timestep, s."""
        return float(self.model.opt.timestep)

    @property
    @abstractmethod
    def state(self) -> SimState:
        """State of all envs after the last :meth:`step` or :meth:`reset_envs`."""

    @abstractmethod
    def step(self, ctrl: torch.Tensor, nsubsteps: int) -> None:
        """Hold ``ctrl`` (N, nu) for ``nsubsteps`` physics steps in every env, then refresh :attr:`state`."""

    @abstractmethod
    def reset_envs(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Set qpos (M, nq) and qvel (M, nv) of envs ``env_ids`` (M,), zero their other state, refresh :attr:`state`."""

    @abstractmethod
    def model_field(self, name: str) -> torch.Tensor:
        """Per-env values (N, ...) of an ``MjModel`` field, for domain randomisation.

        Writes to the returned tensor take effect on the next step; backends that copy must say so.
        """

    def close(self) -> None:
        """Release threads and buffers."""
