"""Residual RL on a frozen base (upright.vla.residual) in the real lift env: a zero residual reproduces the base
exactly, the residual's share is bounded by α (with its ramp), a changed base is caught by the checksum, and
``python train.py task=lift policy.base=...`` trains 2 iterations, leaves the base unchanged and exports the pair
(a residual graph with a dynamic batch; old batch-1 files still run, row by row). A remote base
(``policy.base=ws://...``, the real ``upright-policy-server`` on loopback) gives the local base's actions in env order,
trains, is recorded by URL and server metadata, and runs the pair again."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
import torch
from train_testlib import ROOT, run_train

from upright.policy_io.residual_base import ResidualCfg, check_residual_cfg
from upright.tasks.lift.config import LiftEnvCfg
from upright.tasks.lift.env import LiftEnv
from upright.tasks.standup.config import SimCfg
from upright.training.onnx_export import read_metadata
from upright.vla.checksums import parameters_sha256
from upright.vla.evaluate_lift import remote_spec
from upright.vla.remote import RemotePolicy
from upright.vla.residual import ResidualChunkPolicy
from upright.vla.residual_env import ResidualEnv
from upright.vla.residual_setup import finish_residual, setup_residual
from upright.vla.server_thread import BackgroundServer
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
    env = ResidualEnv(
        _env(2), _base(), SPEC, ResidualCfg(alpha=0.4, alpha_start=0.1, alpha_ramp_iterations=2), steps_per_iteration=5
    )
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
    [
        (ResidualCfg(alpha=0.0), "lift", "policy.alpha must be in (0, 1]"),
        (ResidualCfg(alpha=0.3, alpha_start=0.5), "lift", "policy.alpha_start"),
        (ResidualCfg(alpha=0.3), "standup", "supports task=lift only"),
    ],
)
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


@pytest.mark.slow
def test_train_cli_trains_a_residual_keeps_the_base_and_exports_the_pair(tmp_path):
    base_dir = tmp_path / "base"
    base_dir.mkdir()
    _base().save(base_dir / "model.pt")
    args = [
        "task=lift",
        "env.num_envs=8",
        "train.num_steps_per_env=8",
        "train.max_iterations=2",
        "train.save_interval=1",
        "sim.num_threads=1",
        "train.update_threads=1",
        f"policy.base={base_dir}",
        "policy.alpha=0.2",
        f"run.root={tmp_path / 'logs'}",
        "run.name=res",
        "train.onnx_snapshots=true",
    ]
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
    _check_batch_of_7_matches_rows(run_dir / "policy.onnx", batched=True)

    # the pair runs from the run's files: combined = base + alpha * residual graph, and the lift evaluation takes it
    from upright.vla.evaluate_lift import main as evaluate
    from upright.vla.residual import ResidualChunkPolicy

    pair = ResidualChunkPolicy(run_dir / "policy.onnx")
    base = TinyVLA.load(base_dir / "model.pt")
    batch = {
        "observation.state": torch.randn(2, 49),
        "observation.policy_obs": torch.randn(2, 49),
        "task": ["lift it"] * 2,
    }
    a_base = base.select_action(batch)
    x = torch.cat([batch["observation.policy_obs"], a_base], dim=1).numpy()
    r = np.concatenate([session.run(None, {meta["input_name"]: x[i : i + 1]})[0] for i in range(2)])
    expected = (a_base + 0.2 * torch.from_numpy(r).clamp(-1, 1)).clamp(-1, 1)
    torch.testing.assert_close(pair.select_action(batch), expected)
    evaluate(
        [
            "--policy",
            str(run_dir),
            "--episodes",
            "2",
            "--num-envs",
            "2",
            "--out",
            str(tmp_path / "ev"),
            "sim.num_threads=1",
        ]
    )
    assert "residual alpha 0.2" in (tmp_path / "ev" / "eval.md").read_text()
    # the learning-curve script evaluates a residual run from its policy_<it>.onnx snapshots
    import csv
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import lift_learning

    assert [i for i, _ in lift_learning.checkpoints(run_dir, 1)] == [1, 2]
    lift_learning.main(
        [
            "--run-dir",
            str(run_dir),
            "--every",
            "1",
            "--episodes",
            "2",
            "--num-envs",
            "2",
            "--out",
            str(tmp_path / "curve"),
        ]
    )
    rows = list(csv.DictReader(open(tmp_path / "curve.csv")))
    assert [int(r["iteration"]) for r in rows] == [1, 2] and int(rows[1]["env_steps"]) == 2 * 8 * 8
    (run_dir / "base_model.pt").write_bytes(b"not the base")
    with pytest.raises(ValueError, match="not the base"):
        ResidualChunkPolicy(run_dir / "policy.onnx")


def _check_batch_of_7_matches_rows(residual_onnx, batched: bool) -> None:
    """The residual graph of ``residual_onnx`` through :meth:`ResidualChunkPolicy.residual`: B = 7 in one call (or, for
    a batch-1 file, row by row) equals each row alone (B = 1), and equals onnxruntime run on each row directly."""
    pair = ResidualChunkPolicy(residual_onnx)
    assert pair.batched is batched
    g = torch.Generator().manual_seed(7)
    obs, a_base = torch.randn(7, 49, generator=g), torch.rand(7, 8, generator=g) * 2 - 1
    seven = pair.residual(obs, a_base)
    assert seven.shape == (7, 8) and seven.dtype == torch.float32
    ones = torch.cat([pair.residual(obs[i : i + 1], a_base[i : i + 1]) for i in range(7)])
    torch.testing.assert_close(seven, ones, atol=1e-5, rtol=0)
    session = ort.InferenceSession(str(residual_onnx), providers=["CPUExecutionProvider"])
    x = torch.cat([obs, a_base], 1).numpy()
    direct = np.concatenate([session.run(None, {pair._input: x[i : i + 1]})[0] for i in range(7)])
    torch.testing.assert_close(seven, torch.from_numpy(direct).clamp(-1, 1), atol=1e-5, rtol=0)
    assert isinstance(session.get_inputs()[0].shape[0], int) is not batched  # batch 1 fixed, or a named axis


def test_train_cli_refuses_a_missing_base(tmp_path):
    proc = run_train(
        [
            "task=lift",
            f"policy.base={tmp_path / 'nothing'}",
            "env.num_envs=4",
            "train.max_iterations=1",
            f"run.root={tmp_path}",
        ],
        tmp_path,
    )
    assert proc.returncode == 2 and "train a base with python -m upright.vla.train_bc" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for base, message in (
        ("ws://127.0.0.1:1", "no openpi policy server at ws://127.0.0.1:1.*upright-policy-server"),
        ("ws://localhost", "expected ws://HOST:PORT"),
    ):
        proc = run_train(
            ["task=lift", f"policy.base={base}", "train.max_iterations=1", f"run.root={tmp_path}"], tmp_path
        )
        assert proc.returncode == 2 and re.search(message, proc.stderr), proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    proc = run_train(["task=standup", f"policy.base={tmp_path}", "train.max_iterations=1"], tmp_path)
    assert proc.returncode == 2 and "supports task=lift only" in proc.stderr, proc.stderr


def test_committed_residual_policy_loads_with_its_checked_base():
    import pathlib

    from upright.vla.residual import ResidualChunkPolicy

    folder = pathlib.Path(__file__).resolve().parents[2] / "upright" / "assets" / "policies" / "panda_lift_residual"
    pair = ResidualChunkPolicy(folder / "policy.onnx")  # refuses a base whose SHA-256 differs from the metadata
    record = json.loads((folder / "base_checksum.json").read_text())
    assert parameters_sha256(pair.base) == record["parameters_sha256_start"]
    batch = {
        "observation.state": torch.randn(3, 49),
        "observation.policy_obs": torch.randn(3, 49),
        "task": ["Pick up the green cube and lift it to the red target."] * 3,
    }
    base_only = TinyVLA.load(folder / "base_model.pt")
    a, a_base = pair.select_action(batch), base_only.select_action(batch)
    assert a.shape == (3, 8) and torch.isfinite(a).all() and (a - a_base).abs().max() <= 0.3 + 1e-5
    # exported before residual graphs had a dynamic batch: its graph takes (1, 57), so it runs row by row
    _check_batch_of_7_matches_rows(folder / "policy.onnx", batched=False)


def test_committed_residual_runs_with_its_base_served_and_refuses_another_server():
    import pathlib

    folder = pathlib.Path(__file__).resolve().parents[2] / "upright" / "assets" / "policies" / "panda_lift_residual"
    local = ResidualChunkPolicy(folder / "policy.onnx")
    batch = {
        "observation.state": torch.randn(5, 49),
        "observation.policy_obs": torch.randn(5, 49),
        "task": ["Pick up the green cube and lift it to the red target."] * 5,
    }
    with BackgroundServer(TinyVLA.load(folder / "base_model.pt")) as server:
        # the server's weights_sha256 is the recorded parameters_sha256_start: accepted
        remote = ResidualChunkPolicy(folder / "policy.onnx", base=server.url)
        # (float32 rounding differs between batch sizes: the server may answer the 5 rows in other groupings)
        torch.testing.assert_close(remote.select_action(batch), local.select_action(batch), atol=1e-4, rtol=0)
        remote.close()
    with BackgroundServer(_base(seed=1)) as other:
        with pytest.raises(ValueError, match="does not serve the base"):
            ResidualChunkPolicy(folder / "policy.onnx", base=other.url)
        unchecked = ResidualChunkPolicy(folder / "policy.onnx", base=other.url, check_checksum=False)
        assert unchecked.select_action(batch).shape == (5, 8)
        unchecked.close()


def test_remote_base_gives_the_local_bases_actions_in_env_order():
    """The same TinyVLA locally and behind upright-policy-server (thread): the wrapped envs' base actions and
    observations agree at every step, also after some envs' chunk queues restart out of phase (the remote then asks
    only for those rows; replies must land on their envs). Equal up to float32 rounding (~1e-6: the server may group
    the rows into other batch sizes than the local call); a row on the wrong env would differ by ~0.1-1."""
    n = 6
    with BackgroundServer(_base(chunk=4)) as server:
        remote = RemotePolicy.from_url(server.url)
        assert remote_spec(remote) == {**SPEC, "image_height": 64, "image_width": 64}
        local_env = ResidualEnv(_env(n), _base(chunk=4), SPEC, ResidualCfg(alpha=0.3))
        remote_env = ResidualEnv(_env(n), remote, remote_spec(remote), ResidualCfg(alpha=0.3))
        g = torch.Generator().manual_seed(0)
        torch.testing.assert_close(remote_env.base_action, local_env.base_action, atol=1e-4, rtol=0)
        for t in range(14):
            if t in (2, 5):  # restart some queues: the envs need chunks at different steps from now on
                for e in (local_env, remote_env):
                    e.base.reset(torch.tensor([1, 4] if t == 2 else [0, 3, 5]))
            residual = torch.rand(n, 8, generator=g) * 2 - 1
            obs_l, rew_l, *_ = local_env.step(residual)
            obs_r, rew_r, *_ = remote_env.step(residual)
            torch.testing.assert_close(remote_env.base_action, local_env.base_action, atol=1e-4, rtol=0)
            torch.testing.assert_close(obs_r["actor"], obs_l["actor"], atol=1e-4, rtol=0)
        assert local_env.base_action.abs().max() > 0.1  # the base acts: the comparison is not of zeros
        local_env.close()
        remote_env.close()  # closes the RemotePolicy too
        assert remote._ws is None


def test_remote_base_record_catches_another_server_and_survives_a_lost_one(tmp_path):
    from upright.vla.residual_setup import describe_record

    with (
        BackgroundServer(_base()) as server,
        BackgroundServer(_base(), max_batch=1) as same,
        BackgroundServer(_base(seed=1)) as other,
    ):
        env, info = setup_residual(_env(2), ResidualCfg(base=server.url), tmp_path, 24)
        record = json.loads((tmp_path / "base_checksum.json").read_text())
        assert info == {
            "base_url": server.url,
            "base_metadata_sha256": record["server_metadata_sha256"],
            "base_weights_sha256": parameters_sha256(_base()),
        }
        assert finish_residual(env, tmp_path)["unchanged"] is True
        env.close()
        # resuming: the same policy served with another --max-batch is the same base; another policy is refused
        env, _ = setup_residual(_env(2), ResidualCfg(base=same.url), tmp_path, 24)
        env.close()
        with pytest.raises(ValueError, match="serves another policy than this run was trained on"):
            setup_residual(_env(2), ResidualCfg(base=other.url), tmp_path, 24)
        record["base"] = other.url  # as if the server had swapped its weights during training
        (tmp_path / "base_checksum.json").write_text(json.dumps(record))
        with pytest.raises(RuntimeError, match="server metadata changed"):
            finish_residual(env, tmp_path)
        port = other.port
    record["base"] = f"ws://127.0.0.1:{port}"  # the server is gone at the end: recorded as unchecked, not raised
    (tmp_path / "base_checksum.json").write_text(json.dumps(record))
    end = finish_residual(env, tmp_path)
    assert end["unchanged"] is None and "no openpi policy server" in end["unchecked_reason"]
    assert "NOT checked" in describe_record(end)


def _serve_in_subprocess(base_dir, tmp_path) -> tuple[subprocess.Popen, str]:
    """``upright-policy-server --policy base_dir --port 0`` (python -m upright.vla.server) and its ws:// URL."""
    log = open(tmp_path / "server.log", "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "upright.vla.server", "--policy", str(base_dir), "--port", "0"],
        stderr=log,
        stdout=subprocess.DEVNULL,
    )
    for _ in range(1200):
        log.seek(0)
        m = re.search(r"on ws://127\.0\.0\.1:(\d+)", log.read())
        if m:
            return proc, f"ws://127.0.0.1:{m.group(1)}"
        if proc.poll() is not None:
            break
        import time

        time.sleep(0.1)
    proc.kill()
    log.seek(0)
    raise AssertionError(f"the policy server did not start: {log.read()[-2000:]}")


