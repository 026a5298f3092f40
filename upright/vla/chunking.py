"""Executing action chunks: a plain queue (LeRobot's ``n_action_steps``) or ACT's temporal ensembling.

A chunked policy predicts H actions at once. Executing them open loop for ``n_action_steps`` steps and then
predicting again is the queue mode (LeRobot ``ACTPolicy``/``SmolVLA`` with ``temporal_ensemble_coeff=None``). ACT's
temporal ensembling (Zhao et al., "Learning Fine-Grained Bimanual Manipulation with Low-Cost Hardware", RSS 2023,
section IV-B) predicts a chunk at every step and executes, at step t, the weighted mean of every stored chunk's
prediction for t, with weights w_i = exp(-m · i) where i = 0 is the OLDEST prediction (m = 0.01 in ACT's code,
``temporal_agg``), so older predictions weigh slightly more.

The same class serves play, evaluation and deploy: it only stores tensors, it never calls the policy.
"""

from __future__ import annotations

import math

import torch


class ActionChunkQueue:
    """Per-env buffer of predicted action chunks (B envs, chunk length H, action dim A).

    Args:
        num_envs: B.
        chunk_size: H, actions per predicted chunk.
        action_dim: A.
        n_action_steps: queue mode: actions executed from each chunk before a new prediction (1..H). Ignored with
            temporal ensembling, which predicts every step.
        temporal_ensemble_coeff: m of ACT's weights exp(-m·i) (i = 0 oldest); None: queue mode.

    Raises:
        ValueError: sizes < 1, ``n_action_steps`` outside 1..H, or a negative coefficient.
    """

    def __init__(
        self,
        num_envs: int,
        chunk_size: int,
        action_dim: int,
        n_action_steps: int | None = None,
        temporal_ensemble_coeff: float | None = None,
    ):
        if min(num_envs, chunk_size, action_dim) < 1:
            raise ValueError(
                f"ActionChunkQueue: num_envs, chunk_size and action_dim must be >= 1, got "
                f"{num_envs}, {chunk_size}, {action_dim}"
            )
        n_action_steps = chunk_size if n_action_steps is None else int(n_action_steps)
        if not 1 <= n_action_steps <= chunk_size:
            raise ValueError(f"n_action_steps must be in 1..chunk_size={chunk_size}, got {n_action_steps}")
        if temporal_ensemble_coeff is not None and temporal_ensemble_coeff < 0:
            raise ValueError(f"temporal_ensemble_coeff must be >= 0 (ACT uses 0.01), got {temporal_ensemble_coeff}")
        self.num_envs, self.chunk_size, self.action_dim = num_envs, chunk_size, action_dim
        self.n_action_steps = n_action_steps
        self.coeff = temporal_ensemble_coeff
        # ensembling: sums of weighted predictions per future step, and their weight sums; (B, H, A) and (B, H)
        self._sum = torch.zeros(num_envs, chunk_size, action_dim)
        self._weight = torch.zeros(num_envs, chunk_size)
        self._count = torch.zeros(num_envs, chunk_size, dtype=torch.long)  # predictions stored for each future step
        # queue mode: the current chunk and the index of its next action
        self._chunk = torch.zeros(num_envs, chunk_size, action_dim)
        self._next = torch.full((num_envs,), chunk_size, dtype=torch.long)

    @property
    def ensembling(self) -> bool:
        """Whether ACT's temporal ensembling is on."""
        return self.coeff is not None

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        """Forget the stored chunks of ``env_ids`` (all envs when None): call at every episode start."""
        ids = slice(None) if env_ids is None else env_ids.to(torch.long).cpu()
        self._sum[ids] = 0.0
        self._weight[ids] = 0.0
        self._count[ids] = 0
        self._next[ids] = self.chunk_size

    def needs_prediction(self) -> torch.Tensor:
        """(B,) bool: envs whose next action needs a new chunk (always all of them with ensembling)."""
        if self.ensembling:
            return torch.ones(self.num_envs, dtype=torch.bool)
        return self._next >= self.n_action_steps

    def push(self, chunk: torch.Tensor, env_ids: torch.Tensor | None = None, offset: int = 0) -> None:
        """Store a predicted chunk (M, H, A) for ``env_ids`` (M,) (all envs when None).

        ``offset`` (0..H-1): the chunk was predicted ``offset`` steps ago, so its first ``offset`` actions belong to
        steps already executed and are dropped; its action ``offset`` is the one for the current step (the latency
        compensation of asynchronous inference, :mod:`upright.deploy.chunk_runner`). 0: predicted for this step.

        Raises:
            ValueError: the chunk's shape is not (M, H, A), or ``offset`` is outside 0..H-1.
        """
        ids = torch.arange(self.num_envs) if env_ids is None else env_ids.to(torch.long).cpu()
        chunk = chunk.detach().to("cpu", torch.float32)
        if chunk.shape != (len(ids), self.chunk_size, self.action_dim):
            raise ValueError(f"chunk shape {tuple(chunk.shape)} != ({len(ids)}, {self.chunk_size}, {self.action_dim})")
        offset = int(offset)
        if not 0 <= offset < self.chunk_size:
            raise ValueError(f"offset must be in 0..chunk_size-1={self.chunk_size - 1}, got {offset}")
        if not self.ensembling:
            self._chunk[ids] = chunk
            self._next[ids] = offset
            return
        # the new chunk is the newest prediction for each future step: the step-i slot already holds count[i]
        # older predictions, so its weight is exp(-m * count[i]); with an offset, slot i gets action i + offset
        n = self.chunk_size - offset
        w = torch.exp(-self.coeff * self._count[ids, :n].float())  # (M, n)
        self._sum[ids, :n] += w.unsqueeze(-1) * chunk[:, offset:]
        self._weight[ids, :n] += w
        self._count[ids, :n] += 1

    def remaining(self) -> torch.Tensor:
        """(B,) int64: the steps, from the current one on, that :meth:`pop` can still serve without a new chunk
        (queue mode: the actions left in the chunk, ignoring ``n_action_steps``; ensembling: the leading steps that
        hold at least one prediction)."""
        if not self.ensembling:
            return (self.chunk_size - self._next).clamp_min(0)
        return (self._count > 0).long().cumprod(dim=1).sum(dim=1)

    def pop(self) -> torch.Tensor:
        """(B, A) float32: the action of every env for this step; advances time by one step.

        Raises:
            RuntimeError: an env has no stored action for this step (push a chunk first).
        """
        if self.ensembling:
            if (self._count[:, 0] == 0).any():
                raise RuntimeError("ActionChunkQueue.pop: no chunk predicted for this step; push one first")
            action = self._sum[:, 0] / self._weight[:, :1]
            # shift every buffer one step towards the present
            for buf in (self._sum, self._weight, self._count):
                buf[:, :-1] = buf[:, 1:].clone()
                buf[:, -1] = 0
            return action
        if (self._next >= self.chunk_size).any():
            raise RuntimeError("ActionChunkQueue.pop: an env's chunk is used up; push a new one first")
        action = self._chunk[torch.arange(self.num_envs), self._next]
        self._next += 1
        return action


def act_weights(n: int, coeff: float = 0.01) -> torch.Tensor:
    """(n,) ACT's normalised ensembling weights exp(-coeff·i) / Σ for n stored predictions, i = 0 the oldest."""
    w = torch.tensor([math.exp(-coeff * i) for i in range(n)])
    return w / w.sum()
