"""Behaviour cloning of TinyVLA on a tiny recorded dataset, the ONNX export checked against torch, the ONNX policy's
refusal of a file without the VLA metadata, and the lift evaluation of the trained policy."""

from __future__ import annotations

import csv

import onnx
import pytest
import torch

from upright.vla.dataset import load_dataset
from upright.vla.onnx_policy import REQUIRED_VLA_KEYS, OnnxChunkPolicy, VLAMetadataError, read_vla_metadata
from upright.vla.tokenizer import HASHING_SCHEME
from upright.vla.train_bc import TrainBCConfig, random_shift, train


def test_bc_loss_decreases(tiny_dataset):
    data = load_dataset(tiny_dataset["root"], tiny_dataset["cameras"])
    model, losses = train(data, None, TrainBCConfig(steps=60, batch_size=16, lr=1e-3, chunk_size=8), log=lambda s: None)
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert last < 0.75 * first, (first, last)
    assert model.cfg.cameras == tiny_dataset["cameras"] and model.cfg.chunk_size == 8
    torch.testing.assert_close(model.action_mean, data.action.mean(0))


def test_random_shift_moves_the_image_within_the_padding():
    img = torch.zeros(2, 1, 8, 8)
    img[:, :, 4, 4] = 1.0
    out = random_shift(img, 2, torch.Generator().manual_seed(0))
    assert out.shape == img.shape
    for b in range(2):
        y, x = (out[b, 0] == 1.0).nonzero()[0].tolist()
        assert abs(y - 4) <= 2 and abs(x - 4) <= 2


def test_cli_trains_exports_onnx_that_matches_torch_and_evaluates(tiny_dataset, tmp_path, capsys):
    from upright.vla.evaluate_lift import main as evaluate
    from upright.vla.tiny import TinyVLA
    from upright.vla.train_bc import main

    out = tmp_path / "run"
    main(
        [
            "--dataset",
            str(tiny_dataset["root"]),
            "--out",
            str(out),
            "--steps",
            "20",
            "--chunk-size",
            "8",
            "--log-every",
            "10",
        ]
    )
    with open(out / "train_log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == [10, 20]
    meta = read_vla_metadata(out / "policy.onnx")
    assert set(REQUIRED_VLA_KEYS) <= set(meta) and meta["vocab_hashing"] == HASHING_SCHEME
    assert meta["cameras"] == list(tiny_dataset["cameras"]) and meta["chunk_size"] == 8
    assert meta["state_dim"] == 22 and meta["action_dim"] == 8 and meta["action_convention"] == "delta"
    assert meta["control_dt"] == pytest.approx(0.02) and len(meta["state_names"]) == 22
    model = TinyVLA.load(out / "model.pt")
    onnx_policy = OnnxChunkPolicy(out / "policy.onnx")
    data = load_dataset(tiny_dataset["root"], tiny_dataset["cameras"])
    idx = torch.tensor([0, 7, 30])
    batch = {
        "observation.state": data.state[idx],
        "task": data.task_strings(idx),
        **{f"observation.images.{c}": data.images[c][idx] for c in tiny_dataset["cameras"]},
    }
    with torch.no_grad():
        expected = model.predict_action_chunk(batch)
    torch.testing.assert_close(onnx_policy.predict_action_chunk(batch), expected, atol=1e-4, rtol=1e-4)
    onnx_policy.n_action_steps = 2
    torch.testing.assert_close(onnx_policy.select_action(batch), expected[:, 0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(onnx_policy.select_action(batch), expected[:, 1], atol=1e-4, rtol=1e-4)

    capsys.readouterr()
    evaluate(
        [
            "--policy",
            str(out / "policy.onnx"),
            "--episodes",
            "2",
            "--num-envs",
            "2",
            "sim.num_threads=1",
            "env.episode_length_s=0.2",
        ]
    )
    table = capsys.readouterr().out
    assert "| success |" in table and "policy.onnx" in table and "| 2 |" in table


def test_onnx_policy_refuses_a_file_without_the_vla_metadata(tmp_path):
    from onnx import TensorProto, helper

    path = tmp_path / "plain.onnx"  # a valid graph (y = relu(obs)) without any metadata
    graph = helper.make_graph(
        [helper.make_node("Relu", ["obs"], ["y"])],
        "plain",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
    )
    onnx.save(helper.make_model(graph), str(path))
    assert len(onnx.load(str(path)).metadata_props) == 0
    with pytest.raises(VLAMetadataError, match=r"export it with upright\.vla\.train_bc"):
        OnnxChunkPolicy(path)
    with pytest.raises(FileNotFoundError):
        OnnxChunkPolicy(tmp_path / "missing.onnx")


def test_deploy_contract_travels_with_the_model_to_the_daemon(tiny_dataset, tmp_path):
    """``train_bc --deploy-contract lift``: model.pt and policy.onnx carry what the daemon needs, and its loader
    builds the controller's spec from either file alone (state-only: the daemon has no cameras)."""
    from upright.deploy.chunk_policy import load_chunk_policy
    from upright.deploy.robot_config import load_robot_config
    from upright.tasks.lift.metadata import lift_deploy_contract
    from upright.vla.train_bc import main

    out = tmp_path / "run"
    main(
        [
            "--dataset",
            str(tiny_dataset["root"]),
            "--out",
            str(out),
            "--steps",
            "5",
            "--no-images",
            "--deploy-contract",
            "lift",
        ]
    )
    contract = lift_deploy_contract()
    meta = read_vla_metadata(out / "policy.onnx")
    assert {k: meta[k] for k in contract} == contract
    robot = load_robot_config("franka_emika_panda")
    for source in (out / "policy.onnx", out):  # the ONNX file, and the folder (model.pt)
        spec, policy = load_chunk_policy(str(source), robot)
        assert spec.joint_names == tuple(contract["joint_names"]) and spec.action_mode == "delta"
        assert spec.kd.tolist() == contract["kd"] and spec.obs_dim == 22 and policy.chunk_size == 10
    with pytest.raises(SystemExit):
        main(
            [
                "--dataset",
                str(tiny_dataset["root"]),
                "--out",
                str(tmp_path / "x"),
                "--steps",
                "1",
                "--deploy-contract",
                str(tmp_path / "missing.json"),
            ]
        )
