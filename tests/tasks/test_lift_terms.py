"""Lift reward, termination and observation terms on hand-built states (values by hand), and the lift curriculum's
level-to-range mapping and rules."""

from __future__ import annotations

import math

import pytest
import torch

from upright.tasks.lift import observations as obs
from upright.tasks.lift import rewards, terminations
from upright.tasks.lift.config import LiftEnvCfg, LiftRewardsCfg
from upright.tasks.lift.curriculum import lift_curriculum, reset_ranges
from upright.tasks.lift.state import LiftState


def close(actual, expected):
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=torch.float32), rtol=1e-5, atol=1e-6)


def quat_z(angle: float) -> torch.Tensor:
    return torch.tensor([math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)])


# --- rewards: one test per term ------------------------------------------------------------------------------


def test_gripper_box():
    s = LiftState.zeros(3)
    s.cube_pos[:, 0] = torch.tensor([0.0, 0.1, 1.0])
    close(rewards.gripper_box(s), [1.0, 1 - math.tanh(0.5), 1 - math.tanh(5.0)])


def test_box_target_is_gated_on_reach_and_counts_rotation():
    s = LiftState.zeros(3)
    s.target_pos[:, 2] = 0.1  # cube 0.1 m below its target
    s.reached[:] = torch.tensor([False, True, True])
    s.cube_quat[2] = quat_z(math.pi / 2)  # 90 deg about z: rows 1-2 of R differ from I by |(-1,1,0,-1,-1,0)|... = 2
    expected_pos = 1 - math.tanh(5 * 0.9 * 0.1)
    expected_rot = 1 - math.tanh(5 * (0.9 * 0.1 + 0.1 * 2.0))
    close(rewards.box_target(s), [0.0, expected_pos, expected_rot])


def test_no_floor_collision():
    s = LiftState.zeros(2)
    s.floor_contact[1] = True
    close(rewards.no_floor_collision(s), [1.0, 0.0])


def test_robot_target_qpos_counts_arm_joints_only():
    s = LiftState.zeros(3)
    s.q[1, 0] += 0.3
    s.q[1, 1] -= 0.4  # |(0.3, -0.4)| = 0.5
    s.q[2, 7:] = 0.0  # fingers closed: not part of the posture term
    close(rewards.robot_target_qpos(s), [1.0, 1 - math.tanh(0.5), 1.0])


def test_action_rate():
    s = LiftState.zeros(2)
    s.action[1, :2] = torch.tensor([1.0, -1.0])
    s.last_action[1, :2] = torch.tensor([0.5, 0.0])
    close(rewards.action_rate(s), [0.0, 0.25 + 1.0])


def test_reward_terms_use_config_weights_and_groups():
    terms = rewards.lift_reward_terms(LiftRewardsCfg(gripper_box=1.5))
    by_key = {t.key: t.weight for t in terms}
    assert by_key == {
        "reach/gripper_box": 1.5,
        "lift/box_target": 8.0,
        "regularization/no_floor_collision": 0.25,
        "regularization/robot_target_qpos": 0.3,
        "regularization/action_rate": 0.0,
        "reach/grasp": 4.0,
        "lift/lifted": 8.0,
        "lift/at_target": 0.0,
        "lift/carry": 0.0,
        "lift/box_target_fine": 0.0,
    }
    lifted = next(t for t in rewards.lift_reward_terms(LiftRewardsCfg(lift_height=0.05)) if t.name == "lifted")
    assert lifted.params == {"min_height": 0.05}
    fine = next(
        t for t in rewards.lift_reward_terms(LiftRewardsCfg(fine_sharpness=30.0)) if t.name == "box_target_fine"
    )
    assert fine.func is rewards.box_target and fine.params == {"sharpness": 30.0}


def test_grasp_needs_both_pads_on_the_cube():
    s = LiftState.zeros(4)
    s.pad_contact[:] = torch.tensor([[False, False], [True, False], [False, True], [True, True]])
    assert rewards.grasp(s).tolist() == [0.0, 0.0, 0.0, 1.0]


