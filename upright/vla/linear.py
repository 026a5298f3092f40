"""A small deterministic :class:`~upright.vla.policy.ChunkPolicy`: a fixed random linear map of the observation.

For the policy server's tests, its benchmark and smoke runs (``upright-policy-server --policy
upright.vla.linear:make_linear_policy``): its chunk can be computed independently from the observation, and it
reads every part of the batch (state, one pixel of each camera, the task's length), so a key or layout mix-up on the
wire changes the answer.
"""

from __future__ import annotations

import torch

from upright.vla.policy import IMAGE_PREFIX, STATE_KEY, TASK_KEY, ChunkPolicy, PolicyBatch, validate_batch


class LinearChunkPolicy(ChunkPolicy):
    """chunk (B, H, A) = (features @ weight.T + bias).reshape(B, H, A).

    features (B, F) = [state (S), for each camera in order: its pixel at row 0, column 1, every channel, in [0, 1]
    (uint8 / 255), len(task) / 100 (0 without a task)]; F = S + 3 · cameras + 1.

    Args:
        state_dim: S.
        chunk_size: H.
        action_dim: A.
        cameras: camera names read (``"front"`` reads ``observation.images.front``).
        seed: seed of the weights (N(0, 1)) and bias (N(0, 0.1)).
        action_convention: ``"delta"`` or ``"absolute"``.

    Raises:
        ValueError: sizes < 1 (at construction); a bad batch (at prediction).
    """

    def __init__(
        self,
        state_dim: int = 8,
        chunk_size: int = 10,
        action_dim: int = 7,
        cameras: tuple[str, ...] = (),
        seed: int = 0,
        action_convention: str = "delta",
    ):
        if min(state_dim, chunk_size, action_dim) < 1:
            raise ValueError(f"LinearChunkPolicy: sizes must be >= 1, got {state_dim}, {chunk_size}, {action_dim}")
        self.state_dim, self.chunk_size, self.action_dim = state_dim, chunk_size, action_dim
        self.cameras = tuple(cameras)
        self.action_convention = action_convention
        g = torch.Generator().manual_seed(seed)
        n_features = state_dim + 3 * len(self.cameras) + 1
        self.weight = torch.randn(chunk_size * action_dim, n_features, generator=g)
        self.bias = 0.1 * torch.randn(chunk_size * action_dim, generator=g)

    def features(self, batch: PolicyBatch) -> torch.Tensor:
        """(B, F) float32 features (class docstring)."""
        b = validate_batch(batch, self.state_dim, self.cameras)
        parts = [batch[STATE_KEY].float()]
        for cam in self.cameras:
            img = batch[IMAGE_PREFIX + cam]
            px = img[:, :, 0, 1].float()
            parts.append(px / 255.0 if img.dtype == torch.uint8 else px)
        task = batch.get(TASK_KEY, [""] * b)
        parts.append(torch.tensor([[len(t) / 100.0] for t in task]))
        return torch.cat(parts, dim=1)

    def predict_action_chunk(self, batch: PolicyBatch) -> torch.Tensor:
        """(B, H, A) float32 chunk (class docstring)."""
        f = self.features(batch)
        return (f @ self.weight.T + self.bias).reshape(-1, self.chunk_size, self.action_dim)


def make_linear_policy(
    state_dim: int | str = 8,
    chunk_size: int | str = 10,
    action_dim: int | str = 7,
    cameras: str | tuple[str, ...] = "",
    seed: int | str = 0,
) -> LinearChunkPolicy:
    """:class:`LinearChunkPolicy` from command-line strings (``cameras="front,wrist"``), for ``--policy``."""
    if isinstance(cameras, str):
        cameras = tuple(c for c in cameras.split(",") if c)
    return LinearChunkPolicy(int(state_dim), int(chunk_size), int(action_dim), cameras, int(seed))
