"""TinyVLA: chunk shapes, uint8 and float images give the same chunk, clipping, the instruction matters, and
select_action executes chunks through the queue."""

from __future__ import annotations

import pytest
import torch

from upright.vla.tiny import TinyVLA, TinyVLAConfig


def _model(**kw) -> TinyVLA:
    torch.manual_seed(0)
    cfg = TinyVLAConfig(
        **{
            "cameras": ("front", "wrist"),
            "image_height": 32,
            "image_width": 40,
            "chunk_size": 6,
            "state_dim": 5,
            "action_dim": 3,
            **kw,
        }
    )
    return TinyVLA(cfg).eval()


def _batch(b: int = 4, seed: int = 0, h: int = 32, w: int = 40) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {
        "observation.state": torch.randn(b, 5, generator=g),
        "observation.images.front": torch.randint(0, 256, (b, 3, h, w), generator=g, dtype=torch.uint8),
        "observation.images.wrist": torch.randint(0, 256, (b, 3, h, w), generator=g, dtype=torch.uint8),
        "task": ["pick up the cube"] * b,
    }


def test_chunk_shape_and_uint8_float_images_agree():
    model = _model()
    batch = _batch()
    chunk = model.predict_action_chunk(batch)
    assert chunk.shape == (4, 6, 3) and chunk.dtype == torch.float32
    as_float = {**batch, **{k: v.float() / 255.0 for k, v in batch.items() if k.startswith("observation.images")}}
    torch.testing.assert_close(model.predict_action_chunk(as_float), chunk)
    other = _batch(seed=1)
    assert not torch.allclose(
        model.predict_action_chunk({**batch, "observation.images.front": other["observation.images.front"]}), chunk
    )  # the image is read
    assert not torch.allclose(model.predict_action_chunk({**batch, "task": ["open the drawer"] * 4}), chunk)
    assert model.num_parameters() < 1_000_000


def test_delta_outputs_are_denormalised_and_clipped():
    model = _model(cameras=())
    model.action_mean.fill_(0.5)
    model.action_std.fill_(50.0)  # large outputs, beyond [-1, 1] before the clip
    batch = {"observation.state": torch.randn(64, 5), "task": ["lift"] * 64}
    chunk = model.predict_action_chunk(batch)
    assert chunk.abs().max() <= 1.0 and (chunk.abs() == 1.0).any()
    model.action_convention = "absolute"
    assert model.predict_action_chunk(batch).abs().max() > 1.0


def test_bad_inputs_and_configs_are_refused_in_one_line():
    model = _model()
    with pytest.raises(ValueError, match="env.camera.height/width"):
        model.predict_action_chunk(_batch(h=64, w=64))
    with pytest.raises(ValueError, match="observation.images.wrist"):
        model.predict_action_chunk({k: v for k, v in _batch().items() if "wrist" not in k})
    with pytest.raises(ValueError, match="action_convention"):
        TinyVLAConfig(action_convention="velocity")
    with pytest.raises(ValueError, match="state_names"):
        TinyVLAConfig(state_dim=3, state_names=("a",))


def test_select_action_runs_the_chunk_through_the_queue_then_predicts_again():
    model = _model(n_action_steps=4)
    batch = _batch(b=2)
    chunk = model.predict_action_chunk(batch)
    calls = []
    original = model.predict_action_chunk
    model.predict_action_chunk = lambda b: (calls.append(1), original(b))[1]
    got = [model.select_action(batch) for _ in range(5)]
    for k in range(4):
        torch.testing.assert_close(got[k], chunk[:, k])
    torch.testing.assert_close(got[4], chunk[:, 0])  # a new chunk after n_action_steps
    assert len(calls) == 2
    model.reset(torch.tensor([1]))
    model.select_action(batch)
    assert len(calls) == 3  # env 1 needed a new chunk
