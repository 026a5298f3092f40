"""Physics options shared by every backend (timestep, integrator, solver)."""

from __future__ import annotations

from dataclasses import dataclass

import mujoco


@dataclass
class PhysicsOptions:
    """MuJoCo ``mjOption`` settings applied to a scene before compiling."""

    timestep: float = 0.005
    """Physics step dt, s. HoST ``sim.dt`` = 0.005 (200 Hz PD)."""
    integrator: str = "implicitfast"
    """``euler`` | ``implicitfast`` | ``implicit`` | ``rk4``. implicitfast treats the actuators' Kd implicitly,
    which keeps the light wrist and ankle links stable at dt = 0.005 s."""
    iterations: int = 10
    """Constraint solver iterations (mjlab's G1 default)."""
    ls_iterations: int = 20
    """Line-search iterations (mjlab's G1 default)."""


_INTEGRATORS = {
    "euler": mujoco.mjtIntegrator.mjINT_EULER,
    "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
    "implicit": mujoco.mjtIntegrator.mjINT_IMPLICIT,
    "rk4": mujoco.mjtIntegrator.mjINT_RK4,
}


def apply_physics_options(spec: mujoco.MjSpec, options: PhysicsOptions) -> None:
    """Write ``options`` into ``spec.option``.

    Raises:
        ValueError: unknown integrator name (the message lists the valid ones).
    """
    if options.integrator not in _INTEGRATORS:
        raise ValueError(f"Unknown integrator '{options.integrator}'; valid: {sorted(_INTEGRATORS)}")
    if options.timestep <= 0:
        raise ValueError(f"timestep must be > 0 s, got {options.timestep}")
    spec.option.timestep = options.timestep
    spec.option.integrator = _INTEGRATORS[options.integrator]
    spec.option.iterations = options.iterations
    spec.option.ls_iterations = options.ls_iterations
