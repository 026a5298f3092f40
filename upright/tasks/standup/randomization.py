"""Domain randomisation (HoST) and robustness disturbances of the standup env, on every sim backend.

Source of the ranges: HoST spec §6 (``legged_gym/envs/g1/g1_config_ground.py`` ``domain_rand`` at
upstream commit 70bb580949a3; Huang et al., RSS 2025, Table II agrees unless noted).

:class:`DomainRandCfg` (``env.domain_rand``) holds one range per row of HoST's table;
:class:`DisturbanceCfg` (``env.disturbance``) holds single-value knobs for a robustness battery, all
off by default. :class:`StandupRandomizer` samples per env and writes the physics through
:meth:`upright.sim.base.BatchedSim.set_model_field` only (no backend internals), so the same code runs
on the native and the MJX backend:

* **at env creation**: friction and restitution (all geoms), link masses (all robot links), torso
  payload, torso COM offset;
* **at each reset** (the resetting env ids only): Kp/Kd factors, motor strength and a constant torque
  offset per joint (through the position actuators' ``gainprm``/``biasprm``), the action delay, and
  the initial joint perturbation (the env applies it, :meth:`StandupRandomizer.init_joint_ranges`);
* **at each env step** (:meth:`StandupRandomizer.before_physics`): the delayed per-substep PD targets,
  torque dropout and pushes.

What ``env.domain_rand.enabled=false`` does: no model field is written (every env keeps the compiled
model), the action delay is 0 (the held-control hot path) and resets start from the exact default pose
(``env.init_joint_scale``/``init_joint_offset`` are ignored). Play turns it off; HoST's evaluation
keeps it on (spec §7), and so does ``upright.training.evaluate`` unless ``--no-domain-rand``. The
disturbance knobs apply whether or not randomisation is enabled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from upright.managers.randomization import ActionDelay
from upright.sim.base import BatchedSim, subtree_masses


@dataclass
class DomainRandCfg:
    """HoST's domain randomisation (spec §6). Ranges are (low, high), sampled uniformly and independently."""

    enabled: bool = True
    """Master switch. False: model untouched, no action delay, resets at the exact default pose (see the module doc)."""
    friction: tuple[float, float] = (0.1, 1.0)
    """Robot's sliding friction coefficient, one per env, at creation (HoST spec §6 / Table II "Friction (all
    shapes)"). The contact's coefficient (see :attr:`average_with_terrain`) is written to every geom (robot and
    terrain) of the env, so that MuJoCo's max-combination of the two geoms yields exactly it."""
    restitution: tuple[float, float] = (0.0, 1.0)
    """Robot's coefficient of restitution, one per env, at creation (HoST spec §6 / Table II). MuJoCo has no
    restitution coefficient: the contact's e (see :attr:`average_with_terrain`) sets the contact damping ratio
    ζ = -ln e / sqrt(π² + ln² e) (a linear spring-damper bounces with e = exp(-ζπ / sqrt(1 - ζ²));
    e = 0 -> ζ = 1, the compiled contacts), written to every geom's ``solref`` in MuJoCo's direct form
    (-stiffness, -damping) with the compiled stiffness kept, see :func:`contact_solref`; only when
    :attr:`restitution_as_damping` is on (off by default: the sampled value is then recorded, not applied)."""
    restitution_as_damping: bool = False
    """Apply :attr:`restitution` as the damping ratio of every contact. Off by default: PhysX (HoST's simulator)
    applies restitution only to impacts faster than its bounce threshold (0.5 m/s by default), while a MuJoCo
    damping ratio acts on every contact, resting ones included: at ζ = 0.14 a foot dropped 1 cm onto the floor
    loses and regains contact for hundreds of ms (``tests/standup/test_fidelity.py``). MuJoCo has no
    velocity-gated restitution, so upright keeps the compiled, critically damped contacts."""
    average_with_terrain: bool = True
    """Combine as HoST's simulator did: PhysX (Isaac Gym) gives a contact the average of its two shapes'
    friction and restitution, so HoST's robot met the ground's :attr:`terrain_friction` and
    :attr:`terrain_restitution` and felt friction (0.1..1.0 + 0.8)/2 = 0.45..0.9 and restitution
    (0..1 + 0.3)/2 = 0.15..0.65. True: upright writes these averages; False: the sampled value itself."""
    terrain_friction: float = 0.8
    """Terrain friction for :attr:`average_with_terrain` (HoST ground ``static_friction``, spec §4; upright's
    floor has the same)."""
    terrain_restitution: float = 0.3
    """Terrain restitution for :attr:`average_with_terrain` (HoST ground ``restitution``, spec §4)."""
    link_mass_scale: tuple[float, float] = (0.8, 1.2)
    """Factor on each robot link's mass, per link and env, at creation (HoST spec §6 "Link mass (all links)").
    upright also scales the link's rotational inertia by it (a density change); Isaac Gym changes the mass only."""
    torso_payload: tuple[float, float] = (0.0, 0.0)
    """Mass added to ``torso_link`` after the link scaling, kg, at creation (a point mass at the COM: inertia
    unchanged). Off (0, 0) by default, as HoST actually trained: its config lists -2..+5 kg (spec §6 "Torso
    payload"), but its link-mass loop overwrites the torso mass afterwards (spec §6 "Payload bug"), so HoST's
    policies never felt it. ``env.domain_rand.torso_payload=[-2,5]`` applies the published range."""
    torso_com_offset: tuple[float, float] = (-0.03, 0.03)
    """Offset of ``torso_link``'s COM (``body_ipos``), m, times :attr:`torso_com_offset_axis_scale` per axis of
    the torso frame, at creation (HoST spec §6: U(-0.03, 0.03) x [4, 4, 2], i.e. ±0.12 m x/y, ±0.06 m z)."""
    torso_com_offset_axis_scale: tuple[float, float, float] = (4.0, 4.0, 2.0)
    """Per-axis (x, y, z) multiplier of :attr:`torso_com_offset` (HoST spec §6)."""
    kp_factor: tuple[float, float] = (0.85, 1.15)
    """Factor on each policy joint's Kp, per joint and env, at each reset (HoST spec §6 "Kp and Kd factors")."""
    kd_factor: tuple[float, float] = (0.85, 1.15)
    """Factor on each policy joint's Kd, per joint and env, at each reset (HoST spec §6)."""
    motor_strength: tuple[float, float] = (0.9, 1.1)
    """Factor on each policy joint's PD torque, per joint and env, at each reset (HoST spec §6 "Motor strength")."""
    torque_offset: tuple[float, float] = (-0.05, 0.05)
    """Constant torque added to each policy joint, as a fraction of its torque limit, per joint and env, at each
    reset, before the clamp to ± the limit (HoST spec §6 "Constant torque offset (RFI)")."""
    action_delay_substeps: tuple[int, int] = (0, 4)
    """Action delay in physics substeps (0.005 s each), integer U{low..high} per env at each reset: 0-20 ms
    (HoST spec §6, code; the paper says 0-100 ms). The first ``delay`` substeps of an env step still use the
    earlier PD targets."""


