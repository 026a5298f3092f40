"""The env core (upright.envs.ManagerBasedRlEnv): every task's env step is the core's, and the core runs a task's
managers in the documented order, checked on the real standup and lift envs (real MuJoCo)."""

from __future__ import annotations

import ast
import pathlib

import pytest
import torch

from upright.envs import ManagerBasedRlEnv
from upright.managers.termination import TerminationManager, TerminationTerm
from upright.tasks.lift.config import LiftEnvCfg
from upright.tasks.lift.env import LiftEnv
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.env import StandupEnv
from upright.tasks.standup.getup.env import GetupEnv

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_task_env_is_the_core_and_writes_no_step_of_its_own():
    assert issubclass(StandupEnv, ManagerBasedRlEnv) and issubclass(LiftEnv, ManagerBasedRlEnv)
    assert issubclass(GetupEnv, ManagerBasedRlEnv)
    own = []
    for path in (ROOT / "upright" / "tasks").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                own += [
                    f"{path.relative_to(ROOT)}:{node.name}.{f.name}"
                    for f in node.body
                    if isinstance(f, ast.FunctionDef) and f.name in ("step", "reset_all", "update_observations")
                ]
    assert own == [], f"the env step belongs to upright.envs.ManagerBasedRlEnv; tasks give terms: {own}"


def test_termination_manager_ors_its_terms_and_names_a_bad_one():
    hit = TerminationTerm("first", lambda s, k: torch.arange(4) == k, {"k": 1})
    other = TerminationTerm("second", lambda s: torch.tensor([True, False, False, False]))
    manager = TerminationManager([hit, other])
    assert manager.compute(None, 4, "cpu").tolist() == [True, True, False, False]
    assert manager.last["first"].tolist() == [False, True, False, False]
    bad = TerminationManager([TerminationTerm("wide", lambda s: torch.zeros(4, 2, dtype=torch.bool))])
    with pytest.raises(ValueError, match="'wide' must return"):
        bad.compute(None, 4, "cpu")
    with pytest.raises(ValueError, match="unique"):
        TerminationManager([hit, hit])


def test_the_core_runs_action_events_physics_rewards_terminations_curriculum_resets_observations_in_order():
    env = StandupEnv(StandupEnvCfg(num_envs=4, obs_noise=False), SimCfg(num_threads=1), seed=3)
    calls: list[tuple] = []

    def event(e, ctrl):
        calls.append(("event", int(e.episode.length[0]), ctrl.shape[-1]))
        return ctrl

    def post(e, state):
        calls.append(("post", int(e.episode.length[0])))

    def ends_env_2_at_step_5(state):
        return (torch.arange(4) == 2) & (env.episode.length == 5)

    def curriculum(e, ids, state):
        calls.append(("curriculum", ids.tolist(), e.episode.length[ids].tolist()))  # before the reset clears them

    env.event_terms = (*env.event_terms, event)
    env.post_physics_terms = (post,)
    env.termination_manager = TerminationManager(
        [*env.termination_manager.terms, TerminationTerm("test", ends_env_2_at_step_5)]
    )
    env.curriculum_terms = (*env.curriculum_terms, curriculum)
    env.reset_all()
    q_before = env.state.q.clone()
    for step in range(1, 6):
        obs, reward, dones, extras = env.step(torch.zeros(4, 23))
        assert calls[-1][0] == ("curriculum" if step == 5 else "post")
    assert [c[1:] for c in calls if c[0] == "event"] == [(k, 29) for k in range(5)]  # before the clock moves
    assert [c[0] for c in calls[:2]] == ["event", "post"]
    assert [c[1] for c in calls if c[0] == "post"] == [1, 2, 3, 4, 5]  # after the physics and the clock
    assert calls[-1] == ("curriculum", [2], [5])
    assert dones.tolist() == [0, 0, 1, 0] and not extras["time_outs"].any() and not env.truncated.any()
    assert env.episode.length.tolist() == [5, 5, 0, 5]  # reset after the curriculum
    assert env.last_state.q.shape == env.state.q.shape and not torch.equal(env.state.q, q_before)
    assert extras["reward_groups"].shape == (4, len(env.reward_group_names))
    assert extras["action_applied"].tolist() == [False] * 4  # HoST's unactuated start ignores the action


def test_lift_time_limit_is_a_truncation_and_the_action_term_checks_the_shape():
    cfg = LiftEnvCfg(num_envs=2, episode_length_s=0.1)
    env = LiftEnv(cfg, SimCfg(num_threads=1), seed=0)
    with pytest.raises(ValueError, match=r"actions must be \(N, 8\)"):
        env.step(torch.zeros(2, 4))
    for _ in range(env.max_episode_length):
        obs, reward, dones, extras = env.step(torch.zeros(2, 8))
    assert dones.tolist() == [1, 1] and extras["time_outs"].all() and env.truncated.all()
    assert "action_applied" not in extras
    assert obs["actor"].shape == (2, 49) and env.episode.length.tolist() == [0, 0]
