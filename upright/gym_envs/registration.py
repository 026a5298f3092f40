"""The gymnasium ids of upright's tasks, registered on ``import upright``.

Each entry names an id and the adapter module of its task. The module provides two functions that gymnasium calls:
``make_env(**kwargs) -> gymnasium.Env`` (``gymnasium.make``) and ``make_vector_env(num_envs, **kwargs) ->
gymnasium.vector.VectorEnv`` (``gymnasium.make_vec(..., vectorization_mode="vector_entry_point")``), both built on
:mod:`upright.gym_envs.core`. A task offers an id by naming it and its adapter module in its spec
(``gym_id``, ``gym_adapter``; :mod:`upright.tasks.spec`); the adapter is a :class:`~upright.gym_envs.core.BatchedTask`
subclass: how to build the task's batched env, reseed it, and rebuild the observation an episode ended on.

This module imports no third-party module at import time; ``import upright`` registers the ids when gymnasium is
installed (:func:`register_if_gymnasium_is_installed`), so the robot computer's slim install, which has no gymnasium,
imports upright as it is.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class GymEnvEntry:
    """One gymnasium id of an upright task."""

    id: str
    """Gymnasium id, ``upright/<Name>-v<version>``."""
    module: str
    """Adapter module with ``make_env`` and ``make_vector_env``."""


def gym_entries() -> tuple[GymEnvEntry, ...]:
    """One entry per task spec that names a gymnasium id (:attr:`upright.tasks.spec.TaskSpec.gym_id`), in task-name
    order (``upright/PandaLift-v0``, ``upright/G1Standup-v0``): the order :func:`register_envs` registers them. Reads
    the task specs (light modules) only when called, so ``import upright`` without gymnasium reads none."""
    from upright.tasks.spec import task_specs

    return tuple(GymEnvEntry(s.gym_id, s.gym_adapter) for s in task_specs().values() if s.gym_id and s.gym_adapter)


def register_envs() -> list[str]:
    """Register every id of :func:`gym_entries` with gymnasium that is not registered yet (idempotent: a second call,
    e.g. after ``importlib.reload(upright)``, registers nothing and warns about nothing).

    Episodes end inside the env (``truncated`` at the task's time limit), so no ``TimeLimit`` wrapper is added
    (``max_episode_steps=None``).

    Returns:
        The ids registered by this call.
    """
    from gymnasium.envs.registration import register, registry

    added = []
    for entry in gym_entries():
        if entry.id in registry:
            continue
        register(
            id=entry.id,
            entry_point=f"{entry.module}:make_env",
            vector_entry_point=f"{entry.module}:make_vector_env",
            max_episode_steps=None,
            nondeterministic=False,
        )
        added.append(entry.id)
    return added


def register_if_gymnasium_is_installed() -> bool:
    """Register the ids (:func:`register_envs`) when gymnasium is installed, else do nothing (the robot computer's
    slim install has no gymnasium; ``import upright`` calls this). Returns whether gymnasium was found."""
    if importlib.util.find_spec("gymnasium") is None:
        return False
    register_envs()
    return True
