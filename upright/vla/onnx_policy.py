"""Run an exported VLA policy (``policy.onnx`` of :mod:`upright.vla.train_bc`) from the file alone, with onnxruntime.

The graph (exported by :func:`upright.vla.export.export_onnx`) has the inputs

- ``state``: (B, S) float32, the policy's ``observation.state`` (raw units; the normalisation is in the graph);
- ``token_ids``: (B, T) int64 and ``token_mask``: (B, T) float32, the instruction hashed as ``vocab_hashing`` says
  (:mod:`upright.vla.tokenizer`), T = ``max_tokens``;
- ``images`` (only when ``cameras`` is not empty): (B, len(cameras), 3, H, W) float32 RGB in [0, 1], channels first,
  the cameras in ``cameras`` order;

and the output ``action_chunk`` (B, H, A) float32 in the ``action_convention`` (de-normalised, clipped for ``delta``).
Its ``metadata_props`` (JSON values) hold :data:`REQUIRED_VLA_KEYS`: everything needed to build those inputs.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import torch

from upright.policy_io.registry import register_loader
from upright.policy_io.session import open_session
from upright.vla.policy import IMAGE_PREFIX, STATE_KEY, TASK_KEY, ChunkPolicy, PolicyBatch, validate_batch
from upright.vla.tokenizer import HASHING_SCHEME, HashTokenizer

VLA_METADATA_VERSION = "1"
"""Schema version of the VLA policy metadata."""

REQUIRED_VLA_KEYS = (
    "upright_vla_metadata_version",
    "policy_type",
    "cameras",
    "image_height",
    "image_width",
    "image_channel_order",
    "image_layout",
    "image_input",
    "vocab_hashing",
    "vocab_size",
    "max_tokens",
    "chunk_size",
    "state_key",
    "state_names",
    "state_dim",
    "action_names",
    "action_dim",
    "action_convention",
    "action_low",
    "action_high",
    "normalization",
    "control_dt",
    "input_names",
    "output_name",
)
"""Keys every VLA policy file carries (module docstring)."""

EXPORT_HINT = "export it with upright.vla.train_bc (python -m upright.vla.train_bc --dataset DIR --out DIR)"


class VLAMetadataError(ValueError):
    """A file that is not a VLA policy exported by upright (one-line message naming the fix)."""


def read_vla_metadata(path: str | pathlib.Path) -> dict:
    """The metadata of a VLA policy file, JSON-decoded.

    Raises:
        FileNotFoundError: no such file.
        VLAMetadataError: keys of :data:`REQUIRED_VLA_KEYS` are missing, or another schema version or hashing scheme.
    """
    import onnx

    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no ONNX policy at {path}")
    props = {e.key: e.value for e in onnx.load(str(path), load_external_data=False).metadata_props}
    missing = [k for k in REQUIRED_VLA_KEYS if k not in props]
    if missing:
        raise VLAMetadataError(
            f"{path} lacks the VLA policy metadata ({', '.join(missing[:4])}"
            f"{', ...' if len(missing) > 4 else ''}); {EXPORT_HINT}"
        )
    meta = {k: json.loads(v) for k, v in props.items()}
    if str(meta["upright_vla_metadata_version"]) != VLA_METADATA_VERSION or meta["vocab_hashing"] != HASHING_SCHEME:
        raise VLAMetadataError(
            f"{path} has VLA metadata version {meta['upright_vla_metadata_version']} / hashing "
            f"{meta['vocab_hashing']!r}, this upright reads {VLA_METADATA_VERSION} / "
            f"{HASHING_SCHEME!r}; {EXPORT_HINT}"
        )
    return meta


class OnnxChunkPolicy(ChunkPolicy):
    """A :class:`~upright.vla.policy.ChunkPolicy` running an exported VLA with onnxruntime (CPU, one thread).

    Args:
        path: the ``.onnx`` file.
        n_action_steps, temporal_ensemble_coeff: how :meth:`select_action` executes chunks (default: the file's
            ``n_action_steps``/``temporal_ensemble_coeff`` when it stores them, else the whole chunk in queue mode).

    Attributes:
        metadata: the decoded metadata; ``cameras``, ``state_dim``, ``chunk_size``, ``action_dim``,
        ``action_convention`` from it.

    Raises:
        FileNotFoundError, VLAMetadataError: as :func:`read_vla_metadata`.
        PolicyMetadataError: onnxruntime cannot load the graph (:func:`~upright.policy_io.session.open_session`).
    """

    def __init__(
        self, path: str | pathlib.Path, n_action_steps: int | None = None, temporal_ensemble_coeff: float | None = None
    ):
        self.path = pathlib.Path(path)
        self.metadata = m = read_vla_metadata(self.path)
        self.cameras = tuple(m["cameras"])
        self.state_dim = int(m["state_dim"])
        self.chunk_size, self.action_dim = int(m["chunk_size"]), int(m["action_dim"])
        self.action_convention = str(m["action_convention"])
        self.n_action_steps = n_action_steps if n_action_steps is not None else m.get("n_action_steps")
        coeff = temporal_ensemble_coeff if temporal_ensemble_coeff is not None else m.get("temporal_ensemble_coeff")
        self.temporal_ensemble_coeff = coeff
        self.tokenizer = HashTokenizer(int(m["vocab_size"]), int(m["max_tokens"]))
        self.session = open_session(self.path, fix=EXPORT_HINT)
        self.input_names = list(m["input_names"])
        self.output_name = str(m["output_name"])

    def predict_action_chunk(self, batch: PolicyBatch) -> torch.Tensor:
        """(B, H, A) float32 chunk (module docstring for the graph's inputs).

        Raises:
            ValueError: a missing key or wrong shape, or images of another size than the file's.
        """
        b = validate_batch(batch, self.state_dim, self.cameras)
        m = self.metadata
        ids, mask = self.tokenizer.encode(list(batch.get(TASK_KEY, [""] * b)))
        feeds = {
            "state": torch.as_tensor(batch[STATE_KEY]).detach().cpu().float().numpy(),
            "token_ids": ids.numpy(),
            "token_mask": mask.numpy(),
        }
        images = []
        for cam in self.cameras:
            img = torch.as_tensor(batch[IMAGE_PREFIX + cam]).detach().cpu()
            if tuple(img.shape[2:]) != (m["image_height"], m["image_width"]):
                raise ValueError(
                    f"'{IMAGE_PREFIX + cam}' is {tuple(img.shape[2:])} (H, W); {self.path.name} expects "
                    f"({m['image_height']}, {m['image_width']}): set env.camera.height/width"
                )
            images.append(img.float() / 255.0 if img.dtype == torch.uint8 else img.float())
        if images:
            feeds["images"] = np.ascontiguousarray(torch.stack(images, 1).numpy())
        out = self.session.run([self.output_name], {k: feeds[k] for k in self.input_names})[0]
        return torch.from_numpy(np.asarray(out, dtype=np.float32))


def _is_vla_onnx(spec: str) -> bool:
    """An ``.onnx`` file, or a folder with ``policy.onnx`` and no ``model.pt`` (a TinyVLA folder: its checkpoint)."""
    path = pathlib.Path(spec)
    return (path.suffix == ".onnx" and path.is_file()) or (
        path.is_dir() and (path / "policy.onnx").is_file() and not (path / "model.pt").is_file()
    )


def load_onnx_policy(spec: str, **kwargs) -> OnnxChunkPolicy:
    """``upright-policy-server --policy runs/vla/policy.onnx`` (or its folder): the exported VLA.

    Raises:
        ValueError: ``--arg`` keyword arguments (a file takes none); VLAMetadataError: not a VLA policy file.
    """
    if kwargs:
        raise ValueError(f"--policy {spec}: an ONNX policy takes no --arg (got {sorted(kwargs)})")
    path = pathlib.Path(spec)
    return OnnxChunkPolicy(path / "policy.onnx" if path.is_dir() else path)


register_loader("vla_onnx", _is_vla_onnx, load_onnx_policy)
