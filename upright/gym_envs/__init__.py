"""Gymnasium interface of upright's tasks: ``gymnasium.make`` / ``gymnasium.make_vec`` ids.

``import upright`` registers every id of :data:`upright.gym_envs.registration.GYM_ENVS`
(:func:`~upright.gym_envs.registration.register_envs`). The wrappers live in :mod:`upright.gym_envs.core`
(task-independent) and one adapter module per task (:mod:`upright.gym_envs.standup`, :mod:`upright.gym_envs.lift`).
They wrap the tasks' batched envs, built on the env core :mod:`upright.envs`. README section "Gymnasium interface".
"""

from upright.gym_envs.registration import GYM_ENVS, GymEnvEntry, register_envs

__all__ = ["GYM_ENVS", "GymEnvEntry", "register_envs"]
