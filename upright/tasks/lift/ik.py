"""Differential inverse kinematics for the lift task's Cartesian action mode (``env.action_mode=ee_delta``).

The policy commands a translation of the gripper site, d ∈ R³ (world frame, m), per env step; the arm's position
targets move by the joint step that realises it while the hand keeps its home orientation (pointing down, fingers'
closing axis along world y). This is Isaac Lab's ``DifferentialInverseKinematicsActionCfg`` in relative mode
(``Isaac-Lift-Cube-Franka-IK-Rel-v0``) and ManiSkill's ``pd_ee_delta_pos`` controller, on MuJoCo's site Jacobians.

With q_c the 7 commanded arm angles (the arm's current position targets, rad), J (6 x 7) the gripper site's
Jacobian at q_c (``mj_jacSite``; rotation rows expressed in the site frame), e_r the site-frame rotation vector from
the site's orientation at q_c to the home orientation, W = diag(1, 1, 1, w_tilt, w_tilt, w_yaw) and λ the damping:

    Δq = (WJ)ᵀ (WJ (WJ)ᵀ + λ² I)⁻¹ W [d; e_r] + (I - J⁺J) k_null (q_home - q_c)

(J⁺ the pseudo-inverse; damped least squares, Buss 2004 "Introduction to inverse kinematics with Jacobian transpose,
pseudoinverse and damped least squares methods", section 6; the posture term stays in the Jacobian's null space). The
tilt weight is small because the cubes and targets far out (x ≈ 0.85-0.9 m) are beyond the Panda's reach with the hand
pointing straight down; the scripted expert (:mod:`upright.tasks.lift.expert`) uses the same weights.

Everything is computed on the commanded configuration, not the measured one, so the PD's lag does not feed back into
the IK and the result depends on nothing but the robot's own kinematic model and targets: a real Panda runs the same
computation from its model (libfranka exposes the same Jacobian).
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from upright.policy_io.kinematics import (  # noqa: F401  (bound_lead*: re-exported for the action term)
    KinematicChain,
    Link,
    bound_lead,
    bound_lead_down,
    dls_joint_step,
    orientation_error,
)
from upright.robots import panda

IK_DAMPING = 0.05
"""λ of the damped least squares (the expert's value)."""
IK_ROTATION_WEIGHTS = (0.03, 0.03, 1.0)
"""Weights of the orientation error about the site's (x, y, z) axes: tilts cheap, yaw held (the expert's
``approach`` weights)."""
IK_NULL_GAIN = 0.05
"""k_null of the posture term toward the home arm angles, per env step."""


class DifferentialIK:
    """Batched differential IK of the Panda's gripper site (module docstring) on a private ``MjData``.

    Args:
        model: the lift scene (:func:`upright.tasks.lift.scene.lift_scene`); only its kinematics are used.
        damping, rotation_weights, null_gain: λ, (w_tilt, w_tilt, w_yaw) and k_null (module constants by default).

    Raises:
        ValueError: the model lacks the gripper site.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        damping: float = IK_DAMPING,
        rotation_weights: tuple[float, float, float] = IK_ROTATION_WEIGHTS,
        null_gain: float = IK_NULL_GAIN,
    ):
        self.model = model
        self.data = mujoco.MjData(model)
        self.site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, panda.GRIPPER_SITE)
        if self.site < 0:
            raise ValueError(f"the model has no site '{panda.GRIPPER_SITE}'; load it with upright.tasks.lift.scene")
        self.damping, self.null_gain = float(damping), float(null_gain)
        self.weights = np.concatenate([np.ones(3), np.asarray(rotation_weights, dtype=np.float64)])
        self.home = np.asarray(panda.HOME_QPOS[:7], dtype=np.float64)
        self.home_rotation = self.site_frames(self.home[None])[1][0]
        """(3, 3) the site's orientation at the home pose (site-to-world): the orientation the IK holds."""

    def site_frames(self, q_arm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Site positions (N, 3) m, orientations (N, 3, 3) and arm Jacobians (N, 6, 7) (translation rows in the world
        frame, rotation rows in the site frame) at arm angles ``q_arm`` (N, 7) rad, float64."""
        m, d = self.model, self.data
        n = q_arm.shape[0]
        pos, rot, jac = np.empty((n, 3)), np.empty((n, 3, 3)), np.empty((n, 6, 7))
        jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        for i in range(n):
            d.qpos[:7] = q_arm[i]
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_jacSite(m, d, jacp, jacr, self.site)
            r = d.site_xmat[self.site].reshape(3, 3)
            pos[i], rot[i] = d.site_xpos[self.site], r
            jac[i, :3], jac[i, 3:] = jacp[:, :7], r.T @ jacr[:, :7]
        return pos, rot, jac

    def gravity_torques(self, q_arm: torch.Tensor, finger: torch.Tensor | None = None) -> torch.Tensor:
        """(N, 7) float32 N·m: the arm's joint torques that hold ``q_arm`` (N, 7) rad still against gravity (``mj_rne``
        at zero velocity and acceleration; the cube and any payload not included), with both fingers at ``finger``
        (N,) m (None: closed), on ``q_arm``'s device."""
        m, d = self.model, self.data
        q = q_arm.detach().cpu().double().numpy()
        f = np.zeros(len(q)) if finger is None else finger.detach().cpu().double().numpy()
        out = np.empty((len(q), 7))
        bias = np.zeros(m.nv)
        d.qvel[:] = 0.0
        for i in range(len(q)):
            d.qpos[:7] = q[i]
            d.qpos[7:9] = f[i]
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_comVel(m, d)
            mujoco.mj_rne(m, d, 0, bias)
            out[i] = bias[:7]
        return torch.as_tensor(out, dtype=torch.float32, device=q_arm.device)

    def joint_step(
        self,
        q_arm: torch.Tensor,
        translation: torch.Tensor,
        min_height: float | None = None,
        frames: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> torch.Tensor:
        """Δq (N, 7) rad that moves the site by ``translation`` (N, 3) m (world frame) from arm angles ``q_arm``
        (N, 7) rad and turns it toward the home orientation; float32 on ``q_arm``'s device.

        ``min_height`` (m, world z; None: no bound): the translation's z is raised where it would take the site of
        ``q_arm`` below this height (a workspace floor on the commanded pose; a site already below it is moved up).
        ``frames``: :meth:`site_frames` of ``q_arm`` when the caller has them already (None: computed here)."""
        q = q_arm.detach().cpu().double().numpy()
        dx = translation.detach().cpu().double().numpy()
        frames = self.site_frames(q) if frames is None else frames
        dq = dls_joint_step(
            q, dx, frames, self.home, self.home_rotation, self.weights, self.damping, self.null_gain, min_height
        )
        return torch.as_tensor(dq, dtype=torch.float32, device=q_arm.device)


def chain_from_model(model: mujoco.MjModel) -> KinematicChain:
    """The Panda's kinematic chain (link0 to the hand and both fingers, with masses and centres of mass) and its
    gripper site, from the compiled lift scene: what a policy file carries (``kinematic_chain``) so that the deploy
    daemon computes the IK without MuJoCo (:mod:`upright.policy_io.kinematics`). q = the 9 Panda joints
    (:data:`upright.robots.panda.JOINT_NAMES` order: 7 arm hinges, 2 finger slides).

    Raises:
        ValueError: the model lacks a Panda body, joint or the gripper site, or a body has more than one joint.
    """
    root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "link0")
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, panda.GRIPPER_SITE)
    if root < 0 or site < 0:
        raise ValueError("the model has no Panda link0 or gripper site; load it with upright.tasks.lift.scene")
    bodies = [root] + [b for b in range(root + 1, model.nbody) if _descends(model, b, root)]
    index = {b: i for i, b in enumerate(bodies)}
    joint_q = {name: k for k, name in enumerate(panda.JOINT_NAMES)}
    links = []
    for b in bodies:
        if model.body_jntnum[b] > 1:
            raise ValueError(f"body {model.body(b).name!r} has {model.body_jntnum[b]} joints; the chain takes one")
        jtype, axis, anchor, q_index = "fixed", np.zeros(3), np.zeros(3), -1
        if model.body_jntnum[b] == 1:
            j = model.body_jntadr[b]
            jtype = {int(mujoco.mjtJoint.mjJNT_HINGE): "hinge", int(mujoco.mjtJoint.mjJNT_SLIDE): "slide"}[
                int(model.jnt_type[j])
            ]
            axis, anchor, q_index = model.jnt_axis[j].copy(), model.jnt_pos[j].copy(), joint_q[model.joint(j).name]
        links.append(
            Link(
                name=model.body(b).name,
                parent=index.get(int(model.body_parentid[b]), -1),
                pos=model.body_pos[b].copy(),
                quat=model.body_quat[b].copy(),
                joint_type=jtype,
                axis=axis,
                anchor=anchor,
                q_index=q_index,
                mass=float(model.body_mass[b]),
                com=model.body_ipos[b].copy(),
            )
        )
    return KinematicChain(
        links,
        index[int(model.site_bodyid[site])],
        model.site_pos[site].copy(),
        model.site_quat[site].copy(),
        model.opt.gravity.copy(),
        len(panda.JOINT_NAMES),
    )


def _descends(model: mujoco.MjModel, body: int, root: int) -> bool:
    while body > 0:
        if body == root:
            return True
        body = int(model.body_parentid[body])
    return False
