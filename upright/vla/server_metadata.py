"""The defaults of ``upright-policy-server`` (:mod:`upright.vla.server`: host, port, batch) and what it sends a client
on connect: :func:`policy_metadata`, built from what the served policy declares."""

from __future__ import annotations

from collections.abc import Mapping

from upright.vla.keymap import DEFAULT_KEY_MAP
from upright.vla.policy import IMAGE_PREFIX, STATE_KEY, ChunkPolicy
from upright.vla.server_guard import DEFAULT_MAX_MESSAGE_BYTES

DEFAULT_HOST = "127.0.0.1"
"""Where ``upright-policy-server`` listens by default: loopback only (a non-loopback bind is warned about)."""
DEFAULT_PORT = 8000
"""openpi's default policy-server port."""
DEFAULT_MAX_BATCH = 256
"""Most pipelined requests of one connection answered by one policy call (:mod:`upright.vla.server`)."""

DESCRIPTION_KEYS = ("state_dim", "state_key", "image_height", "image_width")
"""Optional metadata keys, sent when the policy declares them (as attributes, in a ``cfg`` like TinyVLA's, or in a
``metadata`` dict like OnnxChunkPolicy's); ``state_key`` is the lift feature the policy's ``observation.state`` holds
(``observation.state``: the 22-value proprioceptive state, ``observation.policy_obs``: the env's 49-value
observation), which residual RL on a remote base needs (:mod:`upright.vla.residual`)."""


def _declared(policy: ChunkPolicy, key: str):
    """``key`` as the policy declares it: its attribute, its ``cfg``'s, or its ``metadata`` dict's (None if none)."""
    value = getattr(policy, key, None)
    if value is None:
        value = getattr(getattr(policy, "cfg", None), key, None)
    meta = getattr(policy, "metadata", None)
    if value is None and isinstance(meta, Mapping):
        value = meta.get(key)
    return value


def policy_metadata(
    policy: ChunkPolicy,
    key_map: Mapping[str, str] = DEFAULT_KEY_MAP,
    max_batch: int = DEFAULT_MAX_BATCH,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> dict:
    """The metadata sent on connect: ``chunk_size``, ``action_dim``, ``action_convention``, ``observation_keys``
    (openpi keys read), ``required_keys`` (those a request must have), ``key_map``, ``policy`` (class name),
    ``cameras``, ``max_batch``, ``max_message_bytes`` (largest request accepted, bytes), the
    :data:`DESCRIPTION_KEYS` the policy declares, and ``weights_sha256`` when the weights can be hashed
    (:func:`~upright.vla.checksums.policy_weights_sha256`: a torch module's parameters, an ONNX policy's file), so a
    client can tell whether the served weights changed."""
    from upright.vla.checksums import policy_weights_sha256

    reverse = {v: k for k, v in key_map.items()}
    cameras = tuple(_declared(policy, "cameras") or ())
    required = [reverse.get(STATE_KEY, STATE_KEY)] + [reverse.get(IMAGE_PREFIX + c, IMAGE_PREFIX + c) for c in cameras]
    meta = {
        "server": "upright-policy-server",
        "policy": type(policy).__name__,
        "chunk_size": int(policy.chunk_size),
        "action_dim": int(policy.action_dim),
        "action_convention": policy.action_convention,
        "observation_keys": list(key_map),
        "required_keys": required,
        "key_map": dict(key_map),
        "cameras": list(cameras),
        "max_batch": int(max_batch),
        "max_message_bytes": int(max_message_bytes),
    }
    for key in DESCRIPTION_KEYS:
        value = _declared(policy, key)
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            meta[key] = value
    weights = policy_weights_sha256(policy)
    if weights is not None:
        meta["weights_sha256"] = weights
    return meta
