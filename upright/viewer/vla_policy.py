"""Play a VLA chunk policy on the lift task: ``python play.py task=lift policy=<VLA> instruction="lift the red cube"``.

A VLA here is what :func:`upright.vla.evaluate_lift.load_chunk_policy` loads: a TinyVLA folder or ``model.pt``, an
ONNX file with upright's VLA metadata, a policy server (``ws://HOST:PORT``), or a residual run (``policy.base=...``:
its folder or its ``policy.onnx``).
The policy is called as the viewer calls every policy (one observation -> one action per env step), with the batch
built from the env as the VLA evaluation builds it (:func:`upright.vla.evaluate_lift.make_batch`): proprioception
or the env observation, the instruction, camera images when the policy reads cameras. Its action-chunk queue is
reset for every env whose episode just started (the env's episode step is 0).
"""

from __future__ import annotations

import torch

from upright.policy_io.registry import policy_kind


def is_vla(spec: str) -> bool:
    """Whether ``policy=`` names a VLA chunk policy rather than an RL policy (module docstring): a folder with a
    ``base_checksum.json`` (residual run) or with ``model.pt`` and no ``model_<it>.pt`` (TinyVLA), a ``model.pt`` file,
    or an ``.onnx`` file whose metadata is a VLA's or a residual's, or a policy server's ``ws://`` address
    (:func:`upright.policy_io.registry.policy_kind` ``"chunk"`` or ``"residual"``)."""
    return policy_kind(spec) in ("chunk", "residual")


class VLAPolicyFn:
    """A VLA chunk policy as a viewer policy: ``fn(obs) -> (N, A)`` actions for the env it was built for.

    Args:
        spec: the VLA (module docstring).
        env: the lift env (one or more envs).
        instruction: the instruction string (default: the demonstrations' task, ``vla_io.TASK``).

    Raises:
        FileNotFoundError, ValueError: nothing loadable at ``spec`` (one line naming the fix), or a policy that reads
            cameras while the env renders none (the message names the overrides).
        ConnectionError: a policy server (the policy's or a residual's base) that does not answer.
    """

    def __init__(self, spec: str, env, instruction: str | None = None):
        from upright.tasks.lift.vla_io import TASK
        from upright.vla.evaluate_lift import load_chunk_policy

        self.policy, self.spec = load_chunk_policy(spec)
        self.env = env
        self.instruction = TASK if instruction is None else str(instruction)
        self.metadata = dict(getattr(self.policy, "metadata", {}) or {})
        cams = list(self.spec["cameras"])
        rendered = list(env.cfg.camera.cameras) if env.cfg.camera.enabled else []
        if any(c not in rendered for c in cams):
            raise ValueError(
                f"policy={spec} reads cameras {cams}; add env.camera.enabled=true "
                f"env.camera.cameras=[{','.join(cams)}] env.camera.height={self.spec['image_height']} "
                f"env.camera.width={self.spec['image_width']}"
            )
        self.camera_order = rendered

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """(N, A) float32 actions for the env's current step (``obs``: the env's ``actor`` observation, unused: the
        batch is built from the env)."""
        from upright.vla.evaluate_lift import make_batch

        env = self.env
        started = (env.episode_length_buf == 0).nonzero().flatten()
        if started.numel() > 0:
            self.policy.reset(started.cpu())
        batch = make_batch(env, env.get_observations(), self.spec, self.instruction, self.camera_order)
        return self.policy.select_action(batch).float().to(obs.device)
