"""Export a :class:`~upright.vla.tiny.TinyVLA` to ONNX with self-describing metadata, and check it against torch.

The graph's inputs and output and the metadata keys are described in :mod:`upright.vla.onnx_policy`. The state and
action normalisation is baked into the graph (``normalization`` says so); the stats are stored too, for people.
"""

from __future__ import annotations

import json
import pathlib
import warnings
from typing import Any

import numpy as np
import onnx
import torch

from upright.training.onnx_export import _to_jsonable, quiet_onnx_exporter
from upright.vla.onnx_policy import VLA_METADATA_VERSION, OnnxChunkPolicy
from upright.vla.tiny import TinyVLA


class _StateGraph(torch.nn.Module):
    """The exported graph of a policy without cameras: (state, token_ids, token_mask) -> action_chunk."""

    def __init__(self, model: TinyVLA):
        super().__init__()
        self.model = model

    def forward(self, state: torch.Tensor, token_ids: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
        return self.model(state, [], token_ids, token_mask)


class _ImageGraph(_StateGraph):
    """The exported graph with cameras: (state, token_ids, token_mask, images (B, cameras, 3, H, W)) -> action_chunk."""

    def forward(
        self, state: torch.Tensor, token_ids: torch.Tensor, token_mask: torch.Tensor, images: torch.Tensor
    ) -> torch.Tensor:
        cams = [images[:, c] for c in range(len(self.model.cfg.cameras))]
        return self.model(state, cams, token_ids, token_mask)


def input_names(model: TinyVLA) -> list[str]:
    """``state``, ``token_ids``, ``token_mask``, and ``images`` when the policy reads cameras."""
    return ["state", "token_ids", "token_mask", *(["images"] if model.cfg.cameras else [])]


def example_inputs(model: TinyVLA, batch: int = 2, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Random inputs of the graph (state around the stored mean, instruction-like tokens, images in [0, 1])."""
    cfg = model.cfg
    g = torch.Generator().manual_seed(seed)
    state = model.state_mean + model.state_std * torch.randn(batch, cfg.state_dim, generator=g)
    texts = ["pick up the green cube", "lift it to the red target"]
    ids, mask = model.tokenizer.encode([texts[i % 2] for i in range(batch)])
    if not cfg.cameras:
        return (state.float(), ids, mask)
    images = torch.rand(batch, len(cfg.cameras), 3, cfg.image_height, cfg.image_width, generator=g)
    return (state.float(), ids, mask, images)


def vla_metadata(model: TinyVLA, tasks: list[str] | None = None) -> dict[str, Any]:
    """The ``metadata_props`` of ``model``'s policy file (:data:`~upright.vla.onnx_policy.REQUIRED_VLA_KEYS` and
    more); ``tasks``: the instructions seen in training (``training_tasks``). A model trained with a deploy contract
    (``cfg.extra["deploy_contract"]``, ``train_bc --deploy-contract``) also carries its keys
    (:data:`upright.policy_io.schema.CHUNK_CONTRACT_KEYS`: joints, Kp/Kd, default pose, action mode and scale)
    at the top level, so the deploy daemon runs the file alone.

    Raises:
        ValueError: the contract's ``control_dt`` differs from the model's.
    """
    cfg = model.cfg
    contract = dict(cfg.extra.get("deploy_contract") or {})
    if "control_dt" in contract and abs(float(contract["control_dt"]) - cfg.control_dt) > 1e-9:
        raise ValueError(
            f"deploy contract control_dt {contract['control_dt']} s != the model's {cfg.control_dt} s "
            "(the dataset's 1/fps); fix the contract"
        )
    contract.pop("control_dt", None)
    return {
        **contract,
        "upright_vla_metadata_version": VLA_METADATA_VERSION,
        "policy_type": "tiny_vla",
        "cameras": list(cfg.cameras),
        "image_height": cfg.image_height,
        "image_width": cfg.image_width,
        "image_channel_order": "RGB",
        "image_layout": "B,camera,C,H,W",
        "image_input": "input 'images' (B, len(cameras), 3, H, W) float32 RGB in [0, 1] (uint8 / 255), cameras in "
        "'cameras' order; absent when cameras is empty",
        **model.tokenizer.metadata(),
        "chunk_size": cfg.chunk_size,
        "state_key": cfg.state_key,
        "state_names": list(cfg.state_names),
        "state_dim": cfg.state_dim,
        "action_names": list(cfg.action_names),
        "action_dim": cfg.action_dim,
        "action_convention": cfg.action_convention,
        "action_low": cfg.action_low,
        "action_high": cfg.action_high,
        "normalization": "in the graph: state -> (state - state_mean) / state_std; output = head * action_std + "
        "action_mean, clipped to [action_low, action_high] for the delta convention",
        "state_mean": model.state_mean,
        "state_std": model.state_std,
        "action_mean": model.action_mean,
        "action_std": model.action_std,
        "control_dt": cfg.control_dt,
        "n_action_steps": cfg.n_action_steps,
        "temporal_ensemble_coeff": cfg.temporal_ensemble_coeff,
        "input_names": input_names(model),
        "output_name": "action_chunk",
        "training_tasks": list(tasks or []),
    }


def export_onnx(model: TinyVLA, path: str | pathlib.Path, tasks: list[str] | None = None) -> float:
    """Write ``model`` to ``path`` (dynamic batch, weights inside the file, metadata attached) and check it.

    Returns:
        The max |onnx - torch| over random inputs (:func:`check_onnx_matches_torch`).

    Raises:
        AssertionError: onnxruntime and torch disagree by more than 1e-4.
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    graph = (_ImageGraph(model) if model.cfg.cameras else _StateGraph(model)).eval()
    args = example_inputs(model)
    batch = torch.export.Dim("batch", min=1, max=4096)
    dynamic = tuple({0: batch} for _ in args)
    with quiet_onnx_exporter(), torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*axis name.*")  # every input shares the one batch axis
        torch.onnx.export(
            graph,
            args,
            str(path),
            input_names=input_names(model),
            output_names=["action_chunk"],
            opset_version=18,
            dynamo=True,
            dynamic_shapes=dynamic,
            external_data=False,
            verbose=False,
        )
    proto = onnx.load(str(path))
    del proto.metadata_props[:]
    for key, value in vla_metadata(model, tasks).items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, json.dumps(_to_jsonable(value))
    onnx.save(proto, str(path), save_as_external_data=False)
    side = path.with_name(path.name + ".data")
    if side.exists():
        side.unlink()
    return check_onnx_matches_torch(path, model)


def check_onnx_matches_torch(path: str | pathlib.Path, model: TinyVLA, atol: float = 1e-4) -> float:
    """Run the file through :class:`OnnxChunkPolicy` and ``model`` on the same random batch of 3; max |difference|.

    Raises:
        AssertionError: the outputs differ by more than ``atol``.
    """
    inputs = example_inputs(model, batch=3, seed=1)
    batch = {"observation.state": inputs[0], "task": ["pick up the green cube", "lift it", "grab the block"]}
    for c, cam in enumerate(model.cfg.cameras):
        batch[f"observation.images.{cam}"] = inputs[3][:, c]
    with torch.no_grad():
        expected = model.predict_action_chunk(batch).numpy()
    got = OnnxChunkPolicy(path).predict_action_chunk(batch).numpy()
    err = float(np.abs(got - expected).max())
    if err > atol:
        raise AssertionError(f"ONNX output differs from torch by {err:.3g} > {atol:g} ({path})")
    return err
