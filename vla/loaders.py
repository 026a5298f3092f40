"""Turning ``upright-policy-server --policy SPEC`` into a :class:`~upright.vla.policy.ChunkPolicy`.

``SPEC`` is either ``MODULE:FACTORY`` (``upright.vla.linear:make_linear_policy``: the factory is called with the
``--arg KEY=VALUE`` pairs as string keyword arguments; an attribute that already is a ChunkPolicy is used as is) or
anything a registered loader recognises, typically a file path (an exported ONNX policy, a checkpoint). A module
that reads policies from files registers its loader with :func:`register_loader` when imported; the modules of
:data:`BUILTIN_LOADER_MODULES` are imported (when present) before a SPEC is matched.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path

from upright.vla.policy import ChunkPolicy

Loader = Callable[..., ChunkPolicy]
"""``load(spec, **kwargs) -> ChunkPolicy``."""

BUILTIN_LOADER_MODULES = ("upright.vla.onnx_policy", "upright.vla.tiny")
"""Modules imported before matching a SPEC, so that their :func:`register_loader` calls have run."""

_LOADERS: dict[str, tuple[Callable[[str], bool], Loader]] = {}


def register_loader(name: str, matches: Callable[[str], bool], load: Loader) -> None:
    """Register (or replace) the loader ``name``: ``load(spec, **kwargs)`` serves the SPECs ``matches(spec)`` accepts.

    Example: ``register_loader("onnx", lambda s: s.endswith(".onnx"), OnnxChunkPolicy.from_file)``.
    """
    _LOADERS[name] = (matches, load)


def registered_loaders() -> list[str]:
    """Names of the registered loaders, built-in modules imported first."""
    for mod in BUILTIN_LOADER_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:  # the module exists but lacks a dependency: say so
                raise
    return list(_LOADERS)


def _checked(policy: object, spec: str) -> ChunkPolicy:
    if not isinstance(policy, ChunkPolicy):
        raise ValueError(f"--policy {spec!r} gave a {type(policy).__name__}, not an upright.vla.ChunkPolicy")
    for attr in ("chunk_size", "action_dim"):
        if not isinstance(getattr(policy, attr, None), int):
            raise ValueError(f"--policy {spec!r}: the policy has no integer '{attr}'; set it in its constructor")
    return policy


def load_policy(spec: str, kwargs: Mapping[str, str] | None = None) -> ChunkPolicy:
    """The policy SPEC names (module docstring), constructed with ``kwargs``.

    Raises:
        ValueError: no loader recognises SPEC (a path that does not exist: "no such file or folder"), its module or
            factory is missing, or it gives no ChunkPolicy.
    """
    kwargs = dict(kwargs or {})
    names = registered_loaders()
    for matches, load in _LOADERS.values():
        if matches(spec):
            return _checked(load(spec, **kwargs), spec)
    if ":" in spec and not Path(spec).exists():
        mod_name, _, attr = spec.partition(":")
        try:
            module = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            raise ValueError(
                f"--policy {spec!r}: cannot import module '{mod_name}' ({e}); is it on PYTHONPATH?"
            ) from None
        if not hasattr(module, attr):
            raise ValueError(f"--policy {spec!r}: module '{mod_name}' has no attribute '{attr}'")
        obj = getattr(module, attr)
        policy = obj if isinstance(obj, ChunkPolicy) else obj(**kwargs)
        return _checked(policy, spec)
    if ":" not in spec and not Path(spec).exists():
        raise ValueError(
            f"--policy {spec!r}: no such file or folder; give MODULE:FACTORY (e.g. "
            "upright.vla.linear:make_linear_policy), a TinyVLA folder or model.pt, or a VLA .onnx"
        )
    raise ValueError(
        f"no loader recognises --policy {spec!r}: give MODULE:FACTORY (e.g. "
        f"upright.vla.linear:make_linear_policy) or a file a registered loader reads "
        f"(registered: {names or 'none'})"
    )
