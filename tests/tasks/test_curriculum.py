"""HoST pull-force and β curricula: gate, trigger, floors, checkpointing, and their effect in the env."""

import math

import pytest
import torch

from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.curriculum import CurriculumCfg, StandupCurriculum
from upright.tasks.standup.env import StandupEnv


def test_force_is_gated_by_orientation_and_unactuated_start():
    cur = StandupCurriculum(CurriculumCfg(), 4)
    g = torch.tensor([[0, 0, -1.0], [0, 0, -0.79], [-1.0, 0, 0], [0, 0, -0.95]])
    actuated = torch.tensor([True, True, True, False])
    torch.testing.assert_close(cur.pull_force(g, actuated), torch.tensor([200.0, 0, 0, 0]))


def test_trigger_steps_down_only_resetting_envs_to_the_floors():
    cur = StandupCurriculum(CurriculumCfg(), 3)
    ids = torch.tensor([0, 2])
    assert not cur.on_reset(ids, torch.tensor([0.5, 1.2]))  # mean 0.85 <= 0.9: no trigger
    assert cur.on_reset(ids, torch.tensor([0.8, 1.2]))  # mean 1.0
    torch.testing.assert_close(cur.beta, torch.tensor([0.98, 1.0, 0.98]))
    torch.testing.assert_close(cur.force, torch.tensor([160.0, 200.0, 160.0]))
    for _ in range(100):
        cur.on_reset(ids, torch.tensor([1.0, 1.0]))
    torch.testing.assert_close(cur.beta, torch.tensor([0.25, 1.0, 0.25]))
    torch.testing.assert_close(cur.force, torch.tensor([0.0, 200.0, 0.0]))
    assert cur.num_triggers == 101


def test_disabled_curriculum_has_no_force_and_fixed_beta():
    cur = StandupCurriculum(CurriculumCfg(enabled=False, beta_init=0.25), 2)
    assert not cur.on_reset(torch.tensor([0, 1]), torch.tensor([1.2, 1.2]))
    assert torch.all(cur.pull_force(torch.tensor([[0, 0, -1.0]] * 2), torch.tensor([True, True])) == 0)
    torch.testing.assert_close(cur.beta, torch.tensor([0.25, 0.25]))


def test_bad_floors_are_refused():
    with pytest.raises(ValueError, match="beta_min"):
        StandupCurriculum(CurriculumCfg(beta_min=0.0), 1)
    with pytest.raises(ValueError, match="force_min"):
        StandupCurriculum(CurriculumCfg(force_init=10.0, force_min=20.0), 1)


def test_state_dict_round_trip_and_other_env_count():
    cur = StandupCurriculum(CurriculumCfg(), 2)
    cur.on_reset(torch.tensor([1]), torch.tensor([1.0]))
    other = StandupCurriculum(CurriculumCfg(), 2)
    other.load_state_dict(cur.state_dict())
    torch.testing.assert_close(other.beta, cur.beta)
    assert other.num_triggers == 1
    bigger = StandupCurriculum(CurriculumCfg(), 4)
    bigger.load_state_dict(cur.state_dict())
    torch.testing.assert_close(bigger.force, torch.full((4,), 180.0))


@pytest.fixture(scope="module")
def env():
    e = StandupEnv(StandupEnvCfg(num_envs=4), SimCfg(num_threads=1), seed=0)
    yield e
    e.close()


def _upright_in_air(env, height: float) -> None:
    n = env.num_envs
    qpos = env.sim.state.qpos.clone()
    qpos[:, 2] = height
    qpos[:, 3:7] = torch.tensor([1.0, 0, 0, 0])
    qpos[:, 7:] = 0.0
    env.sim.reset_envs(torch.arange(n), qpos, torch.zeros(n, env.model.nv))
    env.episode_length_buf[:] = env.cfg.unactuated_steps + 5
    env.state = env._read_state()


def test_env_pulls_upright_torsos_up(env):
    """Envs with pull force rise relative to those without (the same physics otherwise)."""
    env.curriculum.force[:] = torch.tensor([0.0, 0.0, 200.0, 200.0])
    _upright_in_air(env, 3.0)
    for _ in range(5):
        env.step(torch.zeros(env.num_envs, env.num_actions))
    torch.testing.assert_close(env.pull_force, torch.tensor([0.0, 0.0, 200.0, 200.0]))
    z = env.sim.state.qpos[:, 2]
    t = 5 * env.step_dt
    mass = float(env.model.body_mass.sum())
    assert float(z[2] - z[0]) == pytest.approx(200.0 / mass * t * t / 2, abs=3e-3)


def test_env_trigger_on_tall_resets(env):
    """Episodes that end with the head high step β and the force down; the new β reaches the observation."""
    env.curriculum.beta[:] = 1.0
    env.curriculum.force[:] = 200.0
    _upright_in_air(env, 1.0)
    env.episode_length_buf[:] = env.max_episode_length - 1  # every env times out on the next step
    env.step(torch.zeros(env.num_envs, env.num_actions))
    assert float(env.last_state.head_height.mean()) > 0.9
    torch.testing.assert_close(env.beta, torch.full((4,), 0.98))
    torch.testing.assert_close(env.curriculum.force, torch.full((4,), 160.0))
    assert torch.all(env.episode_length_buf == 0)


def test_curriculum_survives_checkpoint(env):
    env.curriculum.beta[:] = torch.tensor([0.5, 0.6, 0.7, 0.8])
    saved = env.state_dict()
    env.curriculum.beta[:] = 1.0
    env.load_state_dict(saved)
    torch.testing.assert_close(env.beta, torch.tensor([0.5, 0.6, 0.7, 0.8]))
    assert math.isclose(float(env.beta[0]), 0.5)


def test_disabled_curriculum_never_pulls_even_after_loading_training_state():
    """Evaluation envs load checkpoints: the training force must not come back with the state."""
    trained = StandupCurriculum(CurriculumCfg(), 2)
    evaluation = StandupCurriculum(CurriculumCfg(enabled=False), 2)
    evaluation.load_state_dict(trained.state_dict())
    upright_now = torch.tensor([[0, 0, -1.0]] * 2)
    assert torch.all(evaluation.force == 0)
    assert torch.all(evaluation.pull_force(upright_now, torch.tensor([True, True])) == 0)
    evaluation.force[:] = 200.0  # even if set by hand
    assert torch.all(evaluation.pull_force(upright_now, torch.tensor([True, True])) == 0)


def test_per_env_trigger_steps_down_each_env_that_stood():
    """Not HoST: per env, an env whose own episode ended standing steps down even when the batch mean is low
    (HoST's batch mean would not fire here)."""
    cur = StandupCurriculum(CurriculumCfg(trigger="per_env"), 3)
    ids = torch.tensor([0, 1, 2])
    assert cur.on_reset(ids, torch.tensor([1.0, 0.1, 0.1]))  # mean 0.4: HoST's trigger stays off
    torch.testing.assert_close(cur.force, torch.tensor([160.0, 200.0, 200.0]))
    torch.testing.assert_close(cur.beta, torch.tensor([0.98, 1.0, 1.0]))
    assert not cur.on_reset(ids, torch.tensor([0.5, 0.5, 0.5]))
    host = StandupCurriculum(CurriculumCfg(), 3)
    assert not host.on_reset(ids, torch.tensor([1.0, 0.1, 0.1]))


def test_unknown_trigger_is_refused():
    with pytest.raises(ValueError, match="trigger"):
        StandupCurriculum(CurriculumCfg(trigger="mean"), 1)
