"""The policy interface of upright's VLA hooks, after LeRobot's ``PreTrainedPolicy``
(``lerobot/policies/pretrained.py``: ``reset``, ``select_action``, ``predict_action_chunk``).

A batch is a dict with LeRobot's keys:

- ``"observation.state"``: (B, S) float32 proprioception (for the lift task: the 7 arm joint angles (rad) and the
  finger opening (m), then their velocities; see the policy's ``state_names``).
- ``"observation.images.<camera>"``: (B, C, H, W) images, uint8 in [0, 255] or float in [0, 1], RGB, channels first
  (LeRobot's convention); ``<camera>`` is e.g. ``front`` or ``wrist``.
- ``"task"``: list of B instruction strings, e.g. ``"pick up the red cube and lift it to the target"``.

Actions are (B, A) float32 in the convention the policy declares in :attr:`ChunkPolicy.action_convention`:
``"delta"`` (increments of the position targets, as the lift env's actions in [-1, 1]) or ``"absolute"`` (position
targets, rad / m). A chunk is (B, H, A), the first action for the current step.
"""

from __future__ import annotations

import abc
from typing import Any

import torch

from upright.vla.chunking import ActionChunkQueue

PolicyBatch = dict[str, Any]
"""A batch of observations with LeRobot's keys (module docstring)."""

STATE_KEY = "observation.state"
IMAGE_PREFIX = "observation.images."
TASK_KEY = "task"
ACTION_CONVENTIONS = ("delta", "absolute")


def validate_batch(batch: PolicyBatch, state_dim: int | None = None, cameras: tuple[str, ...] = ()) -> int:
    """Check a batch's keys and shapes; returns its size B.

    Raises:
        ValueError: a missing key, a wrong shape or a task list of the wrong length (the message names the key).
    """
    if STATE_KEY not in batch:
        raise ValueError(f"batch lacks '{STATE_KEY}' (B, S); keys present: {sorted(batch)}")
    state = batch[STATE_KEY]
    if state.ndim != 2 or (state_dim is not None and state.shape[1] != state_dim):
        raise ValueError(f"'{STATE_KEY}' must be (B, {state_dim or 'S'}), got {tuple(state.shape)}")
    b = int(state.shape[0])
    for cam in cameras:
        key = IMAGE_PREFIX + cam
        if key not in batch:
            raise ValueError(f"batch lacks '{key}' (B, C, H, W); this policy reads cameras {list(cameras)}")
        img = batch[key]
        if img.ndim != 4 or img.shape[0] != b or img.shape[1] not in (1, 3):
            raise ValueError(f"'{key}' must be (B={b}, C=3, H, W) channels first, got {tuple(img.shape)}")
    if TASK_KEY in batch:
        task = batch[TASK_KEY]
        if isinstance(task, str) or len(task) != b:
            raise ValueError(f"'{TASK_KEY}' must be a list of {b} instruction strings, got {task!r}")
    return b


def select_rows(batch: PolicyBatch, ids: torch.Tensor) -> PolicyBatch:
    """The rows ``ids`` (K,) int64 of a batch, in that order: tensors indexed on dim 0, the ``task`` list picked; other
    values pass unchanged."""
    rows = [int(i) for i in ids]
    out: PolicyBatch = {}
    for key, value in batch.items():
        if key == TASK_KEY:
            out[key] = [value[i] for i in rows]
        elif isinstance(value, torch.Tensor) and value.ndim > 0:
            out[key] = value[ids.to(value.device)]
        else:
            out[key] = value
    return out


class ChunkPolicy(abc.ABC):
    """A chunked, language-conditioned policy (module docstring for the batch format).

    Subclasses implement :meth:`predict_action_chunk` and set :attr:`chunk_size`, :attr:`action_dim` and
    :attr:`action_convention`; :meth:`select_action` executes chunks through an :class:`ActionChunkQueue`
    (queue mode with ``n_action_steps``, or ACT's temporal ensembling with ``temporal_ensemble_coeff``).
    """

    chunk_size: int
    """H, actions per predicted chunk."""
    action_dim: int
    """A."""
    action_convention: str = "delta"
    """``"delta"`` or ``"absolute"`` (module docstring)."""
    n_action_steps: int | None = None
    """Queue mode: actions executed per chunk (None: the whole chunk)."""
    temporal_ensemble_coeff: float | None = None
    """ACT's m (0.01 in ACT); None: queue mode."""
    predict_needed_rows_only: bool = False
    """:meth:`select_action` asks :meth:`predict_action_chunk` for the rows whose queue is empty only (a remote policy,
    whose cost is per row); False: the whole batch, the rows that need a chunk kept (one batched call)."""

    _queue: ActionChunkQueue | None = None

    @abc.abstractmethod
    def predict_action_chunk(self, batch: PolicyBatch) -> torch.Tensor:
        """(B, H, A) float32 action chunk for the batch's current observations."""

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        """Forget queued actions of ``env_ids`` (all envs when None, LeRobot's call); call at every episode start."""
        if self._queue is not None:
            self._queue.reset(env_ids)

    def select_action(self, batch: PolicyBatch) -> torch.Tensor:
        """(B, A) float32 action for this step: pops the queue, predicting a new chunk for the envs that need one.

        The queue is sized by the first batch; a batch of another size starts a new queue.
        """
        b = validate_batch(batch)
        q = self._queue
        if q is None or q.num_envs != b:
            q = self._queue = ActionChunkQueue(
                b, self.chunk_size, self.action_dim, self.n_action_steps, self.temporal_ensemble_coeff
            )
        need = q.needs_prediction()
        if need.any():
            ids = need.nonzero().flatten()
            subset = self.predict_needed_rows_only and len(ids) < b
            with torch.no_grad():
                chunk = self.predict_action_chunk(select_rows(batch, ids) if subset else batch).detach().cpu()
            q.push(chunk if subset else chunk[ids], ids)
        return q.pop()