@pytest.mark.slow
def test_train_cli_with_a_remote_base_records_the_server_and_runs_the_pair(tmp_path):
    base_dir = tmp_path / "base"
    base_dir.mkdir()
    _base().save(base_dir / "model.pt")
    server, url = _serve_in_subprocess(base_dir, tmp_path)
    try:
        args = [
            "task=lift",
            "env.num_envs=8",
            "train.num_steps_per_env=8",
            "train.max_iterations=2",
            "train.save_interval=1",
            "sim.num_threads=1",
            "train.update_threads=1",
            f"policy.base={url}",
            "policy.alpha=0.2",
            f"run.root={tmp_path / 'logs'}",
            "run.name=remote",
        ]
        proc = run_train(args, tmp_path)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        run_dir = tmp_path / "logs" / "lift" / "remote"
        assert not (run_dir / "base_model.pt").exists()  # nothing to copy: the record is the server's
        record = json.loads((run_dir / "base_checksum.json").read_text())
        assert record["remote"] is True and record["base"] == url and record["unchanged"] is True
        assert record["server_metadata_sha256_end"] == record["server_metadata_sha256"]
        weights = parameters_sha256(TinyVLA.load(base_dir / "model.pt"))
        assert record["weights_sha256_start"] == record["weights_sha256_end"] == weights
        assert "server's responsibility" in record["note"] and "Base policy unchanged: server" in proc.stdout
        meta = read_metadata(run_dir / "policy.onnx")
        assert meta["residual_base_url"] == url and "residual_base_file" not in meta
        assert meta["residual_base_metadata_sha256"] == record["server_metadata_sha256"]
        assert meta["residual_base_weights_sha256"] == weights
        assert "server's responsibility" in meta["residual_base_note"]
        _check_batch_of_7_matches_rows(run_dir / "policy.onnx", batched=True)

        # the pair: the recorded server, or the same weights from the file, give the same actions
        remote_pair = ResidualChunkPolicy(run_dir / "policy.onnx")
        local_pair = ResidualChunkPolicy(run_dir / "policy.onnx", base=str(base_dir))  # weights hash checked
        batch = {
            "observation.state": torch.randn(4, 49),
            "observation.policy_obs": torch.randn(4, 49),
            "task": ["lift it"] * 4,
        }
        torch.testing.assert_close(remote_pair.select_action(batch), local_pair.select_action(batch), atol=1e-4, rtol=0)
        remote_pair.close()
        other_dir = tmp_path / "other"
        other_dir.mkdir()
        _base(seed=1).save(other_dir / "model.pt")
        with pytest.raises(ValueError, match="not the base"):
            ResidualChunkPolicy(run_dir / "policy.onnx", base=str(other_dir))

        from upright.vla.evaluate_lift import main as evaluate

        evaluate(
            [
                "--policy",
                str(run_dir),
                "--episodes",
                "2",
                "--num-envs",
                "2",
                "--out",
                str(tmp_path / "ev"),
                "sim.num_threads=1",
            ]
        )
        report = (tmp_path / "ev" / "eval.md").read_text()
        assert "residual alpha 0.2" in report and f"base served at {url}" in report
    finally:
        server.terminate()
        server.wait(timeout=30)
    with pytest.raises(ConnectionError, match="no openpi policy server"):
        ResidualChunkPolicy(run_dir / "policy.onnx")  # the recorded server is gone


def test_train_cli_with_a_remote_base_that_does_not_answer_is_one_line_and_makes_no_run_folder(tmp_path):
    """``train.py`` asks a ``ws://`` base for its metadata before the run folder is made (the check lives on the vla
    floor, ``residual_setup.check_base_answers``, called by the entry point): nothing listens on the port here."""
    import socket

    with socket.socket() as s:  # a free port, closed again: connecting to it is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [
        "task=lift",
        "env.num_envs=8",
        f"policy.base=ws://127.0.0.1:{port}",
        f"run.root={tmp_path / 'logs'}",
        "run.name=remote",
    ]
    proc = run_train(args, tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert len(lines) == 1 and "start it with upright-policy-server" in lines[0], proc.stderr
    assert not (tmp_path / "logs").exists()
