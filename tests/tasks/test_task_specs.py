"""One spec per task (upright.tasks.spec): every task folder is found, its spec imports nothing heavy, and a task
dropped into a new folder is trained, exported and offered to gymnasium without touching any other file."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from upright.tasks.spec import TaskSpec, resolve, task_spec, task_specs

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_every_task_folder_has_a_spec_and_every_spec_resolves():
    specs = task_specs()
    folders = sorted(p.name for p in (ROOT / "upright" / "tasks").iterdir() if (p / "__init__.py").is_file())
    assert list(specs) == folders == ["lift", "reach", "standup"]
    for spec in specs.values():
        for ref in (spec.env_cfg, spec.sim_cfg, spec.env, spec.metadata):
            assert callable(resolve(ref)), ref
        assert spec.groups() is not None
        if spec.gym_id:
            assert callable(resolve(f"{spec.gym_adapter}:make_env"))
        if spec.evaluator:
            assert callable(resolve(spec.evaluator))


def test_unknown_task_and_bad_reference_are_one_line_errors():
    with pytest.raises(ValueError, match="Unknown task 'push'. Valid tasks: lift, reach, standup"):
        task_spec("push")
    with pytest.raises(ValueError, match="expected 'module:attribute'"):
        resolve("upright.tasks.reach.env.ReachEnv")
    with pytest.raises(ValueError, match="has no attribute 'Nope'"):
        resolve("upright.tasks.reach.env:Nope")


def test_reading_every_spec_imports_no_torch_mujoco_or_hydra():
    code = (
        "import sys\nfrom upright.tasks.spec import task_specs\nprint(len(task_specs()))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'mujoco', 'jax', 'hydra')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["3", "[]"], proc.stdout


NEW_TASK = """
from upright.tasks.spec import TaskSpec

SPEC = TaskSpec(
    name="{name}",
    description="the reach task under another name, as a user's new task folder",
    env_cfg="upright.tasks.reach.config:ReachEnvCfg",
    sim_cfg="upright.tasks.lift.config:lift_sim_cfg",
    env="upright.tasks.reach.env:ReachEnv",
    metadata="upright.tasks.{name}.metadata:metadata",
    train_defaults={{"actor_hidden_dims": [16], "critic_hidden_dims": [16], "group_weights": [1.0]}},
    recipes={{"{name}_fast": {{"env.episode_length_s": 1.0}}}},
)
"""

META = """
from upright.tasks.reach.metadata import reach_policy_metadata


def metadata(env):
    return reach_policy_metadata(env) | {{"task": "{name}"}}
"""


@pytest.mark.slow
def test_a_new_task_folder_trains_and_exports_through_train_py(tmp_path):
    """A task folder ``hop/`` with an ``__init__.py``, a ``spec.py`` and a term file, and nothing else changed, is a
    task of ``train.py``: its recipe, its train defaults, its env, its checkpoint and its metadata. It lies outside the
    repository, named by ``UPRIGHT_TASKS_PATH`` (the same discovery as a folder in ``upright/tasks/``)."""
    name = "hop"
    pkg = tmp_path / "tasks" / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""A test task."""\n')
    (pkg / "spec.py").write_text(NEW_TASK.format(name=name))
    (pkg / "metadata.py").write_text(META.format(name=name))
    args = [
        f"task={name}",
        f"recipe={name}_fast",
        "env.num_envs=8",
        "train.num_steps_per_env=4",
        "train.max_iterations=2",
        "sim.num_threads=1",
        "train.update_threads=1",
        f"run.root={tmp_path / 'logs'}",
        "run.name=new",
    ]
    env = dict(os.environ, UPRIGHT_TASKS_PATH=str(tmp_path / "tasks"))
    cmd = [sys.executable, str(ROOT / "train.py"), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run_dir = tmp_path / "logs" / name / "new"
    from upright.training.onnx_export import read_metadata

    meta = read_metadata(run_dir / "policy.onnx")
    assert meta["task"] == name and meta["observation_dim"] == 32
    saved = (run_dir / "config_0.yaml").read_text()
    assert f"task_name: {name}" in saved and "episode_length_s: 1.0" in saved and "- 16" in saved
    # without the variable the task does not exist: one line naming the valid ones
    bare = {k: v for k, v in os.environ.items() if k != "UPRIGHT_TASKS_PATH"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=bare)
    assert proc.returncode == 2 and "Unknown task 'hop'. Valid tasks: lift, reach, standup" in proc.stderr


def test_a_missing_tasks_path_folder_is_a_one_line_error(tmp_path):
    code = "from upright.tasks.spec import task_specs\ntask_specs()"
    env = dict(os.environ, UPRIGHT_TASKS_PATH=str(tmp_path / "nope"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0 and "UPRIGHT_TASKS_PATH names" in proc.stderr and "fix or unset it" in proc.stderr


def test_a_spec_is_frozen():
    spec = task_spec("reach")
    assert isinstance(spec, TaskSpec)
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]