@dataclass
class DisturbanceCfg:
    """Single-value disruptions for robustness tests (not in HoST's training); all off by default.

    Each applies whether or not ``env.domain_rand`` is enabled; a fixed value replaces the matching
    randomised one. Select one with e.g. ``env.disturbance.torque_dropout=0.1``.
    """

    obs_noise_scale: float | None = None
    """Multiplier of HoST's uniform observation noise (spec §2 / Table VIII), e.g. 2.0. None: noise as
    ``env.obs_noise`` says (x1 or off). A value forces the noise on, even where ``env.obs_noise`` is false
    (evaluation); 0 turns it off."""
    action_delay_substeps: int | None = None
    """Fixed action delay for every env, physics substeps of 0.005 s, any length >= 0 (8 = 40 ms, 16 = 80 ms).
    None: the randomised delay (or 0 with randomisation off)."""
    push_velocity: float = 0.0
    """Pushes: horizontal velocity change, m/s, given to the robot by an impulse J = M·Δv on the pelvis (M: the
    env's total robot mass, kg), delivered as a constant force M·Δv / 0.02 s over one env step, in a uniformly
    random horizontal direction (world frame). 0: no pushes."""
    push_interval_s: float = 2.0
    """Mean time between pushes, s: each env waits U(0.5, 1.5) x this, counted over actuated env steps only
    (no push during the unactuated start)."""
    payload_kg: float | None = None
    """Fixed mass added to ``torso_link``, kg, in every env (HoST Table V tests 4-12 kg on the robot). Replaces
    the randomised payload; the link-mass scaling still applies when randomisation is on. None: off."""
    torque_dropout: float = 0.0
    """Probability p in [0, 1]: at each env step, each policy joint's actuator of each env independently
    outputs zero torque (Kp, Kd and offset all zero: the joint is limp) for that whole env step
    (``decimation`` substeps) with probability p. Held joints are unaffected. 0: off."""
    friction: float | None = None
    """Fixed contact sliding friction coefficient, written to every geom in every env (replaces the randomised
    one; no averaging). None: off."""


