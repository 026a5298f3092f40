"""A scripted pick-and-lift expert for the lift env: Cartesian waypoints for the gripper site, tracked by damped
least-squares IK on MuJoCo's site Jacobians (``mj_jacSite``), acting through the env's own action interface (delta
position targets, |a| ≤ 1).

Phases per env (each with a step budget, after which it moves on):

1. ``approach``: site to 6 cm above the cube centre, fingers open, hand pointing down (site z axis = world -z) with
   the fingers' closing axis (site y) along the cube face normal nearest to it.
2. ``descend``: site to :data:`DESCEND_DEPTH` below the cube centre, same orientation.
3. ``grasp``: hold still and close the fingers for :data:`GRASP_STEPS` env steps.
4. ``lift``: move the site so that the cube centre (held at its grasp offset from the site) goes to the target, and
   hold it there.

IK runs on a commanded configuration q_c (7 arm angles) rather than on the measured one, so the PD's lag behind a
moving target does not feed back into the IK step, and the position targets hold q_c against gravity exactly:
ctrl = q_c + g(q_c) / Kp, with g the gravity torques at q_c (``mj_rne`` at zero velocity) and Kp the nominal gains
(:data:`upright.robots.panda.KP`). With p_c the site position at q_c, e_p = k (goal - p_c) (k =
:data:`APPROACH_GAIN`, capped at ``max_step`` m: the commanded site slows down exponentially near a waypoint, since
the arm's PD is underdamped and overshoots a dead stop) and e_r the rotation vector from the site's orientation at
q_c to the desired one, expressed in the site frame with weights (tilt, tilt, yaw) :data:`ROTATION_WEIGHT` per
phase. With J the 6 x 7 site Jacobian at q_c (rotation rows in the site frame) and W the weights,
Δq = (WJ)ᵀ (WJ (WJ)ᵀ + λ² I)⁻¹ W [e_p, e_r] + (I - J⁺J) k_null (q_home - q_c) (J⁺ the exact pseudo-inverse, so
the posture term stays out of the task space), q_c ← q_c + Δq, and the action is (ctrl(q_c) - ctrl) / action_scale,
clipped to ±1. λ = 0.05 damps singular poses. While lifting, the goal is recomputed every step from the cube's
measured offset in the hand (goal = target - (cube - p_measured)), so a cube held off-centre is still delivered.
"""

from __future__ import annotations

import numpy as np
import torch

from upright.robots import panda
from upright.tasks.lift.ik import DifferentialIK, orientation_error
from upright.tasks.quat import quat_to_matrix

APPROACH, DESCEND, GRASP, LIFT = 0, 1, 2, 3
PHASE_NAMES = ("approach", "descend", "grasp", "lift")
GRASP_STEPS = 8
"""Env steps with the fingers closing before the lift (0.16 s: the finger target falls 0.04 m per step)."""
APPROACH_HEIGHT = 0.06
"""Height of the approach waypoint above the cube centre, m."""
PHASE_BUDGET = (60, 20, GRASP_STEPS, 10_000)
"""Most env steps per phase before moving on anyway."""
APPROACH_GAIN = 0.3
"""The targets' site moves this fraction of the remaining error per env step (capped at ``max_step``), so it
slows down exponentially near a waypoint instead of stopping dead (the arm then overshoots by ~1.5 cm)."""
ROTATION_WEIGHT = ((0.03, 0.03, 1.0), (0.03, 0.03, 1.0), (0.03, 0.03, 1.0), (0.03, 0.03, 0.3))
"""Weights of the orientation error about the site's (x, y, z) axes, per phase: yaw (z, aligning the fingers with
the cube's faces) matters most; tilts are cheap, because the cubes and targets far out (x ≈ 0.85-0.9 m) are beyond
the Panda's reach with the hand pointing straight down (they need 27-60 deg of tilt: a position-only IK check of
this scene)."""
DESCEND_DEPTH = 0.0
"""The descend waypoint is this far below the cube centre, m (the pads close around the cube's middle)."""