def test_at_target_is_the_success_test():
    s = LiftState.zeros(3)
    s.target_pos[:] = torch.tensor([0.7, 0.0, 0.3])
    s.cube_pos[:] = torch.tensor([[0.7, 0.0, 0.3], [0.7, 0.024, 0.3], [0.7, 0.0, 0.274]])
    assert rewards.at_target(s, threshold=0.025).tolist() == [1.0, 1.0, 0.0]
    assert rewards.at_target(s, threshold=0.01).tolist() == [1.0, 0.0, 0.0]


def test_carry_is_the_fraction_covered_while_grasped():
    s = LiftState.zeros(5)
    s.target_pos[:, 2] = 0.3  # start 0.3 m below the target
    s.cube_pos[:, 2] = torch.tensor([0.0, 0.15, 0.3, 0.45, 0.15])
    s.pad_contact[:4] = True  # env 4 not grasped
    close(rewards.carry(s), [0.0, 0.5, 1.0, 0.5, 0.0])
    s2 = LiftState.zeros(1)
    s2.target_pos[:, 2] = 0.01  # start 1 cm from the target: the slope uses the 5 cm floor
    s2.pad_contact[:] = True
    close(rewards.carry(s2, min_distance=0.05), [1.0 - 0.01 / 0.05])


def test_carry_pays_nothing_while_the_hand_touches_the_floor():
    s = LiftState.zeros(3)
    s.target_pos[:, 2] = 0.3
    s.cube_pos[:, 2] = 0.075  # a quarter of the way up, grasped in every env
    s.pad_contact[:] = True
    s.floor_contact[:] = torch.tensor([False, True, True])  # envs 1-2: the hand leans on the table
    close(rewards.carry(s), [0.25, 0.0, 0.0])
    close(rewards.carry(s, off_floor=False), [0.25, 0.25, 0.25])  # session 11's ungated term


def test_grasp_gated_off_the_floor_pays_nothing_while_the_hand_touches_it():
    s = LiftState.zeros(3)
    s.pad_contact[:] = torch.tensor([[True, True], [True, True], [True, False]])
    s.floor_contact[:] = torch.tensor([False, True, False])  # env 1 grasps with the hand pressed on the table
    close(rewards.grasp(s), [1.0, 1.0, 0.0])
    close(rewards.grasp(s, off_floor=True), [1.0, 0.0, 0.0])


def test_lifted_needs_a_grasp_and_the_height():
    s = LiftState.zeros(4)
    s.cube_start[:, 2] = 0.03
    s.cube_pos[:, 2] = torch.tensor([0.06, 0.06, 0.045, 0.2])
    s.pad_contact[:] = torch.tensor([[True, True], [True, False], [True, True], [False, False]])
    # grasped and 3 cm up; one pad only; grasped but 1.5 cm up; tossed (high but not held)
    assert rewards.lifted(s, min_height=0.02).tolist() == [1.0, 0.0, 0.0, 0.0]


# --- terminations and success -----------------------------------------------------------------------------------


def test_cube_out_of_bounds():
    s = LiftState.zeros(4)
    s.cube_pos[:] = torch.tensor([[0.7, 0.0, 0.03], [1.01, 0.0, 0.03], [0.7, -1.2, 0.03], [0.7, 0.0, -0.001]])
    assert terminations.cube_out_of_bounds(s).tolist() == [False, True, True, True]


def test_non_finite_and_joint_limit_violation():
    s = LiftState.zeros(3)
    s.dq[1, 2] = float("nan")
    s.q[2, 3] = 0.0  # joint4 at 0 rad: MuJoCo's qpos0 after a divergence, outside [-3.07, -0.07]
    assert terminations.non_finite(s).tolist() == [False, True, False]
    lower = torch.tensor([-2.9, -1.76, -2.9, -3.07, -2.9, -0.02, -2.9, 0.0, 0.0])
    upper = torch.tensor([2.9, 1.76, 2.9, -0.0698 - 0.1 + 0.05, 2.9, 3.75, 2.9, 0.04, 0.04])
    assert terminations.joint_limit_violation(s, lower, upper, margin=0.1).tolist() == [False, False, True]


