"""Policy I/O, the ground floor every reader of a policy file builds on (deploy, play, evaluation, the VLA code).

- :mod:`~upright.policy_io.schema`: the ONNX metadata schema (keys, versions, action modes), reading and type-checking
  a file's metadata;
- :mod:`~upright.policy_io.session`: :func:`~upright.policy_io.session.open_session`, the one onnxruntime session
  factory;
- :mod:`~upright.policy_io.spec`: :class:`~upright.policy_io.spec.PolicySpec`, the decoded contract of an MLP policy,
  and its robot-free checks (a dry run on a zero observation);
- :mod:`~upright.policy_io.source`: resolving ``policy=`` and checking a file's metadata against a task's;
- :mod:`~upright.policy_io.registry`: the kind of a policy source (MLP, VLA chunk policy, residual pair) and the one
  registry of their loaders; :mod:`~upright.policy_io.mlp`: the MLP runners.

Imports numpy, onnx and onnxruntime only (no torch, hydra or MuJoCo), so the robot computer's daemon can import it.
"""
