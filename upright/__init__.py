"""upright: sim-to-real reinforcement learning for robots on MuJoCo.

Sub-packages (each a folder at the repository root):

- ``upright.robots``: robot definitions (model source, joint order, actuators, sensors).
- ``upright.sim``: batched physics backends behind one interface.
- ``upright.tasks``: task definitions (observation, reward and termination terms).
- ``upright.training``: multi-critic PPO on rsl-rl-lib, runner glue, ONNX export.
- ``upright.deploy``: on-robot controller daemon.
- ``upright.gym_envs``: the gymnasium interface (``gymnasium.make("upright/G1Standup-v0")``), registered on import
  where gymnasium is installed (the robot computer's slim install has none, and ``import upright`` imports nothing
  else there).
"""

__version__ = "0.1.0"

from upright.gym_envs.registration import register_if_gymnasium_is_installed as _register_envs

_register_envs()
