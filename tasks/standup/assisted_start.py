"""Assisted starts: a fraction of training episodes begins upright, crouched or standing, not lying.

Not part of HoST (HoST starts every episode from the terrain's posture). It is an initial-state-distribution
curriculum in the spirit of reference state initialisation (Peng et al., "DeepMimic", SIGGRAPH 2018, §6): the
episodes that start upright show the critics and the policy the high-reward states near the goal (balancing,
the post-task rewards, rising from a crouch) long before a lying start reaches them by exploration.

Each assisted episode starts in a crouch with both soles flat on the ground and the whole-body centre of mass
over the middle of the feet. A crouch depth θ ~ U(0, max_crouch) rad sets, in the sagittal plane (pitch angles
added to the default pose, whose leg angles sum to zero so its soles are parallel to the pelvis):

    shank tilt s = min(θ, MAX_SHANK_TILT),  thigh tilt u = θ,  pelvis pitch P(θ) (forward lean)
    hip_pitch += -u - P,  knee += s + u,  ankle_pitch += -s

so the sole pitch P + Δhip + Δknee + Δankle is 0. The shank tilt is capped by the ankle's dorsiflexion range
(−0.87 rad); P(θ) is found by bisection so the centre of mass lies over the sole centre (on a θ grid,
interpolated). Every policy joint then gets U(±joint_noise) and the pelvis a random yaw, and the pelvis height
puts the lowest of HoST's sole points ``clearance`` above the ground (forward kinematics of each start). θ = 0 is the
default standing pose (pelvis ~0.79 m); θ = 1.2 rad is a deep crouch (pelvis ~0.45 m). The episode skips the unactuated
phase (zero action would let the robot fold under PD damping alone), so it is ``unactuated_steps`` env steps shorter.

The curriculum trigger ignores assisted episodes: only episodes from the terrain's posture step the pull force
and β down (:meth:`upright.tasks.standup.env.StandupEnv.step`). Evaluation and the robustness battery never use
assisted starts (:func:`upright.training.evaluate.make_eval_env` sets ``fraction`` to 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np
import torch

from upright.robots import g1

MAX_SHANK_TILT = 0.6
"""Largest shank tilt, rad: the default ankle pitch (−0.2) minus 0.6 stays inside the G1 ankle-pitch range
(−0.87 rad, ``g1_mjlab.xml``)."""


@dataclass
class AssistedStartCfg:
    """Assisted starts (``env.assisted_start.*``). Off by default (HoST)."""

    fraction: float = 0.0
    """Probability that a resetting training episode starts assisted, in [0, 1). 0 = HoST."""
    max_crouch: float = 1.2
    """Largest crouch θ (thigh tilt), rad: θ ~ U(0, max_crouch); 0 = standing (pelvis ~0.79 m), 1.2 = deep crouch
    (pelvis ~0.45 m). At most 1.2."""
    joint_noise: float = 0.05
    """Uniform noise added to each policy joint, rad."""
    clearance: float = 0.01
    """Height of the lowest of HoST's sole points above the ground at reset, m (the foot capsules reach 5 mm
    below those points, ``g1_mjlab.xml``)."""


def validate(cfg: AssistedStartCfg, terrain: str) -> None:
    """Check the settings.

    Raises:
        ValueError: ``fraction`` outside [0, 1), ``max_crouch`` outside [0, 1.2] rad, a negative ``joint_noise``
            or ``clearance``, or assisted starts on a terrain other than ground (the start height is computed
            for flat ground at z = 0).
    """
    if not 0.0 <= cfg.fraction < 1.0:
        raise ValueError(
            f"env.assisted_start.fraction must be in [0, 1), got {cfg.fraction}; "
            "0 turns assisted starts off, and 1 would never start from the terrain's posture."
        )
    if not 0.0 <= cfg.max_crouch <= 1.2:
        raise ValueError(f"env.assisted_start.max_crouch must be in [0, 1.2] rad, got {cfg.max_crouch}.")
    if cfg.joint_noise < 0 or cfg.clearance < 0:
        raise ValueError("env.assisted_start.joint_noise and clearance must be >= 0.")
    if cfg.fraction > 0 and terrain != "ground":
        raise ValueError(
            f"env.assisted_start.fraction > 0 needs terrain=ground (got terrain={terrain}): the start height "
            "is computed for flat ground. Set env.assisted_start.fraction=0 on this terrain."
        )


_LEG_IDS: dict[str, list[int]] = {
    name: [g1.JOINT_NAMES.index(f"{side}_{name}_joint") for side in ("left", "right")]
    for name in ("hip_pitch", "knee", "ankle_pitch")
}
"""Left and right index in :data:`g1.JOINT_NAMES` of each sagittal leg joint a crouch moves."""


def crouch_joints(default_pose: torch.Tensor, theta: torch.Tensor, pitch: torch.Tensor) -> torch.Tensor:
    """Joint angles of crouch depth ``theta`` with pelvis pitch ``pitch`` (module docstring).

    Args:
        default_pose: (29,) default joint angles, rad, :data:`g1.JOINT_NAMES` order.
        theta, pitch: (M,) crouch depth and pelvis forward pitch, rad.

    Returns:
        (M, 29) joint angles, rad (not clamped to the joint range).
    """
    s, u = theta.clamp(max=MAX_SHANK_TILT), theta
    joints = default_pose.expand(theta.numel(), -1).clone()
    for name, delta in (("hip_pitch", -u - pitch), ("knee", s + u), ("ankle_pitch", -s)):
        joints[:, _LEG_IDS[name]] += delta.unsqueeze(-1)
    return joints


class SoleKinematics:
    """Forward kinematics of the G1 pelvis-at-origin pose on a private ``MjData`` (CPU, float64)."""

    def __init__(self, model: mujoco.MjModel):
        """Args: model: a scene whose joints include :data:`g1.JOINT_NAMES`, with the free joint on ``pelvis``."""
        self.model, self.data = model, mujoco.MjData(model)
        jids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in g1.JOINT_NAMES]
        self.q_adr = model.jnt_qposadr[jids]
        self.pelvis = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "pelvis")
        self.free = model.jnt_qposadr[model.body_jntadr[self.pelvis]]
        self.feet = [
            mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"{s}_ankle_roll_link") for s in ("left", "right")
        ]
        self.points = np.asarray(g1.ANKLE_POINTS_IN_FOOT)

    def pose(self, quat: np.ndarray, joints: np.ndarray) -> tuple[float, float]:
        """Place the pelvis at the origin with orientation ``quat`` (4,) wxyz and the 29 ``joints`` (rad).

        Returns:
            (centre-of-mass x − mean x of the eight sole corners, lowest sole point z), m, world frame.
        """
        d = self.data
        d.qpos[:] = self.model.qpos0
        d.qpos[self.free : self.free + 3] = 0.0
        d.qpos[self.free + 3 : self.free + 7] = quat
        d.qpos[self.q_adr] = joints
        mujoco.mj_kinematics(self.model, d)
        mujoco.mj_comPos(self.model, d)
        sole = np.concatenate([d.xpos[b] + self.points @ d.xmat[b].reshape(3, 3).T for b in self.feet])
        corners = sole[[1, 2, 3, 4, 6, 7, 8, 9], 0]
        return float(d.subtree_com[self.pelvis, 0] - corners.mean()), float(sole[:, 2].min())


def balanced_pitch(kin: SoleKinematics, default_pose: torch.Tensor, thetas: np.ndarray) -> np.ndarray:
    """Pelvis forward pitch that puts the centre of mass over the sole centre, per crouch depth θ.

    Bisection in [−0.3, 1.4] rad (leaning forward moves the centre of mass forward over fixed legs).

    Args:
        kin: kinematics of the scene.
        default_pose: (29,) default joint angles, rad.
        thetas: (K,) crouch depths θ, rad.

    Returns:
        (K,) float64 pelvis pitch, rad.
    """
    out = np.empty(len(thetas))
    for k, theta in enumerate(thetas):
        lo, hi = -0.3, 1.4
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            quat = (math.cos(mid / 2), 0.0, math.sin(mid / 2), 0.0)
            joints = crouch_joints(default_pose, torch.tensor([float(theta)]), torch.tensor([mid]))[0].numpy()
            lo, hi = (lo, mid) if kin.pose(np.asarray(quat), joints)[0] > 0 else (mid, hi)
        out[k] = 0.5 * (lo + hi)
    return out


class AssistedStarts:
    """Draws assisted start states for resetting envs (see the module docstring)."""

    def __init__(
        self, cfg: AssistedStartCfg, model: mujoco.MjModel, default_pose: torch.Tensor, policy_ids: torch.Tensor
    ):
        """Build the balanced-pitch table.

        Args:
            cfg: settings (validated by the caller with :func:`validate`).
            model: the scene (flat ground at z = 0).
            default_pose: (29,) float32 default joint angles, rad.
            policy_ids: (23,) long indices of the policy joints among the 29.
        """
        self.cfg = cfg
        self.default_pose = default_pose
        self.policy_ids = policy_ids
        self.kin = SoleKinematics(model)
        self.thetas = np.linspace(0.0, max(cfg.max_crouch, 1e-3), 25)
        """(K,) crouch depths of the table, rad."""
        pitch = balanced_pitch(self.kin, default_pose.detach().cpu().double(), self.thetas)
        self.pitches = torch.tensor(pitch, dtype=torch.float32, device=default_pose.device)
        """(K,) balanced pelvis forward pitch on the θ grid, rad."""

    def pitch(self, theta: torch.Tensor) -> torch.Tensor:
        """(M,) balanced pelvis pitch, rad, for crouch depths ``theta`` (M,) rad (the table, linear in θ)."""
        x = theta / float(self.thetas[-1]) * (len(self.thetas) - 1)
        i = x.floor().long().clamp(0, len(self.thetas) - 2)
        w = (x - i).clamp(0.0, 1.0)
        return self.pitches[i] * (1 - w) + self.pitches[i + 1] * w

    def choose(self, m: int, rng: torch.Generator) -> torch.Tensor:
        """(M,) bool: which of ``m`` resetting envs start assisted (each with probability ``fraction``)."""
        return torch.rand(m, generator=rng) < self.cfg.fraction

    def sample(
        self, m: int, rng: torch.Generator, joint_lower: torch.Tensor, joint_upper: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Draw ``m`` assisted starts.

        Args:
            m: number of starts.
            rng: the env's generator.
            joint_lower, joint_upper: (29,) joint range, rad; the angles are clamped to it.

        Returns:
            pelvis height (M,) m, exact for the noisy joint angles (lowest sole point ``clearance`` above z = 0),
            pelvis quaternion (M, 4) wxyz (a random yaw, then the crouch's forward pitch), and joint angles (M, 29)
            rad (held joints at the default pose).
        """
        dev = self.default_pose.device
        theta = (torch.rand(m, generator=rng) * self.cfg.max_crouch).to(dev)
        yaw = ((torch.rand(m, generator=rng) * 2 - 1) * math.pi).to(dev)
        noise = ((torch.rand(m, len(self.policy_ids), generator=rng) * 2 - 1) * self.cfg.joint_noise).to(dev)
        pitch = self.pitch(theta)
        joints = crouch_joints(self.default_pose, theta, pitch)
        joints[:, self.policy_ids] += noise
        joints = joints.clamp(joint_lower, joint_upper)
        cy, sy, cp, sp = torch.cos(yaw / 2), torch.sin(yaw / 2), torch.cos(pitch / 2), torch.sin(pitch / 2)
        quat = torch.stack([cy * cp, -sy * sp, cy * sp, sy * cp], dim=-1)  # yaw about z, then pitch about the new y
        q64, j64 = quat.detach().cpu().double().numpy(), joints.detach().cpu().double().numpy()
        lowest = torch.tensor([self.kin.pose(q64[k], j64[k])[1] for k in range(m)], dtype=torch.float32, device=dev)
        return self.cfg.clearance - lowest, quat, joints
