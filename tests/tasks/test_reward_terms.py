"""Unit tests of the HoST standup reward terms on hand-built states (values computed by hand)."""

import math

import pytest
import torch

from upright.managers.reward import RewardManager, RewardTerm
from upright.tasks.standup.joints import joint_ids
from upright.tasks.standup.rewards import (
    GROUP_WEIGHTS,
    GROUPS,
    REWARD_GROUPS,
    post_task,
    regularization,
    standup_reward_terms,
    style,
    task,
)
from upright.tasks.standup.rewards.tolerance import tolerance
from upright.tasks.standup.state import StandupState


def close(actual, expected):
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=torch.float32), rtol=1e-5, atol=1e-6)


def jid(name):
    (i,) = joint_ids(name)
    return i


# --- helpers -----------------------------------------------------------------------------------


def test_joint_ids_by_name_and_regex():
    assert joint_ids("left_hip_pitch_joint") == [0]
    assert joint_ids(["right_knee_joint", "left_knee_joint"]) == [9, 3]  # pattern order kept
    assert joint_ids(["waist_yaw_joint", ".*_wrist_roll_joint"]) == [12, 17, 22]
    with pytest.raises(ValueError):
        joint_ids("no_such_joint")


def test_tolerance():
    x = torch.tensor([1.5, 1.0, 0.5, 0.0, 3.0, 2.5])
    # bounds [1, 2], margin 1, v = 0.1: value = v ** (d^2), d = distance / margin.
    close(tolerance(x, 1.0, 2.0, 1.0, 0.1), [1.0, 1.0, 0.1**0.25, 0.1, 0.1, 0.1**0.25])
    close(tolerance(torch.tensor([-1.0]), 0.0, math.inf, 2.0, 0.5), [0.5**0.25])


# --- task --------------------------------------------------------------------------------------


def test_head_height():
    s = StandupState.zeros(3)
    s.head_pos[:, 2] = torch.tensor([1.2, 0.5, 1.1])
    s.feet_pos[2, :, 2] = torch.tensor([0.1, 0.3])  # mean foot z 0.2 -> h = 0.9
    close(task.head_height(s), [1.0, 0.1**0.25, 0.1**0.01])


def test_task_orientation():
    s = StandupState.zeros(3)
    s.projected_gravity[1] = torch.tensor([1.0, 0.0, 0.0])  # lying: -g_z = 0, d = 0.99
    s.projected_gravity[2] = torch.tensor([0.0, 0.0, 1.0])  # upside down: -g_z = -1, d = 1.99
    close(task.orientation(s), [1.0, 0.05 ** (0.99**2), 0.05 ** (1.99**2)])


# --- style -------------------------------------------------------------------------------------


def test_waist_yaw_deviation():
    s = StandupState.zeros(4)
    w = jid("waist_yaw_joint")
    s.q[0, w], s.q[1, w], s.q[2, w] = 1.5, -1.5, 1.3
    s.q[3, jid("left_hip_yaw_joint")] = 2.0  # another joint: ignored
    close(style.waist_yaw_deviation(s, joint_ids=[w], threshold=1.4), [1.0, 1.0, 0.0, 0.0])


@pytest.mark.parametrize("kind", ["yaw", "roll"])
def test_hip_deviation(kind):
    func = style.hip_yaw_deviation if kind == "yaw" else style.hip_roll_deviation
    other = "roll" if kind == "yaw" else "yaw"
    ids = joint_ids([f"left_hip_{kind}_joint", f"right_hip_{kind}_joint"])
    s = StandupState.zeros(5)
    s.q[:, ids] = torch.tensor([[1.5, 0.0], [0.95, -0.95], [1.3, 0.5], [0.95, 0.0], [0.0, 0.0]])
    s.q[4, jid(f"left_hip_{other}_joint")] = 2.0  # the other hip joint: ignored
    close(func(s, joint_ids=ids, max_threshold=1.4, min_threshold=0.9), [1.0, 1.0, 0.0, 0.0, 0.0])


def test_knee_deviation():
    ids = joint_ids(["left_knee_joint", "right_knee_joint"])
    s = StandupState.zeros(4)
    s.q[:, ids] = torch.tensor([[2.9, 0.0], [0.5, -0.1], [2.8, -0.05], [0.0, 3.0]])
    close(style.knee_deviation(s, joint_ids=ids, max_threshold=2.85, min_threshold=-0.06), [1.0, 1.0, 0.0, 1.0])


