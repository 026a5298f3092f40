"""Grasped starts for the lift curriculum: a fraction of training episodes begins with the cube between the fingers.

Why: with the carry reward a policy must discover lifting from the table by exploration, and most seeds settle in a
grasp-and-hold optimum first (``docs/lift_learning.md``, sessions 11-13). Starting some episodes from a state on the
way to success is the reset-to-demonstration idea (Nair et al., "Overcoming Exploration in Reinforcement Learning
with Demonstrations", ICRA 2018, section IV-C; Salimans and Chen, "Learning Montezuma's Revenge from a Single
Demonstration", 2018), here with a state computed from the robot's kinematics instead of a recorded one: the arm
solved by differential IK (:class:`upright.tasks.lift.ik.DifferentialIK`, hand pointing down, fingers' closing axis
along world y, which is the cube's face normal at its start orientation) so that the gripper site sits at the cube
centre, each finger open by the cube's half width plus :data:`FINGER_CLEARANCE` and commanded closed. The cube rests
on the table as in a normal start. Nothing of it is observable by the policy or needed on a robot: it only changes
which states training visits. Evaluation (curriculum off) never uses it.
"""

from __future__ import annotations

import numpy as np
import torch

IK_ITERATIONS = 40
"""Damped least-squares iterations from the home pose."""
IK_STEP = 0.05
"""Largest site translation per iteration, m."""
IK_TOLERANCE = 0.005
"""A solve farther than this from the cube centre (m; far cubes beyond the hand-down reach) falls back to a normal
start."""
FINGER_CLEARANCE = 0.001
"""Gap between each pad and the cube face at the start, m: the closed command squeezes within the first env step."""


def solve_grasp_arm(ik, home_q: torch.Tensor, site_goal: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Arm angles that put the gripper site at ``site_goal`` (M, 3) m (world frame), hand down.

    Args:
        ik: a :class:`~upright.tasks.lift.ik.DifferentialIK` of the lift scene.
        home_q: (7,) rad, the start of the iterations.
        site_goal: (M, 3) float32, m.

    Returns:
        ``q`` (M, 7) float32 rad and ``ok`` (M,) bool: the solve ended within :data:`IK_TOLERANCE` of the goal.
    """
    q = home_q.detach().cpu().float().expand(site_goal.shape[0], 7).clone()
    goal = site_goal.detach().cpu().double().numpy()
    for _ in range(IK_ITERATIONS):
        frames = ik.site_frames(q.double().numpy())
        err = goal - frames[0]
        norm = np.linalg.norm(err, axis=1, keepdims=True)
        step = err * np.minimum(1.0, IK_STEP / np.maximum(norm, 1e-9))
        q = q + ik.joint_step(q, torch.as_tensor(step, dtype=torch.float32), frames=frames)
    pos = ik.site_frames(q.double().numpy())[0]
    ok = torch.as_tensor(np.linalg.norm(goal - pos, axis=1) < IK_TOLERANCE)
    return q.to(site_goal.device), ok.to(site_goal.device)
