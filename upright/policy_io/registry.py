"""Which kind of policy a source is, and the one registry of the loaders that read each kind.

Kinds (:data:`KINDS`):

- ``"mlp"``: an RL policy, observation (B, D) float32 -> actions (B, J): an ``.onnx`` file with upright's MLP
  metadata (:mod:`upright.policy_io.schema`), a training checkpoint ``model_<it>.pt``, or a run folder of them;
- ``"chunk"``: a VLA chunk policy (:class:`upright.vla.policy.ChunkPolicy`): an ``.onnx`` file with upright's VLA
  metadata, a TinyVLA ``model.pt`` or its folder, a policy server ``ws://HOST:PORT``;
- ``"residual"``: a residual pair, an RL residual over a chunk base (:mod:`upright.vla.residual`): its run folder
  (with ``base_checksum.json``) or its ``policy.onnx`` (metadata ``policy_type`` = ``residual``).

:func:`policy_kind` tells the kind from names and ONNX metadata alone (nothing is loaded). A module that reads a kind
registers its loader with :func:`register_loader` when imported; the modules of :data:`BUILTIN_LOADER_MODULES` are
imported (when present) the first time a kind's loaders are looked up, so that this module itself imports nothing
heavy (files are read through onnxruntime by :mod:`upright.policy_io.onnx_info`).
"""

from __future__ import annotations

import importlib
import json
import pathlib
from collections.abc import Callable, Iterable
from typing import Any

KINDS = ("mlp", "chunk", "residual")
"""The kinds of policy sources (module docstring)."""

Loader = Callable[..., Any]
"""``load(spec, **kwargs) -> policy``: an MLP runner, a ChunkPolicy, a residual pair."""

BUILTIN_LOADER_MODULES: dict[str, tuple[str, ...]] = {
    "mlp": ("upright.policy_io.mlp",),
    "chunk": ("upright.vla.onnx_policy", "upright.vla.tiny"),
    "residual": ("upright.vla.residual",),
}
"""Modules imported before a kind's loaders are matched, so that their :func:`register_loader` calls have run."""

_LOADERS: dict[str, tuple[str, Callable[[str], bool], Loader]] = {}


def register_loader(name: str, matches: Callable[[str], bool], load: Loader, kind: str = "chunk") -> None:
    """Register (or replace) the loader ``name`` of ``kind``: ``load(spec, **kwargs)`` serves the SPECs
    ``matches(spec)`` accepts.

    Example: ``register_loader("vla_onnx", lambda s: s.endswith(".onnx"), OnnxChunkPolicy.from_file)``.

    Raises:
        ValueError: ``kind`` is not one of :data:`KINDS`.
    """
    if kind not in KINDS:
        raise ValueError(f"loader {name!r}: kind {kind!r} is not one of {KINDS}")
    _LOADERS[name] = (kind, matches, load)


def registered_loaders(kinds: Iterable[str] = KINDS) -> list[str]:
    """Names of the registered loaders of ``kinds``, in registration order, their built-in modules imported first.

    Raises:
        ModuleNotFoundError: a built-in module exists but lacks one of its own dependencies.
    """
    kinds = tuple(kinds)
    for kind in kinds:
        for mod in BUILTIN_LOADER_MODULES.get(kind, ()):
            try:
                importlib.import_module(mod)
            except ModuleNotFoundError as e:
                if e.name != mod:  # the module exists but lacks a dependency: say so
                    raise
    return [name for name, (kind, _, _) in _LOADERS.items() if kind in kinds]


def find_loader(spec: str, kinds: Iterable[str] = KINDS) -> tuple[str, Loader] | None:
    """The first registered loader of ``kinds`` whose ``matches(spec)`` accepts ``spec``, as (name, load); None if
    none does."""
    for name in registered_loaders(kinds):
        _, matches, load = _LOADERS[name]
        if matches(spec):
            return name, load
    return None


def onnx_kind(path: str | pathlib.Path) -> str | None:
    """The kind of an ``.onnx`` file from its metadata alone: ``"chunk"`` (upright's VLA metadata), ``"residual"``
    (``policy_type`` = ``residual``), ``"mlp"`` (anything else ONNX reads); None when ONNX cannot read it (the
    loader says why)."""
    from upright.policy_io import onnx_info

    try:
        props = onnx_info.read(path).metadata
    except (OSError, onnx_info.OnnxFileError):  # not an ONNX file: the loader that reads it says why
        return None
    if "upright_vla_metadata_version" in props:
        return "chunk"
    try:
        residual = json.loads(props.get("policy_type", '""')) == "residual"
    except json.JSONDecodeError:
        residual = False
    return "residual" if residual else "mlp"


def policy_kind(spec: str) -> str | None:
    """The kind (:data:`KINDS`) of the policy source ``spec`` names, from names and ONNX metadata (nothing loaded):

    - ``ws://`` / ``wss://``: ``"chunk"`` (a policy server);
    - a folder: ``"residual"`` with ``base_checksum.json``, ``"chunk"`` with ``model.pt`` and no ``model_<it>.pt``
      (TinyVLA), ``"mlp"`` with ``policy.onnx`` or ``model_<it>.pt``;
    - ``model.pt``: ``"chunk"``; another ``.pt``: ``"mlp"`` (a training checkpoint);
    - an ``.onnx`` file: :func:`onnx_kind`.

    None: nothing of a known kind there (the loader asked for it says why).
    """
    if str(spec).startswith(("ws://", "wss://")):
        return "chunk"
    path = pathlib.Path(spec).expanduser()
    if path.is_dir():
        if (path / "base_checksum.json").is_file():
            return "residual"
        if (path / "model.pt").is_file() and not any(path.glob("model_*.pt")):
            return "chunk"
        if (path / "policy.onnx").is_file() or any(path.glob("model_*.pt")):
            return "mlp"
        return None
    if not path.is_file():
        return None
    if path.name == "model.pt":
        return "chunk"
    if path.suffix == ".pt":
        return "mlp"
    if path.suffix == ".onnx":
        return onnx_kind(path)
    return None
