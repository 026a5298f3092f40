"""Learning from interventions (upright.vla.intervention): the three weightings on a hand-built episode table, LoRA
through peft changes only the adapter weights, and the finetune CLI writes a policy that evaluate_lift can load."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from upright.vla.dataset import load_dataset
from upright.vla.intervention import (
    WeightingCfg,
    add_lora,
    finetune,
    load_intervention_flags,
    merge_lora,
    sample_weights,
)
from upright.vla.train_bc import TrainBCConfig, train

pytest.importorskip("peft")


def test_weightings_up_weight_humans_and_down_weight_the_steps_before():
    episode = torch.tensor([0] * 10 + [1] * 6)
    human = torch.zeros(16, dtype=torch.bool)
    human[5:8] = True  # an intervention in episode 0
    human[10] = True  # episode 1 starts under human control: episode 0's last frames are not "before" it
    cfg = WeightingCfg(intervention_weight=3.0, pre_intervention_steps=3, pre_intervention_weight=0.25)
    assert sample_weights(human, episode, "bc", cfg).tolist() == [1.0] * 16
    w = sample_weights(human, episode, "intervention", cfg)
    assert w[human].tolist() == [3.0] * 4 and w[~human].tolist() == [1.0] * 12
    s = sample_weights(human, episode, "sirius", cfg).tolist()
    assert s[:2] == [1.0, 1.0] and s[2:5] == [0.25] * 3 and s[5:8] == [3.0] * 3 and s[8:10] == [1.0, 1.0]
    assert s[10] == 3.0 and s[11:] == [1.0] * 5
    with pytest.raises(ValueError, match="unknown weighting"):
        sample_weights(human, episode, "dagger")
    # episode 1 failed: its autonomous frames get failure_weight under sirius only; human frames keep their weight
    success = episode == 0
    f = sample_weights(human, episode, "sirius", WeightingCfg(3.0, 3, 0.25, failure_weight=0.5), success).tolist()
    assert f[:10] == s[:10] and f[10] == 3.0 and f[11:] == [0.5] * 5
    assert sample_weights(human, episode, "bc", cfg, success).tolist() == [1.0] * 16
    with pytest.raises(ValueError, match="must both be"):
        sample_weights(human, episode, "sirius", cfg, success[:3])


@pytest.fixture(scope="module")
def base(tiny_dataset):
    data = load_dataset(tiny_dataset["root"], tiny_dataset["cameras"])
    model, _ = train(data, None, TrainBCConfig(steps=5, chunk_size=8, export=False), log=lambda s: None)
    return model, data


def test_lora_changes_only_the_adapters_and_merges_back(base, tiny_dataset):
    model, data = base
    before = {k: v.clone() for k, v in model.state_dict().items()}
    flags = load_intervention_flags(tiny_dataset["root"])
    assert flags.shape == (len(data),) and flags.dtype == torch.bool
    wrapped = add_lora(model, rank=4)
    finetune(wrapped, data, sample_weights(flags, data.episode, "sirius"), steps=15, log=lambda s: None)
    changed_adapters = 0
    for name, p in wrapped.named_parameters():
        key = name.replace("base_model.model.", "").replace(".base_layer", "")
        if "lora_" in name:
            assert p.requires_grad
            changed_adapters += int("lora_B" in name and p.abs().max() > 0)  # lora_B starts at zero
        else:
            assert not p.requires_grad
            torch.testing.assert_close(p.detach(), before[key], rtol=0, atol=0)
    assert changed_adapters == 3
    merged = merge_lora(wrapped)
    after = merged.state_dict()
    assert sorted(after) == sorted(before)
    assert (after["head.4.weight"] - before["head.4.weight"]).abs().max() > 0
    torch.testing.assert_close(after["embed.weight"], before["embed.weight"], rtol=0, atol=0)


def test_cosine_schedule_decays_the_rate_to_zero_and_constant_keeps_it(base):
    model, data = base
    weights = torch.ones(len(data))
    for schedule, last in (("cosine", 0.0), ("constant", 3e-4)):
        lines: list[str] = []
        trainable = add_lora(copy.deepcopy(model), rank=2)  # the module's fixture stays as it is
        finetune(trainable, data, weights, steps=10, lr=3e-4, log=lines.append, lr_schedule=schedule)
        rates = [float(line.split(" lr ")[1].split()[0]) for line in lines]
        assert rates[-1] == pytest.approx(last, abs=1e-12), (schedule, rates)
        if schedule == "cosine":
            assert all(a > b for a, b in zip(rates, rates[1:]))  # strictly decreasing
    with pytest.raises(ValueError, match="lr_schedule"):
        finetune(model, data, weights, steps=1, lr_schedule="linear")


def test_finetune_cli_writes_an_evaluable_policy(base, tiny_dataset, tmp_path):
    from upright.vla.evaluate_lift import load_chunk_policy
    from upright.vla.finetune import main

    model, _ = base
    model.save(tmp_path / "base.pt")
    out = tmp_path / "ft"
    main(
        [
            "--base",
            str(tmp_path / "base.pt"),
            "--dataset",
            str(tiny_dataset["root"]),
            "--weighting",
            "intervention",
            "--lora-rank",
            "2",
            "--steps",
            "10",
            "--out",
            str(out),
        ]
    )
    report = json.loads((out / "finetune.json").read_text())
    assert report["weighting"] == "intervention" and report["lora_rank"] == 2 and report["trainable_parameters"] > 0
    policy, spec = load_chunk_policy(out / "policy.onnx")
    assert spec["cameras"] == list(tiny_dataset["cameras"]) and policy.chunk_size == 8
    with pytest.raises(SystemExit):
        main(["--base", str(tmp_path / "nothing.pt"), "--dataset", str(tiny_dataset["root"]), "--out", str(out)])


@pytest.fixture
def untrained_base():
    """The operator tests' base: an untrained state-only TinyVLA (per test: ``select_action`` keeps a chunk queue)."""
    from upright.vla.tiny import TinyVLA, TinyVLAConfig

    torch.manual_seed(0)
    return TinyVLA(TinyVLAConfig(cameras=(), chunk_size=4, state_dim=49, state_key="observation.policy_obs")).eval()


