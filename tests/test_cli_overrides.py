"""Issue 13 item 7 and 8: train.py refuses bad overrides in one line before Hydra runs (real train.py processes), and
the progress line prints '-' for a reward group when no episode ended in the iteration."""

from __future__ import annotations

import pytest
from test_train_smoke import SMALL, run_train


@pytest.mark.parametrize(
    "override, expected",
    [
        ("+env.nope=1", "Could not override 'env.nope'. (unknown key; upright's keys are fixed)"),
        ("+env.num_envs=4", "'env.num_envs' already exists and upright takes no new keys; drop the '+'"),
        ("train.max_iterations=-1", "train.max_iterations must be >= 1 (got -1)"),
        ("env.num_envs=0", "env.num_envs must be >= 1 (got 0)"),
        ("resume=no/such/run", "resume=no/such/run: no such run directory or checkpoint file"),
    ],
)
def test_bad_override_is_one_line_and_exit_2(tmp_path, override, expected):
    proc = run_train(["task=standup", override], tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.startswith("error: ") and expected in proc.stderr.splitlines()[0]
    assert "Traceback" not in proc.stderr and not (tmp_path / "logs").exists()


def test_progress_line_prints_a_dash_when_no_episode_ended(tmp_path):
    args = [
        *SMALL,
        "env.episode_length_s=1.0",
        "train.init_at_random_ep_len=false",
        "train.max_iterations=1",
        "run.root=runs",
        "run.name=dash",
    ]
    proc = run_train(args, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("it 1/1"))
    assert "task=- regularization=- style=- post_task=-" in line and "nan" not in line


# --- saved run configs ------------------------------------------------------------------------------------------


def _saved_lift_config(tmp_path, drop: str | None = None, extra: dict | None = None):
    """A lift run config as train.py saves it (the composed config), with one key removed or added."""
    from omegaconf import OmegaConf

    from upright.conf import task_schema

    cfg = OmegaConf.create(OmegaConf.to_container(OmegaConf.create(task_schema("lift")), resolve=True))
    cfg.seed = 3
    if drop:
        parent, leaf = drop.rsplit(".", 1)
        del OmegaConf.select(cfg, parent)[leaf]
    for key, value in (extra or {}).items():
        OmegaConf.update(cfg, key, value, force_add=True)
    path = tmp_path / "config_0.yaml"
    OmegaConf.save(cfg, path)
    return path


def test_a_run_config_saved_before_a_setting_gets_the_behaviour_it_trained_with(tmp_path):
    from upright.conf import load_run_config

    old = load_run_config(_saved_lift_config(tmp_path, drop="env.rewards.carry_off_floor"))
    assert old.env.rewards.carry_off_floor is False  # the carry was ungated before the setting existed
    new = load_run_config(_saved_lift_config(tmp_path))
    assert new.env.rewards.carry_off_floor is True
    no_threshold = load_run_config(_saved_lift_config(tmp_path, drop="env.rewards.at_target_threshold"))
    assert no_threshold.env.rewards.at_target_threshold == 0.025  # a plain new setting: its default


def test_a_run_config_with_an_unknown_key_or_task_is_refused(tmp_path):
    from upright.conf import load_run_config

    with pytest.raises(ValueError, match="predates a change of its schema"):
        load_run_config(_saved_lift_config(tmp_path, extra={"env.rewards.not_a_term": 1.0}))
    with pytest.raises(ValueError, match="task_name='juggle'"):
        load_run_config(_saved_lift_config(tmp_path, extra={"task_name": "juggle"}))
    with pytest.raises(FileNotFoundError):
        load_run_config(tmp_path / "missing.yaml")


def test_a_standup_run_config_with_removed_levers_loads_without_them_and_their_overrides_are_refused(tmp_path):
    """Levers removed on 2026-11-26 (:data:`upright.conf.REMOVED_SETTINGS`): a run config saved with them still loads
    (evaluation, export and play of earlier runs), and an override of one names the commit where their code lived."""
    from omegaconf import OmegaConf

    from upright.conf import REMOVED_IN, load_run_config, task_schema
    from upright.conf.validate import validate_overrides

    cfg = OmegaConf.create(OmegaConf.to_container(OmegaConf.create(task_schema("standup")), resolve=True))
    cfg.env.rise_path = {"fraction": 0.6, "fall_drop": 0.25}
    cfg.env.state_archive = {"fraction": 0.4}
    cfg.env.assisted_start = {"fraction": 0.1}
    cfg.env.curriculum.pull_assisted = False
    OmegaConf.save(cfg, tmp_path / "config_0.yaml")
    loaded = load_run_config(tmp_path / "config_0.yaml")
    assert not any(key in loaded.env for key in ("rise_path", "state_archive", "assisted_start"))
    assert "pull_assisted" not in loaded.env.curriculum and loaded.env.curriculum.trigger == "batch_mean"
    message = validate_overrides(["task=standup", "env.assisted_start.fraction=0.25"])
    assert "env.assisted_start was removed" in message and REMOVED_IN in message
