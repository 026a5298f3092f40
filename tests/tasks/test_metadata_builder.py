"""The observation block every task writes into its ONNX metadata (upright.tasks.metadata), on hand-made terms."""

from __future__ import annotations

import torch

from upright.managers.observation import ObservationTerm
from upright.policy_io.schema import HISTORY_LAYOUT, REQUIRED_KEYS
from upright.tasks.metadata import POLICY_IO, first_line, observation_metadata


def gyro(state) -> torch.Tensor:
    """(N, 3) angular velocity, base frame, rad/s.

    More text that is not the description."""
    return state


def test_observation_block_from_terms():
    terms = (ObservationTerm("gyro", gyro, 0.25, 0.05), ObservationTerm("cube", lambda s: s, 1.0, 0.0))
    meta = observation_metadata(terms, (3, 6), 4, 50.0, {"gyro": "IMU"})
    assert meta["observation_names"] == ["gyro", "cube"] and meta["observation_dims"] == [3, 6]
    assert meta["observation_scales"] == [0.25, 1.0] and meta["observation_noise"] == [0.05, 0.0]
    assert meta["observation_descriptions"] == ["(N, 3) angular velocity, base frame, rad/s.", ""]
    assert meta["observation_frame_dim"] == 9 and meta["observation_dim"] == 36  # 4 frames of 9
    assert meta["observation_history_length"] == 4 and meta["observation_history_order"] == "oldest_first"
    assert meta["history_layout"] == HISTORY_LAYOUT and meta["observation_clip"] == 50.0
    assert meta["privileged_inputs"] == ["cube"]  # not measurable on the robot
    assert {"input_name", "output_name"} <= set(POLICY_IO) and POLICY_IO["input_name"] == "obs"
    required = {k for k in REQUIRED_KEYS if k.startswith("observation_")} | {"history_layout", "privileged_inputs"}
    assert required <= set(meta)


def test_first_line_of_missing_or_blank_docstrings():
    assert first_line(None) == "" and first_line("   \n ") == "" and first_line("\n  a b\n c") == "a b"
