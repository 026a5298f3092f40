"""``benchmarks/bench_standup_env.py``'s configuration: the benchmark's N wins over a recipe's ``env.num_envs``, and
``--set`` applies env.* / train.* values on top of the recipe (its cost-per-iteration A/Bs rely on both)."""

from __future__ import annotations

import pathlib
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # the script imports its siblings (machine, standup_stepping) by name
    import bench_standup_env

    monkeypatch.setattr(bench_standup_env, "RECIPE", "getup")
    monkeypatch.setattr(bench_standup_env, "SETTINGS", {})
    yield bench_standup_env
    sys.modules.pop("bench_standup_env", None)


def test_the_benchmarks_n_wins_over_the_recipes_num_envs(bench):
    cfg = bench.bench_env_cfg(64)  # recipe=getup sets env.num_envs=8192
    assert cfg.num_envs == 64 and cfg.mdp == "getup" and cfg.getup.actor_history == 6


def test_set_overrides_the_recipe_and_reads_yaml_values(bench, monkeypatch):
    settings = bench.parse_settings(
        ["env.getup.actor_history=1", "env.getup.fall_termination=false", "train.desired_kl=5e-3"]
    )
    assert settings == {"env.getup.actor_history": 1, "env.getup.fall_termination": False, "train.desired_kl": 0.005}
    monkeypatch.setattr(bench, "SETTINGS", settings)
    cfg = bench.bench_env_cfg(32)
    assert (cfg.num_envs, cfg.getup.actor_history, cfg.getup.fall_termination) == (32, 1, False)
    assert bench.bench_train_cfg(12).desired_kl == pytest.approx(0.005)


@pytest.mark.parametrize("item", ["getup.actor_history=1", "env.getup.actor_history", "sim.num_threads=1"])
def test_a_malformed_set_is_one_line_naming_the_form(bench, item):
    with pytest.raises(ValueError, match=r"expected env\.KEY=VALUE or train\.KEY=VALUE") as err:
        bench.parse_settings([item])
    assert "\n" not in str(err.value)
