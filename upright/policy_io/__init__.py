"""Policy I/O, the ground floor every reader of a policy file builds on (deploy, play, evaluation, the VLA code).

- :mod:`~upright.policy_io.schema`: the ONNX metadata schema (keys, versions, action modes), reading and type-checking
  a file's metadata;
- :mod:`~upright.policy_io.session`: :func:`~upright.policy_io.session.open_session`, the one onnxruntime session
  factory;
- :mod:`~upright.policy_io.spec`: :class:`~upright.policy_io.spec.PolicySpec`, the decoded contract of an MLP policy,
  and its robot-free checks (a dry run on a zero observation);
- :mod:`~upright.policy_io.source`: resolving ``policy=`` and checking a file's metadata against a task's;
- :mod:`~upright.policy_io.registry`: the kind of a policy source (MLP, VLA chunk policy, residual pair) and the one
  registry of their loaders; :mod:`~upright.policy_io.mlp`: the MLP runners;
- :mod:`~upright.policy_io.onnx_info`: the metadata and graph inputs/outputs of an ONNX file, read through
  onnxruntime;
- :mod:`~upright.policy_io.obs_terms`: the actor observation terms the daemon builds, over a neutral robot reading
  (numpy on the robot, torch in the training env).

Imports numpy and onnxruntime only (no torch, hydra, MuJoCo or onnx), so the robot computer's slim install
(pyproject's base dependencies) runs the daemon.
"""
