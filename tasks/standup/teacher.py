"""An open-loop keyframe get-up of the G1 (the "teacher") and the states along it.

The rise-path keyframes of :mod:`~upright.tasks.standup.rise_path` (supine, sitting up, tucked sit, squat,
standing), tracked open loop by the scene's PD position actuators, reach the tucked sit and fall back: shifting
the weight onto the feet needs momentum. One extra "rock" keyframe between the tucked sit and the squat, and the
durations of the segments, were searched with the cross-entropy method (``benchmarks/standup_teacher_cem.py``,
score: highest head height with a foot on the ground, pelvis below 0.85 m and |vz| < 0.5 m/s, so jumps do not
count). :data:`DEFAULT_PARAMS` is the result of seed 1 (``docs/standup_learning/teacher_cem_s1.json``): from a
settled supine start, the head goes 0.09 -> 0.63 m (tucked sit) -> 1.24 m in ~2.3 s, then the robot falls (no
balance feedback). The motion is explosive (segments at the 0.2 s minimum); the simulated actuators have no
torque-speed limit, so a real G1 would be slower (docs/standup_learning.md).

:func:`teacher_states` records the simulator states along noisy rollouts of this get-up; the rise-path starts use
them with ``env.rise_path.source=teacher`` (reference state initialisation from a dynamic reference: Peng et al.,
"DeepMimic", SIGGRAPH 2018, §6; Tao et al., "Learning to Get Up", SIGGRAPH 2022, §4).
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from upright.robots import g1

PARAMS = (
    "rock_hip_pitch",
    "rock_knee",
    "rock_ankle_pitch",
    "rock_shoulder_pitch",
    "rock_elbow",
    "rock_waist_pitch",
    "t_tuck",
    "t_rock",
    "t_squat",
    "t_stand",
)
"""The searched numbers: the rock keyframe's joint angles (rad, both sides; clipped to the joint range) and the
durations of the tucked-sit, rock, squat and standing segments (s, clipped to [t_min, 2])."""

DEFAULT_PARAMS: dict[str, float] = {
    "rock_hip_pitch": -3.0710,
    "rock_knee": 3.2123,
    "rock_ankle_pitch": -0.1336,
    "rock_shoulder_pitch": -2.3804,
    "rock_elbow": 2.1747,
    "rock_waist_pitch": 0.4271,
    "t_tuck": 0.0324,
    "t_rock": -0.5757,
    "t_squat": 0.5347,
    "t_stand": 0.4228,
}
"""CEM result, seed 1, 12 generations x 32 samples, t_min 0.2 s (``docs/standup_learning/teacher_cem_s1.json``)."""


class KeyframeGetUp:
    """Open-loop PD tracking of the rise-path keyframes with the rock keyframe (module docstring).

    Args:
        model: the standup scene (flat ground at z = 0; position actuators in :data:`g1.JOINT_NAMES` order).
        default_pose: (29,) default joint angles, rad.
        policy_ids: (23,) indices of the policy joints among the 29.
        t_min: shortest segment duration, s.
    """

    def __init__(self, model: mujoco.MjModel, default_pose: np.ndarray, policy_ids: np.ndarray, t_min: float = 0.2):
        from upright.tasks.standup.rise_path import keyframes, settled_starts

        self.m, self.d = model, mujoco.MjData(model)
        self.frames = keyframes(model, np.asarray(default_pose, dtype=np.float64))
        jids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in g1.JOINT_NAMES]
        self.lo, self.hi = model.jnt_range[jids, 0], model.jnt_range[jids, 1]
        self.q_adr = model.jnt_qposadr[jids]
        self.head = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, "head")
        self.feet = {
            mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"{s}_ankle_roll_link") for s in ("left", "right")
        }
        self.policy_ids = np.asarray(policy_ids)
        self.q0 = settled_starts(model, "supine", 1, seed=0, settle_s=0.5, joint_noise=0.0)[0]
        """(nq,) settled supine start (pelvis at x = y = 0, yaw of the bank's first draw)."""
        self.t_min = t_min
        self.waist = g1.JOINT_NAMES.index("waist_pitch_joint")

    def schedule(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Keyframe times (6,) s and joint targets (6, 29) rad for parameters ``p`` (10,) in :data:`PARAMS` order."""
        from upright.tasks.standup.rise_path import _sym, interpolate

        f = self.frames
        tuck, squat, stand = interpolate(f, 0.45)[1], interpolate(f, 0.65)[1], interpolate(f, 1.0)[1]
        rock = tuck.copy()
        for name, v in zip(("hip_pitch", "knee", "ankle_pitch", "shoulder_pitch", "elbow"), p[:5]):
            rock[_sym(name)] = v
        rock[self.waist] = p[5]
        rock = np.clip(rock, self.lo, self.hi)
        dt = np.clip(np.asarray(p[6:10], dtype=np.float64), self.t_min, 2.0)
        times = np.concatenate([[0.0, 0.8], 0.8 + np.cumsum(dt)])
        return times, np.stack([interpolate(f, 0.0)[1], interpolate(f, 0.2)[1], tuck, rock, squat, stand])

    def rollout(
        self,
        p: np.ndarray,
        grounded: bool = True,
        target_noise: np.ndarray | None = None,
        yaw: float = 0.0,
        record_every: int = 0,
        tail_s: float = 1.0,
    ):
        """One open-loop get-up from the settled supine start.

        Args:
            p: (10,) parameters in :data:`PARAMS` order.
            grounded: score only moments with a foot on the ground, pelvis below 0.85 m and |vz| < 0.5 m/s.
            target_noise: (29,) rad added to every target of this rollout (None: none).
            yaw: rotation of the start about the vertical, rad.
            record_every: record (qpos, qvel, head height) every this many physics steps (0: none).
            tail_s: time simulated after the last keyframe, s.

        Returns:
            score (highest head height after the squat keyframe's time, m), head-height trace (every 2 physics
            steps, m), and the recorded (qpos (K, nq), qvel (K, nv), head (K,)) arrays (empty when not recording).
        """
        m, d = self.m, self.d
        ts, targets = self.schedule(p)
        if target_noise is not None:
            targets = np.clip(targets + target_noise, self.lo, self.hi)
        d.qpos[:], d.qvel[:] = self.q0, 0.0
        cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
        w, x, y, z = d.qpos[3:7]
        d.qpos[3:7] = (cy * w - sy * z, cy * x - sy * y, cy * y + sy * x, cy * z + sy * w)  # yaw ⊗ q
        mujoco.mj_forward(m, d)
        best, trace, rec = 0.0, [], ([], [], [])
        steps = int((ts[-1] + tail_s) / m.opt.timestep)
        for k in range(0, steps, 2):
            t = k * m.opt.timestep
            i = min(int(np.searchsorted(ts, t, side="right")) - 1, len(ts) - 2)
            s = float(np.clip((t - ts[i]) / (ts[i + 1] - ts[i]), 0.0, 1.0))
            d.ctrl[:] = targets[i] * (1 - s) + targets[i + 1] * s
            mujoco.mj_step(m, d, nstep=2)
            h = float(d.site_xpos[self.head, 2])
            trace.append(h)
            if record_every and (k // 2) % max(1, record_every // 2) == 0:
                rec[0].append(d.qpos.copy()), rec[1].append(d.qvel.copy()), rec[2].append(h)
            if t <= ts[-3]:
                continue
            if grounded:
                foot = any(
                    m.geom_bodyid[c.geom1] in self.feet or m.geom_bodyid[c.geom2] in self.feet
                    for c in d.contact[: d.ncon]
                )
                if not (foot and abs(d.qvel[2]) < 0.5 and d.qpos[2] < 0.85):
                    continue
            best = max(best, h)
        arrays = (
            tuple(np.asarray(r) for r in rec)
            if record_every
            else (np.empty((0, m.nq)), np.empty((0, m.nv)), np.empty(0))
        )
        return best, trace, arrays


def teacher_states(
    model: mujoco.MjModel,
    default_pose: np.ndarray,
    policy_ids: np.ndarray,
    num_states: int,
    joint_noise: float,
    seed: int,
    params: dict[str, float] | None = None,
    record_every: int = 4,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """States along noisy rollouts of the teacher get-up, until 0.3 s after its last keyframe.

    Each rollout gets a random yaw and U(±joint_noise) rad added to the targets of the policy joints; states are
    recorded every ``record_every`` physics steps; rollouts are added until ``num_states`` are collected.

    Returns:
        qpos (num_states, nq), qvel (num_states, nv) float64 (pelvis near x = y = 0) and head height (num_states,) m.
    """
    params = DEFAULT_PARAMS if params is None else params
    unknown = set(params) ^ set(PARAMS)
    if unknown:
        raise ValueError(f"teacher parameters must be exactly {PARAMS}; mismatched: {sorted(unknown)}")
    p = np.array([params[k] for k in PARAMS])
    teacher = KeyframeGetUp(model, default_pose, policy_ids)
    rng = np.random.default_rng(seed)
    qs, vs, hs = [], [], []
    while sum(len(h) for h in hs) < num_states:
        noise = np.zeros(len(g1.JOINT_NAMES))
        noise[teacher.policy_ids] = rng.uniform(-joint_noise, joint_noise, len(teacher.policy_ids))
        _, _, (q, v, h) = teacher.rollout(
            p, True, noise, float(rng.uniform(-math.pi, math.pi)), record_every, tail_s=0.3
        )
        qs.append(q), vs.append(v), hs.append(h)
    return np.concatenate(qs)[:num_states], np.concatenate(vs)[:num_states], np.concatenate(hs)[:num_states]