def test_shoulder_roll_deviation():
    ids = joint_ids(["left_shoulder_roll_joint", "right_shoulder_roll_joint"])
    s = StandupState.zeros(4)
    s.q[:, ids] = torch.tensor([[-0.03, 0.0], [0.0, 0.03], [0.5, -0.5], [0.03, -0.03]])
    close(style.shoulder_roll_deviation(s, joint_ids=ids, threshold=0.02), [1.0, 1.0, 0.0, 0.0])


def test_foot_displacement():
    s = StandupState.zeros(3)
    s.base_pos[:, 2] = torch.tensor([0.7, 0.6, 0.7])  # row 1 below H2 = 0.65
    s.feet_pos[:, 1, 0] = 1.0  # left foot under the pelvis, right foot 1 m away
    s.feet_pos[:, :, 2] = 0.05
    s.feet_pos[2, 1, 2] = 0.35  # right foot lifted above 0.3 m
    # left: |d|^2 = 0 -> clamped to 0.3 -> exp(-0.6); right: exp(-2 * 1).
    out = style.foot_displacement(s, scale=2.0, min_sq_distance=0.3, max_foot_height=0.3, stage_height=0.65)
    close(out, [math.exp(-0.6) + math.exp(-2.0), 0.0, math.exp(-0.6)])


def test_ankle_parallel():
    s = StandupState.zeros(3)
    s.ankle_points[1, 0, 3:, 2] = 0.1  # 10z = [0,0,0,1,1]: var (unbiased) 0.3; mean over feet 0.15
    s.ankle_points[2, 0, 4, 2] = 0.075  # 10z = [0,0,0,0,0.75]: var 0.1125, mean 0.05625 (biased var would be 0.045)
    close(style.ankle_parallel(s, scale=10.0, threshold=0.05), [1.0, 0.0, 0.0])
    s.ankle_points[2, 0, 4, 2] = 0.01  # var 0.002 -> parallel
    close(style.ankle_parallel(s), [1.0, 0.0, 1.0])


def test_feet_distance():
    s = StandupState.zeros(3)
    s.feet_pos[0, 1] = torch.tensor([0.95, 0.0, 0.0])
    s.feet_pos[1, 1] = torch.tensor([0.6, 0.6, 0.0])  # 0.849 m
    s.feet_pos[2, 1] = torch.tensor([0.5, 0.0, 0.8])  # 3-D 0.943 m but horizontal 0.5 m
    close(style.feet_distance(s, threshold=0.9), [1.0, 0.0, 0.0])


def test_shank_orientation():
    s = StandupState.zeros(4)
    s.base_pos[:, 2] = torch.tensor([0.5, 0.4, 0.5, 0.5])  # row 1 below H1 = 0.45
    s.ankle_pos[:, :, 2] = 0.1
    s.knee_pos[:, :, 2] = 0.5  # vertical shanks: cos = 1
    s.knee_pos[2, 1] = torch.tensor([0.4, 0.0, 0.1])  # right shank horizontal: mean cos 0.5, d = 0.3
    s.knee_pos[3, :] = torch.tensor([0.4, 0.0, 0.5])  # both at 45 deg: cos = 0.7071, d = 0.0929
    d45 = 0.8 - math.sqrt(0.5)
    out = style.shank_orientation(s, lower=0.8, margin=1.0, value_at_margin=0.1, stage_height=0.45)
    close(out, [1.0, 0.0, 0.1**0.09, 0.1 ** (d45**2)])


def test_style_base_ang_vel():
    s = StandupState.zeros(2)
    s.base_ang_vel[:] = torch.tensor([0.5, 0.5, 3.0])  # |w_xy|^2 = 0.5; z ignored
    s.base_pos[:, 2] = torch.tensor([0.5, 0.4])
    close(style.base_ang_vel(s, scale=2.0, stage_height=0.45), [math.exp(-1.0), 0.0])


# --- regularization ----------------------------------------------------------------------------


