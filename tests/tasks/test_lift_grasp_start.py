"""Grasped starts of the lift curriculum (``env.curriculum.grasped_start_fraction``,
upright/tasks/lift/grasp_start.py)."""

from __future__ import annotations

import torch

from upright.tasks.lift.config import LiftEnvCfg
from upright.tasks.lift.env import LiftEnv
from upright.tasks.lift.grasp_start import solve_grasp_arm
from upright.tasks.lift.ik import DifferentialIK
from upright.tasks.lift.scene import lift_scene
from upright.tasks.standup.config import SimCfg


def _env(fraction: float, level: float, num_envs: int = 16, enabled: bool = True, **kw) -> LiftEnv:
    cfg = LiftEnvCfg(num_envs=num_envs, action_mode="ee_delta", ee_gravity_compensation=True, **kw)
    cfg.curriculum.grasped_start_fraction = fraction
    cfg.curriculum.init_level = level
    cfg.curriculum.enabled = enabled
    return LiftEnv(cfg, SimCfg(backend="native", num_threads=1), seed=1)


def test_the_ik_solve_reaches_a_central_cube_and_flags_an_unreachable_one():
    ik = DifferentialIK(lift_scene(0.005))
    goals = torch.tensor([[0.7, 0.05, 0.03], [0.6, -0.1, 0.035], [1.3, 0.0, 0.03]])
    q, ok = solve_grasp_arm(ik, torch.tensor(ik.home, dtype=torch.float32), goals)
    assert ok.tolist() == [True, True, False]
    site = ik.site_frames(q.double().numpy())[0]
    assert abs(site[:2] - goals[:2].numpy()).max() < 5e-3


def test_grasped_starts_hold_the_cube_and_lift_it_on_an_upward_command():
    env = _env(1.0, 1.0)  # full ranges, randomisation on: far-edge cubes fall back to normal starts
    env.reset_all()
    gs = env.grasped_start.clone()
    assert gs.sum() >= 0.75 * env.num_envs
    env.step(torch.zeros(env.num_envs, 4))
    s = env.last_state
    assert bool(s.grasped[gs].all()) and not bool(s.floor_contact[gs].any())
    assert not bool(s.grasped[~gs].any())  # normal starts: the hand at home
    for _ in range(15):  # site up 1.5 cm per env step, fingers closing
        env.step(torch.tensor([[0.0, 0.0, 1.0, -1.0]]).repeat(env.num_envs, 1))
    s = env.last_state
    assert bool((s.cube_lift[gs] > 0.08).all()), s.cube_lift[gs]
    env.close()


def test_grasped_starts_leave_the_levels_alone_and_need_the_curriculum():
    env = _env(1.0, 0.5, num_envs=8, episode_length_s=0.1)  # 5-step episodes, none succeeds
    env.reset_all()
    assert bool(env.grasped_start.all())
    for _ in range(6):
        env.step(torch.zeros(8, 4))
    assert torch.allclose(env.curriculum.level, torch.full((8,), 0.5))  # failures, but grasped starts: no step down
    env.close()
    env = _env(0.0, 0.5, num_envs=8, episode_length_s=0.1)
    env.reset_all()
    for _ in range(6):
        env.step(torch.zeros(8, 4))
    assert not bool(env.grasped_start.any()) and bool((env.curriculum.level < 0.5).all())  # normal failures step down
    env.close()
    env = _env(1.0, 0.5, num_envs=8, enabled=False)  # evaluation and play: never
    env.reset_all()
    assert not bool(env.grasped_start.any())
    env.close()