def _pair(cfg: Any, key: str, prefix: str) -> tuple[float, float]:
    value = getattr(cfg, key)
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{prefix}.{key} must be a (low, high) pair, got {value!r}") from None
    if lo > hi:
        raise ValueError(f"{prefix}.{key} = ({lo}, {hi}) is inverted: write it as (low, high) with low <= high")
    return lo, hi


def _check_range(
    cfg: Any, key: str, prefix: str, minimum: float | None = None, maximum: float | None = None, strict: bool = False
) -> tuple[float, float]:
    lo, hi = _pair(cfg, key, prefix)
    if minimum is not None and (lo < minimum or (strict and lo <= minimum)):
        bound = ">" if strict else ">="
        raise ValueError(f"{prefix}.{key} = ({lo}, {hi}): values must be {bound} {minimum}; raise the low end")
    if maximum is not None and hi > maximum:
        raise ValueError(f"{prefix}.{key} = ({lo}, {hi}): values must be <= {maximum}; lower the high end")
    return lo, hi


def validate_domain_rand(cfg: Any, prefix: str = "env.domain_rand") -> None:
    """Check a :class:`DomainRandCfg` (or its DictConfig).

    Raises:
        ValueError: an inverted or out-of-domain range; the message names the key and the fix.
    """
    _check_range(cfg, "friction", prefix, minimum=0.0)
    _check_range(cfg, "restitution", prefix, minimum=0.0, maximum=1.0)
    if cfg.terrain_friction < 0:
        raise ValueError(f"{prefix}.terrain_friction must be >= 0, got {cfg.terrain_friction}")
    if not 0.0 <= cfg.terrain_restitution <= 1.0:
        raise ValueError(f"{prefix}.terrain_restitution must lie in [0, 1], got {cfg.terrain_restitution}")
    _check_range(cfg, "link_mass_scale", prefix, minimum=0.0, strict=True)
    _pair(cfg, "torso_payload", prefix)
    _pair(cfg, "torso_com_offset", prefix)
    scale = tuple(cfg.torso_com_offset_axis_scale)
    if len(scale) != 3:
        raise ValueError(f"{prefix}.torso_com_offset_axis_scale must have 3 entries (x, y, z), got {scale!r}")
    _check_range(cfg, "kp_factor", prefix, minimum=0.0)
    _check_range(cfg, "kd_factor", prefix, minimum=0.0)
    _check_range(cfg, "motor_strength", prefix, minimum=0.0)
    _pair(cfg, "torque_offset", prefix)
    lo, hi = _check_range(cfg, "action_delay_substeps", prefix, minimum=0.0)
    if lo != int(lo) or hi != int(hi):
        raise ValueError(f"{prefix}.action_delay_substeps = ({lo}, {hi}) must be whole substeps (integers)")


def validate_disturbance(cfg: Any, prefix: str = "env.disturbance") -> None:
    """Check a :class:`DisturbanceCfg` (or its DictConfig).

    Raises:
        ValueError: a value out of its domain; the message names the key and the fix.
    """
    if cfg.obs_noise_scale is not None and cfg.obs_noise_scale < 0:
        raise ValueError(
            f"{prefix}.obs_noise_scale must be >= 0 (or null to follow env.obs_noise), got {cfg.obs_noise_scale}"
        )
    d = cfg.action_delay_substeps
    if d is not None and (d < 0 or d != int(d)):
        raise ValueError(f"{prefix}.action_delay_substeps must be a whole number of substeps >= 0 (or null), got {d}")
    if cfg.push_velocity < 0:
        raise ValueError(f"{prefix}.push_velocity must be >= 0 m/s (0 turns pushes off), got {cfg.push_velocity}")
    if cfg.push_interval_s <= 0:
        raise ValueError(f"{prefix}.push_interval_s must be > 0 s, got {cfg.push_interval_s}")
    if not 0.0 <= cfg.torque_dropout <= 1.0:
        raise ValueError(f"{prefix}.torque_dropout is a probability: use a value in [0, 1], got {cfg.torque_dropout}")
    if cfg.friction is not None and cfg.friction < 0:
        raise ValueError(f"{prefix}.friction must be >= 0 (or null), got {cfg.friction}")


