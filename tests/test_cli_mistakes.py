"""Issue 33 section 6: every CLI mistake of train.py, play.py and ``python -m upright.training.evaluate`` is one line
that names the fix, exit status 2, and leaves no run folder behind. Real processes; the policies of another task are
a two-iteration lift run (its policy.onnx, model_1.pt and config_0.yaml) and a standup ONNX with train.py's
metadata."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
import torch
from train_testlib import run_train, two_iteration_run

sys.path.insert(0, str(pathlib.Path(__file__).parent / "viewer"))
from viewer_testlib import run_play, write_onnx_policy

LIFT = [
    "task=lift",
    "env.num_envs=16",
    "train.num_steps_per_env=8",
    "train.save_interval=1",
    "sim.num_threads=1",
    "train.update_threads=1",
]


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The single ``error: ...`` line of a refused start (asserts exit 2, one line on stderr, no traceback)."""
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    return lines[0]


def run_evaluate(args: list[str], cwd: pathlib.Path) -> subprocess.CompletedProcess:
    """``python -m upright.training.evaluate *args`` in ``cwd``, output captured."""
    return subprocess.run(
        [sys.executable, "-m", "upright.training.evaluate", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


@pytest.fixture(scope="module")
def lift_run(tmp_path_factory):
    """A two-iteration lift run: ``policy.onnx``, ``model_0.pt``, ``model_1.pt``, ``config_0.yaml``."""
    run_dir, _ = two_iteration_run(tmp_path_factory.mktemp("lift"), "lift", LIFT)
    return run_dir


@pytest.fixture(scope="module")
def standup_onnx(tmp_path_factory):
    """A standup policy.onnx with the metadata train.py writes."""
    from upright.tasks.registry import make_env, policy_metadata
    from upright.tasks.standup.config import SimCfg, StandupEnvCfg

    env = make_env("standup", StandupEnvCfg(num_envs=1), SimCfg(num_threads=1), device="cpu", seed=0)
    try:
        obs_dim = int(env.get_observations()["actor"].shape[-1])
        return write_onnx_policy(
            tmp_path_factory.mktemp("standup") / "policy.onnx",
            obs_dim,
            env.num_actions,
            policy_metadata("standup", env),
        )
    finally:
        env.close()


# --- train.py --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "override, expected",
    [
        ("seed=abc", "seed=abc: seed takes an integer, e.g. seed=1."),
        ("env.num_envs=many", "env.num_envs=many: env.num_envs takes an integer, e.g. env.num_envs=8192."),
        ("train.learning_rate=fast", "train.learning_rate takes a number, e.g. train.learning_rate=0.001."),
        ("env.curriculum.enabled=maybe", "takes true or false, e.g. env.curriculum.enabled=false."),
    ],
)
def test_a_value_of_the_wrong_type_is_one_line_naming_the_key_and_type(tmp_path, override, expected):
    line = one_error_line(run_train(["task=standup", override], tmp_path))
    assert expected in line and not (tmp_path / "logs").exists()


@pytest.mark.parametrize(
    "override, nearest",
    [
        ("env.num_env=8", "env.num_envs"),
        ("num_envs=8", "env.num_envs"),
        ("train.max_iteration=3", "train.max_iterations"),
        ("postur=prone", "posture"),
    ],
)
def test_an_override_typo_suggests_the_nearest_key(tmp_path, override, nearest):
    line = one_error_line(run_train(["task=standup", override], tmp_path))
    assert line.endswith(f"did you mean {nearest}?") and not (tmp_path / "logs").exists()


def test_an_unknown_key_with_no_near_one_lists_its_level_briefly(tmp_path):
    line = one_error_line(run_train(["task=lift", "env.zzz=1"], tmp_path))
    assert "Could not override 'env.zzz'" in line and "keys of env: " in line and "num_envs" in line
    assert "train.max_iterations" not in line  # only env's keys, not all of them


@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch has a CUDA device")
def test_a_cuda_device_without_cuda_is_one_line_before_any_folder(tmp_path):
    line = one_error_line(run_train(["task=lift", "device=cuda:0"], tmp_path))
    assert line.startswith("error: device=cuda:0 but ") and line.endswith("; use device=cpu.")
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("task, robot", [("standup", "unitree_g1"), ("lift", "franka_emika_panda")])
def test_a_missing_robot_model_is_one_line_and_leaves_no_run_folder(tmp_path, monkeypatch, task, robot):
    empty = tmp_path / "menagerie"
    empty.mkdir()
    monkeypatch.setenv("MENAGERIE_ROOT", str(empty))
    for _ in range(2):  # every try, not only the first
        line = one_error_line(run_train([f"task={task}"], tmp_path))
        assert f"Robot model '{robot}' is not available" in line and "Set MENAGERIE_ROOT" in line
        assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("target", ["run", "checkpoint"])
def test_resuming_a_run_of_another_task_is_one_line_naming_its_task(tmp_path, lift_run, target):
    before = sorted(p.name for p in lift_run.iterdir())
    resume = lift_run if target == "run" else lift_run / "model_1.pt"
    line = one_error_line(run_train(["task=standup", f"resume={resume}"], tmp_path))
    assert f"resume={resume} is a task=lift run (config_0.yaml says task_name: lift), not task=standup" in line
    assert "resume it with task=lift" in line
    assert sorted(p.name for p in lift_run.iterdir()) == before


def test_a_start_that_fails_after_the_run_folder_is_made_removes_it(tmp_path, monkeypatch):
    """train() in this process, the runner failing to build: the run folder and the parents it made are gone."""
    from hydra import compose, initialize

    from upright.conf import register_configs, with_task_groups
    from upright.training import train_loop

    def broken_runner(*args, **kwargs):
        raise RuntimeError("runner failed")

    monkeypatch.setattr(train_loop, "UprightRunner", broken_runner)
    register_configs()
    with initialize(version_base=None, config_path=None):
        args = ["task=lift", "env.num_envs=2", "sim.num_threads=1", f"run.root={tmp_path / 'runs'}", "run.name=broken"]
        cfg = compose("config", overrides=with_task_groups(args))
    with pytest.raises(RuntimeError, match="runner failed"):
        train_loop.train(cfg)
    assert not (tmp_path / "runs").exists()


# --- evaluate ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["policy.onnx", "model_1.pt"])
def test_evaluate_refuses_a_lift_policy_on_standup_in_one_line(tmp_path, lift_run, policy):
    path = lift_run / policy
    line = one_error_line(run_evaluate(["--policy", str(path), "--episodes", "1", "--num-envs", "1"], tmp_path))
    where = "ONNX metadata" if policy.endswith(".onnx") else "config_0.yaml"
    assert f"policy={path} is a policy of task=lift (its {where} says so), not of task=standup; use --task lift" in line


def test_evaluate_refuses_a_standup_policy_on_lift_in_one_line(tmp_path, standup_onnx):
    args = ["--task", "lift", "--policy", str(standup_onnx), "--episodes", "1", "--num-envs", "1"]
    line = one_error_line(run_evaluate(args, tmp_path))
    assert "is a policy of task=standup (its ONNX metadata says so), not of task=lift; use --task standup" in line


def test_evaluate_a_text_file_named_onnx_is_one_line(tmp_path):
    (tmp_path / "policy.onnx").write_text("not a model\n")
    args = ["--policy", "policy.onnx", "--episodes", "1", "--num-envs", "1", "sim.num_threads=1"]
    line = one_error_line(run_evaluate(args, tmp_path))
    assert "policy.onnx: cannot read as an ONNX model" in line


# --- play.py ----------------------------------------------------------------------------------------------------


def test_play_refuses_a_lift_policy_on_standup_in_one_line(tmp_path, lift_run):
    path = lift_run / "policy.onnx"
    line = one_error_line(run_play(["task=standup", f"policy={path}", "video=out.mp4"], tmp_path))
    assert f"policy={path} is a policy of task=lift (its ONNX metadata says so), not of task=standup" in line
    assert line.endswith("; use task=lift")
    assert not (tmp_path / "out.mp4").exists()


def test_play_refuses_a_standup_policy_on_lift_in_one_line(tmp_path, standup_onnx):
    line = one_error_line(run_play(["task=lift", f"policy={standup_onnx}", "video=out.mp4"], tmp_path))
    assert "is a policy of task=standup (its ONNX metadata says so), not of task=lift; use task=standup" in line


def test_play_override_typo_suggests_the_nearest_key(tmp_path):
    line = one_error_line(run_play(["task=standup", "polcy=zero"], tmp_path))
    assert line.endswith("did you mean policy?")
