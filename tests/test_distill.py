"""DAgger distillation of the predictive-sampling teacher (:mod:`upright.training.distill`), on the real standup env."""

from __future__ import annotations

import pytest
import torch

from upright.tasks.standup.planner import PlannerCfg
from upright.training.distill import DistillCfg, distill

ABSOLUTE = [
    "env.action_mode=absolute",
    "env.curriculum.beta_init=1.0",
    "env.curriculum.beta_min=1.0",
    "sim.num_threads=1",
]


def test_distillation_fits_the_teachers_labels_and_saves_a_resumable_checkpoint(tmp_path):
    run = tmp_path / "distill"
    report = distill(
        ABSOLUTE,
        run,
        DistillCfg(rounds=1, steps=40, epochs=30, batch_size=16),
        PlannerCfg(samples=4, horizon_s=0.2, knots=2),
        num_envs=2,
        seed=3,
    )
    r0 = report["rounds"][0]
    assert r0["labels"] == 2 * (40 - 30)  # actuated steps only: the first 30 are HoST's unactuated drop
    assert r0["fit_mse"] < 0.5 * r0["mse_before_fit"]
    assert (run / "model_0.pt").exists() and (run / "distill.json").exists()
    data = torch.load(run / "labels.pt")
    assert data["obs"].shape == (20, 456) and data["labels"].shape == (20, 23) and data["labels"].abs().max() <= 1.0
    from upright.training.evaluate import make_eval_env

    env, policy, beta, _ = make_eval_env(str(run / "model_0.pt"), overrides=["env.action_mode=absolute"], num_envs=2)
    assert beta == 1.0 and policy(env.get_observations()["actor"]).shape == (2, 23)


def test_distillation_refuses_the_relative_action_mode(tmp_path):
    with pytest.raises(ValueError, match="env.action_mode=absolute"):
        distill([], tmp_path / "d", DistillCfg(rounds=1, steps=1), PlannerCfg(samples=2), num_envs=1)


def test_each_teacher_plans_on_its_envs_randomised_model():
    from upright.tasks.registry import make_env
    from upright.tasks.standup.config import SimCfg, StandupEnvCfg
    from upright.training.distill import env_model

    env = make_env("standup", StandupEnvCfg(num_envs=3), SimCfg(num_threads=1), device="cpu", seed=4)
    masses = env.sim.model_field("body_mass").double()
    assert (masses[0] - masses[1]).abs().max() > 1e-3  # randomised per env
    for i in range(3):
        model = env_model(env, i)
        assert torch.equal(torch.tensor(model.body_mass), masses[i])
        assert torch.equal(torch.tensor(model.actuator_gainprm), env.sim.model_field("actuator_gainprm")[i].double())
    assert torch.equal(torch.tensor(env.model.body_mass), torch.tensor(env_model(env, 0).body_mass)) is False  # a copy


def test_a_resumed_run_keeps_its_labels_and_adds_a_round(tmp_path):
    run = tmp_path / "distill"
    small = dict(steps=32, epochs=2, batch_size=16)
    planner = PlannerCfg(samples=2, horizon_s=0.1, knots=2)
    distill(ABSOLUTE, run, DistillCfg(rounds=1, **small), planner, num_envs=1, seed=2)
    first = torch.load(run / "labels.pt")
    with pytest.raises(FileExistsError, match="--resume"):
        distill(ABSOLUTE, run, DistillCfg(rounds=2, **small), planner, num_envs=1, seed=2)
    report = distill(ABSOLUTE, run, DistillCfg(rounds=2, **small), planner, num_envs=1, seed=2, resume=True)
    assert [r["round"] for r in report["rounds"]] == [0, 1] and report["rounds"][1]["teacher_prob"] == 0.5
    data = torch.load(run / "labels.pt")
    assert data["labels"].shape[0] == 2 * first["labels"].shape[0]
    assert torch.equal(data["labels"][: first["labels"].shape[0]], first["labels"])  # the earlier labels are kept
    with pytest.raises(FileNotFoundError, match="--resume"):
        distill(ABSOLUTE, tmp_path / "none", DistillCfg(rounds=1, **small), planner, num_envs=1, resume=True)
