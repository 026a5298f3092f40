"""Reading a recorded LeRobot v3 dataset into BC tensors, and the ACT/LeRobot chunk targets with their padding."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
import torch

from upright.vla.dataset import chunk_targets, concat, load_dataset


def test_chunk_targets_take_the_next_actions_of_the_same_episode_and_pad_with_the_last():
    action = torch.arange(5.0).unsqueeze(1) * torch.tensor([[1.0, -1.0]])  # frames 0..4
    episode = torch.tensor([0, 0, 0, 1, 1])
    targets, is_pad = chunk_targets(action, episode, 3)
    assert targets.shape == (5, 3, 2) and is_pad.shape == (5, 3) and is_pad.dtype == torch.bool
    assert targets[:, :, 0].tolist() == [[0, 1, 2], [1, 2, 2], [2, 2, 2], [3, 4, 4], [4, 4, 4]]
    assert is_pad.tolist() == [
        [False, False, False],
        [False, False, True],
        [False, True, True],
        [False, False, True],
        [False, True, True],
    ]
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_targets(action, episode, 0)


def test_recorded_dataset_loads_with_tasks_actions_and_chunks(tiny_dataset):
    root, cams, steps = tiny_dataset["root"], tiny_dataset["cameras"], tiny_dataset["steps"]
    data = load_dataset(root, cams)
    n = 2 * steps
    assert len(data) == n and data.num_episodes == 2
    assert data.state.shape == (n, 22) and data.action.shape == (n, 8) and data.state.dtype == torch.float32
    assert sorted(data.tasks) == sorted(tiny_dataset["instructions"])
    per_episode = {int(e): set(data.task_strings(torch.nonzero(data.episode == e).flatten())) for e in (0, 1)}
    assert all(len(t) == 1 for t in per_episode.values()) and per_episode[0] != per_episode[1]
    # the actions are the parquet's, in frame order
    table = pq.read_table(root / "data" / "chunk-000" / "file-001.parquet")
    torch.testing.assert_close(data.action[steps:], torch.tensor(table.column("action").to_pylist()))
    for cam in cams:
        img = data.images[cam]
        assert img.shape == (n, 3, 64, 64) and img.dtype == torch.uint8 and img.float().std() > 5
    targets, is_pad = chunk_targets(data.action, data.episode, 10)
    last = steps - 1
    for t in (0, last - 3, last, last + 1):
        end = last if t <= last else n - 1
        for k in range(10):
            torch.testing.assert_close(targets[t, k], data.action[min(t + k, end)])
            assert bool(is_pad[t, k]) == (t + k > end)
    first = load_dataset(root, (), max_episodes=1)
    assert len(first) == steps and first.images == {}
    both = concat([first, load_dataset(root)])
    assert both.num_episodes == 3 and len(both) == steps + n


def test_missing_dataset_and_missing_features_name_the_fix(tiny_dataset, tmp_path):
    root = tiny_dataset["root"]
    with pytest.raises(FileNotFoundError, match="record_demos"):
        load_dataset(tmp_path / "nothing")
    with pytest.raises(ValueError, match="--cameras"):
        load_dataset(root, ("wrist",))
    with pytest.raises(ValueError, match="observation.nothing"):
        load_dataset(root, state_key="observation.nothing")
