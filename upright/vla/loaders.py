"""Turning ``upright-policy-server --policy SPEC`` into a :class:`~upright.vla.policy.ChunkPolicy`.

``SPEC`` is either ``MODULE:FACTORY`` (``upright.vla.linear:make_linear_policy``: the factory is called with the
``--arg KEY=VALUE`` pairs as string keyword arguments; an attribute that already is a ChunkPolicy is used as is) or
anything a registered chunk-policy loader recognises, typically a file path (an exported ONNX policy, a checkpoint).
Loaders live in the one registry of :mod:`upright.policy_io.registry` (kind ``"chunk"``): a module that reads policies
from files registers its loader with :func:`~upright.policy_io.registry.register_loader` when imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path

from upright.policy_io.registry import find_loader, registered_loaders
from upright.vla.policy import ChunkPolicy


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
    names = registered_loaders(["chunk"])
    found = find_loader(spec, ["chunk"])
    if found is not None:
        return _checked(found[1](spec, **kwargs), spec)
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