def test_simulated_operator_logs_takeovers_with_the_daemons_columns(untrained_base, tmp_path):
    import numpy as np
    import pyarrow.parquet as pq

    from upright.dataset_io.records import ControlSource
    from upright.training.record_demos import record
    from upright.vla.sim_operator import TakeoverController

    spec = {"state_key": "observation.policy_obs", "cameras": []}
    made = []

    def factory(env):
        made.append(TakeoverController(env, untrained_base, spec, check_step=5))
        return made[0]

    out = tmp_path / "int"
    record(
        out,
        episodes=2,
        num_envs=2,
        seed=1,
        overrides=["sim.num_threads=1", "env.episode_length_s=0.3"],
        controller=factory,
    )
    assert made[0].takeovers == 2  # an untrained base grasps nothing by step 5
    import pyarrow as pa

    files = sorted(out.glob("data/chunk-*/file-*.parquet"))
    table = pa.concat_tables(
        [pq.read_table(f, columns=["index", "frame_index", "intervention", "control_source"]) for f in files]
    ).sort_by("index")
    assert table.num_rows == 2 * 15
    frame = np.asarray(table.column("frame_index"))
    human = np.asarray(table.column("intervention"))
    source = np.asarray(table.column("control_source"))
    np.testing.assert_array_equal(human, frame >= 5)
    np.testing.assert_array_equal(source, np.where(human, int(ControlSource.HUMAN), int(ControlSource.POLICY)))
    flags = load_intervention_flags(out)
    from upright.vla.intervention import load_episode_success

    success = load_episode_success(out)
    assert success.shape == flags.shape and not success.any()  # 0.3 s episodes cannot succeed
    data = load_dataset(out, (), "observation.policy_obs")
    w = sample_weights(flags, data.episode, "sirius", WeightingCfg(pre_intervention_steps=3))
    expected = np.where(frame >= 5, 2.0, np.where(frame >= 2, 0.1, 1.0))
    np.testing.assert_allclose(w.numpy(), expected, rtol=1e-6)


