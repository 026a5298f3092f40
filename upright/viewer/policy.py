"""Policies for ``play.py``: ``policy=<run dir | checkpoint .pt | .onnx | zero | random>``, and for task=lift a VLA
chunk policy (:mod:`upright.viewer.vla_policy`).

The RL policies, their checks against the task and the settings read from a policy before an env is built are those
of evaluation (:mod:`upright.training.policy_loading`); :func:`load_policy` adds the VLA chunk policies of task=lift.
"""

from __future__ import annotations

from upright.policy_io.source import PolicyLoadError
from upright.training import policy_loading
from upright.training.policy_loading import PolicyFn


def load_policy(
    spec: str, env, task_name: str, train_cfg=None, device: str = "cpu", seed: int = 0, instruction: str | None = None
) -> PolicyFn:
    """Build the policy ``spec`` names for ``env``.

    Args:
        spec: run directory, ``.pt``, ``.onnx``, ``zero`` or ``random``; for task=lift also a VLA chunk policy
            (:mod:`upright.viewer.vla_policy`: a TinyVLA, a VLA ``.onnx``, a policy server ``ws://HOST:PORT``, a
            residual run).
        env: the task env (its observation width and joints are what the policy must fit).
        task_name: the task (checked against ONNX metadata).
        train_cfg: the task's ``train`` config (actor layout of checkpoints; default :class:`TrainCfg`).
        instruction: a VLA's instruction (``instruction=`` of play.py; default: the demonstrations' task string).

    Raises:
        PolicyLoadError: see :func:`upright.training.policy_loading.load_policy`; a VLA that cannot be loaded.
    """
    if spec not in ("zero", "random") and task_name == "lift":
        from upright.viewer.vla_policy import VLAPolicyFn, is_vla

        if is_vla(spec):
            try:
                return VLAPolicyFn(spec, env, instruction)
            except (FileNotFoundError, ValueError, ConnectionError) as err:
                raise PolicyLoadError(str(err)) from None
    return policy_loading.load_policy(spec, env, task_name, train_cfg, device, seed)
