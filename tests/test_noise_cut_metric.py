"""``train.noise_cut_metric``: the noise cut fired by a training indicator (``upright/training/noise_cut.py``)."""

from __future__ import annotations

import pathlib

import pytest
import torch
from train_testlib import run_train

from upright.training.noise_cut import MetricTrigger, NoiseCutMetricError, fires_on_every_rank


def test_the_trigger_fires_on_the_first_full_window_at_the_threshold_after_the_warmup():
    trigger = MetricTrigger("Metrics/pelvis_passed_0.5", at_least=0.9, window=3, warmup=2)
    # warm-up: values of episodes that began before this process's first resets are ignored, however high
    assert trigger.update(1.0) is False and trigger.update(1.0) is False and trigger.mean is None
    assert trigger.update(0.95) is False  # 1 of 3
    assert trigger.update(None) is False  # no episode logged it: skipped, not a zero
    assert trigger.update(0.80) is False  # 2 of 3
    assert trigger.update(0.85) is False  # full window, mean 0.867 < 0.9
    assert trigger.mean == pytest.approx((0.95 + 0.80 + 0.85) / 3)
    assert trigger.update(1.0) is False  # (0.80 + 0.85 + 1.0) / 3 = 0.883
    assert trigger.update(1.0) is True  # (0.85 + 1.0 + 1.0) / 3 = 0.95


def test_the_warmup_is_one_episode_in_iterations():
    # the get-up's 6 s episode at 50 Hz is 300 env steps: 25 iterations of 12 env steps, 13 of 24
    assert MetricTrigger.for_env("m", 0.9, 10, max_episode_length=300, steps_per_env=12).warmup == 25
    assert MetricTrigger.for_env("m", 0.9, 10, max_episode_length=300, steps_per_env=24).warmup == 13


def test_a_metric_never_logged_is_a_one_line_error_naming_the_fix():
    trigger = MetricTrigger("Metrics/pelvis_passed_O.5", at_least=0.9, window=2, warmup=3)
    for _ in range(7):  # 2 x warm-up + window = 8 iterations without a value
        assert trigger.update(None) is False
    with pytest.raises(NoiseCutMetricError, match="train.noise_cut_metric=null") as err:
        trigger.update(None)
    assert "\n" not in str(err.value) and "Metrics/pelvis_passed_O.5" in str(err.value)
    # a metric logged once, even in the warm-up, is a real name: a later gap is not an error
    logged = MetricTrigger("m", at_least=0.9, window=2, warmup=3)
    logged.update(0.1)
    for _ in range(10):
        assert logged.update(None) is False


def _rank(rank: int, init: str, values: list, out: str) -> None:
    """One gloo rank: rank 0 logs ``values`` into a trigger (warm-up 1, window 1); rank 1 logs nothing and follows."""
    torch.distributed.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    trigger = MetricTrigger("m", at_least=0.5, window=1, warmup=1)
    answers = []
    try:
        for v in values:
            answers.append(fires_on_every_rank(trigger, v, logs=rank == 0, distributed=True, device="cpu"))
    except NoiseCutMetricError as err:
        answers.append(str(err))
    finally:
        torch.distributed.destroy_process_group()
    pathlib.Path(f"{out}.{rank}").write_text(repr(answers))


@pytest.mark.parametrize(
    ("values", "expected"), [([0.9, 0.1, 0.7], [False, False, True]), ([None, None, None], [False, False, "stop"])]
)
def test_every_rank_cuts_or_stops_in_the_iteration_rank_0_does(tmp_path, values, expected):
    import torch.multiprocessing as mp

    init, out = f"file://{tmp_path / 'store'}", str(tmp_path / "answers")
    mp.spawn(_rank, args=(init, values, out), nprocs=2, join=True)
    for rank in (0, 1):
        answers = eval(pathlib.Path(f"{out}.{rank}").read_text())
        assert answers[:-1] == expected[:-1]
        if expected[-1] == "stop":
            assert isinstance(answers[-1], str) and "train.noise_cut_metric=m was not logged" in answers[-1]
        else:
            assert answers[-1] is expected[-1]


def test_bad_trigger_values_are_one_line():
    from upright.conf.validate import validate_overrides

    message = validate_overrides(
        ["task=standup", "train.noise_cut_metric=Metrics/pelvis_passed_0.5", "train.noise_cut_metric_window=0"]
    )
    assert "train.noise_cut_metric_window must be an integer >= 1" in message and "\n" not in message
    assert "train.noise_cut_metric_at_least must be a finite number" in validate_overrides(
        ["task=standup", "train.noise_cut_metric=Metrics/pelvis_passed_0.5", "train.noise_cut_metric_at_least=nan"]
    )
    assert "train.noise_cut_std must be > 0" in validate_overrides(
        ["task=standup", "train.noise_cut_metric=Metrics/pelvis_passed_0.5", "train.noise_cut_std=0"]
    )
    assert validate_overrides(["task=standup", "train.noise_cut_metric=Metrics/pelvis_passed_0.5"]) is None
    with pytest.raises(ValueError, match="train.noise_cut_metric must be"):
        MetricTrigger(" ", 0.9, 10, 0)