def restitution_to_damping_ratio(e: torch.Tensor) -> torch.Tensor:
    """Damping ratio ζ of a linear spring-damper contact whose coefficient of restitution is ``e``.

    Inverts e = exp(-ζπ / sqrt(1 - ζ²)): ζ = -ln e / sqrt(π² + ln² e); e = 0 gives ζ = 1 (critically
    damped, no bounce), e = 1 gives ζ = 0.

    Args:
        e: any shape, float, values in [0, 1].

    Returns:
        ζ, same shape and dtype, in [0, 1].
    """
    log_e = torch.log(e.clamp(min=1e-300 if e.dtype == torch.float64 else 1e-30))
    zeta = -log_e / torch.sqrt(math.pi**2 + log_e * log_e)
    return torch.where(e <= 0, torch.ones_like(zeta), zeta)


def contact_solref(nominal: torch.Tensor, zeta: torch.Tensor, timestep: float) -> torch.Tensor:
    """Geom ``solref`` in MuJoCo's direct form (-k, -b) with the compiled stiffness k and damping ratio ``zeta``.

    MuJoCo's standard form (timeconst τ, dampratio ζ0) sets the contact's reference stiffness k = 1/(τ²ζ0²)
    (τ floored at 2·timestep, as MuJoCo's ``refsafe`` does) and damping b = 2/τ (both per unit impedance);
    lowering ``dampratio`` there raises the stiffness. The direct form keeps k and sets b = 2ζ·sqrt(k), so ζ
    changes the damping only; ζ = ζ0 reproduces the compiled contact. A geom already in direct form keeps its k.

    Args:
        nominal: (G, 2) compiled ``geom_solref``.
        zeta: (M,) damping ratio per env.
        timestep: physics dt, s.

    Returns:
        (M, G, 2) float32 ``geom_solref`` rows, all entries <= 0.
    """
    nominal = nominal.to(torch.float64)
    tau = nominal[:, 0].clamp(min=2.0 * timestep)
    standard = nominal[:, 0] > 0
    k = torch.where(standard, 1.0 / (tau * tau * nominal[:, 1] * nominal[:, 1]), -nominal[:, 0])
    b = 2.0 * zeta.to(torch.float64)[:, None] * torch.sqrt(k)[None, :]
    return torch.stack([(-k).expand_as(b), -b], dim=-1).float()


