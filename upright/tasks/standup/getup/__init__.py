"""The get-up MDP of ``recipe=getup`` (MuJoCo Playground ``Go1Getup``; mujocolab/mjlab_playground ``getup``, branch
``g1-getup``), on the standup task's scene, backends, evaluation and export.

One file per kind of term: :mod:`.actions` (PD gains from the motors' reflected inertia, the relative action),
:mod:`.events` (resets: standing, dropped with a random orientation, or the HoST posture), :mod:`.observations`
(actor and critic terms, each naming the G1 sensor behind it), :mod:`.rewards` (one group), :mod:`.config` (their
parameters, ``env.getup.*``) and :mod:`.env` (the env that wires them into the standup env's step).
"""
