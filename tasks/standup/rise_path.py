"""Rise-path starts: a fraction of training episodes begins at a point of a scripted get-up, settled by physics.

Not part of HoST (HoST starts every episode from the terrain's posture). It is reference state initialisation
(Peng et al., "DeepMimic", SIGGRAPH 2018, §6; Tao et al., "Learning to Get Up", SIGGRAPH 2022, §4: ε-RSI) from
a scripted reference instead of motion capture: a keyframe get-up of the G1 in six poses,

====  ===========================================  =====================
 u     pose                                          head height (settled)
====  ===========================================  =====================
0.00  supine, HoST's default joint angles            ~0.10 m
0.20  sitting up, legs forward, hands behind         ~0.50 m
0.45  sitting, knees tucked to the chest, feet flat  ~0.63 m
0.65  deep squat, heels down, torso forward          ~0.70 m
0.80  crouch θ = 1.2 rad (``assisted_start``)         ~0.95 m
1.00  standing (θ = 0)                               ~1.12 m
====  ===========================================  =====================

with pelvis pitch and joint angles interpolated linearly in between. The poses were found by settling candidate
poses under PD in this scene (``docs/standup_learning.md``, "Rise-path starts"): the tucked sit and the squat
are statically stable; the poses between the tucked sit and the squat are not (their centre of mass lies
between the buttocks and the feet) and roll back within ~1 s, so they show the policy the start of the
weight shift onto the feet, which is the step a lying start never reaches by exploration.

The reference is only a pose path; no state is kinematic. At env creation a bank of ``bank_size`` starts is
simulated: for each, u ~ U(0, 1), every policy joint gets U(±joint_noise), the pelvis a random yaw; the robot is
placed with its lowest collision geometry ``clearance`` above the ground and settles for U(settle_min,
settle_max) s with the PD targets at the pose (the scene's actuators, gravity, contacts). The bank keeps the
settled qpos and qvel, so every start is a state the simulator reached on its own.

Episodes started from the bank can be shorter (``episode_length_s``) and end when the head falls ``fall_drop``
below its start height; they skip the unactuated phase, get no pull force (``pull_assisted``) and do not step
the curricula (they are flagged like :mod:`~upright.tasks.standup.assisted_start` episodes). Evaluation and
play never use them (:func:`upright.training.evaluate.make_eval_env` sets the fraction to 0).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import mujoco
import numpy as np
import torch
from upright.robots import g1
from upright.tasks.standup.assisted_start import (
    SoleKinematics,
    balanced_pitch,
    crouch_joints,
)


@dataclass
class RisePathCfg:
    """Rise-path starts (``env.rise_path.*``). Off by default (HoST)."""

    fraction: float = 0.0
    """Probability that a resetting training episode starts on the rise path, in [0, 1). 0 = HoST."""
    source: str = "keyframes"
    """``keyframes``: poses interpolated along the keyframe path, settled (module docstring); ``teacher``: states
    along noisy rollouts of the open-loop keyframe get-up of :mod:`~upright.tasks.standup.teacher` (with their
    velocities; ``u_min``, ``u_max``, ``settle_*`` and ``clearance`` do not apply)."""
    bank_size: int = 1024
    """Starts simulated at env creation (each ~0.2 s of physics; 1024 take ~2 s on one core)."""
    joint_noise: float = 0.1
    """Uniform noise added to each policy joint of the pose, rad."""
    settle_min: float = 0.05
    """Shortest settling time, s."""
    settle_max: float = 0.4
    """Longest settling time, s."""
    clearance: float = 0.005
    """Gap between the lowest collision geometry and the ground when the pose is placed, m."""
    episode_length_s: float = 0.0
    """Length of rise-path episodes, s (0: the env's ``episode_length_s``). Shorter episodes reset more often, so
    more of the samples are near the start states instead of lying after a fall."""
    fall_drop: float = 0.0
    """Terminate a rise-path episode once its head height is this far below its start head height, m (0: never).
    The fall then ends the episode's rewards instead of continuing as a lying start."""
    u_min: float = 0.0
    """Lowest path coordinate drawn (0 = supine)."""
    u_max: float = 1.0
    """Highest path coordinate drawn (1 = standing)."""


def validate(cfg: RisePathCfg, terrain: str) -> None:
    """Check the settings.

    Raises:
        ValueError: a value out of range, or rise-path starts on a terrain other than ground (the poses are
            placed on flat ground at z = 0); the message names the key.
    """
    if not 0.0 <= cfg.fraction < 1.0:
        raise ValueError(f"env.rise_path.fraction must be in [0, 1), got {cfg.fraction}; 0 turns rise-path starts off.")
    if cfg.source not in ("keyframes", "teacher"):
        raise ValueError(f"env.rise_path.source must be 'keyframes' or 'teacher', got {cfg.source!r}")
    if cfg.bank_size < 1:
        raise ValueError(f"env.rise_path.bank_size must be >= 1, got {cfg.bank_size}")
    if cfg.joint_noise < 0 or cfg.clearance < 0 or not 0 <= cfg.settle_min <= cfg.settle_max:
        raise ValueError("env.rise_path.joint_noise and clearance must be >= 0 and 0 <= settle_min <= settle_max.")
    if cfg.episode_length_s < 0 or cfg.fall_drop < 0:
        raise ValueError("env.rise_path.episode_length_s and fall_drop must be >= 0 (0 turns each off).")
    if not 0.0 <= cfg.u_min <= cfg.u_max <= 1.0:
        raise ValueError(f"env.rise_path.u_min/u_max must satisfy 0 <= u_min <= u_max <= 1, got {cfg.u_min}, {cfg.u_max}")
    if cfg.fraction > 0 and terrain != "ground":
        raise ValueError(
            f"env.rise_path.fraction > 0 needs terrain=ground (got terrain={terrain}): the poses are placed on flat "
            "ground. Set env.rise_path.fraction=0 on this terrain."
        )


def _sym(name: str) -> list[int]:
    """Left and right index in :data:`g1.JOINT_NAMES` of ``left_<name>_joint`` / ``right_<name>_joint``."""
    return [g1.JOINT_NAMES.index(f"{side}_{name}_joint") for side in ("left", "right")]


def ground_pose(
    default_pose: np.ndarray, pitch: float, hip: float, knee: float, ankle: float | None = None,
    shoulder_pitch: float = 0.0, elbow: float = 0.8, shoulder_roll: float = 0.0,
) -> tuple[float, np.ndarray]:
    """A symmetric pose: pelvis forward pitch (rad; −π/2 = supine) and 29 joint angles (rad).

    ``ankle`` None puts the soles parallel to the ground (pitch + hip + knee + ankle = 0); ``shoulder_roll`` is
    mirrored (left +, right −, arms away from the body).
    """
    q = default_pose.astype(np.float64).copy()
    q[_sym("hip_pitch")], q[_sym("knee")] = hip, knee
    q[_sym("ankle_pitch")] = -(pitch + hip + knee) if ankle is None else ankle
    q[_sym("shoulder_pitch")], q[_sym("elbow")] = shoulder_pitch, elbow
    q[g1.JOINT_NAMES.index("left_shoulder_roll_joint")] = shoulder_roll
    q[g1.JOINT_NAMES.index("right_shoulder_roll_joint")] = -shoulder_roll
    return pitch, q


def keyframes(model: mujoco.MjModel, default_pose: np.ndarray) -> list[tuple[float, float, np.ndarray]]:
    """The get-up keyframes of the module docstring: (u, pelvis pitch rad, (29,) joint angles rad), u increasing.

    The crouch and standing poses use :mod:`~upright.tasks.standup.assisted_start`'s balanced pelvis pitch.
    """
    kin = SoleKinematics(model)
    dp = torch.tensor(default_pose, dtype=torch.float64)
    frames = [
        (0.00, *ground_pose(default_pose, -math.pi / 2, -0.1, 0.3, -0.2)),
        (0.20, *ground_pose(default_pose, -0.6, -1.3, 0.4, None, 0.6, 0.3, 0.3)),
        (0.45, *ground_pose(default_pose, -0.2, -2.4, 2.2, None, -1.0, 0.3, 0.3)),
        (0.65, *ground_pose(default_pose, 0.2, -2.0, 2.6, -0.8, -1.0, 0.5, 0.0)),
    ]
    for u, theta in ((0.8, 1.2), (0.9, 0.6), (1.0, 0.0)):
        pitch = float(balanced_pitch(kin, dp, np.array([theta]))[0])
        joints = crouch_joints(dp, torch.tensor([theta], dtype=torch.float64), torch.tensor([pitch], dtype=torch.float64))
        frames.append((u, pitch, joints[0].numpy()))
    return frames


def interpolate(frames: list[tuple[float, float, np.ndarray]], u: float) -> tuple[float, np.ndarray]:
    """Pelvis pitch (rad) and (29,) joint angles (rad) at path coordinate ``u`` in [0, 1] (linear between frames)."""
    for (u0, p0, q0), (u1, p1, q1) in itertools.pairwise(frames):
        if u <= u1:
            s = (u - u0) / (u1 - u0)
            return p0 + s * (p1 - p0), q0 + s * (q1 - q0)
    return frames[-1][1], frames[-1][2]


class RisePathStarts:
    """The bank of settled rise-path starts (see the module docstring) and draws from it."""

    def __init__(self, cfg: RisePathCfg, model: mujoco.MjModel, default_pose: np.ndarray,
                 policy_ids: np.ndarray, seed: int, device: torch.device | str = "cpu"):
        """Simulate the bank (native MuJoCo, one thread, float64).

        Args:
            cfg: settings (validated by the caller with :func:`validate`).
            model: the scene (flat ground at z = 0, the G1's position actuators in :data:`g1.JOINT_NAMES` order).
            default_pose: (29,) default joint angles, rad.
            policy_ids: (23,) indices of the policy joints among the 29 (the others get no noise).
            seed: seed of the bank's draws.
            device: torch device of the returned tensors.
        """
        self.cfg = cfg
        self.device = torch.device(device)
        rng = np.random.default_rng(seed)
        d = mujoco.MjData(model)
        jids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in g1.JOINT_NAMES]
        q_adr = model.jnt_qposadr[jids]
        lo, hi = model.jnt_range[jids, 0], model.jnt_range[jids, 1]
        frames = keyframes(model, np.asarray(default_pose, dtype=np.float64))
        robot_geoms = np.flatnonzero(model.geom_bodyid != 0)
        head = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, "head")
        n = cfg.bank_size
        if cfg.source == "teacher":
            from upright.tasks.standup.teacher import teacher_states

            qpos, qvel, heads = teacher_states(model, default_pose, policy_ids, n, cfg.joint_noise, seed)
            self.u = np.full(n, np.nan)
            self._store(qpos, qvel, heads)
            return
        self.u = np.empty(n)
        """(B,) path coordinate of each start (NaN for teacher states)."""
        qpos, qvel, heads = np.empty((n, model.nq)), np.empty((n, model.nv)), np.empty(n)
        for k in range(n):
            u = float(rng.uniform(cfg.u_min, cfg.u_max))
            pitch, joints = interpolate(frames, u)
            joints = joints.copy()
            joints[policy_ids] += rng.uniform(-cfg.joint_noise, cfg.joint_noise, len(policy_ids))
            joints = np.clip(joints, lo, hi)
            yaw = float(rng.uniform(-math.pi, math.pi))
            cy, sy, cp, sp = math.cos(yaw / 2), math.sin(yaw / 2), math.cos(pitch / 2), math.sin(pitch / 2)
            d.qpos[:] = model.qpos0
            d.qpos[3:7] = (cy * cp, -sy * sp, cy * sp, sy * cp)  # yaw about z, then pitch about the new y
            d.qpos[q_adr] = joints
            d.qvel[:] = 0.0
            d.qpos[2] = 0.0
            mujoco.mj_kinematics(model, d)
            lowest = min(_geom_bottom(model, d, g) for g in robot_geoms)
            d.qpos[2] = cfg.clearance - lowest
            d.ctrl[:] = joints
            d.time = 0.0
            mujoco.mj_forward(model, d)
            steps = round(rng.uniform(cfg.settle_min, cfg.settle_max) / model.opt.timestep)
            if steps:
                mujoco.mj_step(model, d, nstep=steps)
            self.u[k] = u
            qpos[k], qvel[k], heads[k] = d.qpos, d.qvel, d.site_xpos[head, 2]
        self._store(qpos, qvel, heads)

    def _store(self, qpos: np.ndarray, qvel: np.ndarray, heads: np.ndarray) -> None:
        self.qpos = torch.tensor(qpos, dtype=torch.float32, device=self.device)
        """(B, nq) generalised positions of the starts (pelvis near x = y = 0)."""
        self.qvel = torch.tensor(qvel, dtype=torch.float32, device=self.device)
        """(B, nv) generalised velocities of the starts."""
        self.head_height = torch.tensor(heads, dtype=torch.float32, device=self.device)
        """(B,) head height above the ground of each start, m."""

    def choose(self, m: int, rng: torch.Generator, taken: torch.Tensor) -> torch.Tensor:
        """(M,) bool: which of ``m`` resetting envs start on the rise path (probability ``fraction``, never one
        already ``taken`` (M,) bool by another start kind)."""
        return (torch.rand(m, generator=rng) < self.cfg.fraction).to(taken.device) & ~taken

    def sample(self, m: int, rng: torch.Generator, xy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``m`` starts uniformly from the bank.

        Args:
            m: number of starts.
            rng: the env's generator.
            xy: (M, 2) pelvis x, y of the env's start position, m (added to the bank's x = y = 0).

        Returns:
            qpos (M, nq) and qvel (M, nv) float32.
        """
        idx = torch.randint(0, self.qpos.shape[0], (m,), generator=rng).to(self.device)
        qpos = self.qpos[idx].clone()
        qpos[:, 0:2] += xy
        return qpos, self.qvel[idx].clone()


def _geom_bottom(model: mujoco.MjModel, data: mujoco.MjData, g: int) -> float:
    """Lowest world z of collision geometry ``g`` (its axis-aligned box in the geom frame, rotated), m."""
    if not (model.geom_contype[g] or model.geom_conaffinity[g]):
        return math.inf
    center, half = model.geom_aabb[g, :3], model.geom_aabb[g, 3:]
    rot = data.geom_xmat[g].reshape(3, 3)
    return float(data.geom_xpos[g, 2] + rot[2] @ center - np.abs(rot[2]) @ half)
