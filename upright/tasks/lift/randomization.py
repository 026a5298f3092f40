"""The lift task's domain randomisation, as terms of :mod:`upright.managers.randomization` (``env.domain_rand``;
``enabled=false`` turns every part off: nominal model, no observation noise, no action delay).

At every reset of an env: cube mass (with its subtree mass and inertia, same factor), cube size (half sizes, bounding
sphere and box; the inertia x factor², the cube starts resting on the floor at its own half height), cube sliding
friction, Kp of each actuator (``gainprm[0]`` with ``biasprm[1]``) and Kd of each actuator (``biasprm[2]``), and the
action delay (0 to ``action_delay_substeps`` physics substeps). Observation noise is each term's half-width times
``obs_noise_scale`` (:data:`upright.tasks.lift.observations.OBSERVATION_TERMS`). Ranges are upright's choice, in the
spirit of ManiSkill/Isaac Lab manipulation randomisation; none is from Playground, which trains ``PandaPickCube``
without randomisation.
"""

from __future__ import annotations

import mujoco
import torch

from upright.managers.randomization import ActionDelay, FieldTarget, ModelFieldRandomizer, ModelFieldTerm
from upright.robots import panda
from upright.tasks.lift.config import LiftDomainRandCfg


def _range(name: str, value) -> tuple[float, float]:
    lo, hi = float(value[0]), float(value[1])
    if not 0 < lo <= hi:
        raise ValueError(f"env.domain_rand.{name} must be [lo, hi] with 0 < lo <= hi, got {list(value)}")
    return lo, hi


def lift_randomization_terms(cfg: LiftDomainRandCfg, model: mujoco.MjModel) -> list[ModelFieldTerm]:
    """The model-field terms of ``cfg`` (empty when disabled).

    Raises:
        ValueError: a range is not 0 < lo <= hi (the message names the key).
    """
    if not cfg.enabled:
        return []
    cube = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, panda.CUBE_BODY)
    cube_geom = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, panda.CUBE_BODY)
    arm = slice(0, model.nu)
    return [
        # the cube is a root body: its subtree mass is its own mass, and must follow it (upright.sim.PER_ENV_FIELDS)
        ModelFieldTerm(
            "cube_mass",
            (
                FieldTarget("body_mass", (cube,)),
                FieldTarget("body_subtreemass", (cube,)),
                FieldTarget("body_inertia", (cube,)),
            ),
            *_range("cube_mass_scale", cfg.cube_mass_scale),
        ),
        ModelFieldTerm(
            "cube_size",
            (
                FieldTarget("geom_size", (cube_geom,)),
                FieldTarget("geom_rbound", (cube_geom,)),
                FieldTarget("geom_aabb", (cube_geom, slice(3, 6))),
                FieldTarget("body_inertia", (cube,), power=2.0),
            ),
            *_range("cube_size_scale", cfg.cube_size_scale),
        ),
        ModelFieldTerm(
            "cube_friction",
            (FieldTarget("geom_friction", (cube_geom, 0)),),
            *_range("cube_friction_scale", cfg.cube_friction_scale),
        ),
        ModelFieldTerm(
            "kp",
            (FieldTarget("actuator_gainprm", (arm, 0)), FieldTarget("actuator_biasprm", (arm, 1))),
            *_range("kp_scale", cfg.kp_scale),
            per_entry=True,
        ),
        ModelFieldTerm(
            "kd", (FieldTarget("actuator_biasprm", (arm, 2)),), *_range("kd_scale", cfg.kd_scale), per_entry=True
        ),
    ]


class LiftRandomizer:
    """Model fields, action delay and observation-noise scale of the lift task.

    Args:
        cfg: ``env.domain_rand``.
        sim: the backend.
        decimation: physics substeps per env step.
        seed: seed of the draws.

    Raises:
        ValueError: a bad range or delay (the message names the key).
    """

    def __init__(self, cfg: LiftDomainRandCfg, sim, decimation: int, seed: int):
        self.cfg = cfg
        self.rng = torch.Generator().manual_seed(seed)
        self.fields = ModelFieldRandomizer(sim, lift_randomization_terms(cfg, sim.model), self.rng)
        self._sim = sim
        self._cube_geom = mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_GEOM, panda.CUBE_BODY)
        delay = int(cfg.action_delay_substeps) if cfg.enabled else 0
        if not 0 <= delay <= decimation:
            raise ValueError(f"env.domain_rand.action_delay_substeps must be 0..{decimation}, got {delay}")
        self.delay = ActionDelay(sim.num_envs, sim.model.nu, decimation, delay, device=sim.device)
        """Per-env action delay (``delay.delay``: (N,) int64 substeps, U{0..action_delay_substeps} at each reset)."""
        if cfg.obs_noise_scale < 0:
            raise ValueError(f"env.domain_rand.obs_noise_scale must be >= 0, got {cfg.obs_noise_scale}")

    @property
    def obs_noise_scale(self) -> float:
        """Multiplier of the observation noise (0 when randomisation is off)."""
        return float(self.cfg.obs_noise_scale) if self.cfg.enabled else 0.0

    def cube_half_height(self, env_ids: torch.Tensor) -> torch.Tensor:
        """(M,) float32 half height of the cube in ``env_ids``, m (its randomised ``geom_size[2]``)."""
        return self._sim.model_field("geom_size")[env_ids.cpu(), self._cube_geom, 2].float().to(env_ids.device)

    def cube_half_size(self, env_ids: torch.Tensor) -> torch.Tensor:
        """(M, 3) float32 half sizes (x, y, z) of the cube in ``env_ids``, m (its randomised ``geom_size``)."""
        return self._sim.model_field("geom_size")[env_ids.cpu(), self._cube_geom, :3].float().to(env_ids.device)

    def resample_fields(self, env_ids: torch.Tensor) -> None:
        """New model fields (cube mass, size and friction, Kp, Kd) for ``env_ids`` (M,)."""
        self.fields.apply(env_ids, "reset")

    def reset_delay(self, env_ids: torch.Tensor, ctrl: torch.Tensor) -> None:
        """New action delays for ``env_ids`` (M,), the delay line filled with their control at reset ``ctrl``
        (M, nu) (held for the first substeps of the first env step)."""
        m = int(env_ids.numel())
        delay = torch.zeros(m, dtype=torch.long)
        if self.delay.max_delay > 0 and m:
            delay = torch.randint(0, self.delay.max_delay + 1, (m,), generator=self.rng)
        self.delay.reset(env_ids, ctrl, delay)
