"""Shared by the ``train.py`` end-to-end tests (``test_train_smoke.py``, ``test_lift_train_smoke.py``): the real CLI in
a subprocess, and the two-iteration run their module fixtures share."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
"""The repository root (``train.py``, ``play.py``)."""


def run_train(args: list[str], cwd: pathlib.Path) -> subprocess.CompletedProcess:
    """``python train.py *args`` in ``cwd``, output captured (text), unbuffered, 280 s at most."""
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def two_iteration_run(
    cwd: pathlib.Path, task: str, args: list[str]
) -> tuple[pathlib.Path, subprocess.CompletedProcess]:
    """Train ``task`` for 2 iterations with ``args`` into ``cwd/runs/<task>/smoke``; fails the test (with the last
    output) unless it exits 0. Returns the run folder and the finished process."""
    proc = run_train([*args, "train.max_iterations=2", "run.root=runs", "run.name=smoke"], cwd)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return cwd / "runs" / task / "smoke", proc
