"""Issue 13.6: training is crash-safe. Checkpoints and policy.onnx are written to a temporary file, fsynced and renamed,
so a failed save (a full disk, here a real EFBIG from RLIMIT_FSIZE) never leaves a truncated ``model_<it>.pt``; and
``resume=<run dir>`` skips a truncated newest checkpoint with a warning naming it, instead of a torch zip error."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import onnx
import pytest
import torch

from upright.training.runner import atomic_write, checkpoint_problem, latest_checkpoint

ROOT = pathlib.Path(__file__).resolve().parents[1]
SMALL = [
    "task=standup",
    "env.num_envs=8",
    "env.episode_length_s=0.3",
    "train.num_steps_per_env=8",
    "train.save_interval=1",
    "sim.num_threads=1",
]


LIMITED = (
    "import os, resource, sys; n = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_FSIZE, (n, n)); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
)
"""Run a command with a file size limit: a disk that fills up, writes past it fail with EFBIG (Python ignores
SIGXFSZ). A launcher rather than preexec_fn, which is unsafe in this (multithreaded) test process."""


def run_train(args: list[str], cwd: pathlib.Path, max_file_bytes: int | None = None) -> subprocess.CompletedProcess:
    launcher = [sys.executable, "-c", LIMITED, str(max_file_bytes)] if max_file_bytes else [sys.executable]
    return subprocess.run(
        [*launcher, str(ROOT / "train.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


@pytest.mark.slow
def test_failed_save_leaves_no_truncated_checkpoint_and_resume_skips_a_truncated_one(tmp_path):
    proc = run_train([*SMALL, "train.max_iterations=2", "run.root=runs", "run.name=crash"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run_dir = tmp_path / "runs" / "standup" / "crash"
    good = run_dir / "model_1.pt"
    size = good.stat().st_size
    onnx_before = (run_dir / "policy.onnx").read_bytes()

    # the disk fills up while model_2.pt is written: the run fails, and leaves no model_2.pt (it used to leave a
    # truncated one), model_1.pt and policy.onnx as they were, and no temporary file behind
    proc = run_train([*SMALL, "train.max_iterations=3", f"resume={run_dir}"], tmp_path, max_file_bytes=size // 2)
    assert proc.returncode != 0 and "in save" in proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not (run_dir / "model_2.pt").exists(), "a failed save left a (truncated) model_2.pt"
    assert checkpoint_problem(good) is None and (run_dir / "policy.onnx").read_bytes() == onnx_before
    assert not [p.name for p in run_dir.iterdir() if ".tmp-" in p.name]

    # a truncated newest checkpoint (as a kill during a non-atomic save, or a bad copy, leaves): resume names it in a
    # warning and continues from the newest intact one
    (run_dir / "model_2.pt").write_bytes(good.read_bytes()[: size // 2])
    proc = run_train([*SMALL, "train.max_iterations=3", f"resume={run_dir}"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"WARNING: resume={run_dir}: skipped {run_dir / 'model_2.pt'} (truncated or corrupt" in proc.stderr
    assert f"Resuming {good} after 2 completed iterations" in proc.stdout
    assert torch.load(run_dir / "model_2.pt", weights_only=False)["infos"]["completed_iterations"] == 3
    onnx.checker.check_model(onnx.load(str(run_dir / "policy.onnx")))


def _checkpoints(run_dir: pathlib.Path, n: int) -> list[pathlib.Path]:
    run_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for it in range(n):
        path = run_dir / f"model_{it}.pt"
        torch.save({"iter": it, "weights": torch.randn(256, 256)}, path)
        out.append(path)
    return out


def test_latest_checkpoint_names_corrupt_files(tmp_path, capsys):
    c0, c1, c2 = _checkpoints(tmp_path / "run", 3)
    assert latest_checkpoint(tmp_path / "run") == c2 and capsys.readouterr().err == ""
    c2.write_bytes(c2.read_bytes()[:1000])  # truncated
    data = bytearray(c1.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside the weights: fails the member's CRC
    c1.write_bytes(bytes(data))
    assert checkpoint_problem(c0) is None and checkpoint_problem(c1) and checkpoint_problem(c2)
    assert latest_checkpoint(tmp_path / "run") == c0
    err = capsys.readouterr().err
    assert f"skipped {c2} (truncated or corrupt" in err and f"{c1} (truncated or corrupt" in err and f"from {c0}" in err
    with pytest.raises(ValueError, match=f"{c2} is not a readable checkpoint .*resume={c2.parent} uses the newest"):
        latest_checkpoint(c2)
    c0.write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="No intact checkpoint in run directory .*model_0.pt"):
        latest_checkpoint(tmp_path / "run")


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path):
    path = tmp_path / "policy.onnx"
    path.write_bytes(b"old and complete")

    def fails_half_way(tmp: pathlib.Path) -> None:
        tmp.write_bytes(b"new but")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        atomic_write(path, fails_half_way)
    assert path.read_bytes() == b"old and complete" and sorted(p.name for p in tmp_path.iterdir()) == ["policy.onnx"]
    atomic_write(path, lambda tmp: tmp.write_bytes(b"new and complete"))
    assert path.read_bytes() == b"new and complete" and sorted(p.name for p in tmp_path.iterdir()) == ["policy.onnx"]
