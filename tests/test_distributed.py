"""Multi-process training with torchrun: 2 CPU processes (gloo) keep identical policy parameters."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_two_cpu_ranks_stay_in_sync(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(ROOT / "train.py"),
        "task=standup",
        "env.num_envs=4",
        "env.episode_length_s=0.3",
        "train.num_steps_per_env=6",
        "train.max_iterations=2",
        "train.save_interval=1",
        "sim.num_threads=1",
        "train.update_threads=1",
        "run.root=runs",
        "run.name=ddp",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=280, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    diffs = {int(r): float(d) for r, d in re.findall(r"rank (\d)/2: max \|param - rank 0 param\| = ([^;]+);", out)}
    assert diffs == {0: 0.0, 1: 0.0}, out[-3000:]
    # only rank 0 wrote checkpoints, and it ran 2 iterations
    assert (tmp_path / "runs/standup/ddp/model_1.pt").is_file()
    assert len([line for line in proc.stdout.splitlines() if line.startswith("it ")]) == 2