def test_success_threshold_is_maniskill_goal_thresh():
    s = LiftState.zeros(3)
    s.target_pos[:, 2] = torch.tensor([0.024, 0.026, 0.0])
    assert terminations.success(s).tolist() == [True, False, True]
    assert LiftEnvCfg().success_threshold == 0.025


# --- observations -------------------------------------------------------------------------------------------


def test_observation_terms_have_the_documented_widths():
    s = LiftState.zeros(2)
    assert [t.func(s).shape[1] for t in obs.OBSERVATION_TERMS] == list(obs.OBSERVATION_DIMS)
    assert sum(obs.OBSERVATION_DIMS) == 49


def test_cube_orientation_is_the_first_two_matrix_columns():
    s = LiftState.zeros(1)
    s.cube_quat[0] = quat_z(math.pi / 2)  # x axis -> world y, y axis -> world -x
    close(obs.cube_orientation(s), [[0.0, 1.0, 0.0, -1.0, 0.0, 0.0]])


def test_vectors_point_from_gripper_to_cube_to_target():
    s = LiftState.zeros(1)
    s.gripper_pos[0] = torch.tensor([0.5, 0.0, 0.3])
    s.cube_pos[0] = torch.tensor([0.7, 0.1, 0.03])
    s.target_pos[0] = torch.tensor([0.6, 0.0, 0.33])
    close(obs.gripper_to_cube(s), [[0.2, 0.1, -0.27]])
    close(obs.cube_to_target(s), [[-0.1, -0.1, 0.3]])


# --- curriculum: level -> ranges, and the rules' parameters ------------------------------------------------------


def test_levels_map_to_reset_ranges():
    cfg = LiftEnvCfg()
    r = reset_ranges(cfg, torch.tensor([0.0, 1.0, 0.5]))
    close(r["cube_xy"], [0.05, 0.2, 0.125])
    close(r["target_xy"], [0.05, 0.2, 0.125])
    close(r["target_height_max"], [0.25, 0.4, 0.325])
    close(r["target_height_min"], [0.2, 0.2, 0.2])
    cfg.curriculum.target_height_min_start, cfg.curriculum.target_height_max_start = 0.05, 0.1
    r = reset_ranges(cfg, torch.tensor([0.0, 1.0, 0.5]))
    close(r["target_height_min"], [0.05, 0.2, 0.125])
    close(r["target_height_max"], [0.1, 0.4, 0.25])


def test_low_start_targets_are_drawn_in_the_level_0_range():
    from upright.tasks.lift.env import LiftEnv
    from upright.tasks.standup.config import SimCfg

    cfg = LiftEnvCfg(num_envs=64)
    cfg.curriculum.target_height_min_start, cfg.curriculum.target_height_max_start = 0.05, 0.1
    env = LiftEnv(cfg, SimCfg(num_threads=1), seed=0)
    cube, target = env.sample_reset(torch.arange(64))
    rise = target[:, 2] - cube[:, 2]
    assert rise.min() >= 0.05 - 1e-6 and rise.max() <= 0.1 + 1e-6 and rise.max() - rise.min() > 0.03
    env.close()


def test_lift_curriculum_rules_use_the_config_steps():
    cfg = LiftEnvCfg()
    c = lift_curriculum(cfg, 3, "cpu")
    c.level[:] = 0.5
    c.on_episode_end(torch.tensor([0, 1]), torch.tensor([True, False]))
    close(c.level, [0.52, 0.42, 0.5])


def test_lift_curriculum_refuses_a_start_wider_than_the_task():
    cfg = LiftEnvCfg()
    cfg.curriculum.cube_xy_start = 0.3
    with pytest.raises(ValueError, match="cube_xy_start"):
        lift_curriculum(cfg, 1, "cpu")
