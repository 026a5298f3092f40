"""Task registry: ``task=<name>`` -> its env and the ONNX metadata of its policies, read from the task's spec
(:mod:`upright.tasks.spec`; every ``upright/tasks/<name>/spec.py``)."""

from __future__ import annotations

from typing import Any

from upright.tasks.spec import task_spec


def make_env(task_name: str, env_cfg, sim_cfg, device: str, seed: int):
    """Build the env of ``task_name`` (its spec's :attr:`~upright.tasks.spec.TaskSpec.env`).

    Raises:
        ValueError: unknown task (the message lists the valid ones), or the task's own config errors.
    """
    return task_spec(task_name).make_env(env_cfg, sim_cfg, device=device, seed=seed)


def policy_metadata(task_name: str, env) -> dict[str, Any]:
    """ONNX metadata describing how to run a policy of ``task_name`` with nothing but the file (its spec's
    :attr:`~upright.tasks.spec.TaskSpec.metadata`).

    The keys and their meaning are listed in :mod:`upright.policy_io.schema` (every key of
    :data:`~upright.policy_io.schema.REQUIRED_KEYS` is present); :mod:`upright.training.onnx_export` writes them as
    JSON strings.

    Raises:
        ValueError: unknown task.
    """
    return task_spec(task_name).policy_metadata(env)
