"""The action-chunk queue (queue mode and ACT's temporal ensembling) and the policy interface's select_action."""

from __future__ import annotations

import pytest
import torch

from upright.vla import ActionChunkQueue, ChunkPolicy, validate_batch
from upright.vla.chunking import act_weights


def _chunk(t: int, h: int = 4) -> torch.Tensor:
    """(2, H, 1): env 0 predicts 10·t + i for future step i; env 1 the negative."""
    c = torch.tensor([float(10 * t + i) for i in range(h)]).reshape(1, h, 1)
    return torch.cat([c, -c])


def test_temporal_ensembling_weights_every_prediction_for_a_step_oldest_heaviest():
    q = ActionChunkQueue(2, 4, 1, temporal_ensemble_coeff=0.01)
    for t in range(7):
        q.push(_chunk(t))
        a = q.pop()
        preds = torch.tensor([float(10 * s + (t - s)) for s in range(max(0, t - 3), t + 1)])  # oldest first
        expect = (act_weights(len(preds), 0.01) * preds).sum()
        torch.testing.assert_close(a[:, 0], torch.stack([expect, -expect]))
    w = act_weights(3, 0.5)
    assert w[0] > w[1] > w[2]


def test_queue_mode_executes_n_action_steps_then_asks_again():
    q = ActionChunkQueue(2, 4, 1, n_action_steps=3)
    assert q.needs_prediction().all()
    q.push(_chunk(1))
    got = [q.pop()[0, 0].item() for _ in range(3)]
    assert got == [10.0, 11.0, 12.0] and q.needs_prediction().all()
    q.reset(torch.tensor([1]))
    with pytest.raises(RuntimeError, match="push"):
        ActionChunkQueue(1, 4, 1).pop()
    with pytest.raises(ValueError, match="n_action_steps"):
        ActionChunkQueue(1, 4, 1, n_action_steps=5)
    with pytest.raises(ValueError, match=r"chunk shape"):
        q.push(torch.zeros(2, 3, 1))


class _Counter(ChunkPolicy):
    chunk_size, action_dim, n_action_steps = 4, 2, 2

    def __init__(self):
        self.calls = 0

    def predict_action_chunk(self, batch):
        self.calls += 1
        b = batch["observation.state"].shape[0]
        return torch.arange(4.0).reshape(1, 4, 1).expand(b, 4, 2) + 100 * self.calls


def test_select_action_predicts_only_when_the_queue_runs_out_and_reset_forgets():
    p = _Counter()
    batch = {"observation.state": torch.zeros(3, 5), "task": ["lift"] * 3}
    actions = [p.select_action(batch)[0, 0].item() for _ in range(4)]
    assert actions == [100.0, 101.0, 200.0, 201.0] and p.calls == 2
    p.reset()
    assert p.select_action(batch)[0, 0].item() == 300.0


def test_bad_batches_name_the_key():
    with pytest.raises(ValueError, match="observation.state"):
        validate_batch({"task": ["x"]})
    with pytest.raises(ValueError, match="observation.images.front"):
        validate_batch({"observation.state": torch.zeros(1, 3)}, cameras=("front",))
    with pytest.raises(ValueError, match="list of 2"):
        validate_batch({"observation.state": torch.zeros(2, 3), "task": "lift"})


def test_push_with_an_offset_drops_the_actions_of_elapsed_steps_in_both_modes():
    """A chunk predicted ``offset`` steps ago (asynchronous inference, upright/deploy/chunk_runner.py): its action
    ``offset``
    is the one for now; ``remaining`` counts the steps the queue can still serve."""
    q = ActionChunkQueue(2, 4, 1)
    assert q.remaining().tolist() == [0, 0]
    q.push(_chunk(1), offset=2)
    assert q.remaining().tolist() == [2, 2]
    assert [q.pop()[:, 0].tolist() for _ in range(2)] == [[12.0, -12.0], [13.0, -13.0]]
    assert q.remaining().tolist() == [0, 0]
    e = ActionChunkQueue(2, 4, 1, temporal_ensemble_coeff=0.0)  # m = 0: the plain mean of the predictions
    e.push(_chunk(1), offset=1)  # predicted last step: 11, 12, 13 for now, +1, +2
    assert e.remaining().tolist() == [3, 3]
    e.push(_chunk(2))  # predicted now: 20, 21, 22, 23
    assert e.remaining().tolist() == [4, 4]
    assert [e.pop()[0, 0].item() for _ in range(4)] == [15.5, 16.5, 17.5, 23.0]
    for bad in (-1, 4):
        with pytest.raises(ValueError, match="offset"):
            q.push(_chunk(1), offset=bad)
