"""The env core every task builds on: :class:`ManagerBasedRlEnv` (:mod:`.manager_based`), after mjlab's
``envs/manager_based_rl_env.py``. A task's env subclasses it with its scene, its state reader, its reset event and
its managers (action term, event terms, reward groups, termination terms, curriculum terms, observation groups, all
from :mod:`upright.managers`); the env step itself is written once, here. The gymnasium adapters over it live in
:mod:`upright.gym_envs`."""

from upright.envs.manager_based import ManagerBasedRlEnv

__all__ = ["ManagerBasedRlEnv"]
