"""Gymnasium interface of upright's tasks: ``gymnasium.make`` / ``gymnasium.make_vec`` ids.

``import upright`` registers every id of :data:`upright.envs.registration.GYM_ENVS`
(:func:`~upright.envs.registration.register_envs`). The wrappers live in :mod:`upright.envs.core` (task-independent)
and one adapter module per task (:mod:`upright.envs.standup`, :mod:`upright.envs.lift`). README section "Gymnasium
interface".
"""

from upright.envs.registration import GYM_ENVS, GymEnvEntry, register_envs

__all__ = ["GYM_ENVS", "GymEnvEntry", "register_envs"]