def test_simulated_operator_hands_back_after_the_correction(untrained_base, tmp_path):
    """With hand_back_height the expert corrects (grasps and lifts) and gives the episode back to the policy."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from upright.training.record_demos import record
    from upright.vla.sim_operator import TakeoverController

    spec = {"state_key": "observation.policy_obs", "cameras": []}
    made = []

    def factory(env):
        made.append(TakeoverController(env, untrained_base, spec, check_step=1, hand_back_height=0.01))
        return made[0]

    out = tmp_path / "int"
    record(
        out,
        episodes=2,
        num_envs=2,
        seed=1,
        overrides=["sim.num_threads=1", "env.domain_rand.enabled=false"],
        controller=factory,
    )
    op = made[0]
    assert op.takeovers >= 2 and op.handbacks >= 1
    files = sorted(out.glob("data/chunk-*/file-*.parquet"))
    table = pa.concat_tables(
        [pq.read_table(f, columns=["episode_index", "frame_index", "intervention"]) for f in files]
    ).sort_by([("episode_index", "ascending"), ("frame_index", "ascending")])
    ep = np.asarray(table.column("episode_index"))
    human = np.asarray(table.column("intervention"))
    handed = 0
    for e in np.unique(ep):
        h = human[ep == e]
        assert not h[0] and h[1]  # the policy drives frame 0, the expert from the check step
        # a hand-back is a human frame followed by a policy frame
        handed += int(np.any(h[1:-1] & ~h[2:]))
    assert handed >= 1
    with pytest.raises(ValueError, match="hand_back_height"):
        TakeoverController(None, untrained_base, spec, hand_back_height=0.0)


def test_a_policy_can_play_the_operator(untrained_base, tmp_path):
    """--operator: the human frames carry the operator policy's actions for the recorded observation."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from upright.training.record_demos import record
    from upright.vla.linear import LinearChunkPolicy
    from upright.vla.sim_operator import TakeoverController

    spec = {"state_key": "observation.policy_obs", "cameras": []}
    op = LinearChunkPolicy(state_dim=49, chunk_size=1, action_dim=8, seed=3)
    made = []

    def factory(env):
        made.append(TakeoverController(env, untrained_base, spec, check_step=3, operator=(op, spec)))
        return made[0]

    out = tmp_path / "int"
    record(
        out,
        episodes=2,
        num_envs=2,
        seed=1,
        overrides=["sim.num_threads=1", "env.episode_length_s=0.2"],
        controller=factory,
    )
    assert made[0].expert is None and made[0].takeovers == 2
    files = sorted(out.glob("data/chunk-*/file-*.parquet"))
    t = pa.concat_tables(
        [pq.read_table(f, columns=["index", "intervention", "observation.policy_obs", "action"]) for f in files]
    ).sort_by("index")
    human = np.asarray(t.column("intervention"))
    obs = np.stack(t.column("observation.policy_obs").to_numpy(zero_copy_only=False)).astype(np.float32)
    act = np.stack(t.column("action").to_numpy(zero_copy_only=False)).astype(np.float32)
    from upright.tasks.lift.vla_io import TASK

    expected = op.select_action({"observation.state": torch.from_numpy(obs), "task": [TASK] * len(obs)}).numpy()
    np.testing.assert_allclose(np.clip(act[human], -1, 1), np.clip(expected[human], -1, 1), atol=1e-4)
    assert not np.allclose(np.clip(act[~human], -1, 1), np.clip(expected[~human], -1, 1), atol=1e-2)
