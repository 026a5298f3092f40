"""The lift task's reward terms and groups.

Terms and weights are MuJoCo Playground's ``PandaPickCube`` (``mujoco_playground/_src/manipulation/franka_emika_panda/
pick.py``, ``default_config().reward_config.scales`` and ``_get_reward``): ``gripper_box`` 4, ``box_target`` 8 (gated
on the gripper having reached the cube), ``no_floor_collision`` 0.25, ``robot_target_qpos`` 0.3; upright adds
``grasp`` 4 (ManiSkill ``PickCube``) and ``lifted`` 8 (Isaac Lab ``Isaac-Lift-Cube-Franka``), without which PPO
settles in a reach-and-stay optimum (``docs/lift_learning.md``; ``env.rewards.grasp=0 env.rewards.lifted=0`` gives
Playground's reward). upright splits them
into three groups, one critic each: ``reach`` (gripper to cube), ``lift`` (cube to target) and ``regularization``
(floor contact, posture). Every group sums ``weight * dt * value`` (dt = 0.02 s); each term returns its unweighted
(N,) float32 value.
"""

from __future__ import annotations

import torch

from upright.managers.reward import RewardGroup, RewardTerm
from upright.tasks.lift.state import LiftState
from upright.tasks.quat import quat_to_matrix

REWARD_GROUPS: tuple[RewardGroup, ...] = (
    RewardGroup("reach"),
    RewardGroup("lift"),
    RewardGroup("regularization"),
)
"""Groups in column order."""


def gripper_box(state: LiftState, sharpness: float = 5.0) -> torch.Tensor:
    """``1 - tanh(sharpness * |cube - gripper|)`` (distances in m): 1 at the cube centre, 0.24 at 10 cm (Playground)."""
    return 1.0 - torch.tanh(sharpness * state.gripper_to_cube.norm(dim=-1))


def box_target(state: LiftState, sharpness: float = 5.0, rotation_weight: float = 0.1) -> torch.Tensor:
    """``(1 - tanh(sharpness * (0.9 |target - cube| + 0.1 e_rot))) * reached`` (Playground).

    e_rot = |rows 1-2 of R_cube - rows 1-2 of I| (the target orientation is the identity), dimensionless. The term is 0
    until the gripper has reached the cube this episode (:attr:`LiftState.reached`), so pushing the cube towards the
    target without grasping it earns nothing.
    """
    pos_err = state.cube_to_target.norm(dim=-1)
    rows = quat_to_matrix(state.cube_quat)[:, :2, :].reshape(-1, 6)
    eye = torch.eye(3, device=rows.device)[:2].reshape(6)
    rot_err = (rows - eye).norm(dim=-1)
    value = 1.0 - torch.tanh(sharpness * ((1.0 - rotation_weight) * pos_err + rotation_weight * rot_err))
    return value * state.reached.float()


def no_floor_collision(state: LiftState) -> torch.Tensor:
    """1 when neither the hand capsule nor a fingertip pad touches the floor, else 0 (Playground)."""
    return (~state.floor_contact).float()


def robot_target_qpos(state: LiftState) -> torch.Tensor:
    """``1 - tanh(|q_arm - q_home_arm|)`` over the 7 arm joints (rad): stay near the home posture (Playground)."""
    return 1.0 - torch.tanh((state.q[:, :7] - state.home_q[:7]).norm(dim=-1))


def grasp(state: LiftState, off_floor: bool = False) -> torch.Tensor:
    """1 while both finger pads touch the cube, else 0 (ManiSkill ``PickCube`` dense reward's ``is_grasped`` term).
    Not in Playground (``env.rewards.grasp=0`` removes it). With ``off_floor`` it is also 0 while the hand or a
    fingertip touches the floor (:attr:`LiftState.floor_contact`), so a grasp made by pressing the hand onto the
    table earns nothing."""
    held = state.grasped & ~state.floor_contact if off_floor else state.grasped
    return held.float()


