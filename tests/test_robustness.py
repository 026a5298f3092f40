"""Robustness battery CLI: every row reaches the env, the table and CSV list every row, bad rows error."""

import csv

import mujoco
import pytest
import torch

from upright.training import robustness
from upright.training.evaluate import make_eval_env


def _torso_mass(env) -> float:
    torso = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
    return float(env.sim.model_field("body_mass")[0, torso])


def test_disruption_overrides_reach_the_env():
    kwargs = dict(num_envs=2, episode_length_s=0.2, domain_rand=False, beta=0.5, overrides=["sim.num_threads=1"])
    env, _, beta, _ = make_eval_env("zero", **kwargs)
    nominal = _torso_mass(env)
    env.close()
    assert beta == 0.5
    (payload,) = [d for d in robustness.BATTERY if d.name == "payload 12 kg"]
    env, _, _, cfg = make_eval_env("zero", **{**kwargs, "overrides": [*kwargs["overrides"], *payload.overrides]})
    try:
        assert _torso_mass(env) == pytest.approx(nominal + 12.0, abs=1e-6)
        assert cfg.env.curriculum.enabled is False and float(env.curriculum.force.abs().max()) == 0.0
    finally:
        env.close()


def test_battery_covers_the_issue_list():
    names = [d.name for d in robustness.BATTERY]
    for must in (
        "observation noise x2",
        "action delay 40 ms",
        "action delay 80 ms",
        "pushes 1.0 m/s",
        "payload 4 kg",
        "payload 8 kg",
        "payload 12 kg",
        "torque dropout 0.05",
        "torque dropout 0.2",
        "friction 0.2",
    ):
        assert must in names


def test_cli_writes_one_table(tmp_path, capsys):
    rows = ["nominal", "action delay 80 ms"]
    robustness.main(
        [
            "--policy",
            "random",
            "--episodes",
            "2",
            "--num-envs",
            "2",
            "--episode-length-s",
            "0.8",
            "--only",
            *rows,
            "--out",
            str(tmp_path),
            "sim.num_threads=1",
        ]
    )
    md = (tmp_path / "robustness.md").read_text()
    assert all(f"| {r} |" in md for r in rows)
    with open(tmp_path / "robustness.csv") as f:
        table = list(csv.DictReader(f))
    assert [r["disruption"] for r in table] == rows
    assert all(0.0 <= float(r["E_succ"]) <= 100.0 for r in table)
    assert float(table[0]["E_smth"]) > 0.0  # a random policy moves its joints


def test_unknown_row_is_an_error():
    with pytest.raises(SystemExit):
        robustness.main(["--policy", "zero", "--only", "gravity off"])


def test_peak_height_is_the_highest_actuated_pelvis_height():
    """A robot that never moves (zero policy on the nominal model) peaks near its lying pelvis height."""
    from upright.training.evaluate import PEAK, run_episodes

    env, policy, _, _ = make_eval_env(
        "zero", num_envs=2, episode_length_s=1.0, domain_rand=False, overrides=["sim.num_threads=1"]
    )
    try:
        res = run_episodes(env, policy, 2)
        lying = float(env.last_state.base_height.max())
    finally:
        env.close()
    assert res[PEAK].shape == (2,)
    assert 0.0 < float(res[PEAK].max()) < 0.3 and abs(float(res[PEAK].max()) - lying) < 0.05


def test_final_head_height_is_the_last_steps_head_height():
    """The zero policy ends lying: its final head height is the head-above-feet of the episode's last state."""
    from upright.training.evaluate import FINAL_HEAD, run_episodes, summarize

    env, policy, _, _ = make_eval_env(
        "zero", num_envs=2, episode_length_s=1.0, domain_rand=False, overrides=["sim.num_threads=1"]
    )
    try:
        res = run_episodes(env, policy, 2)
        last = env.last_state.head_height.clone()
    finally:
        env.close()
    assert torch.equal(res[FINAL_HEAD], last)
    assert float(last.abs().max()) < 0.3  # lying: the head is near the height of the feet
    assert summarize(res)[FINAL_HEAD] == pytest.approx(float(last.mean()))


def test_fell_after_standing_counts_a_standing_start_that_sinks():
    """Get-up standing starts (pelvis at its standing height, acting from the first step) under the zero policy sink:
    the PD targets follow the measured q, so nothing holds the weight. Each episode passed 0.7 m and fell below 0.5 m
    (read from the simulator's pelvis z): E_succ 0 and fell-after-standing 100 %. Lying starts never stand: 0 %."""
    from upright.tasks.standup.config import SimCfg, StandupEnvCfg
    from upright.tasks.standup.getup.config import GetupCfg
    from upright.tasks.standup.getup.env import GetupEnv
    from upright.tasks.standup.randomization import DomainRandCfg
    from upright.training.evaluate import FELL, run_episodes

    def env_of(stand: float) -> GetupEnv:
        cfg = StandupEnvCfg(num_envs=2, mdp="getup", episode_length_s=3.0, obs_noise=False)
        cfg.curriculum.enabled, cfg.curriculum.beta_init = False, 0.6
        cfg.getup = GetupCfg(stand_fraction=stand, fall_fraction=0.0)
        cfg.domain_rand = DomainRandCfg(enabled=False)
        cfg.unactuated_steps = 0  # the evaluator counts heights from this step on
        return GetupEnv(cfg, SimCfg(num_threads=1), seed=0)

    def zero(obs):
        return torch.zeros(obs.shape[0], 23)

    env = env_of(1.0)
    res = run_episodes(env, zero, 2)
    assert env.last_state.base_pos[:, 2].max() < 0.5  # they did sink
    assert res["E_succ"].tolist() == [0.0, 0.0] and res[FELL].tolist() == [100.0, 100.0]
    res = run_episodes(env_of(0.0), zero, 2)
    assert res[FELL].tolist() == [0.0, 0.0]
