"""A model-based teacher for the standup task: predictive sampling over PD-target splines.

Predictive sampling (Howell et al., "Predictive Sampling: Real-time Behaviour Synthesis with MuJoCo", 2022,
arXiv 2212.00541; the planner of MuJoCo MPC): at every env step, perturb a nominal plan of PD targets with Gaussian
noise, simulate each candidate over a short horizon with ``mujoco.rollout`` on the scene's own model, keep the
cheapest, apply its first env step and shift the plan. The plan is a piecewise-linear spline of ``knots`` knots over
the horizon on the 23 policy joints (the held joints stay at the default pose); with ``beta`` > 0 every target is
kept within default ± β, the targets a policy in ``env.action_mode=absolute`` with |a| <= 1 can command, so a
student can imitate the labels exactly.

Cost per physics step, summed over the horizon: ``height · (z_pelvis - z*)² + upright · (1 - R_zz) +
vel · |v_xy|² + pose · |q - q_default|²`` (z* = ``z_target``, R_zz = the world z of the pelvis z axis).

The planner reads the full simulator state (a teacher's privilege); no policy input comes from it. Measured in
``benchmarks/standup_predictive_sampling.py`` (docs/standup_learning.md, "Session 7").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np
from mujoco import rollout

from upright.robots import g1


@dataclass
class PlannerCfg:
    """Predictive-sampling settings (defaults: the settings that stood the G1 up from supine in session 7)."""

    samples: int = 32
    """Candidate plans per env step (the nominal plan is one of them)."""
    horizon_s: float = 0.6
    """Planning horizon, s."""
    knots: int = 4
    """Spline knots over the horizon."""
    sigma: float = 0.15
    """Standard deviation of the knot noise, rad."""
    z_target: float = 0.78
    """Pelvis height the cost pulls toward, m (the settled standing pelvis height of the scene's default pose)."""
    beta: float = 1.0
    """Keep targets within default ± beta, rad (0: the joint range only)."""
    weights: dict[str, float] = field(
        default_factory=lambda: {"height": 10.0, "upright": 3.0, "vel": 0.3, "pose": 0.01}
    )
    """Cost weights (module docstring)."""


DECIMATION = 4
"""Physics steps per env step (dt 0.005 s x 4 = 0.02 s, as the standup env)."""


def knot_weights(t: np.ndarray, knots: int) -> np.ndarray:
    """Weights (len(t), knots) of a piecewise-linear spline with knots at 0, 1, ..., knots - 1, sampled at the knot
    coordinates ``t`` (float); past the last knot the spline holds its last value."""
    w = np.zeros((len(t), knots))
    for i, x in enumerate(t):
        k = min(int(x), knots - 2)
        f = min(x - k, 1.0)
        w[i, k], w[i, k + 1] = 1.0 - f, f
    return w


class PredictiveSampler:
    """Predictive sampling over PD-target splines of the 23 policy joints (module docstring).

    Args:
        model: the standup scene (position actuators in :data:`g1.JOINT_NAMES` order, decimation 4 at 50 Hz).
        cfg: settings.
        seed: seed of the plan noise.
    """

    def __init__(self, model: mujoco.MjModel, cfg: PlannerCfg | None = None, seed: int = 0):
        cfg = cfg or PlannerCfg()
        nsamples, horizon_s, knots, sigma = cfg.samples, cfg.horizon_s, cfg.knots, cfg.sigma
        z_target, weights, beta = cfg.z_target, cfg.weights, cfg.beta
        self.m = model
        self.datas = [mujoco.MjData(model)]
        self.info = g1.robot_info()
        self.pol = np.asarray(self.info.policy_joint_ids)
        self.default = self.info.default_pose.astype(np.float64)
        jids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in g1.JOINT_NAMES]
        self.lo, self.hi = model.jnt_range[jids, 0].copy(), model.jnt_range[jids, 1].copy()
        if beta > 0:  # targets a policy in env.action_mode=absolute with |a| <= 1 can command: default ± β
            self.lo[self.pol] = np.maximum(self.lo[self.pol], self.default[self.pol] - beta)
            self.hi[self.pol] = np.minimum(self.hi[self.pol], self.default[self.pol] + beta)
        self.q_adr = model.jnt_qposadr[jids]
        self.nsamples, self.knots, self.sigma = nsamples, knots, sigma
        self.steps = max(2, round(horizon_s / (model.opt.timestep * DECIMATION)))
        self.z_target, self.w = z_target, weights
        self.rng = np.random.default_rng(seed)
        self.nominal = np.tile(self.default, (knots, 1))  # (K, 29) PD targets at the knots
        self.interp = knot_weights(np.linspace(0.0, knots - 1, self.steps), knots)  # env step -> knots (H, K)
        # plan shift by one env step: the spline resampled at t + dt, the last knot held (K, K)
        self.shift = knot_weights(np.arange(knots) + (knots - 1) / (self.steps - 1), knots)
        self.state_size = mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS)

    def _controls(self, knots: np.ndarray) -> np.ndarray:
        """(S, K, 29) knot targets -> (S, H*DECIMATION, 29) per-physics-step controls."""
        per_env_step = np.einsum("hk,skj->shj", self.interp, knots)
        return np.repeat(per_env_step, DECIMATION, axis=1)

    def _cost(self, states: np.ndarray) -> np.ndarray:
        """(S, T, nstate) rollout states -> (S,) total cost."""
        nq = self.m.nq
        qpos = states[..., 1 : 1 + nq]
        qvel = states[..., 1 + nq : 1 + nq + self.m.nv]
        z = qpos[..., 2]
        qx, qy = qpos[..., 4], qpos[..., 5]
        r_zz = 1.0 - 2.0 * (qx**2 + qy**2)
        joints = qpos[..., self.q_adr[self.pol]]
        c = (
            self.w["height"] * (z - self.z_target) ** 2
            + self.w["upright"] * (1.0 - r_zz)
            + self.w["vel"] * (qvel[..., 0] ** 2 + qvel[..., 1] ** 2)
            + self.w["pose"] * ((joints - self.default[self.pol]) ** 2).sum(-1)
        )
        return c.sum(axis=1)

    def plan(self, data: mujoco.MjData) -> np.ndarray:
        """One planning step from ``data``'s state (its full physics state is read, not changed).

        Returns:
            (29,) float64 PD targets (rad, :data:`g1.JOINT_NAMES` order) for the next env step.
        """
        state = np.empty(self.state_size)
        mujoco.mj_getState(self.m, data, state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        noise = self.rng.normal(0.0, self.sigma, (self.nsamples, self.knots, len(self.pol)))
        noise[0] = 0.0  # the nominal itself is a candidate
        knots = np.repeat(self.nominal[None], self.nsamples, axis=0)
        knots[:, :, self.pol] += noise
        knots = np.clip(knots, self.lo, self.hi)
        ctrl = self._controls(knots)
        states, _ = rollout.rollout(self.m, self.datas, np.repeat(state[None], self.nsamples, axis=0), ctrl)
        best = int(np.argmin(self._cost(states)))
        first = ctrl[best, 0].copy()
        self.nominal = self.shift @ knots[best]
        return first
