"""Managers every task shares, after mjlab's manager-based envs: observation terms with history
(:mod:`.observation`), reward terms in groups for multi-critic PPO (:mod:`.reward`), per-episode bookkeeping
(:mod:`.episode`), domain-randomisation terms (:mod:`.randomization`) and per-env curriculum levels
(:mod:`.curriculum`).

A term is a small function of the task's state dataclass (``func(state, **params)``) returning an (N, ...) torch
tensor; a term's config is a frozen dataclass holding the function, its parameters and its scale or weight. The
managers know nothing of any robot or task. The lift task (:mod:`upright.tasks.lift`) is built on them; the
standup task still has its own copies (``tasks/standup/rewards/__init__.py``'s ``RewardManager``, its
observation history and episode sums), to be moved onto these.
"""
