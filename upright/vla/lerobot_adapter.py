"""A LeRobot ``PreTrainedPolicy`` (ACT, SmolVLA, pi0, ...) as a :class:`~upright.vla.policy.ChunkPolicy`.

Written against lerobot 0.6.1's API (``lerobot/policies/pretrained.py``: ``select_action``, ``predict_action_chunk``,
``reset``; ``lerobot/policies/factory.py``: ``get_policy_class``, ``make_pre_post_processors``;
``PreTrainedConfig.action_feature``). lerobot >= 0.5 requires Python >= 3.12, so on this project's Python 3.11 the
adapter refuses to construct, with the fix in the message; it has NOT been run against lerobot here (no test loads
a LeRobot policy), only its refusal is tested.

The batch format is the same on both sides (upright's VLA keys are LeRobot's); uint8 images are scaled to float in
[0, 1], as LeRobot's policies read them, and LeRobot's pre/post-processor pipelines (normalisation, device) run
around the policy when given.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch

from upright.vla.policy import IMAGE_PREFIX, ChunkPolicy, PolicyBatch

MIN_PYTHON = (3, 12)
MIN_LEROBOT = (0, 5)
INSTALL_HINT = 'pip install "lerobot>=0.5" (on Python >= 3.12)'


def require_lerobot() -> None:
    """Check that lerobot >= 0.5 is importable.

    Raises:
        ImportError: Python < 3.12, lerobot missing, or an older lerobot (one line, with the install command).
    """
    if sys.version_info[:2] < MIN_PYTHON:
        raise ImportError(
            f"LeRobotPolicy needs lerobot>=0.5, which needs Python >= 3.12 (this is Python "
            f"{sys.version_info.major}.{sys.version_info.minor}): on Python >= 3.12, {INSTALL_HINT}"
        )
    try:
        from importlib.metadata import version

        import lerobot  # noqa: F401

        have = version("lerobot")
    except ImportError:
        raise ImportError(f"LeRobotPolicy needs lerobot>=0.5, which is not installed: {INSTALL_HINT}") from None
    parts = tuple(int(p) for p in have.split(".")[:2] if p.isdigit())
    if parts < MIN_LEROBOT:
        raise ImportError(f"LeRobotPolicy needs lerobot>=0.5, found {have}: {INSTALL_HINT}")


class LeRobotPolicy(ChunkPolicy):
    """A LeRobot ``PreTrainedPolicy`` behind upright's ChunkPolicy interface (module docstring).

    :meth:`select_action` and :meth:`reset` are LeRobot's own (its action queue, its ``n_action_steps`` or temporal
    ensembling), :meth:`predict_action_chunk` LeRobot's chunk; both through the processors when given.

    Args:
        policy: the LeRobot policy (``lerobot.policies.pretrained.PreTrainedPolicy``), in eval mode.
        preprocessor: LeRobot's input pipeline (``make_pre_post_processors``), or None to feed the batch as is.
        postprocessor: LeRobot's output pipeline (unnormalises actions), or None.
        action_convention: ``"absolute"`` (LeRobot datasets store position targets) or ``"delta"``.

    Raises:
        ImportError: lerobot >= 0.5 is not importable (Python < 3.12 included): the message names the fix.
        ValueError: the policy's config has no action feature or chunk size.
    """

    def __init__(
        self,
        policy: Any,
        preprocessor: Callable | None = None,
        postprocessor: Callable | None = None,
        action_convention: str = "absolute",
    ):
        require_lerobot()
        cfg = policy.config
        action = cfg.action_feature
        horizon = getattr(cfg, "chunk_size", None) or getattr(cfg, "horizon", None)
        if action is None or horizon is None:
            raise ValueError(f"{type(policy).__name__}: its config lacks the action feature or chunk_size/horizon")
        self.policy, self.preprocessor, self.postprocessor = policy, preprocessor, postprocessor
        self.chunk_size, self.action_dim = int(horizon), int(action.shape[0])
        self.n_action_steps = getattr(cfg, "n_action_steps", None)
        self.action_convention = action_convention

    @classmethod
    def from_pretrained(
        cls, path: str, device: str | None = None, action_convention: str = "absolute"
    ) -> LeRobotPolicy:
        """Load a saved LeRobot policy (a folder or a hub id) with its processors, on ``device`` (LeRobot's default
        when None).

        Raises:
            ImportError: as the constructor.
        """
        require_lerobot()
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors

        cfg = PreTrainedConfig.from_pretrained(path)
        if device is not None:
            cfg.device = device
        policy = get_policy_class(cfg.type).from_pretrained(path, config=cfg).eval()
        pre, post = make_pre_post_processors(cfg, pretrained_path=path)
        return cls(policy, pre, post, action_convention)

    def _pre(self, batch: PolicyBatch) -> PolicyBatch:
        batch = {
            k: (v.float() / 255.0 if k.startswith(IMAGE_PREFIX) and v.dtype == torch.uint8 else v)
            for k, v in batch.items()
        }
        return self.preprocessor(batch) if self.preprocessor is not None else batch

    def _post(self, action: torch.Tensor) -> torch.Tensor:
        if self.postprocessor is not None:
            action = self.postprocessor(action)
        return action.detach().to("cpu", torch.float32)

    def predict_action_chunk(self, batch: PolicyBatch) -> torch.Tensor:
        """(B, H, A) float32 on the CPU: LeRobot's ``predict_action_chunk``."""
        with torch.no_grad():
            return self._post(self.policy.predict_action_chunk(self._pre(batch)))

    def select_action(self, batch: PolicyBatch) -> torch.Tensor:
        """(B, A) float32 on the CPU: LeRobot's ``select_action`` (its own queue)."""
        with torch.no_grad():
            return self._post(self.policy.select_action(self._pre(batch)))

    def reset(self) -> None:
        """LeRobot's ``reset`` (clears its action queue)."""
        self.policy.reset()