def test_regularization_squares():
    s = StandupState.zeros(2)
    s.ddq[0, 0], s.ddq[0, 5] = 2.0, -3.0
    close(regularization.joint_acc(s), [13.0, 0.0])
    s.action[0, :2], s.last_action[0, :2], s.last_last_action[0, :2] = 1.0, 0.5, 0.5
    close(regularization.action_rate(s), [0.5, 0.0])  # 2 * 0.5^2
    close(regularization.action_smoothness(s), [0.5, 0.0])  # 2 * (1 - 1 + 0.5)^2
    s.tau[1, 0], s.tau[1, 1] = 10.0, -20.0
    close(regularization.torques(s), [0.0, 500.0])
    s.dq[1, 0], s.dq[1, 1], s.dq[1, 2] = -3.0, 0.5, 4.0
    close(regularization.joint_power(s), [0.0, 40.0])  # 10*3 + 20*0.5 + 0*4
    close(regularization.joint_vel(s), [0.0, 25.25])
    s.p_target[0, 0], s.q[0, 0], s.q[0, 1] = 1.0, 0.5, -2.0
    close(regularization.target_pos_error(s), [4.25, 0.0])


def test_joint_pos_limits():
    s = StandupState.zeros(2)  # soft limits +-2 rad
    s.q[0, :3] = torch.tensor([2.5, -2.25, 1.9])
    s.q[1, :] = 1.99
    close(regularization.joint_pos_limits(s), [0.75, 0.0])


def test_joint_vel_limits():
    s = StandupState.zeros(2)  # dq_limit 30 -> soft 27 rad/s
    s.dq[0, :3] = torch.tensor([27.5, -40.0, 26.0])  # 0.5 + clip(13, max=1) + 0
    s.dq[1, :] = -26.9
    close(regularization.joint_vel_limits(s, soft_factor=0.9), [1.5, 0.0])


# --- post-task ---------------------------------------------------------------------------------


def _standing(n, heights):
    s = StandupState.zeros(n)
    s.base_pos[:, 2] = torch.tensor(heights)
    return s


def test_post_task_velocities_and_orientation():
    s = _standing(2, [0.7, 0.6])  # row 1 below H2
    s.base_ang_vel[:] = torch.tensor([0.5, 0.5, 1.0])
    s.base_lin_vel[:] = torch.tensor([0.2, 0.4, 5.0])  # |v_xy|^2 = 0.2
    s.projected_gravity[:] = torch.tensor([0.3, 0.4, -0.866])  # |g_xy|^2 = 0.25
    close(post_task.ang_vel_xy(s, scale=2.0, stage_height=0.65), [math.exp(-1.0), 0.0])
    close(post_task.lin_vel_xy(s, scale=5.0, stage_height=0.65), [math.exp(-1.0), 0.0])
    close(post_task.orientation(s, scale=5.0, stage_height=0.65), [math.exp(-1.25), 0.0])


def test_post_task_base_height():
    s = _standing(4, [0.7, 0.8, 0.75, 0.6])
    out = post_task.base_height(s, target=0.75, scale=20.0, stage_height=0.65)
    close(out, [math.exp(-1.0), math.exp(-1.0), 1.0, 0.0])


def test_upper_body_posture():
    assert len(post_task.UPPER_BODY_IDS) == 11
    s = _standing(4, [0.7, 0.7, 0.7, 0.6])
    lsr, rsr = jid("left_shoulder_roll_joint"), jid("right_shoulder_roll_joint")
    # row 0: all zero -> error 0.3^2 + 0.3^2 = 0.18.
    s.q[1:, lsr], s.q[1:, rsr] = 0.3, -0.3  # on target
    s.q[1, jid("left_hip_pitch_joint")] = 3.0  # a leg joint: ignored
    s.q[2, jid("waist_yaw_joint")] = 1.0  # error 1
    out = post_task.upper_body_posture(s, scale=0.1, stage_height=0.65)
    close(out, [math.exp(-0.018), 1.0, math.exp(-0.1), 0.0])


def test_feet_height_diff():
    s = _standing(3, [0.7, 0.7, 0.6])
    s.feet_pos[0, 0, 2] = 0.1  # |dz| = 0.1
    s.feet_pos[2, 0, 2] = 0.1
    out = post_task.feet_height_diff(s, scale=20.0, min_diff=0.02, stage_height=0.65)
    close(out, [math.exp(-2.0), math.exp(-0.4), 0.0])