SMALL = [  # HoST's recipe logs Metrics/head_height at every env step; a 0.3 s episode is 15 env steps: 2 iterations
    "task=standup",
    "recipe=host",
    "env.num_envs=8",
    "env.episode_length_s=0.3",
    "train.num_steps_per_env=8",
    "train.save_interval=1",
    "sim.num_threads=1",
    "train.schedule=fixed",
    "train.noise_cut_iteration=null",
    "train.noise_cut_std=0.25",
    "train.noise_cut_entropy_coef=0",
    "train.noise_cut_metric_window=1",
    "run.root=runs",
]


def _std(run_dir, it):
    return torch.load(run_dir / f"model_{it}.pt", weights_only=False)["actor_state_dict"]["distribution.std_param"]


@pytest.mark.slow
def test_the_metric_cuts_the_noise_after_the_warmup_and_the_cut_holds_at_a_resume(tmp_path):
    """A threshold every head height meets: iterations 1-2 are the warm-up, the 3rd fills the window and cuts. A
    resume before any ``train.noise_cut_iteration`` keeps the cut (no second one; the learned std goes on)."""
    args = [*SMALL, "train.max_iterations=4", "run.name=metric", "train.noise_cut_metric=Metrics/head_height"]
    args.append("train.noise_cut_metric_at_least=-100")
    proc = run_train(args, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Metrics/head_height: mean" in proc.stdout and "(train.noise_cut_metric)" in proc.stdout
    assert "Noise cut after iteration 3: action std 0.25, entropy coefficient 0.0" in proc.stdout
    run_dir = tmp_path / "runs" / "standup" / "metric"
    assert (_std(run_dir, 1) - 0.25).abs().min() > 0.3  # init 0.8: not cut in the warm-up
    assert torch.equal(_std(run_dir, 2), torch.full_like(_std(run_dir, 2), 0.25))
    infos = torch.load(run_dir / "model_2.pt", weights_only=False)["infos"]
    assert infos["noise_cut_applied"] is True and infos["noise_cut_at"] == 3
    proc = run_train([*args, "train.max_iterations=6", f"resume={run_dir}"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Noise cut" not in proc.stdout and "(train.noise_cut_metric)" not in proc.stdout
    std5 = _std(run_dir, 5)
    assert torch.allclose(std5, _std(run_dir, 3), atol=0.05) and not torch.equal(std5, torch.full_like(std5, 0.25))
    assert torch.load(run_dir / "model_5.pt", weights_only=False)["infos"]["noise_cut_at"] == 3


@pytest.mark.slow
def test_an_unmet_threshold_does_not_cut_and_an_unlogged_metric_stops_the_run_after_a_checkpoint(tmp_path):
    args = [*SMALL, "train.max_iterations=4", "run.name=high", "train.noise_cut_metric=Metrics/head_height"]
    proc = run_train([*args, "train.noise_cut_metric_at_least=100"], tmp_path)
    assert proc.returncode == 0 and "Noise cut" not in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert torch.load(tmp_path / "runs/standup/high/model_3.pt", weights_only=False)["infos"]["noise_cut_at"] is None
    # a typo: after twice the warm-up (2) and the window (1), one line naming the fix, and the 5 iterations are saved
    args = [*SMALL, "train.max_iterations=6", "run.name=typo", "train.noise_cut_metric=Metrics/head_heigth"]
    proc = run_train(args, tmp_path)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "train.noise_cut_metric=Metrics/head_heigth was not logged" in errors[0]
    assert "Traceback" not in proc.stderr
    saved = torch.load(tmp_path / "runs/standup/typo/model_4.pt", weights_only=False)
    assert saved["infos"]["completed_iterations"] == 5


def test_a_resumed_run_whose_trigger_cut_keeps_the_cuts_entropy_coefficient_and_its_std():
    """``UprightRunner.apply_noise_cut`` at a resume before ``train.noise_cut_iteration`` of a run the trigger cut:
    the entropy coefficient is the cut's again (the resumed algorithm starts at the recipe's 0.01), the std stays."""
    from types import SimpleNamespace

    from upright.training.runner import UprightRunner

    actor = torch.nn.Module()
    actor.distribution = torch.nn.Module()  # rsl-rl's GaussianDistribution holds the state-independent std
    actor.distribution.std_param = torch.nn.Parameter(torch.full((3,), 0.33))
    alg = SimpleNamespace(actor=actor, optimizer=None, entropy_coef=0.01)
    runner = SimpleNamespace(alg=alg, noise_cut=(1226, 0.4, 0.0), noise_cut_applied=True, completed_iterations=900)
    runner.noise_cut_at = 850
    UprightRunner.apply_noise_cut(runner)
    assert alg.entropy_coef == 0.0 and torch.allclose(actor.distribution.std_param, torch.full((3,), 0.33))
    assert runner.noise_cut_at == 850  # no second cut
    fresh_alg = SimpleNamespace(actor=actor, optimizer=None, entropy_coef=0.01)
    before = SimpleNamespace(alg=fresh_alg, noise_cut=(1226, 0.4, 0.0))
    before.noise_cut_applied, before.completed_iterations, before.noise_cut_at = False, 900, None
    UprightRunner.apply_noise_cut(before)  # not cut yet, before the iteration: nothing changes
    assert before.alg.entropy_coef == 0.01 and before.noise_cut_at is None