def lifted(state: LiftState, min_height: float = 0.02) -> torch.Tensor:
    """1 while the cube is grasped and its centre is more than ``min_height`` (m) above its start, else 0 (Isaac Lab
    ``Isaac-Lift-Cube-Franka`` ``lifting_object``, which tests the height alone; the grasp gate keeps a tossed cube
    from earning it). Not in Playground (``env.rewards.lifted=0`` removes it)."""
    return (state.grasped & (state.cube_lift > min_height)).float()


def carry(state: LiftState, min_distance: float = 0.05, off_floor: bool = True) -> torch.Tensor:
    """``grasped * off_floor * clip(1 - |target - cube| / |target - cube_start|, 0, 1)``: the fraction of the way from
    the cube's start to the target covered so far, while the cube is held (dimensionless, 0 on the floor, 1 at the
    target).

    Linear in the distance, so each cm of carry earns the same, where ``lifted`` pays a flat bonus for any lift above
    2 cm (holding the cube low then pays as much as carrying it up; ``docs/lift_learning.md``, sessions 9-10) and
    ``box_target``'s tanh is nearly flat 20-40 cm from the target. The start distance is floored at ``min_distance``
    (m) so that a target near the start does not blow the slope up. The grasp gate is ManiSkill ``PickCube``'s
    (``place_reward * is_grasped``); not in Playground (weight 0 by default).

    With ``off_floor`` the term is also 0 while the hand or a fingertip touches the floor
    (:attr:`LiftState.floor_contact`): without that gate, half of the seeds settled in a pose that pressed the hand
    capsule onto the table (~150 N) and tilted the cube 5-7 cm up between the fingers, earning a quarter of the carry
    without ever leaving the floor (``docs/lift_learning.md``, session 12).
    """
    start = (state.target_pos - state.cube_start).norm(dim=-1).clamp_min(min_distance)
    frac = (1.0 - state.cube_to_target.norm(dim=-1) / start).clamp(0.0, 1.0)
    held = state.grasped & ~state.floor_contact if off_floor else state.grasped
    return frac * held.float()


def at_target(state: LiftState, threshold: float = 0.025) -> torch.Tensor:
    """1 while the cube centre is within ``threshold`` (m) of the target, the success test, else 0 (ManiSkill
    ``PickCube``'s dense reward is highest once the goal is reached). Not in Playground; weight 0 by default."""
    return (state.cube_to_target.norm(dim=-1) < threshold).float()


def action_rate(state: LiftState) -> torch.Tensor:
    """``|a_t - a_{t-1}|²`` (dimensionless): not in Playground, weight 0 by default."""
    return (state.action - state.last_action).square().sum(dim=-1)


def lift_reward_terms(weights) -> list[RewardTerm]:
    """The terms with the weights of ``weights`` (:class:`upright.tasks.lift.config.LiftRewardsCfg`)."""
    return [
        RewardTerm("gripper_box", gripper_box, "reach", weights.gripper_box),
        RewardTerm("grasp", grasp, "reach", weights.grasp, {"off_floor": weights.grasp_off_floor}),
        RewardTerm("box_target", box_target, "lift", weights.box_target),
        RewardTerm(
            "box_target_fine", box_target, "lift", weights.box_target_fine, {"sharpness": weights.fine_sharpness}
        ),
        RewardTerm("lifted", lifted, "lift", weights.lifted, {"min_height": weights.lift_height}),
        RewardTerm("carry", carry, "lift", weights.carry, {"off_floor": weights.carry_off_floor}),
        RewardTerm("at_target", at_target, "lift", weights.at_target, {"threshold": weights.at_target_threshold}),
        RewardTerm("no_floor_collision", no_floor_collision, "regularization", weights.no_floor_collision),
        RewardTerm("robot_target_qpos", robot_target_qpos, "regularization", weights.robot_target_qpos),
        RewardTerm("action_rate", action_rate, "regularization", weights.action_rate),
    ]