# --- term table and manager --------------------------------------------------------------------


def test_standup_reward_terms_weights():
    weights = {t.key: t.weight for t in standup_reward_terms()}
    assert weights == {
        "task/head_height": 1.0,
        "task/orientation": 1.0,
        "regularization/joint_acc": -2.5e-7,
        "regularization/action_rate": -0.01,
        "regularization/action_smoothness": -0.01,
        "regularization/torques": -2.5e-6,
        "regularization/joint_power": -2.5e-5,
        "regularization/joint_vel": -1e-3,
        "regularization/target_pos_error": -2.5e-4,
        "regularization/joint_pos_limits": -100.0,
        "regularization/joint_vel_limits": -1.0,
        "style/waist_yaw_deviation": -10.0,
        "style/hip_yaw_deviation": -10.0,
        "style/hip_roll_deviation": -10.0,
        "style/knee_deviation": -0.25,
        "style/shoulder_roll_deviation": -2.5,
        "style/foot_displacement": 2.5,
        "style/ankle_parallel": 20.0,
        "style/feet_distance": -10.0,
        "style/shank_orientation": 10.0,
        "style/base_ang_vel": 1.0,
        "post_task/ang_vel_xy": 10.0,
        "post_task/lin_vel_xy": 10.0,
        "post_task/orientation": 10.0,
        "post_task/base_height": 10.0,
        "post_task/upper_body_posture": 10.0,
        "post_task/feet_height_diff": 2.5,
    }
    assert REWARD_GROUPS == ("task", "regularization", "style", "post_task")
    assert GROUP_WEIGHTS == (2.5, 0.1, 1.0, 1.0)


def _const(value):
    return lambda state, scale=1.0: torch.full((state.num_envs,), value * scale)


def test_reward_manager_groups():
    terms = [
        RewardTerm("a", _const(0.5), "task", 1.0),
        RewardTerm("b", _const(0.4), "task", 1.0, {"scale": 2.0}),  # 0.8
        RewardTerm("r1", _const(1.0), "regularization", -1.0),
        RewardTerm("r2", _const(2.0), "regularization", -0.5),
        RewardTerm("s", _const(3.0), "style", 1.0),
    ]
    rewards, parts = RewardManager(terms, GROUPS, dt=0.02).compute(StandupState.zeros(2), 2, "cpu")
    assert rewards.shape == (2, 4)
    close(rewards, [[0.4, -0.04, 0.06, 0.0]] * 2)  # task product, not x dt; others x dt; no post-task terms
    assert list(parts) == ["task/a", "task/b", "regularization/r1", "regularization/r2", "style/s"]
    close(parts["task/b"], [0.8, 0.8])
    close(parts["regularization/r2"], [-0.02, -0.02])
    with pytest.raises(ValueError):
        RewardManager([terms[0], terms[0]], GROUPS, dt=0.02)
    with pytest.raises(ValueError):
        RewardManager([RewardTerm("x", _const(1.0), "regu", 1.0)], GROUPS, dt=0.02)


def test_reward_manager_standup_terms_on_zero_state():
    # Lying flat at z = 0: head 0 m above the feet (f_head = 0.1), upright gravity (f_orient = 1);
    # only ankle-parallel (flat soles) fires in style: 20 * 0.02; nothing is above a stage height.
    rewards, parts = RewardManager(standup_reward_terms(), GROUPS, dt=0.02).compute(StandupState.zeros(2), 2, "cpu")
    close(rewards, [[0.1, 0.0, 0.4, 0.0]] * 2)
    assert len(parts) == 27


# --- terrain- and posture-specific terms (spec §3 per-terrain notes, "Ground-prone config") ------------


def test_feet_stumble():
    s = StandupState.zeros(5)
    s.feet_contact_force[0, 0] = torch.tensor([0.0, 0.0, 150.0])  # standing: no stumble
    s.feet_contact_force[1, 1] = torch.tensor([40.0, 30.0, 10.0])  # |F_xy| 50 > 3 * 10
    s.feet_contact_force[2, 0] = torch.tensor([29.0, 0.0, -10.0])  # 29 < 30 (|F_z| used)
    s.feet_contact_force[3, 0] = torch.tensor([0.0, 31.0, -10.0])  # 31 > 30
    # row 4: both feet in the air (F = 0): no stumble
    close(style.feet_stumble(s, ratio=3.0), [0.0, 1.0, 0.0, 1.0, 0.0])


