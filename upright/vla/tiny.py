"""TinyVLA: a small built-in vision-language-action policy, trained by behaviour cloning (:mod:`upright.vla.train_bc`).

A stand-in for a pretrained VLA (pi0, SmolVLA), sized to train and run on a CPU (about 0.2 M parameters with the
defaults): it has the interface and the inputs of one (camera images, an instruction, proprioception, chunked
actions) but no pretrained vision or language backbone.

- Each camera image (3, H, W) goes through one small CNN (weights shared by the cameras): three strided 3x3/5x5
  convolutions, then a spatial softmax (robomimic's: the expected image x, y of each feature map, in [-1, 1]) and a
  linear layer to ``image_dim``.
- The instruction is hashed into word ids (:class:`~upright.vla.tokenizer.HashTokenizer`), embedded (``text_dim``)
  and mean-pooled over its words (mask).
- The state is normalised with the training data's mean and std (buffers).
- An MLP maps the concatenated features to an (H, A) chunk in normalised action units; the output is de-normalised
  with the stored action mean and std and, for the ``delta`` convention, clipped to [action_low, action_high].
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from upright.policy_io.registry import register_loader
from upright.vla.policy import (
    ACTION_CONVENTIONS,
    IMAGE_PREFIX,
    STATE_KEY,
    TASK_KEY,
    ChunkPolicy,
    PolicyBatch,
    validate_batch,
)
from upright.vla.tokenizer import HashTokenizer


@dataclass
class TinyVLAConfig:
    """Sizes and conventions of a :class:`TinyVLA`.

    Raises (on construction):
        ValueError: sizes < 1, an unknown action convention, or names that do not match the dims.
    """

    cameras: tuple[str, ...] = ("front",)
    """Cameras read, as ``observation.images.<camera>``; empty: a state-and-language-only policy."""
    image_height: int = 64
    image_width: int = 64
    chunk_size: int = 10
    """H, actions per chunk (ACT uses 100 at 50 Hz; 8-16 suit the lift task's 0.02 s steps)."""
    vocab_size: int = 1024
    max_tokens: int = 16
    text_dim: int = 32
    image_dim: int = 64
    """Features per camera after the CNN."""
    conv_channels: int = 32
    hidden_dim: int = 256
    state_dim: int = 22
    action_dim: int = 8
    action_convention: str = "delta"
    """``delta`` (lift: increments of the position targets, in [-1, 1]) or ``absolute`` (targets, rad / m)."""
    action_low: float = -1.0
    action_high: float = 1.0
    """Bounds the ``delta`` outputs are clipped to."""
    state_key: str = STATE_KEY
    """The dataset feature the state came from (``observation.state`` or ``observation.policy_obs``); the policy's
    batch key is always ``observation.state``."""
    state_names: tuple[str, ...] = ()
    action_names: tuple[str, ...] = ()
    control_dt: float = 0.02
    """Seconds per action (the dataset's 1 / fps)."""
    n_action_steps: int | None = None
    """Queue mode: actions executed per chunk (None: all H)."""
    temporal_ensemble_coeff: float | None = None
    """ACT's temporal ensembling m (e.g. 0.01); None: queue mode."""
    extra: dict = field(default_factory=dict)
    """Free-form provenance (datasets, steps), stored with the checkpoint."""

    def __post_init__(self):
        self.cameras = tuple(self.cameras)
        self.state_names, self.action_names = tuple(self.state_names), tuple(self.action_names)
        sizes = {
            k: getattr(self, k)
            for k in (
                "image_height",
                "image_width",
                "chunk_size",
                "vocab_size",
                "max_tokens",
                "text_dim",
                "image_dim",
                "conv_channels",
                "hidden_dim",
                "state_dim",
                "action_dim",
            )
        }
        bad = {k: v for k, v in sizes.items() if int(v) < 1}
        if bad:
            raise ValueError(f"TinyVLAConfig: sizes must be >= 1, got {bad}")
        if self.action_convention not in ACTION_CONVENTIONS:
            raise ValueError(
                f"TinyVLAConfig.action_convention must be one of {ACTION_CONVENTIONS}, got {self.action_convention!r}"
            )
        if self.state_names and len(self.state_names) != self.state_dim:
            raise ValueError(f"TinyVLAConfig: {len(self.state_names)} state_names for state_dim {self.state_dim}")
        if self.action_names and len(self.action_names) != self.action_dim:
            raise ValueError(f"TinyVLAConfig: {len(self.action_names)} action_names for action_dim {self.action_dim}")

    def to_dict(self) -> dict:
        """Plain dict (tuples as lists) for checkpoints; :meth:`from_dict` reverses it."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TinyVLAConfig:
        return cls(**d)


class SpatialSoftmax(nn.Module):
    """(B, C, h, w) feature maps -> (B, 2C): the softmax-weighted mean image x and y of each map, in [-1, 1]."""

    def __init__(self, height: int, width: int):
        super().__init__()
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, height), torch.linspace(-1, 1, width), indexing="ij")
        self.register_buffer("grid", torch.stack([xs.reshape(-1), ys.reshape(-1)], 1))  # (h*w, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c = x.shape[0], x.shape[1]
        attn = torch.softmax(x.flatten(2), dim=-1)  # (B, C, h*w)
        return (attn @ self.grid).reshape(b, 2 * c)


class ImageEncoder(nn.Module):
    """(B, 3, H, W) float32 in [0, 1] -> (B, out_dim) features."""

    def __init__(self, height: int, width: int, channels: int, out_dim: int):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(3, channels // 2, 5, stride=2, padding=2),
            nn.ReLU(),
            nn.Conv2d(channels // 2, channels, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, stride=1, padding=1),
            nn.ReLU(),
        )
        with torch.no_grad():
            h, w = self.conv(torch.zeros(1, 3, height, width)).shape[2:]
        self.pool = SpatialSoftmax(h, w)
        self.out = nn.Sequential(nn.Linear(2 * channels, out_dim), nn.ReLU())

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.out(self.pool(self.conv(image * 2.0 - 1.0)))


def _safe_std(std: torch.Tensor) -> torch.Tensor:
    """std with constant entries (std < 1e-6, e.g. the Panda's zero gyro) set to 1: they are centred, not scaled."""
    return torch.where(std < 1e-6, torch.ones_like(std), std)


class TinyVLA(nn.Module, ChunkPolicy):
    """The small built-in VLA (module docstring).

    Args:
        cfg: sizes and conventions.

    The normalisation buffers ``state_mean``/``state_std`` (S,) and ``action_mean``/``action_std`` (A,) start at 0/1;
    :meth:`set_stats` sets them from training data.
    """

    def __init__(self, cfg: TinyVLAConfig):
        nn.Module.__init__(self)
        self.cfg = cfg
        self.chunk_size, self.action_dim = cfg.chunk_size, cfg.action_dim
        self.action_convention = cfg.action_convention
        self.n_action_steps, self.temporal_ensemble_coeff = cfg.n_action_steps, cfg.temporal_ensemble_coeff
        self.tokenizer = HashTokenizer(cfg.vocab_size, cfg.max_tokens)
        self.image_encoder = (
            ImageEncoder(cfg.image_height, cfg.image_width, cfg.conv_channels, cfg.image_dim) if cfg.cameras else None
        )
        self.embed = nn.Embedding(cfg.vocab_size, cfg.text_dim, padding_idx=0)
        fused = len(cfg.cameras) * cfg.image_dim + cfg.text_dim + cfg.state_dim
        self.head = nn.Sequential(
            nn.Linear(fused, cfg.hidden_dim),
            nn.ReLU(),
            nn.Linear(cfg.hidden_dim, cfg.hidden_dim),
            nn.ReLU(),
            nn.Linear(cfg.hidden_dim, cfg.chunk_size * cfg.action_dim),
        )
        for name, dim in (("state", cfg.state_dim), ("action", cfg.action_dim)):
            self.register_buffer(f"{name}_mean", torch.zeros(dim))
            self.register_buffer(f"{name}_std", torch.ones(dim))

    def set_stats(self, state: torch.Tensor, action: torch.Tensor) -> None:
        """Set the normalisation buffers from (N, S) states and (N, A) actions (constant entries get std 1)."""
        self.state_mean.copy_(state.mean(0))
        self.state_std.copy_(_safe_std(state.std(0)))
        self.action_mean.copy_(action.mean(0))
        self.action_std.copy_(_safe_std(action.std(0)))

    def normalized_chunk(
        self, state: torch.Tensor, images: list[torch.Tensor], token_ids: torch.Tensor, token_mask: torch.Tensor
    ) -> torch.Tensor:
        """(B, H, A) chunk in normalised action units (the training target's units).

        Args:
            state: (B, S) float32 raw state.
            images: one (B, 3, H, W) float32 in [0, 1] per camera, in ``cfg.cameras`` order.
            token_ids: (B, T) int64 hashed word ids; token_mask: (B, T) float32.
        """
        feats = [self.image_encoder(img) for img in images] if self.image_encoder is not None else []
        mask = token_mask.unsqueeze(-1)
        text = (self.embed(token_ids) * mask).sum(1) / mask.sum(1).clamp_min(1.0)
        feats += [text, (state - self.state_mean) / self.state_std]
        return self.head(torch.cat(feats, dim=-1)).reshape(-1, self.chunk_size, self.action_dim)

    def denormalize(self, chunk: torch.Tensor) -> torch.Tensor:
        """Normalised (B, H, A) -> actions; clipped to [action_low, action_high] for the ``delta`` convention."""
        out = chunk * self.action_std + self.action_mean
        if self.action_convention == "delta":
            out = out.clamp(self.cfg.action_low, self.cfg.action_high)
        return out

    def forward(
        self, state: torch.Tensor, images: list[torch.Tensor], token_ids: torch.Tensor, token_mask: torch.Tensor
    ) -> torch.Tensor:
        """(B, H, A) float32 actions (de-normalised, clipped): the graph exported to ONNX."""
        return self.denormalize(self.normalized_chunk(state, images, token_ids, token_mask))

    def images_from_batch(self, batch: PolicyBatch) -> list[torch.Tensor]:
        """The batch's camera images as (B, 3, H, W) float32 in [0, 1] (uint8 is divided by 255).

        Raises:
            ValueError: an image of another size than the config's (the message names env.camera.width/height).
        """
        out = []
        for cam in self.cfg.cameras:
            img = torch.as_tensor(batch[IMAGE_PREFIX + cam])
            if tuple(img.shape[2:]) != (self.cfg.image_height, self.cfg.image_width):
                size = (self.cfg.image_height, self.cfg.image_width)
                raise ValueError(
                    f"'{IMAGE_PREFIX + cam}' is {tuple(img.shape[2:])} (H, W); this policy was trained on "
                    f"{size}: set env.camera.height/width"
                )
            out.append(img.float() / 255.0 if img.dtype == torch.uint8 else img.float())
        return out

    @torch.no_grad()
    def predict_action_chunk(self, batch: PolicyBatch) -> torch.Tensor:
        """(B, H, A) float32 action chunk; a batch without ``task`` gets no instruction (all-padding tokens).

        Raises:
            ValueError: a missing key or a wrong shape (:func:`~upright.vla.policy.validate_batch`), or an image size
                other than the config's.
        """
        b = validate_batch(batch, self.cfg.state_dim, self.cfg.cameras)
        device = self.state_mean.device
        ids, mask = self.tokenizer.encode(list(batch.get(TASK_KEY, [""] * b)))
        images = [img.to(device) for img in self.images_from_batch(batch)]
        state = torch.as_tensor(batch[STATE_KEY]).to(device, torch.float32)
        return self.forward(state, images, ids.to(device), mask.to(device))

    def save(self, path, **extra) -> None:
        """Write ``{"config", "state_dict", **extra}`` to ``path`` (torch.save, via a temporary file and a rename)."""
        from upright.atomic_io import atomic_write

        payload = {"config": self.cfg.to_dict(), "state_dict": self.state_dict(), **extra}
        atomic_write(path, lambda tmp: torch.save(payload, tmp))

    @classmethod
    def load(cls, path, map_location: str = "cpu") -> TinyVLA:
        """A model saved by :meth:`save` (``model.pt`` of :mod:`upright.vla.train_bc`), in eval mode.

        Raises:
            FileNotFoundError: no such file.
            ValueError: the file is not a TinyVLA checkpoint (the message names train_bc).
        """
        import pathlib

        path = pathlib.Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no TinyVLA checkpoint at {path}; train one with python -m upright.vla.train_bc")
        payload = torch.load(path, map_location=map_location, weights_only=False)
        if not isinstance(payload, dict) or "config" not in payload or "state_dict" not in payload:
            raise ValueError(
                f"{path} is not a TinyVLA checkpoint (no config/state_dict); train one with "
                "python -m upright.vla.train_bc"
            )
        model = cls(TinyVLAConfig.from_dict(payload["config"]))
        model.load_state_dict(payload["state_dict"])
        return model.eval()

    def num_parameters(self) -> int:
        """Trainable parameters."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


def _is_checkpoint(spec: str) -> bool:
    """A ``.pt`` file, or a folder with ``model.pt`` (what :func:`load_checkpoint` reads)."""
    import pathlib

    path = pathlib.Path(spec)
    return (path.suffix == ".pt" and path.is_file()) or (path.is_dir() and (path / "model.pt").is_file())


def load_checkpoint(spec: str, **kwargs) -> TinyVLA:
    """``upright-policy-server --policy runs/tiny_vla`` (or ``.../model.pt``): the TinyVLA saved there.

    Raises:
        ValueError: ``--arg`` keyword arguments (a checkpoint takes none), or not a TinyVLA checkpoint.
    """
    import pathlib

    if kwargs:
        raise ValueError(f"--policy {spec}: a TinyVLA checkpoint takes no --arg (got {sorted(kwargs)})")
    path = pathlib.Path(spec)
    return TinyVLA.load(path / "model.pt" if path.is_dir() else path)


register_loader("tinyvla", _is_checkpoint, load_checkpoint)
