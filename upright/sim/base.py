"""The batched-physics interface every backend implements (native MuJoCo now, MJX later).

Task code talks only to :class:`BatchedSim`: it writes controls, steps, resets rows and reads
state as torch tensors. It never imports MuJoCo's batch API, JAX or a backend module.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import mujoco
import torch

PER_ENV_FIELDS: tuple[str, ...] = (
    "geom_friction",
    "geom_solref",
    "body_mass",
    "body_subtreemass",
    "body_ipos",
    "body_inertia",
    "actuator_gainprm",
    "actuator_biasprm",
    "dof_damping",
    "dof_armature",
    "dof_frictionloss",
)
"""``MjModel`` fields every backend can vary per env (:meth:`BatchedSim.set_model_field`): friction, contact
``solref`` (stiffness and damping: restitution), masses, COM, inertia, actuator gains (``gainprm``/``biasprm``:
Kp, Kd of position actuators), joint damping, armature and friction loss, the fields domain randomisation
changes. The native backend can vary more.

``body_subtreemass`` is here because ``mj_comPos`` divides each subtree's mass-weighted position by it to get
``subtree_com``: a ``body_mass`` written alone leaves it stale, the centre of mass that the dynamics use is then
wrong (for a free body of mass m' with a compiled m, at m'/m times its true position), and contacts on that body
blow up (measured on the lift task's cube: any mass factor from 0.5 to 2 made grasped cubes leave the workspace at
1,000 m/s within a few steps; writing the subtree mass too removed every case). Write both together."""

GEOMETRY_FIELDS: tuple[str, ...] = ("geom_size", "geom_rbound", "geom_aabb")
"""Geom sizes with their bounding sphere and box: per env only when a task asks (``make_sim(..., extra_fields=...)``,
e.g. the lift task's cube-size randomisation), since on MJX every per-env field is one more batched input of the
compiled step."""


class BackendUnsupportedError(RuntimeError):
    """The model uses a feature the chosen ``sim.backend`` does not implement (e.g. MJX's JAX implementation and
    contact sensors that match subtrees). The message names the feature and the backends to use instead."""


def subtree_masses(body_mass: torch.Tensor, body_parentid) -> torch.Tensor:
    """Per-env ``body_subtreemass`` from per-env ``body_mass``, as ``mj_setConst`` computes it.

    Write the result with ``body_mass`` (see :data:`PER_ENV_FIELDS`): a body's subtree mass is its own mass plus
    its descendants'. MuJoCo numbers every child after its parent, so one pass from the last body back to the
    first accumulates each subtree.

    Args:
        body_mass: (N, nbody) float masses, kg.
        body_parentid: (nbody,) int parent body ids (``MjModel.body_parentid``; body 0, the world, is its own parent).

    Returns:
        (N, nbody) subtree masses, kg, same dtype and device as ``body_mass``.
    """
    sub = body_mass.clone()
    for b in range(sub.shape[1] - 1, 0, -1):
        sub[:, int(body_parentid[b])] += sub[:, b]
    return sub


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

    # Treat these tensors as read-only: a backend may alias its own buffers (MJX hands JAX arrays over by
    # DLPack). Each step produces new tensors, so tensors kept from earlier steps stay valid.


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
        """Advance every env ``nsubsteps`` physics steps, then refresh :attr:`state`.

        Args:
            ctrl: (N, nu) controls held for all substeps, or (nsubsteps, N, nu) one control per substep
                (action delay in physics substeps uses this).
            nsubsteps: physics steps to take.

        Raises:
            ValueError: ``ctrl`` has neither shape.
        """

    @abstractmethod
    def set_body_wrench(self, body_ids: list[int], wrench: torch.Tensor) -> None:
        """Set the external wrench (``mjData.xfrc_applied``) on bodies ``body_ids`` in every env.

        Args:
            body_ids: K body ids of the model.
            wrench: (N, K, 6) float, world frame, applied at each body's COM: force (N) then torque (N·m).

        The wrench stays applied at every substep until set again; a reset clears it in the reset envs.
        """

    def _substep_ctrl(self, ctrl: torch.Tensor, nsubsteps: int) -> torch.Tensor | None:
        """Validate ``ctrl``; return it as (nsubsteps, N, nu) if it is per substep, else None."""
        n, nu = self.num_envs, self.model.nu
        if ctrl.shape == (n, nu):
            return None
        if ctrl.shape == (nsubsteps, n, nu):
            return ctrl
        raise ValueError(f"ctrl must be (N, nu) = ({n}, {nu}) or (nsubsteps, N, nu); got {tuple(ctrl.shape)}")

    @abstractmethod
    def reset_envs(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Set qpos (M, nq) and qvel (M, nv) of envs ``env_ids`` (M,), zero their other state, refresh :attr:`state`."""

    @abstractmethod
    def model_field(self, name: str) -> torch.Tensor:
        """Per-env values (N, ...) of an ``MjModel`` field, for domain randomisation.

        Writes to the returned tensor take effect on the next step; backends that copy must say so
        (MJX does). :meth:`set_model_field` is the portable way to write.
        """

    def set_model_field(self, name: str, env_ids: torch.Tensor, values: torch.Tensor) -> None:
        """Set per-env model field ``name`` of envs ``env_ids`` (M,) to ``values`` (M, ...) (or broadcastable).

        Takes effect at the next step, in those envs only. Same call on every backend; the fields that
        every backend can vary are :data:`PER_ENV_FIELDS`. Only the raw field changes: constants
        MuJoCo derives from it at compile time (``mj_setConst``: subtree masses, ``*_invweight0``,
        ``stat.meaninertia``) keep their compiled values, on every backend alike. The exception is collision
        culling: the native backend moves a body's bounding volumes (``bvh_aabb``) with its ``body_ipos``
        (MJX does not use them), so a COM offset never hides contacts.

        Raises:
            ValueError: the field cannot vary per env on this backend (the message lists the valid ones).
        """
        field = self.model_field(name)
        ids = env_ids.detach().to(field.device, torch.long)
        field[ids] = values.detach().to(field.device, field.dtype).expand_as(field[ids])

    def close(self) -> None:  # noqa: B027  an optional hook: a backend without threads or buffers keeps it
        """Release threads and buffers."""