def test_lower_body_deviation_is_mirror_symmetry():
    s = StandupState.zeros(4)
    names = ["hip_roll", "hip_pitch", "hip_yaw", "knee"]
    left = [jid(f"left_{n}_joint") for n in names]
    right = [jid(f"right_{n}_joint") for n in names]
    mirrored = torch.tensor([0.2, -0.5, 0.1, 1.0])
    for r in range(3):
        s.q[r, right] = mirrored
        s.q[r, left] = mirrored * torch.tensor([-1.0, 1.0, -1.0, 1.0])  # mirror image: roll and yaw flip sign
    s.q[1, left[3]] = 1.4  # left knee 0.4 rad more: asymmetry 0.4^2 / 2 = 0.08
    s.q[2, left[0]] = 0.2  # left roll equal to the right one, not mirrored: (-0.2 - 0.2)^2 / 2 = 0.08
    s.q[3, jid("left_ankle_pitch_joint")] = 1.0  # an ankle: not compared
    close(style.lower_body_asymmetry(s), [0.0, 0.08, 0.08, 0.0])
    close(style.lower_body_deviation(s, scale=2.0), [1.0, math.exp(-0.16), math.exp(-0.16), 1.0])


def test_post_task_lower_body_deviation_is_gated():
    s = _standing(2, [0.7, 0.6])
    s.q[:, jid("left_knee_joint")] = 0.4  # asymmetry 0.08
    close(post_task.lower_body_deviation(s, scale=2.0, stage_height=0.65), [math.exp(-0.16), 0.0])


def test_hip_pitch_deviation():
    ids = joint_ids(["left_hip_pitch_joint", "right_hip_pitch_joint"])
    s = StandupState.zeros(4)
    s.q[:, ids] = torch.tensor([[-2.6, 0.0], [-1.7, -1.65], [-1.7, -1.0], [0.5, 0.3]])
    close(style.hip_pitch_deviation(s, joint_ids=ids, max_threshold=2.5, min_threshold=1.6), [1.0, 1.0, 0.0, 0.0])


def test_thigh_orientation():
    s = StandupState.zeros(4)
    s.base_pos[:, 2] = torch.tensor([0.5, 0.4, 0.5, 0.5])  # row 1 below H1 = 0.45
    s.knee_pos[:, :, 2] = 0.3
    s.hip_pos[:, :, 2] = 0.7  # vertical thighs: cos = 1
    s.hip_pos[2, 1] = torch.tensor([0.4, 0.0, 0.3])  # right thigh horizontal: min cos 0 -> d = 0.8
    s.hip_pos[3, 0] = torch.tensor([0.4, 0.0, 0.7])  # left at 45 deg: min cos 0.7071
    d45 = 0.8 - math.sqrt(0.5)
    out = style.thigh_orientation(s, lower=0.8, margin=1.0, value_at_margin=0.1, stage_height=0.45)
    close(out, [1.0, 0.0, 0.1**0.64, 0.1 ** (d45**2)])


def test_stage_gates_relative_to_feet():
    # Slope: pelvis 1.5 m up, feet at 1.0 m -> 0.5 m above the feet: above H1 = 0.4, below H2 = 0.6.
    s = StandupState.zeros(1)
    s.base_pos[:, 2], s.feet_pos[:, :, 2] = 1.5, 1.0
    close(style.base_ang_vel(s, stage_height=0.4, relative_to_feet=True), [1.0])
    close(style.base_ang_vel(s, stage_height=0.4), [1.0])
    close(post_task.ang_vel_xy(s, stage_height=0.6, relative_to_feet=True), [0.0])
    close(post_task.ang_vel_xy(s, stage_height=0.6), [1.0])  # pelvis z 1.5 > 0.6
    s.base_pos[:, 2] = 1.7  # 0.7 above the feet = the slope target
    close(post_task.base_height(s, target=0.7, stage_height=0.6, relative_to_feet=True), [1.0])
    close(post_task.base_height(s, target=0.7, stage_height=0.6), [math.exp(-20.0)])
