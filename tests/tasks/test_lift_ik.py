"""The lift task's Cartesian action mode (``env.action_mode=ee_delta``): the differential IK on the real Panda model
moves the gripper site by the commanded step and holds the hand's orientation; the env takes 4-value actions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from upright.tasks.lift.config import LiftEnvCfg
from upright.tasks.lift.env import LiftEnv
from upright.tasks.lift.ik import DifferentialIK, bound_lead, bound_lead_down
from upright.tasks.lift.metadata import lift_policy_metadata
from upright.tasks.lift.scene import lift_scene
from upright.tasks.standup.config import SimCfg


def _angle(r_a: np.ndarray, r_b: np.ndarray) -> float:
    """Angle between two rotations, rad."""
    return float(np.arccos(np.clip((np.trace(r_a.T @ r_b) - 1.0) / 2.0, -1.0, 1.0)))


@pytest.mark.parametrize("step", [(0.01, 0.0, 0.0), (0.0, -0.01, 0.0), (0.0, 0.0, 0.01), (0.006, 0.004, -0.008)])
def test_ik_step_moves_the_site_by_the_command(step):
    ik = DifferentialIK(lift_scene(0.005))
    rng = np.random.default_rng(0)
    q = ik.home + rng.uniform(-0.03, 0.03, (8, 7))  # near home: little orientation error to correct alongside
    p0, r0, _ = ik.site_frames(q)
    d = np.tile(step, (8, 1))
    dq = ik.joint_step(torch.tensor(q, dtype=torch.float32), torch.tensor(d, dtype=torch.float32)).double().numpy()
    p1, _, _ = ik.site_frames(q + dq)
    err = np.linalg.norm(p1 - p0 - d, axis=1)
    assert (err < 0.15 * 0.01 + 5e-4).all(), err  # within 15 % of the 1 cm step, and float32 rounding


def test_ik_turns_the_hand_back_to_its_home_orientation():
    ik = DifferentialIK(lift_scene(0.005))
    q = ik.home[None] + np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3]])  # yawed 0.3 rad at the flange
    before = _angle(ik.site_frames(q)[1][0], ik.home_rotation)
    for _ in range(20):
        q = q + ik.joint_step(torch.tensor(q, dtype=torch.float32), torch.zeros(1, 3)).double().numpy()
    after = _angle(ik.site_frames(q)[1][0], ik.home_rotation)
    assert before > 0.25 and after < 0.3 * before, (before, after)


def test_ee_delta_env_lifts_the_hand_on_command_and_keeps_it_pointing_down():
    cfg = LiftEnvCfg(num_envs=2, action_mode="ee_delta")
    cfg.domain_rand.enabled = False
    env = LiftEnv(cfg, SimCfg(backend="native", num_threads=1))
    assert env.num_actions == 4 and env.get_observations()["actor"].shape == (2, 45)
    with pytest.raises(ValueError, match=r"\(N, 4\).*ee_delta"):
        env.step(torch.zeros(2, 8))
    start = env.state.gripper_pos.clone()
    up = torch.tensor([[0.0, 0.0, 1.0, 0.0]]).repeat(2, 1)
    for _ in range(10):  # 10 x 1.5 cm up
        env.step(up)
    for _ in range(15):
        env.step(torch.zeros(2, 4))
    moved = (env.state.gripper_pos - start)[0]
    assert 0.10 < float(moved[2]) < 0.17 and float(moved[:2].norm()) < 0.03, moved
    ik = env.ik
    q = env.state.q[:1, :7].double().numpy()
    assert _angle(ik.site_frames(q)[1][0], ik.home_rotation) < 0.15
    meta = lift_policy_metadata(env)
    assert meta["action_mode"] == "ee_delta" and sum(meta["observation_dims"]) == 45
    assert meta["ee_site"] == "gripper" and len(meta["ik_rotation_weights"]) == 3
    env.close()


def test_bad_action_mode_and_the_expert_in_ee_mode_are_refused():
    with pytest.raises(ValueError, match="env.action_mode must be one of"):
        LiftEnv(LiftEnvCfg(num_envs=1, action_mode="cartesian"), SimCfg(backend="native", num_threads=1))
    from upright.tasks.lift.expert import ScriptedExpert

    env = LiftEnv(LiftEnvCfg(num_envs=1, action_mode="ee_delta"), SimCfg(backend="native", num_threads=1))
    with pytest.raises(ValueError, match="env.action_mode=delta"):
        ScriptedExpert(env)
    env.close()


def test_ik_workspace_floor_raises_only_the_steps_that_would_go_below_it():
    ik = DifferentialIK(lift_scene(0.005))
    q = np.tile(ik.home, (3, 1))
    z0 = ik.site_frames(q)[0][:, 2]  # ~0.38 m at home
    down = torch.tensor([[0.0, 0.0, -0.01]] * 3)
    floors = [None, z0[1] - 0.004, z0[2] + 0.02]  # no floor; 4 mm below the site; 2 cm above it
    steps = [
        ik.joint_step(torch.tensor(q[i : i + 1], dtype=torch.float32), down[i : i + 1], floors[i]) for i in range(3)
    ]
    z1 = [ik.site_frames(q[i : i + 1] + steps[i].double().numpy())[0][0, 2] for i in range(3)]
    assert abs(z1[0] - (z0[0] - 0.01)) < 2e-3  # the full 1 cm down
    assert abs(z1[1] - floors[1]) < 1e-3  # stopped at the floor
    assert z1[2] > z0[2] + 0.015  # already below the floor: moved up toward it


def test_ee_delta_env_cannot_command_the_hand_into_the_table():
    heights = {}
    for floor in (None, 0.025):
        cfg = LiftEnvCfg(num_envs=2, action_mode="ee_delta", ee_min_height=floor)
        cfg.domain_rand.enabled = False
        env = LiftEnv(cfg, SimCfg(backend="native", num_threads=1))
        down = torch.tensor([[0.0, 0.0, -1.0, 0.0]]).repeat(2, 1)
        for _ in range(40):  # 40 x 1.5 cm down from ~0.38 m
            env.step(down)
        heights[floor] = env.ik.site_frames(env.ctrl[:, :7].double().numpy())[0][:, 2]  # the commanded site
        if floor is not None:
            assert lift_policy_metadata(env)["ee_min_height"] == floor
        env.close()
    assert (heights[None] < -0.1).all()  # without the floor the command goes 10+ cm into the table
    assert (heights[0.025] > 0.025 - 1e-3).all(), heights


def test_gravity_compensation_makes_the_outstretched_arm_hold_its_commanded_site():
    """Reach 0.2 m forward and 0.3 m down with the hand pointing down; without compensation the arm sags below the
    commanded site, with it (q_c + g(q_c) / Kp) the measured site stays within a few mm of the command."""
    errors = {}
    for comp in (False, True):
        cfg = LiftEnvCfg(num_envs=1, action_mode="ee_delta", ee_gravity_compensation=comp)
        cfg.domain_rand.enabled = False
        env = LiftEnv(cfg, SimCfg(backend="native", num_threads=1))
        move = torch.tensor([[1.0, 0.0, -1.0, 0.0]])
        for i in range(80):  # 20 steps forward+down (site to ~(0.84, 0, 0.095) m), then hold still to settle
            env.step(move if i < 20 else torch.zeros(1, 4))
        commanded = env.ik.site_frames(env.ctrl[:, :7].double().numpy())[0][0]
        measured = env.ik.site_frames(env.last_state.q[:, :7].double().numpy())[0][0]
        errors[comp] = commanded[2] - measured[2]  # > 0: the arm sags below its command
        env.close()
    assert errors[False] > 0.03, errors  # ~6 cm at this reach
    assert abs(errors[True]) < 0.002, errors


def test_bound_lead_keeps_the_command_within_the_bound_and_winds_it_back():
    p_meas = np.zeros((3, 3))
    p_cmd = np.array([[0.0, 0.0, 0.01], [0.0, 0.0, -0.04], [0.0, 0.0, -0.30]])
    d = np.array([[0.0, 0.0, -0.015]] * 3)
    out = bound_lead(p_cmd, p_meas, d, 0.05)
    np.testing.assert_allclose(out[0], d[0])  # within the bound: unchanged
    np.testing.assert_allclose(p_cmd[1:] + out[1:], [[0.0, 0.0, -0.05]] * 2, atol=1e-12)  # clamped onto the ball
    assert out[2, 2] > 0.2  # a wound-up command is wound back at once


def test_max_lead_stops_the_command_winding_up_into_the_table():
    """Command the hand down for 40 steps (it stops on the table after ~20), then up: unbounded, the command ran far
    into the table and the hand stays down for many steps while it is wound back; with ``ee_max_lead`` 0.05 m it
    leaves the table within a few steps, and the command never led the hand by more than the bound."""
    steps_to_rise, leads = {}, {}
    for lead in (None, 0.05):
        cfg = LiftEnvCfg(num_envs=1, action_mode="ee_delta", ee_gravity_compensation=True, ee_max_lead=lead)
        cfg.domain_rand.enabled = False
        env = LiftEnv(cfg, SimCfg(backend="native", num_threads=1))
        env.reset_envs(torch.arange(1), torch.tensor([[0.5, 0.25, 0.03]]), torch.tensor([[0.5, 0.25, 0.3]]))
        env.state = env._read_state()
        site = lambda q, env=env: env.ik.site_frames(q[:, :7].double().numpy())[0][0]  # noqa: E731
        worst = 0.0
        for _ in range(40):
            env.step(torch.tensor([[0.0, 0.0, -1.0, 0.0]]))
            worst = max(worst, float(np.linalg.norm(site(env.ctrl) - site(env.last_state.q))))
        pressed = site(env.last_state.q)[2]
        assert pressed < 0.06, (lead, pressed)  # the hand is down on the table
        for step in range(1, 41):  # noqa: B007  read after the loop: the step the hand rose
            env.step(torch.tensor([[0.0, 0.0, 1.0, 0.0]]))
            if site(env.last_state.q)[2] > pressed + 0.03:
                break
        steps_to_rise[lead], leads[lead] = step, worst
        env.close()
    assert leads[0.05] < 0.05 + 0.016 and leads[None] > 0.15, leads  # one step may land past the bound's ball
    assert steps_to_rise[0.05] <= 12 and steps_to_rise[None] >= steps_to_rise[0.05] + 8, steps_to_rise


def test_bound_lead_down_raises_only_the_z_of_a_command_too_far_below():
    p_meas = np.zeros((3, 3))
    p_cmd = np.array([[0.2, 0.0, 0.10], [0.0, 0.0, -0.02], [0.0, 0.1, -0.30]])
    d = np.array([[0.015, 0.0, 0.0], [0.01, 0.0, -0.015], [0.0, -0.01, -0.015]])
    out = bound_lead_down(p_cmd, p_meas, d, 0.03)
    np.testing.assert_allclose(out[0], d[0])  # far ahead and above: unbounded
    np.testing.assert_allclose(out[1], [0.01, 0.0, -0.01], atol=1e-12)  # stops at 3 cm below, x kept
    np.testing.assert_allclose(out[2], [0.0, -0.01, 0.27], atol=1e-12)  # wound back at once, y kept


def test_max_lead_down_stops_the_command_winding_up_into_the_table():
    """Pressed down on the table for 40 steps, then commanded up: with ``ee_max_lead_down`` 0.05 m the command never
    sinks more than that below the hand, and the hand leaves the table within a few steps (as with ``ee_max_lead``,
    test above; that the bound is one-sided is the unit test's)."""
    cfg = LiftEnvCfg(num_envs=1, action_mode="ee_delta", ee_gravity_compensation=True, ee_max_lead_down=0.05)
    cfg.domain_rand.enabled = False
    env = LiftEnv(cfg, SimCfg(backend="native", num_threads=1))
    site = lambda q: env.ik.site_frames(q[:, :7].double().numpy())[0][0]  # noqa: E731
    env.reset_envs(torch.arange(1), torch.tensor([[0.5, 0.25, 0.03]]), torch.tensor([[0.5, 0.25, 0.3]]))
    env.state = env._read_state()
    sink = 0.0
    for _ in range(40):
        env.step(torch.tensor([[0.0, 0.0, -1.0, 0.0]]))
        sink = max(sink, float(site(env.last_state.q)[2] - site(env.ctrl)[2]))
    pressed = site(env.last_state.q)[2]
    assert pressed < 0.06, pressed  # the hand is down on the table
    assert sink < 0.05 + 0.016, sink  # one step may land past the bound
    for step in range(1, 41):  # noqa: B007  read after the loop: the step the hand rose
        env.step(torch.tensor([[0.0, 0.0, 1.0, 0.0]]))
        if site(env.last_state.q)[2] > pressed + 0.03:
            break
    env.close()
    assert step <= 12, step


def test_max_lead_down_waits_for_the_gate_level_in_training_and_always_applies_in_evaluation():
    """``env.curriculum.ee_max_lead_down_level`` 0.5: of two envs pressed onto the table, the one at level 0 winds its
    command far below the hand and the one at level 1 does not; with the curriculum off both are bounded."""
    sinks = {}
    for curriculum in (True, False):
        cfg = LiftEnvCfg(num_envs=2, action_mode="ee_delta", ee_gravity_compensation=True, ee_max_lead_down=0.05)
        cfg.curriculum.enabled, cfg.curriculum.ee_max_lead_down_level = curriculum, 0.5
        cfg.domain_rand.enabled = False
        env = LiftEnv(cfg, SimCfg(backend="native", num_threads=1))
        env.curriculum.level[:] = torch.tensor([0.0, 1.0])
        env.reset_envs(torch.arange(2), torch.tensor([[0.5, 0.25, 0.03]] * 2), torch.tensor([[0.5, 0.25, 0.3]] * 2))
        env.state = env._read_state()
        sites = lambda q, env=env: env.ik.site_frames(q[:, :7].double().numpy())[0]  # noqa: E731
        sink = np.zeros(2)
        for _ in range(40):
            env.step(torch.tensor([[0.0, 0.0, -1.0, 0.0]] * 2))
            sink = np.maximum(sink, sites(env.last_state.q)[:, 2] - sites(env.ctrl)[:, 2])
        sinks[curriculum] = sink
        env.close()
    assert sinks[True][0] > 0.1 and sinks[True][1] < 0.05 + 0.016, sinks
    assert (sinks[False] < 0.05 + 0.016).all(), sinks
    with pytest.raises(ValueError, match="ee_max_lead_down_level"):
        bad = LiftEnvCfg(num_envs=1, action_mode="ee_delta", ee_max_lead_down=0.05)
        bad.curriculum.ee_max_lead_down_level = 1.5
        LiftEnv(bad, SimCfg(backend="native", num_threads=1))


def test_ee_lead_term_is_the_command_minus_the_hand_and_needs_the_switch():
    from upright.tasks.lift.observations import EE_LEAD_TERM, ee_lead
    from upright.tasks.lift.state import LiftState

    s = LiftState.zeros(2)
    s.gripper_pos = torch.tensor([[0.5, 0.0, 0.2], [0.8, 0.1, 0.1]])
    with pytest.raises(ValueError, match="env.ee_observe_lead=true"):
        ee_lead(s)
    s.command_site = torch.tensor([[0.5, 0.0, 0.1], [0.9, 0.1, 0.1]])
    assert torch.allclose(ee_lead(s), torch.tensor([[0.0, 0.0, -0.1], [0.1, 0.0, 0.0]]))
    assert EE_LEAD_TERM.name == "ee_lead" and EE_LEAD_TERM.noise > 0
    with pytest.raises(ValueError, match="env.ee_observe_lead=true needs env.action_mode=ee_delta"):
        LiftEnv(LiftEnvCfg(num_envs=1, ee_observe_lead=True), SimCfg(backend="native", num_threads=1))


def test_observed_lead_shows_the_command_winding_into_the_table():
    """With ``env.ee_observe_lead`` the frame ends with FK(targets) - site; pushing the hand down onto the table winds
    the command below the hand, and the observation says so. The cached frames equal a fresh computation."""
    cfg = LiftEnvCfg(num_envs=2, action_mode="ee_delta", ee_observe_lead=True)
    cfg.domain_rand.enabled = False
    env = LiftEnv(cfg, SimCfg(backend="native", num_threads=1))
    obs = env.get_observations()["actor"]
    assert obs.shape == (2, 48) and env.observation_dims[-1] == 3
    assert obs[:, -3:].norm(dim=1).max() < 0.02  # at reset the command sits on the hand
    down = torch.tensor([[0.0, 0.0, -1.0, 0.0]]).repeat(2, 1)
    for _ in range(40):  # 40 x 1.5 cm down: the table stops the hand
        env.step(down)
    lead = env.get_observations()["actor"][:, -3:]
    fresh = env.ik.site_frames(env.ctrl[:, :7].double().numpy())[0]
    expected = torch.as_tensor(fresh, dtype=torch.float32) - env.state.gripper_pos
    assert torch.allclose(lead, expected, atol=1e-5), (lead, expected)
    assert (lead[:, 2] < -0.1).all(), lead  # the command is > 10 cm below the hand
    meta = lift_policy_metadata(env)
    assert meta["observation_names"][-1] == "ee_lead" and meta["ee_observe_lead"] is True
    assert sum(meta["observation_dims"]) == 48 and "ee_lead" not in meta["privileged_inputs"]
    env.close()
