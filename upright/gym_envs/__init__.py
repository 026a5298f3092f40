"""Gymnasium interface of upright's tasks: ``gymnasium.make`` / ``gymnasium.make_vec`` ids.

``import upright`` registers every id of :func:`upright.gym_envs.registration.gym_entries`
(:func:`~upright.gym_envs.registration.register_envs`). The wrappers live in :mod:`upright.gym_envs.core`
(task-independent) and one adapter module per task (:mod:`upright.gym_envs.standup`, :mod:`upright.gym_envs.lift`).
They wrap the tasks' batched envs, built on the env core :mod:`upright.envs`. README section "Gymnasium interface".
"""

from upright.gym_envs.registration import GymEnvEntry, gym_entries, register_envs

__all__ = ["GymEnvEntry", "gym_entries", "register_envs"]
