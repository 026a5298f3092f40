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
    reverse_curriculum: bool = False
    """Reverse curriculum over the path (Florensa et al., "Reverse Curriculum Generation for Reinforcement
    Learning", CoRL 2017, applied to the path coordinate): draws start at u >= ``curriculum_u_start`` (near standing)
    and the lowest drawn u moves ``curriculum_step`` down the path each time the episodes started in the frontier
    band [u_low, u_low + ``curriculum_band``) succeed often enough (``curriculum_success``; success = the episode
    lasted its length and ended with the head above the curriculum's threshold height, ``Metrics/path_stood``).
    Keyframe source only."""
    curriculum_u_start: float = 0.9
    """First lowest path coordinate of the reverse curriculum (0.9: standing, see the module table)."""
    curriculum_step: float = 0.05
    """How far down the path the lowest coordinate moves on each advance."""
    curriculum_band: float = 0.1
    """Width of the frontier band above the lowest coordinate, in path coordinate."""
    curriculum_frontier_share: float = 0.5
    """Share of rise-path draws taken from the frontier band; the rest are uniform over [u_low, u_max], so the
    easier starts stay in the batch."""
    curriculum_success: float = 0.5
    """Success rate of frontier episodes at which the curriculum advances."""
    curriculum_min_episodes: int = 200
    """Frontier episodes counted before the success rate is read (then the count restarts)."""


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
        raise ValueError(
            f"env.rise_path.u_min/u_max must satisfy 0 <= u_min <= u_max <= 1, got {cfg.u_min}, {cfg.u_max}"
        )
    if cfg.reverse_curriculum:
        if cfg.source != "keyframes":
            raise ValueError(
                "env.rise_path.reverse_curriculum needs env.rise_path.source=keyframes (teacher states "
                "have no path coordinate)."
            )
        if not cfg.u_min <= cfg.curriculum_u_start <= cfg.u_max:
            raise ValueError(
                f"env.rise_path.curriculum_u_start must lie in [u_min, u_max] = [{cfg.u_min}, "
                f"{cfg.u_max}], got {cfg.curriculum_u_start}"
            )
        if cfg.curriculum_step <= 0 or cfg.curriculum_band <= 0 or cfg.curriculum_min_episodes < 1:
            raise ValueError(
                "env.rise_path.curriculum_step and curriculum_band must be > 0 and curriculum_min_episodes >= 1."
            )
        if not 0 <= cfg.curriculum_frontier_share <= 1 or not 0 < cfg.curriculum_success <= 1:
            raise ValueError(
                "env.rise_path.curriculum_frontier_share must be in [0, 1] and curriculum_success in (0, 1]."
            )
    if cfg.fraction > 0 and terrain != "ground":
        raise ValueError(
            f"env.rise_path.fraction > 0 needs terrain=ground (got terrain={terrain}): the poses are placed on flat "
            "ground. Set env.rise_path.fraction=0 on this terrain."
        )


def _sym(name: str) -> list[int]:
    """Left and right index in :data:`g1.JOINT_NAMES` of ``left_<name>_joint`` / ``right_<name>_joint``."""
    return [g1.JOINT_NAMES.index(f"{side}_{name}_joint") for side in ("left", "right")]


