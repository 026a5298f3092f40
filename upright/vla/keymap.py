"""openpi observations <-> LeRobot batches: key names, image layout, batching.

openpi sends ONE unbatched observation per request, with model-specific keys; its LIBERO client
(``examples/libero/main.py``) sends ``observation/image`` and ``observation/wrist_image`` as (H, W, 3) uint8 RGB,
``observation/state`` as (S,) floats and ``prompt`` as a string. A LeRobot batch (:mod:`upright.vla.policy`) has
``observation.images.<camera>`` (B, C, H, W), ``observation.state`` (B, S) float32 and ``task`` (list of B strings).

:data:`DEFAULT_KEY_MAP` maps openpi's names to LeRobot's; another model's names (DROID's
``observation/exterior_image_1_left``, ...) go in a key map of their own (``--key-map`` of ``upright-policy-server``).
A key absent from the key map passes under its own name when it is already a LeRobot key (``observation.state``,
``observation.images.<camera>``, ``task``); any other unmapped key of an observation is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from upright.vla.policy import IMAGE_PREFIX, STATE_KEY, TASK_KEY, PolicyBatch, validate_batch

DEFAULT_KEY_MAP: dict[str, str] = {
    "observation/image": "observation.images.front",
    "observation/wrist_image": "observation.images.wrist",
    "observation/state": "observation.state",
    "prompt": "task",
}
"""openpi observation key -> LeRobot batch key (openpi's LIBERO example names)."""


def _is_lerobot_key(key: str) -> bool:
    return key in (STATE_KEY, TASK_KEY) or (key.startswith(IMAGE_PREFIX) and len(key) > len(IMAGE_PREFIX))


def check_key_map(key_map: Mapping[str, str]) -> dict[str, str]:
    """The key map as a dict, checked: LeRobot keys as values, each used once.

    Raises:
        ValueError: a value that is not a LeRobot key, or two openpi keys mapped to one LeRobot key.
    """
    key_map = dict(key_map)
    for src, dst in key_map.items():
        if not _is_lerobot_key(dst):
            raise ValueError(
                f"key map: '{src}' -> '{dst}': the target must be '{STATE_KEY}', '{TASK_KEY}' or "
                f"'{IMAGE_PREFIX}<camera>'"
            )
    dup = sorted({d for d in key_map.values() if list(key_map.values()).count(d) > 1})
    if dup:
        raise ValueError(f"key map: several openpi keys map to {dup}; map each LeRobot key once")
    return key_map


def parse_key_map(items: list[str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A key map from ``OPENPI_KEY=LEROBOT_KEY`` strings (entries replace those of ``base`` with the same target).

    Raises:
        ValueError: an item without ``=``, or a bad key map (:func:`check_key_map`).
    """
    key_map = dict(DEFAULT_KEY_MAP if base is None else base)
    for item in items:
        src, sep, dst = item.partition("=")
        if not sep or not src or not dst:
            raise ValueError(
                f"key map entry {item!r}: write OPENPI_KEY=LEROBOT_KEY, e.g. "
                "observation/exterior_image_1_left=observation.images.front"
            )
        key_map = {k: v for k, v in key_map.items() if v != dst}
        key_map[src] = dst
    return check_key_map(key_map)


def _image_to_chw(key: str, value) -> torch.Tensor:
    """(1, C, H, W) from an (H, W, C) (or (C, H, W)) uint8 or float image; uint8 stays uint8, floats become float32."""
    img = np.asarray(value)
    if img.ndim == 3 and img.shape[-1] in (1, 3):
        img = img.transpose(2, 0, 1)
    elif not (img.ndim == 3 and img.shape[0] in (1, 3)):
        raise ValueError(f"'{key}' must be an (H, W, 3) RGB image (openpi's layout) or (3, H, W), got {img.shape}")
    if img.dtype == np.uint8 or img.dtype.kind == "f":  # a C-order copy: unpacked arrays are read-only views
        return torch.from_numpy(
            np.array(img, dtype=np.uint8 if img.dtype == np.uint8 else np.float32, order="C")
        ).unsqueeze(0)
    raise ValueError(f"'{key}' must be uint8 in [0, 255] or float in [0, 1], got dtype {img.dtype}")


def observation_to_batch(
    obs: Mapping, key_map: Mapping[str, str] = DEFAULT_KEY_MAP, cameras: tuple[str, ...] = ()
) -> PolicyBatch:
    """One openpi observation to a LeRobot batch of size 1.

    Args:
        obs: the unpacked request: state (S,) numbers, images (H, W, 3) uint8 (or float in [0, 1]), prompt a string.
        key_map: openpi key -> LeRobot key (module docstring for unmapped keys).
        cameras: cameras the policy needs (``"front"`` for ``observation.images.front``); their absence is an error.

    Returns:
        ``observation.state`` (1, S) float32, ``observation.images.<camera>`` (1, C, H, W) uint8 or float32, ``task``
        a list of one string (when the observation has a prompt).

    Raises:
        ValueError: not a dict, a missing state or camera (the message names the openpi key to send), a wrong shape
            or dtype.
    """
    if not isinstance(obs, Mapping):
        raise ValueError(f"an observation must be a dict of openpi keys, got {type(obs).__name__}")
    reverse = {v: k for k, v in key_map.items()}
    batch: PolicyBatch = {}
    for key, value in obs.items():
        target = key_map.get(key, key if isinstance(key, str) and _is_lerobot_key(key) else None)
        if target is None:
            continue
        if target == STATE_KEY:
            state = np.asarray(value)
            if state.ndim != 1 or state.dtype.kind not in "fiub":
                raise ValueError(
                    f"'{key}' must be a 1-D numeric state (S,), got shape {state.shape} dtype {state.dtype}"
                )
            batch[STATE_KEY] = torch.from_numpy(state.astype(np.float32)).unsqueeze(0)
        elif target == TASK_KEY:
            if not isinstance(value, str):
                raise ValueError(f"'{key}' must be an instruction string, got {type(value).__name__}")
            batch[TASK_KEY] = [str(value)]
        else:
            batch[target] = _image_to_chw(key, value)
    needed = [STATE_KEY] + [IMAGE_PREFIX + c for c in cameras]
    for dst in needed:
        if dst not in batch:
            src = reverse.get(dst, dst)
            raise ValueError(f"observation lacks '{src}' (mapped to '{dst}'); keys present: {sorted(map(str, obs))}")
    return batch


def batch_to_observations(batch: PolicyBatch, key_map: Mapping[str, str] = DEFAULT_KEY_MAP) -> list[dict]:
    """A LeRobot batch to B openpi observations (the reverse of :func:`observation_to_batch`).

    State rows become (S,) float32 arrays, images (H, W, C) uint8 (floats in [0, 1] are scaled by 255 and rounded),
    tasks strings; a key without an openpi name (reverse key map) keeps its LeRobot name.

    Raises:
        ValueError: a bad batch (:func:`~upright.vla.policy.validate_batch`).
    """
    b = validate_batch(batch)
    reverse = {v: k for k, v in key_map.items()}
    obs: list[dict] = [{} for _ in range(b)]
    for key, value in batch.items():
        name = reverse.get(key, key)
        if key == TASK_KEY:
            for i in range(b):
                obs[i][name] = str(value[i])
            continue
        arr = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        if key == STATE_KEY:
            arr = arr.astype(np.float32)
        elif key.startswith(IMAGE_PREFIX):
            if arr.dtype != np.uint8:
                arr = np.rint(np.clip(arr, 0.0, 1.0) * 255.0).astype(np.uint8)
            arr = arr.transpose(0, 2, 3, 1)
        elif arr.ndim == 0 or arr.shape[0] != b:
            continue  # not a per-row value
        for i in range(b):
            obs[i][name] = np.ascontiguousarray(arr[i])
    return obs
