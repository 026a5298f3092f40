"""Managers every task shares, after mjlab's manager-based envs, run by the env core (:mod:`upright.envs`): the action
term interface (:mod:`.action`), observation terms, groups and history (:mod:`.observation`), reward terms in groups
for multi-critic PPO (:mod:`.reward`), termination terms (:mod:`.termination`), per-episode bookkeeping
(:mod:`.episode`), domain-randomisation terms and the action delay (:mod:`.randomization`) and per-env curriculum
levels (:mod:`.curriculum`).

A term is a small function of the task's state dataclass (``func(state, **params)``) returning an (N, ...) torch
tensor; a term's config is a frozen dataclass holding the function, its parameters and its scale or weight. The
managers know nothing of any robot or task. Every task is built on them: a task is its config, its state
dataclass and its term files (:mod:`upright.tasks.lift`: ``rewards.py``, ``observations.py``,
``randomization.py``, ``curriculum.py``; :mod:`upright.tasks.standup`: ``rewards/`` with HoST's product-combined
task group, ``observations.py`` with its 6-frame history, ``randomization.py``), and the ONNX metadata of the
observation is written from the same terms (:func:`upright.tasks.metadata.observation_metadata`). Standup keeps
its own curriculum (HoST's pull force and β per env, :mod:`upright.tasks.standup.curriculum`), which is not a
level in [0, 1].
"""
