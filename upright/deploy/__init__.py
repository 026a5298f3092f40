"""upright.deploy: the on-robot daemon (``upright-deploy run | sim-robot | ctl | recover``).

Modules, from the policy file to the motors:

- ``metadata``: the policy contract read from the ONNX file alone; refuses files without metadata or
  whose joints do not match the robot.
- ``observation``: the training env's observation terms (the neutral definitions of
  :mod:`upright.policy_io.obs_terms`), in numpy, for one robot, with history.
- ``policy``: onnxruntime, one thread (MLP files); ``chunk_policy`` + ``chunk_runner``: a chunked (VLA) policy
  (ONNX, TinyVLA, or a remote openpi server) with its deploy contract, run off the real-time thread through an
  action-chunk queue (``docs/deploy_chunked.md``).
- ``controller``: per-cycle checks, the state machine's targets, logging (with its parts ``controller_safety``,
  ``controller_targets``, ``controller_operator``, ``controller_recording``); ``state_machine``, ``safety``.
- ``loop``: absolute-deadline pacing, optional SCHED_FIFO/pinning, gc frozen, watchdog, damping on exit.
- ``robot`` (abstract robot + ``SerialRobot``), ``bus`` (pyserial link), ``robot_config`` (motors, buses,
  limits), ``protocol`` (GO-M8010-6 frames, CRC-16/CCITT, upright's IMU frame).
- ``logger_process``: LeRobotDataset v3 episodes written by a separate process through
  :mod:`upright.dataset_io` (the format, its crash-safe journal, the writer lock and the check of a dataset folder that
  ``run``, ``recover`` and ``upright.vla.train_bc`` do first) (``logger_client``: the daemon's side;
  ``logger_writer``: the process's; ``logger_records``: the pipe record both share; the dataset's record layout, which
  demonstration recording writes too, is :mod:`upright.dataset_io.records`); ``recover``: ``upright-deploy recover``.
- ``camera`` + ``shared_frames``: camera sources of a chunked policy (sim-robot's frames, OpenCV/V4L2), each grabbing
  in its own thread; the memory-mapped frame files they and the logger's image ring use.
- ``operator``: Unix-socket API and keyboard (``operator_socket``: the socket's path and security checks, and the
  ``ctl`` client).
- ``sim_robot`` + ``pty_device``: the G1 (standup scene) or the Panda (lift scene) in MuJoCo answering the same
  bytes over pseudo-terminals; ``sim_camera``: its cameras, rendered from the simulated state
  (the only modules here that import MuJoCo and the robot/scene definitions; the daemon never imports them).

For an MLP policy the daemon imports only the ground floor from the rest of upright (``policy_io``: the schema, the
neutral observation terms, onnxruntime; ``dataset_io``) and numpy, onnxruntime, pyserial and pyarrow: the robot
computer's slim install (pyproject's base dependencies; no torch, MuJoCo, Hydra or onnx). Chunked policies import the
VLA runtime (``upright.vla``: ONNX, TinyVLA, remote client, with torch: the ``train`` extra), and ``sim-robot`` MuJoCo;
each mode refuses in one line naming the extra when it is missing. Never training, the simulator backends or the env.
"""