class ScriptedExpert:
    """Scripted pick-and-lift for every env of a :class:`~upright.tasks.lift.env.LiftEnv`.

    Args:
        env: the lift env (its model, state and action scale are read).
        max_step: largest Cartesian step of the site per env step, m (0.015 m: 0.75 m/s).
        damping: λ of the damped least squares.
        null_gain: k_null of the posture term in the Jacobian's null space.

    Raises:
        ValueError: the env's actions are not the 8 position-target deltas (``env.action_mode=ee_delta``).
    """

    def __init__(self, env, max_step: float = 0.015, damping: float = 0.05, null_gain: float = 0.05):
        if env.num_actions != 8:
            raise ValueError(
                f"the scripted expert acts on the 8 position targets (env.action_mode=delta); the env "
                f"has env.action_mode={env.cfg.action_mode}: drop that override"
            )
        self.env = env
        self.model = env.model
        self.ik = DifferentialIK(self.model)
        """Kinematics (site frames) and gravity torques of the scene; its own IK step is not used (the expert's
        orientation goal follows the cube)."""
        self.max_step, self.damping, self.null_gain = max_step, damping, null_gain
        n = env.num_envs
        self.phase = np.zeros(n, dtype=np.int64)
        """(N,) current phase of each env (:data:`PHASE_NAMES`)."""
        self.phase_steps = np.zeros(n, dtype=np.int64)
        self.grasp_offset = np.zeros((n, 3))
        """(N, 3) cube centre minus site at the end of the grasp, m."""
        self.home = np.asarray(panda.HOME_QPOS[:7])
        self.q_cmd = np.full((n, 7), np.nan)
        """(N, 7) commanded arm configuration q_c, rad (NaN: taken from the measured one at the next step)."""
        self.kp = np.asarray(panda.KP[:7])
        self.hold = np.zeros((n, 3))
        """(N, 3) site goal while grasping (where the descent ended), m."""

    def reset(self, env_ids) -> None:
        """Start over (phase ``approach``) in ``env_ids``."""
        ids = np.asarray(torch.as_tensor(env_ids).cpu())
        self.phase[ids] = APPROACH
        self.phase_steps[ids] = 0
        self.q_cmd[ids] = np.nan

    def _desired_rotation(self, r_cur: np.ndarray, cube_rot: np.ndarray) -> np.ndarray:
        """Site pointing down, its y axis (the fingers' closing axis) along the cube's horizontal face normal nearest
        to the current one."""
        z = np.array([0.0, 0.0, -1.0])
        normals = [cube_rot[:, 0], cube_rot[:, 1], -cube_rot[:, 0], -cube_rot[:, 1]]
        normals = [n - n.dot(z) * z for n in normals]
        y = max(normals, key=lambda n: float(n.dot(r_cur[:, 1])) / (np.linalg.norm(n) + 1e-9))
        y = y / np.linalg.norm(y)
        x = np.cross(y, z)
        return np.stack([x, y, z], axis=1)

    def act(self) -> torch.Tensor:
        """Actions (N, 8) float32 for the env's current state; advances each env's phase."""
        env = self.env
        s = env.state
        q = s.q.detach().cpu().double().numpy()
        ctrl = env.ctrl.detach().cpu().double().numpy()
        cube = s.cube_pos.detach().cpu().double().numpy()
        cube_rot = quat_to_matrix(s.cube_quat).detach().cpu().double().numpy()
        target = s.target_pos.detach().cpu().double().numpy()
        scale = float(env.cfg.action_scale)
        lower, upper = env.ctrl_lower[:7].cpu().numpy(), env.ctrl_upper[:7].cpu().numpy()
        actions = np.zeros((env.num_envs, 8))
        fresh = np.isnan(self.q_cmd[:, 0])
        self.q_cmd[fresh] = q[fresh, :7]
        measured_all = self.ik.site_frames(q[:, :7])[0]
        pos_all, rot_all, jac_all = self.ik.site_frames(self.q_cmd)  # rotation rows in the site frame
        for i in range(env.num_envs):
            measured, pos, rot, jac = measured_all[i], pos_all[i], rot_all[i], jac_all[i]
            r_des = self._desired_rotation(rot, cube_rot[i])
            rot_err = rot.T @ orientation_error(rot[None], r_des[None])[0]  # site frame
            phase = self.phase[i]
            if phase == APPROACH:
                goal = cube[i] + np.array([0.0, 0.0, APPROACH_HEIGHT])
                done = np.linalg.norm(goal - measured) < 0.015 and abs(rot_err[2]) < 0.1
            elif phase == DESCEND:
                goal = cube[i] - np.array([0.0, 0.0, DESCEND_DEPTH])
                done = np.abs(goal - measured).max() < 0.008
            elif phase == GRASP:
                goal = self.hold[i]
                done = self.phase_steps[i] + 1 >= GRASP_STEPS
            else:
                goal = target[i] - (cube[i] - measured)
                done = False
            self.phase_steps[i] += 1
            if phase < LIFT and (done or self.phase_steps[i] >= PHASE_BUDGET[phase]):
                if phase == DESCEND:
                    self.hold[i] = pos
                self.phase[i], self.phase_steps[i] = phase + 1, 0
            err = goal - pos
            norm = np.linalg.norm(err)
            step = min(self.max_step, APPROACH_GAIN * norm)
            err = err * (step / max(norm, 1e-12))
            w = np.concatenate([np.ones(3), ROTATION_WEIGHT[self.phase[i]]])
            e, jw = w * np.concatenate([err, rot_err]), w[:, None] * jac
            dq = jw.T @ np.linalg.solve(jw @ jw.T + self.damping**2 * np.eye(6), e)
            dq += (np.eye(7) - np.linalg.pinv(jac) @ jac) @ (self.null_gain * (self.home - self.q_cmd[i]))
            self.q_cmd[i] = np.clip(self.q_cmd[i] + dq, lower, upper)
            actions[i, 7] = 1.0 if self.phase[i] < GRASP else -1.0
        fingers = torch.as_tensor(q[:, 7:9].mean(axis=1))
        gravity = self.ik.gravity_torques(torch.as_tensor(self.q_cmd), fingers).double().numpy()
        actions[:, :7] = (self.q_cmd + gravity / self.kp - ctrl[:, :7]) / scale
        return torch.as_tensor(np.clip(actions, -1.0, 1.0), dtype=torch.float32, device=env.device)