class StandupRandomizer:
    """Samples and applies :class:`DomainRandCfg` and :class:`DisturbanceCfg` for N standup envs.

    Args:
        dr: ``env.domain_rand``.
        disturbance: ``env.disturbance``.
        sim: the env's backend; all model writes go through ``sim.set_model_field``.
        policy_actuators: (J,) int64 actuator ids of the policy joints (the randomised actuators).
        root_body: the robot's free-floating root body id (pelvis); the robot's links are its subtree.
        torso_body: ``torso_link`` body id (payload, COM offset).
        decimation: physics substeps per env step.
        step_dt: env step, s.
        seed: seed of the randomiser's own generator (separate from the env's reset generator).

    Attributes with per-env samples (float32 on ``sim.device`` unless noted) are documented below;
    they are all-ones / zeros where randomisation is off.

    Raises:
        ValueError: a bad config value (the message names it).
    """

    def __init__(
        self,
        dr: Any,
        disturbance: Any,
        sim: BatchedSim,
        *,
        policy_actuators: torch.Tensor,
        root_body: int,
        torso_body: int,
        decimation: int,
        step_dt: float,
        seed: int,
    ):
        validate_domain_rand(dr)
        validate_disturbance(disturbance)
        self.dr, self.dist, self.sim = dr, disturbance, sim
        self.enabled = bool(dr.enabled)
        m = sim.model
        n, dev = sim.num_envs, sim.device
        self.num_envs, self.device, self.step_dt = n, dev, step_dt
        self.rng = torch.Generator(device="cpu").manual_seed(int(seed))
        self._pol = policy_actuators.to(torch.long).cpu()
        self._root, self._torso = int(root_body), int(torso_body)
        self._robot_bodies = torch.tensor([b for b in range(m.nbody) if int(m.body_rootid[b]) == self._root])

        f32 = torch.float32
        self.nominal_gainprm = torch.tensor(m.actuator_gainprm, dtype=f32, device=dev)
        """(nu, 10) compiled ``actuator_gainprm``."""
        self.nominal_biasprm = torch.tensor(m.actuator_biasprm, dtype=f32, device=dev)
        """(nu, 10) compiled ``actuator_biasprm``."""
        self.kp = self.nominal_gainprm[self._pol, 0].clone()
        """(J,) compiled Kp of the policy joints, N·m/rad."""
        self.kd = -self.nominal_biasprm[self._pol, 2].clone()
        """(J,) compiled Kd, N·m·s/rad."""
        self.torque_limit = torch.tensor(m.actuator_forcerange[self._pol.numpy(), 1], dtype=f32, device=dev)
        """(J,) torque limits, N·m (the actuators' ``forcerange``)."""
        j = self._pol.numel()
        self.friction = torch.full((n,), math.nan, device=dev)
        """(N,) contact sliding friction, written to every geom; NaN where the compiled values are kept."""
        self.restitution = torch.zeros(n, device=dev)
        """(N,) contact coefficient of restitution (0 where off: the compiled, critically damped contacts)."""
        self.link_mass_scale = torch.ones(n, self._robot_bodies.numel(), device=dev)
        """(N, B) factor on each robot link's mass and inertia (B robot bodies, model order)."""
        self.payload = torch.zeros(n, device=dev)
        """(N,) mass added to ``torso_link``, kg."""
        self.com_offset = torch.zeros(n, 3, device=dev)
        """(N, 3) torso COM offset, torso frame, m."""
        self.kp_factor = torch.ones(n, j, device=dev)
        """(N, J) Kp factor per policy joint (resampled at reset)."""
        self.kd_factor = torch.ones(n, j, device=dev)
        """(N, J) Kd factor per policy joint (resampled at reset)."""
        self.motor_strength = torch.ones(n, j, device=dev)
        """(N, J) motor strength per policy joint (resampled at reset)."""
        self.torque_offset = torch.zeros(n, j, device=dev)
        """(N, J) constant torque offset per policy joint, N·m (resampled at reset)."""
        self.dropped = torch.zeros(n, j, dtype=torch.bool, device=dev)
        """(N, J) bool: joints whose torque is zeroed in the current env step (torque dropout)."""
        self.push_force = torch.zeros(n, 3, device=dev)
        """(N, 3) push force on the pelvis during the current env step, world frame, N."""

        max_delay = int(dr.action_delay_substeps[1]) if self.enabled else 0
        if disturbance.action_delay_substeps is not None:
            max_delay = int(disturbance.action_delay_substeps)
        self.delay = ActionDelay(n, m.nu, decimation, max_delay, dev)
        """Per-env action delay of the PD targets (``delay.delay``: (N,) int64 substeps)."""

        self._push_timer = torch.zeros(n, device=dev)
        self._pushing = False
        self._sample_creation()

    # ------------------------------------------------------------------ sampling
    def _uniform(self, rng: Any, shape: tuple[int, ...]) -> torch.Tensor:
        lo, hi = (float(v) for v in rng)
        return (lo + (hi - lo) * torch.rand(shape, generator=self.rng)).to(self.device)

    def reseed(self, seed: int) -> None:
        """Reseed the randomiser's generator with ``seed`` and redraw the creation-time fields of every env, as a
        randomiser built with that seed draws them."""
        self.rng.manual_seed(int(seed))
        self._sample_creation()

    def _sample_creation(self) -> None:
        """Sample and write the creation-time fields (friction, restitution, masses, COM) of every env."""
        m, n, dr, dist = self.sim.model, self.num_envs, self.dr, self.dist
        all_ids = torch.arange(n, device=self.device)
        if self.enabled:
            self.friction = self._uniform(dr.friction, (n,))
            self.restitution = self._uniform(dr.restitution, (n,))
            if dr.average_with_terrain:
                self.friction = 0.5 * (self.friction + float(dr.terrain_friction))
                self.restitution = 0.5 * (self.restitution + float(dr.terrain_restitution))
            self.link_mass_scale = self._uniform(dr.link_mass_scale, (n, self._robot_bodies.numel()))
            self.payload = self._uniform(dr.torso_payload, (n,))
            axis = torch.tensor([float(a) for a in dr.torso_com_offset_axis_scale], device=self.device)
            self.com_offset = self._uniform(dr.torso_com_offset, (n, 3)) * axis
        if dist.friction is not None:
            self.friction = torch.full((n,), float(dist.friction), device=self.device)
        if dist.payload_kg is not None:
            self.payload = torch.full((n,), float(dist.payload_kg), device=self.device)
        if float(m.body_mass[self._torso]) + float(self.payload.min()) <= 0:
            raise ValueError(
                f"torso payload {float(self.payload.min())} kg leaves torso_link with no mass "
                f"({float(m.body_mass[self._torso])} kg compiled); raise the payload"
            )

        if not torch.isnan(self.friction).all():
            friction = torch.tensor(m.geom_friction, dtype=torch.float32, device=self.device).repeat(n, 1, 1)
            friction[:, :, 0] = self.friction[:, None]
            self.sim.set_model_field("geom_friction", all_ids, friction)
        if self.enabled and dr.restitution_as_damping:
            zeta = restitution_to_damping_ratio(self.restitution.double())
            solref = contact_solref(torch.tensor(m.geom_solref), zeta, float(m.opt.timestep)).to(self.device)
            self.sim.set_model_field("geom_solref", all_ids, solref)
        if self.enabled or dist.payload_kg is not None:
            bodies = self._robot_bodies.to(self.device)
            mass = torch.tensor(m.body_mass, dtype=torch.float32, device=self.device).repeat(n, 1)
            mass[:, bodies] *= self.link_mass_scale
            mass[:, self._torso] += self.payload
            self.sim.set_model_field("body_mass", all_ids, mass)
            # the subtree masses must follow, or MuJoCo's centres of mass go stale (upright.sim.PER_ENV_FIELDS)
            self.sim.set_model_field("body_subtreemass", all_ids, subtree_masses(mass, m.body_parentid))
            if self.enabled:
                inertia = torch.tensor(m.body_inertia, dtype=torch.float32, device=self.device).repeat(n, 1, 1)
                inertia[:, bodies] *= self.link_mass_scale[:, :, None]
                self.sim.set_model_field("body_inertia", all_ids, inertia)
                ipos = torch.tensor(m.body_ipos, dtype=torch.float32, device=self.device).repeat(n, 1, 1)
                ipos[:, self._torso] += self.com_offset
                self.sim.set_model_field("body_ipos", all_ids, ipos)
        mass = torch.tensor(m.body_mass[self._robot_bodies.numpy()], dtype=torch.float32, device=self.device)
        self.robot_mass = (self.link_mass_scale * mass).sum(dim=1) + self.payload
        """(N,) total robot mass per env, kg."""

    def on_reset(self, env_ids: torch.Tensor, reset_ctrl: torch.Tensor) -> None:
        """Resample the reset-time parameters of ``env_ids`` (M,) and write their actuators.

        Args:
            env_ids: (M,) int64 resetting envs.
            reset_ctrl: (M, nu) PD targets at reset (the reset joint angles), rad: the delay history starts there.
        """
        mcount = env_ids.numel()
        if mcount == 0:
            return
        ids = env_ids.to(self.device, torch.long)
        j = self._pol.numel()
        if self.enabled:
            dr = self.dr
            self.kp_factor[ids] = self._uniform(dr.kp_factor, (mcount, j))
            self.kd_factor[ids] = self._uniform(dr.kd_factor, (mcount, j))
            self.motor_strength[ids] = self._uniform(dr.motor_strength, (mcount, j))
            self.torque_offset[ids] = self._uniform(dr.torque_offset, (mcount, j)) * self.torque_limit
            self._write_actuators(ids)
            lo, hi = (int(v) for v in dr.action_delay_substeps)
            delay = torch.randint(lo, hi + 1, (mcount,), generator=self.rng)
        else:
            delay = torch.zeros(mcount, dtype=torch.long)
        if self.dist.action_delay_substeps is not None:
            delay = torch.full((mcount,), int(self.dist.action_delay_substeps), dtype=torch.long)
        self.delay.reset(ids, reset_ctrl.to(self.device), delay.to(self.device))
        if self.dist.push_velocity > 0:
            self._push_timer[ids] = self._uniform((0.5, 1.5), (mcount,)) * float(self.dist.push_interval_s)

    def obs_noise_scale(self, obs_noise: bool) -> float:
        """Multiplier of HoST's observation noise half-widths: ``env.disturbance.obs_noise_scale`` if set, else 1
        when ``obs_noise`` (``env.obs_noise``) is true, else 0 (no noise)."""
        scale = self.dist.obs_noise_scale
        return float(scale) if scale is not None else (1.0 if obs_noise else 0.0)

    def init_joint_ranges(self, scale: Any, offset: Any) -> tuple[tuple[float, float], tuple[float, float]]:
        """Ranges of the reset joint perturbation: ``env.init_joint_scale``/``offset`` (HoST spec §4/§6: scale
        U(0.9, 1.1), offset U(-0.1, 0.1) rad) when randomisation is on, else the exact default pose ((1, 1), (0, 0))."""
        if not self.enabled:
            return (1.0, 1.0), (0.0, 0.0)
        return (float(scale[0]), float(scale[1])), (float(offset[0]), float(offset[1]))

    # ------------------------------------------------------------------ actuators
    def _write_actuators(self, ids: torch.Tensor) -> None:
        """Write ``actuator_gainprm``/``biasprm`` rows of envs ``ids``: gain = Kp·f_kp·s, bias = (offset,
        -Kp·f_kp·s, -Kd·f_kd·s) on the policy joints, zero on dropped joints; held joints keep the compiled
        values."""
        pol = self._pol.to(self.device)
        strength = self.motor_strength[ids]
        kp = self.kp * self.kp_factor[ids] * strength
        kd = self.kd * self.kd_factor[ids] * strength
        offset = self.torque_offset[ids]
        if self.dist.torque_dropout > 0:
            keep = (~self.dropped[ids]).float()
            kp, kd, offset = kp * keep, kd * keep, offset * keep
        gain = self.nominal_gainprm.repeat(ids.numel(), 1, 1)
        bias = self.nominal_biasprm.repeat(ids.numel(), 1, 1)
        gain[:, pol, 0] = kp
        bias[:, pol, 0] = offset
        bias[:, pol, 1] = -kp
        bias[:, pol, 2] = -kd
        self.sim.set_model_field("actuator_gainprm", ids, gain)
        self.sim.set_model_field("actuator_biasprm", ids, bias)

    # ------------------------------------------------------------------ per env step
    def before_physics(self, ctrl: torch.Tensor, actuated: torch.Tensor) -> torch.Tensor:
        """Apply this env step's disturbances; return the controls to give ``BatchedSim.step``.

        Args:
            ctrl: (N, nu) PD targets commanded this env step, rad.
            actuated: (N,) bool, True once an env's unactuated start is over (pushes wait for it).

        Returns:
            (N, nu) ``ctrl`` (no delay anywhere) or (decimation, N, nu) delayed per-substep targets.
        """
        if self.dist.torque_dropout > 0:
            p = float(self.dist.torque_dropout)
            self.dropped = (torch.rand(self.dropped.shape, generator=self.rng) < p).to(self.device)
            self._write_actuators(torch.arange(self.num_envs, device=self.device))
        if self.dist.push_velocity > 0:
            self._apply_pushes(actuated.to(self.device))
        return self.delay.push(ctrl)

    def _apply_pushes(self, actuated: torch.Tensor) -> None:
        self._push_timer = torch.where(actuated, self._push_timer - self.step_dt, self._push_timer)
        push = actuated & (self._push_timer <= 0)
        if not (bool(push.any()) or self._pushing):
            return
        count = int(push.sum())
        force = torch.zeros(self.num_envs, 3, device=self.device)
        if count:
            angle = self._uniform((0.0, 2.0 * math.pi), (count,))
            magnitude = self.robot_mass[push] * float(self.dist.push_velocity) / self.step_dt
            force[push, 0] = magnitude * torch.cos(angle)
            force[push, 1] = magnitude * torch.sin(angle)
            self._push_timer[push] = self._uniform((0.5, 1.5), (count,)) * float(self.dist.push_interval_s)
        wrench = torch.zeros(self.num_envs, 1, 6, device=self.device)
        wrench[:, 0, :3] = force
        self.sim.set_body_wrench([self._root], wrench)
        self.push_force = force
        self._pushing = count > 0
