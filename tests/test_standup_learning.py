"""Pure helpers of ``benchmarks/standup_learning.py`` (checkpoint choice, wall clock, recipe diff, cache); no timing."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys

import pytest

PATH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "standup_learning.py"


@pytest.fixture(scope="module")
def sl():
    spec = importlib.util.spec_from_file_location("standup_learning", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["standup_learning"] = module
    spec.loader.exec_module(module)
    return module


def test_select_checkpoints_keeps_first_spaced_and_last(sl):
    its = [0, 25, 50, 75, 100, 125, 137]
    assert sl.select_checkpoints(its, None) == its
    assert sl.select_checkpoints(its, 50) == [0, 50, 100, 137]
    assert sl.select_checkpoints(its, 40) == [0, 50, 100, 137]
    assert sl.select_checkpoints([], 10) == []


def test_cumulative_seconds_sums_iterations_below_each_count_and_flags_gaps(sl):
    per_it = sl.last_by_step([(0, 1.0), (1, 2.0), (2, 9.0), (2, 3.0), (4, 5.0)])  # step 2 logged twice: last wins
    assert per_it == {0: 1.0, 1: 2.0, 2: 3.0, 4: 5.0}
    assert sl.cumulative_seconds(per_it, [3, 1, 0, 5]) == {0: 0.0, 1: 1.0, 3: 6.0, 5: None}  # iteration 3 missing


def test_mtime_seconds_skips_gaps_between_sessions(sl):
    # session 1 starts at t=100 (config_0), checkpoints after 1 and 26 iterations; resumed at t=1000 from 26
    ckpts = {1: 110.0, 26: 350.0, 51: 1200.0}
    assert sl.mtime_seconds(ckpts, {0: 100.0, 26: 1000.0}) == {1: 10.0, 26: 250.0, 51: 450.0}
    assert sl.mtime_seconds(ckpts, {}) == {}


def test_recipe_overrides_lists_differences_but_not_run_keys(sl):
    defaults = sl.flatten(
        {
            "env": {"num_envs": 512, "curriculum": {"trigger": "mean"}},
            "train": {"dims": [512, 256], "save_interval": 10, "lr": None},
            "seed": 1,
        }
    )
    config = sl.flatten(
        {
            "env": {"num_envs": 512, "curriculum": {"trigger": "per_env"}},
            "train": {"dims": [256, 256], "save_interval": 25, "lr": 0.001, "gone": True},
            "seed": 2,
            "run": {"name": "x"},
        }
    )
    assert sl.recipe_overrides(config, defaults) == [
        "env.curriculum.trigger=per_env",
        "train.dims=[256,256]",
        "train.gone=true",
        "train.lr=0.001",
    ]
    assert sl.format_value(None) == "null" and sl.format_value("a b") == '"a b"'
    # a setting added since the run (absent from its config) counts with what the run had: its schema default
    defaults["train.cut"] = 5
    before = {"train.cut": None, "train.other": 1}
    assert "train.cut=null" in sl.recipe_overrides(config, defaults, before)
    assert "train.cut=null" not in sl.recipe_overrides({**config, "train.cut": 5}, defaults, before)
    assert not any(o.startswith("train.other") for o in sl.recipe_overrides(config, defaults, before))


def test_a_getup_run_from_before_the_noise_cut_shows_it_off(sl):
    """A ``recipe=getup`` run config without ``train.noise_cut_*`` (written before the setting) is not today's
    default recipe: its recipe shows the cut off."""
    flat = sl.flat_config(sl.compose_config(["task=standup"]))
    for key in [k for k in flat if k.startswith("train.noise_cut_")]:
        del flat[key]
    assert "train.noise_cut_iteration=null" in sl.run_recipe(flat)
    assert sl.run_recipe(sl.flat_config(sl.compose_config(["task=standup"]))) == []


def test_parse_recipe_named_quoted_and_unknown(sl):
    assert sl.parse_recipe("fast=train.critic_shared_trunk=true env.num_envs=256") == (
        "fast",
        ["train.critic_shared_trunk=true", "env.num_envs=256"],
    )
    assert sl.parse_recipe("host=") == ("host", [])
    assert sl.parse_recipe("default") == ("default", [])
    with pytest.raises(sl.UsageError, match="unknown recipe 'nope'"):
        sl.parse_recipe("nope")
    with pytest.raises(sl.UsageError, match="recipe names must differ"):
        sl.parse_recipes(["a=", "a=x=1"], [])


def test_cache_round_trip_and_invalidation(sl, tmp_path):
    run = tmp_path / "run_s1"
    run.mkdir()
    ckpt = run / "model_25.pt"
    ckpt.write_bytes(b"weights")
    cache = sl.Cache(tmp_path / "cache")
    settings = sl.EvalSettings(episodes=20)
    assert cache.load(ckpt, settings) is None
    cache.store(ckpt, settings, {"E_succ": 12.5})
    assert cache.load(ckpt, settings) == {"E_succ": 12.5}
    assert cache.load(ckpt, sl.EvalSettings(episodes=100)) is None  # another episode count: its own file
    assert cache.load(ckpt, sl.EvalSettings(episodes=20, overrides=("sim.num_threads=1",))) is None
    st = ckpt.stat()
    os.utime(ckpt, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # the checkpoint was rewritten
    assert cache.load(ckpt, settings) is None


def test_read_perf_seconds_from_tensorboard_events_with_a_resume(sl, tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    for steps, scale in ((range(0, 4), 1.0), (range(2, 5), 10.0)):  # resumed from a checkpoint after 2 iterations
        w = SummaryWriter(log_dir=str(tmp_path))
        for s in steps:
            w.add_scalar(sl.COLLECTION_TAG, 1.0 * scale, s)
            w.add_scalar(sl.LEARNING_TAG, 2.0 * scale, s)
        w.close()
    assert sl.read_perf_seconds(tmp_path) == {0: 3.0, 1: 3.0, 2: 30.0, 3: 30.0, 4: 30.0}


def test_open_run_errors_are_one_line(sl, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        sl.main(["curve", "--run-dir", str(tmp_path / "missing")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: run directory") and "does not exist" in err and "\n" not in err
    with pytest.raises(sl.UsageError, match="has no checkpoint"):
        sl.open_run(tmp_path)
    (tmp_path / "model_0.pt").write_bytes(b"")
    assert sl.open_run(tmp_path).checkpoints == {0: tmp_path / "model_0.pt"}


def test_cost_report_medians_ratio_and_idle_verdict(sl):
    cfg = sl.compose_config(["recipe=host", "env.num_envs=64"])
    a = sl.Recipe("host", [], cfg, collection=[9.0, 2.0, 2.2, 2.4], update=[9.0, 8.0, 8.2, 8.4])
    b = sl.Recipe(
        "fast", ["train.critic_shared_trunk=true"], cfg, collection=[9.0, 2.0, 2.1, 2.2], update=[9.0, 3.0, 3.1, 3.2]
    )
    md, record = sl.cost_report(
        [a, b], warmup=1, iters=3, load_before=(0.1, 0.2, 0.3), load_after=(1.0, 0.5, 0.3), others=0.02
    )
    host, fast = record["recipes"]
    assert (host["collection_s"], host["update_s"], host["iteration_s"]) == pytest.approx(
        (2.2, 8.2, 10.4)
    )  # no warm-up
    assert fast["ratio_to_first"] == pytest.approx(5.2 / 10.4) and host["env_steps_per_s"] == pytest.approx(3200 / 10.4)
    assert record["idle"] and "CPU idle." in md and "before: 0.10/0.20/0.30" in md
    _, busy = sl.cost_report([a], warmup=1, iters=3, load_before=(1.9, 1, 1), load_after=(2, 2, 2), others=0.5)
    assert busy["idle"] is False