def ground_pose(
    default_pose: np.ndarray,
    pitch: float,
    hip: float,
    knee: float,
    ankle: float | None = None,
    shoulder_pitch: float = 0.0,
    elbow: float = 0.8,
    shoulder_roll: float = 0.0,
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
        joints = crouch_joints(
            dp, torch.tensor([theta], dtype=torch.float64), torch.tensor([pitch], dtype=torch.float64)
        )
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

    def __init__(
        self,
        cfg: RisePathCfg,
        model: mujoco.MjModel,
        default_pose: np.ndarray,
        policy_ids: np.ndarray,
        seed: int,
        device: torch.device | str = "cpu",
    ):
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
            self._init_curriculum()
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
        self._init_curriculum()

    # ------------------------------------------------------------------ reverse curriculum
    def _init_curriculum(self) -> None:
        self.u_low = float(self.cfg.curriculum_u_start) if self.cfg.reverse_curriculum else float(self.cfg.u_min)
        """Lowest path coordinate drawn now (moves down with the reverse curriculum; ``u_min`` without it)."""
        self.advances = 0
        """How many times the reverse curriculum has moved ``u_low`` down."""
        self._frontier_done = 0
        self._frontier_stood = 0
        self.last_frontier_rate = float("nan")
        """Success rate of the frontier band over the last completed count (NaN before the first)."""
        self._u_bank = torch.tensor(self.u, dtype=torch.float32, device=self.device)

    def _draw_indices(self, m: int, rng: torch.Generator) -> torch.Tensor:
        """(M,) bank indices: uniform over the bank, or, with the reverse curriculum, a ``curriculum_frontier_share``
        from the frontier band and the rest uniform over the starts with u >= ``u_low``."""
        n = self.qpos.shape[0]
        if not self.cfg.reverse_curriculum:
            return torch.randint(0, n, (m,), generator=rng).to(self.device)
        eligible = (self._u_bank >= self.u_low - 1e-6).nonzero().flatten()
        frontier = (
            ((self._u_bank >= self.u_low - 1e-6) & (self._u_bank < self.u_low + self.cfg.curriculum_band))
            .nonzero()
            .flatten()
        )
        if eligible.numel() == 0:  # a bank without starts above u_low: take the highest ones
            eligible = torch.argsort(self._u_bank, descending=True)[: max(1, n // 10)]
        if frontier.numel() == 0:
            frontier = eligible
        pick_frontier = torch.rand(m, generator=rng).to(self.device) < self.cfg.curriculum_frontier_share
        a = frontier[torch.randint(0, frontier.numel(), (m,), generator=rng).to(self.device)]
        b = eligible[torch.randint(0, eligible.numel(), (m,), generator=rng).to(self.device)]
        return torch.where(pick_frontier, a, b)

    def record(self, start_u: torch.Tensor, stood: torch.Tensor) -> None:
        """Count finished rise-path episodes for the reverse curriculum and advance it when due (no-op without it).

        Args:
            start_u: (K,) path coordinate each finished episode started at.
            stood: (K,) bool, whether it succeeded (lasted its length, head above the threshold height at the end).
        """
        if not self.cfg.reverse_curriculum or start_u.numel() == 0:
            return
        in_band = start_u < self.u_low + self.cfg.curriculum_band
        self._frontier_done += int(in_band.sum())
        self._frontier_stood += int((stood & in_band).sum())
        if self._frontier_done >= self.cfg.curriculum_min_episodes:
            rate = self._frontier_stood / self._frontier_done
            self.last_frontier_rate = rate
            if rate >= self.cfg.curriculum_success and self.u_low > self.cfg.u_min + 1e-9:
                self.u_low = max(float(self.cfg.u_min), self.u_low - self.cfg.curriculum_step)
                self.advances += 1
            self._frontier_done = self._frontier_stood = 0

    def state_dict(self) -> dict:
        """The reverse curriculum's position, for checkpoints."""
        return {"u_low": self.u_low, "advances": self.advances}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        self.u_low = float(state["u_low"])
        self.advances = int(state["advances"])

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

    def sample(self, m: int, rng: torch.Generator, xy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Draw ``m`` starts from the bank: uniformly, or by the reverse curriculum (``reverse_curriculum``).

        Args:
            m: number of starts.
            rng: the env's generator.
            xy: (M, 2) pelvis x, y of the env's start position, m (added to the bank's x = y = 0).

        Returns:
            qpos (M, nq) and qvel (M, nv) float32, and the (M,) path coordinate of each start (NaN for teacher
            states).
        """
        idx = self._draw_indices(m, rng)
        qpos = self.qpos[idx].clone()
        qpos[:, 0:2] += xy
        return qpos, self.qvel[idx].clone(), self._u_bank[idx]


def settled_starts(
    model: mujoco.MjModel,
    kind: str,
    n: int,
    seed: int,
    settle_s: float | None = None,
    joint_noise: float = RisePathCfg.joint_noise,
    stand_u_min: float = 0.9,
) -> np.ndarray:
    """(n, nq) float64 start qpos for teachers, tests and benchmarks, drawn from a :class:`RisePathStarts` bank.

    Args:
        model: the standup scene.
        kind: ``"stand"``: the top of the path (u in [``stand_u_min``, 1], not settled unless ``settle_s``: quiet
            standing);
            ``"supine"``: u = 0 (lying on the back), settled ``settle_s`` s (default 0.4 s).
        n: number of starts; seed: the bank's seed.
        joint_noise: U(±joint_noise) rad on the policy joints' pose before settling (``RisePathCfg.joint_noise``).

    Raises:
        ValueError: an unknown ``kind``.
    """
    if kind not in ("stand", "supine"):
        raise ValueError(f"settled_starts: kind must be 'stand' or 'supine', not {kind!r}")
    info = g1.robot_info()
    u = (stand_u_min, 1.0) if kind == "stand" else (0.0, 0.0)
    t = settle_s if settle_s is not None else (0.0 if kind == "stand" else 0.4)
    cfg = RisePathCfg(
        fraction=0.5, bank_size=n, u_min=u[0], u_max=u[1], settle_min=t, settle_max=t, joint_noise=joint_noise
    )
    return RisePathStarts(cfg, model, info.default_pose, info.policy_joint_ids, seed=seed).qpos.double().numpy()


def _geom_bottom(model: mujoco.MjModel, data: mujoco.MjData, g: int) -> float:
    """Lowest world z of collision geometry ``g`` (its axis-aligned box in the geom frame, rotated), m."""
    if not (model.geom_contype[g] or model.geom_conaffinity[g]):
        return math.inf
    center, half = model.geom_aabb[g, :3], model.geom_aabb[g, 3:]
    rot = data.geom_xmat[g].reshape(3, 3)
    return float(data.geom_xpos[g, 2] + rot[2] @ center - np.abs(rot[2]) @ half)
