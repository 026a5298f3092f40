"""openpi's msgpack-numpy wire format: our packer against the real openpi-client package, errors, key mapping."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
import torch

from upright.vla import wire
from upright.vla.keymap import DEFAULT_KEY_MAP, batch_to_observations, observation_to_batch, parse_key_map

# openpi-client 0.1.2 pins numpy<2; it is installed with --no-deps (README's test command), see test_policy_server.py
OPENPI_SKIP = "openpi-client not installed: pip install --no-deps openpi-client==0.1.2 (README's test command)"

VALUES = [
    1,
    1.0,
    "hello",
    None,
    [1, 2, 3],
    {"key": [1, 2, 3]},
    b"raw",
    np.bool_(True),
    np.int64(7),
    np.float32(2.5),
    np.float64(3.5),
    np.str_("asdf"),
    np.array(1.0),
    np.array([1, 2, 3], dtype=np.int32),
    np.array(["asdf", "qwer"]),
    np.array([True, False]),
    np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32),
    np.arange(24, dtype=np.int16).reshape(2, 3, 4),
    np.array([np.nan, np.inf, -np.inf]),
    np.arange(12.0).reshape(3, 4)[:, ::2],  # non-contiguous
    np.zeros((224, 224, 3), np.uint8),
    {"arr": np.array([1, 2]), "nested": {"arr": np.array([4.0, 5.0])}},
]


def _same(a, b) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    else:  # np.float64 and np.str_ go out as msgpack floats and strings (they subclass float and str)
        assert a == b and (type(a) is type(b) or isinstance(a, (float, str)))


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_pack_round_trip(value):
    _same(value, wire.unpackb(wire.packb(value)))


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_same_bytes_and_values_as_openpi_client(value):
    m = pytest.importorskip("openpi_client.msgpack_numpy", reason=OPENPI_SKIP)
    ours = wire.packb(value)
    assert ours == m.packb(value)
    _same(m.unpackb(ours), wire.unpackb(ours))


def test_array_layout_on_the_wire_is_openpis_tagged_map():
    raw = msgpack.unpackb(wire.packb(np.arange(6, dtype="<f4").reshape(2, 3)))
    assert list(raw) == [b"__ndarray__", b"data", b"dtype", b"shape"]
    assert raw[b"dtype"] == "<f4" and raw[b"shape"] == [2, 3] and len(raw[b"data"]) == 24


def test_refused_dtypes_and_types_raise_clear_errors():
    for bad in (np.array([object()], dtype=object), np.array([1j]), np.zeros(2, dtype=[("a", "f4")])):
        with pytest.raises(ValueError, match="cannot pack a numpy"):
            wire.packb({"x": bad})
    with pytest.raises(TypeError, match=r"tensor.cpu\(\).numpy\(\)"):
        wire.packb({"x": torch.zeros(2)})
    with pytest.raises(ValueError, match="not an openpi"):
        wire.unpackb(b"\x92\x01")  # a 2-list cut short
    forged = msgpack.packb({b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": "|O", b"shape": [1]})
    with pytest.raises(ValueError, match="refusing to unpack a object"):
        wire.unpackb(forged)
    short = msgpack.packb({b"__ndarray__": True, b"data": b"\0" * 4, b"dtype": "<f8", b"shape": [2]})
    with pytest.raises(ValueError, match="malformed packed array"):
        wire.unpackb(short)


def test_reply_without_actions_or_text_frame_raises():
    actions, reply = wire.actions_from_reply(wire.packb({"actions": np.ones((4, 2)), "server_timing": {}}))
    assert actions.dtype == np.float32 and actions.shape == (4, 2) and "server_timing" in reply
    with pytest.raises(ValueError, match="without 'actions'.*'action'"):
        wire.actions_from_reply(wire.packb({"action": np.ones((4, 2))}))
    with pytest.raises(ValueError, match=r"expected a numeric \(H, A\)"):
        wire.actions_from_reply(wire.packb({"actions": np.ones(4)}))
    with pytest.raises(RuntimeError, match="answered with an error: boom"):
        wire.actions_from_reply("boom\n")


def test_key_map_converts_openpi_observations_and_back():
    rng = np.random.default_rng(0)
    obs = {
        "observation/image": rng.integers(0, 256, (6, 5, 3), dtype=np.uint8),
        "observation/wrist_image": rng.integers(0, 256, (4, 4, 3), dtype=np.uint8),
        "observation/state": rng.normal(size=8),
        "prompt": "lift the cube",
        "unmapped/extra": np.zeros(2),
    }
    batch = observation_to_batch(obs, cameras=("front", "wrist"))
    assert sorted(batch) == ["observation.images.front", "observation.images.wrist", "observation.state", "task"]
    front = batch["observation.images.front"]
    assert front.shape == (1, 3, 6, 5) and front.dtype == torch.uint8
    assert torch.equal(front[0, :, 2, 1], torch.from_numpy(obs["observation/image"][2, 1]))  # HWC -> CHW
    assert batch["observation.state"].dtype == torch.float32 and batch["task"] == ["lift the cube"]
    back = batch_to_observations(batch)
    assert len(back) == 1 and np.array_equal(back[0]["observation/image"], obs["observation/image"])
    assert back[0]["prompt"] == "lift the cube" and back[0]["observation/state"].dtype == np.float32
    with pytest.raises(ValueError, match="lacks 'observation/wrist_image'"):
        observation_to_batch({k: v for k, v in obs.items() if k != "observation/wrist_image"}, cameras=("wrist",))
    with pytest.raises(ValueError, match=r"\(H, W, 3\) RGB image"):
        observation_to_batch({**obs, "observation/image": np.zeros((4, 4), np.uint8)})
    droid = parse_key_map(["observation/exterior_image_1_left=observation.images.front"])
    assert droid["observation/exterior_image_1_left"] == "observation.images.front"
    assert "observation/image" not in droid and droid["prompt"] == DEFAULT_KEY_MAP["prompt"]
    with pytest.raises(ValueError, match="OPENPI_KEY=LEROBOT_KEY"):
        parse_key_map(["observation/image"])
    with pytest.raises(ValueError, match="the target must be"):
        parse_key_map(["a=observation.bogus"])
