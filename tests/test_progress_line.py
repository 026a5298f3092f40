"""The training progress line names every quantity with its unit, and Ctrl-C names the checkpoint it writes."""

from __future__ import annotations

import re

import pytest
import torch
from test_l2c2 import CountingEnv, train_dict

from upright.training.runner import UprightRunner, checkpoint_name, interrupted_message, progress_line

GROUPS = {"task": 0.1234, "regularization": float("nan")}


def test_standup_line_labels_every_quantity_and_the_eta_target():
    extras = {
        "Metrics/head_height": -0.1,
        "Metrics/action_scale": 0.95,
        "Curriculum/pull_force_level": 180.0,
        "Metrics/stood_from_posture": 0.01,
    }
    line = progress_line(8, 12000, 5120.0, GROUPS, extras, 123.45, 3600 * 30)
    assert line.startswith("it 8/12000 | 5,120 env-steps/s | reward per env step: task=0.123 regularization=- |")
    for part in (
        "head above feet -0.100 m",
        "action bound beta 0.95",
        "pull force 180 N",
        "stood up 1.0 % of episodes",
        "episode length 123.5 env steps",
        "ETA 1 day, 6:00:00 to it 12000 (train.max_iterations)",
    ):
        assert f"| {part}" in line, (part, line)


def test_lift_and_getup_lines():
    lift = progress_line(3, 1500, 1e4, {"reach": 0.5}, {"Metrics/success": 0.25, "Curriculum/level": 0.4}, None, 5)
    assert "| success 25.0 % of episodes | curriculum level 0.40 | episode length - |" in lift
    extras = {
        "Metrics/host_success": 0.0,
        "Metrics/pelvis_passed_0.5": 0.5,
        "Metrics/standing_start_time_up": 1.1,
        "Metrics/action_scale": 0.6,
    }
    getup = progress_line(1, 10, 1.0, {"getup": 1.0}, extras, 10.0, 0)
    assert (
        "| pelvis above 0.5 m 50.0 % of episodes | HoST success 0.0 % of episodes | standing starts kept up 1.1 s |"
    ) in getup
    assert "beta" not in getup  # getup has no β curriculum


def test_interrupt_message_names_the_file_it_writes():
    assert checkpoint_name(8) == "model_7.pt"
    message = interrupted_message(8, "logs/standup/run")
    assert "after 8 iterations (it 8/...)" in message and "saving logs/standup/run/model_7.pt" in message
    assert "no checkpoint" in interrupted_message(0, "logs/x")


def test_ctrl_c_saves_the_file_the_message_names(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    runner = UprightRunner(
        CountingEnv(), train_dict(save_interval=100), log_dir=str(tmp_path / "run"), update_threads=1
    )
    log = runner.logger.log

    def ctrl_c_after_the_third(it: int, *args, **kwargs) -> None:
        log(it, *args, **kwargs)  # the line "it 3/10 ..." is printed, then the operator presses Ctrl-C
        if it == 2:
            raise KeyboardInterrupt

    runner.logger.log = ctrl_c_after_the_third
    with pytest.raises(KeyboardInterrupt):
        runner.learn_until(10)
    out = capsys.readouterr().out
    named = re.search(r"saving (\S+model_(\d+)\.pt)", out)
    assert named and "Interrupted after 3 iterations" in out, out[-2000:]
    saved = torch.load(named.group(1), weights_only=False)
    assert saved["infos"]["completed_iterations"] == 3 and named.group(2) == "2"
    assert [line.split()[1] for line in out.splitlines() if line.startswith("it ")][-1] == "3/10"
