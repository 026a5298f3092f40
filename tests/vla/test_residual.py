"""Residual RL on a frozen base (upright.vla.residual) in the real lift env: a zero residual reproduces the base
exactly, the residual's share is bounded by α (with its ramp), a changed base is caught by the checksum, and
``python train.py task=lift policy.base=...`` trains 2 iterations, leaves the base unchanged and exports the pair."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
import torch
from train_testlib import ROOT, run_train

from upright.tasks.lift.config import LiftEnvCfg
from upright.tasks.lift.env import LiftEnv
from upright.tasks.standup.config import SimCfg
from upright.training.onnx_export import read_metadata
from upright.vla.residual import ResidualEnv, finish_residual, parameters_sha256, setup_residual
from upright.vla.residual_config import ResidualCfg, check_residual_cfg
from upright.vla.tiny import TinyVLA, TinyVLAConfig

SPEC = {"state_key": "observation.policy_obs", "cameras": [], "image_height": 64, "image_width": 64, "state_dim": 49}


def _base(seed: int = 0, chunk: int = 4) -> TinyVLA:
    torch.manual_seed(seed)
    cfg = TinyVLAConfig(cameras=(), chunk_size=chunk, state_dim=49, state_key="observation.policy_obs")
    model = TinyVLA(cfg).eval()
    with torch.no_grad():  # larger outputs than the default init, so the base visibly moves the arm
        model.head[-1].weight.mul_(20.0)
    return model


def _env(n: int = 3, seed: int = 5) -> LiftEnv:
    cfg = LiftEnvCfg(num_envs=n)
    cfg.curriculum.enabled = False
    return LiftEnv(cfg, SimCfg(num_threads=1), seed=seed)


def test_zero_residual_reproduces_the_base_and_obs_carry_the_base_action():
    from upright.vla.evaluate_lift import make_batch

    wrapped = ResidualEnv(_env(), _base(), SPEC, ResidualCfg(alpha=0.5))
    plain, base = _env(), _base()
    obs = wrapped.get_observations()
    assert obs["actor"].shape == (3, 49 + 8)
    torch.testing.assert_close(obs["actor"][:, 49:], wrapped.base_action)
    assert wrapped.base_action.abs().max() > 0.1  # the base acts
    p_obs = plain.get_observations()
    for _ in range(30):
        obs, *_ = wrapped.step(torch.zeros(3, 8))
        a = base.select_action(make_batch(plain, p_obs, SPEC, wrapped.instruction, []))
        p_obs, _, dones, _ = plain.step(a)
        base.reset(dones.nonzero().flatten())
    torch.testing.assert_close(wrapped.env.state.q, plain.state.q)
    torch.testing.assert_close(obs["actor"][:, :49], p_obs["actor"])
    wrapped.close()
    plain.close()


def test_residual_share_is_bounded_by_alpha_and_ramps():
    env = ResidualEnv(_env(2), _base(), SPEC, ResidualCfg(alpha=0.4, alpha_start=0.1, alpha_ramp_iterations=2),
                      steps_per_iteration=5)  # fmt: skip
    assert env.alpha == pytest.approx(0.1)
    big = torch.full((2, 8), 7.0)  # clipped to 1 before scaling
    torch.testing.assert_close(env.combine(big), (env.base_action + 0.1).clamp(-1, 1))
    for _ in range(5):
        env.step(torch.zeros(2, 8))
    assert env.alpha == pytest.approx(0.25)  # half-way through 10 ramp steps
    for _ in range(10):
        env.step(torch.zeros(2, 8))
    assert env.alpha == pytest.approx(0.4)
    assert (env.combine(-big) - env.base_action).abs().max() <= 0.4 + 1e-6
    env.close()


@pytest.mark.parametrize(
    ("cfg", "task", "message"),
    [(ResidualCfg(alpha=0.0), "lift", "policy.alpha must be in (0, 1]"),
     (ResidualCfg(alpha=0.3, alpha_start=0.5), "lift", "policy.alpha_start"),
     (ResidualCfg(alpha=0.3), "standup", "supports task=lift only")],
)  # fmt: skip
def test_bad_settings_refused(cfg, task, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_residual_cfg(cfg, task)


def test_checksum_catches_a_changed_base(tmp_path):
    base_dir = tmp_path / "base"
    base_dir.mkdir()
    _base().save(base_dir / "model.pt")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    env, info = setup_residual(_env(2), ResidualCfg(base=str(base_dir)), run_dir, 24)
    assert info["base_file"] == "base_model.pt" and (run_dir / "base_model.pt").is_file()
    record = json.loads((run_dir / "base_checksum.json").read_text())
    assert record["parameters_sha256_start"] == parameters_sha256(TinyVLA.load(base_dir / "model.pt"))
    assert finish_residual(env, run_dir)["unchanged"] is True
    with torch.no_grad():
        env.base.head[0].bias.add_(1e-3)
    with pytest.raises(RuntimeError, match="weights changed"):
        finish_residual(env, run_dir)
    env.close()


def test_train_cli_trains_a_residual_keeps_the_base_and_exports_the_pair(tmp_path):
    base_dir = tmp_path / "base"
    base_dir.mkdir()
    _base().save(base_dir / "model.pt")
    args = ["task=lift", "env.num_envs=8", "train.num_steps_per_env=8", "train.max_iterations=2", "train.save_interval=1",
            "sim.num_threads=1", "train.update_threads=1", f"policy.base={base_dir}", "policy.alpha=0.2",
            f"run.root={tmp_path / 'logs'}", "run.name=res", "train.onnx_snapshots=true"]  # fmt: skip
    proc = run_train(args, tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    run_dir = tmp_path / "logs" / "lift" / "res"
    record = json.loads((run_dir / "base_checksum.json").read_text())
    assert record["unchanged"] is True and record["parameters_sha256_end"] == record["parameters_sha256_start"]
    meta = read_metadata(run_dir / "policy.onnx")
    assert meta["policy_type"] == "residual" and meta["residual_alpha"] == 0.2
    assert meta["observation_dim"] == 57 and meta["residual_base_file"] == "base_model.pt"
    assert meta["residual_base_sha256"] == record["file_sha256"]
    session = ort.InferenceSession(str(run_dir / "policy.onnx"), providers=["CPUExecutionProvider"])
    out = session.run(None, {meta["input_name"]: np.zeros((1, 57), np.float32)})[0]
    assert out.shape == (1, 8) and np.isfinite(out).all()
    assert "Base policy unchanged" in proc.stdout

    # the pair runs from the run's files: combined = base + alpha * residual graph, and the lift evaluation takes it
    from upright.vla.evaluate_lift import main as evaluate
    from upright.vla.residual import ResidualChunkPolicy

    pair = ResidualChunkPolicy(run_dir / "policy.onnx")
    base = TinyVLA.load(base_dir / "model.pt")
    batch = {"observation.state": torch.randn(2, 49), "observation.policy_obs": torch.randn(2, 49),
             "task": ["lift it"] * 2}  # fmt: skip
    a_base = base.select_action(batch)
    x = torch.cat([batch["observation.policy_obs"], a_base], dim=1).numpy()
    r = np.concatenate([session.run(None, {meta["input_name"]: x[i : i + 1]})[0] for i in range(2)])
    expected = (a_base + 0.2 * torch.from_numpy(r).clamp(-1, 1)).clamp(-1, 1)
    torch.testing.assert_close(pair.select_action(batch), expected)
    evaluate(["--policy", str(run_dir), "--episodes", "2", "--num-envs", "2", "--out", str(tmp_path / "ev"),
              "sim.num_threads=1"])  # fmt: skip
    assert "residual alpha 0.2" in (tmp_path / "ev" / "eval.md").read_text()
    # the learning-curve script evaluates a residual run from its policy_<it>.onnx snapshots
    import csv
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import lift_learning

    assert [i for i, _ in lift_learning.checkpoints(run_dir, 1)] == [1, 2]
    lift_learning.main(["--run-dir", str(run_dir), "--every", "1", "--episodes", "2", "--num-envs", "2",
                        "--out", str(tmp_path / "curve")])  # fmt: skip
    rows = list(csv.DictReader(open(tmp_path / "curve.csv")))
    assert [int(r["iteration"]) for r in rows] == [1, 2] and int(rows[1]["env_steps"]) == 2 * 8 * 8
    (run_dir / "base_model.pt").write_bytes(b"not the base")
    with pytest.raises(ValueError, match="not the base"):
        ResidualChunkPolicy(run_dir / "policy.onnx")


def test_train_cli_refuses_a_missing_base(tmp_path):
    proc = run_train(["task=lift", f"policy.base={tmp_path / 'nothing'}", "env.num_envs=4", "train.max_iterations=1",
                      f"run.root={tmp_path}"], tmp_path)  # fmt: skip
    assert proc.returncode == 2 and "train a base with python -m upright.vla.train_bc" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    proc = run_train(["task=standup", f"policy.base={tmp_path}", "train.max_iterations=1"], tmp_path)
    assert proc.returncode == 2 and "supports task=lift only" in proc.stderr, proc.stderr


def test_committed_residual_policy_loads_with_its_checked_base():
    import pathlib

    from upright.vla.residual import ResidualChunkPolicy

    folder = pathlib.Path(__file__).resolve().parents[2] / "assets" / "policies" / "panda_lift_residual"
    pair = ResidualChunkPolicy(folder / "policy.onnx")  # refuses a base whose SHA-256 differs from the metadata
    record = json.loads((folder / "base_checksum.json").read_text())
    assert parameters_sha256(pair.base) == record["parameters_sha256_start"]
    batch = {"observation.state": torch.randn(3, 49), "observation.policy_obs": torch.randn(3, 49),
             "task": ["Pick up the green cube and lift it to the red target."] * 3}  # fmt: skip
    base_only = TinyVLA.load(folder / "base_model.pt")
    a, a_base = pair.select_action(batch), base_only.select_action(batch)
    assert a.shape == (3, 8) and torch.isfinite(a).all() and (a - a_base).abs().max() <= 0.3 + 1e-5
