"""upright.deploy: the on-robot daemon (``upright-deploy run | sim-robot | ctl | recover``).

Modules, from the policy file to the motors:

- ``metadata``: the policy contract read from the ONNX file alone; refuses files without metadata or
  whose joints do not match the robot.
- ``observation``: the training env's observation terms (shared definitions) for one robot, with history.
- ``policy``: onnxruntime, one thread.
- ``controller``: per-cycle checks, the state machine's targets, logging; ``state_machine``, ``safety``.
- ``loop``: absolute-deadline pacing, optional SCHED_FIFO/pinning, gc frozen, watchdog, damping on exit.
- ``robot`` (abstract robot + ``SerialRobot``), ``bus`` (pyserial link), ``robot_config`` (motors, buses,
  limits), ``protocol`` (GO-M8010-6 frames, CRC-16/CCITT, upright's IMU frame).
- ``logger_process`` + ``lerobot_dataset``: LeRobotDataset v3 episodes written by a separate process,
  crash-safe journal.
- ``operator``: Unix-socket API and keyboard.
- ``sim_robot`` + ``pty_device``: the G1 in MuJoCo answering the same bytes over pseudo-terminals
  (the only modules here that import MuJoCo and the robot/scene definitions; the daemon never imports them).

Deploy imports only the shared observation term definitions (``upright.tasks.standup.observations``
and ``.state``) from the rest of upright; never training, the simulator backends or the env.
"""
