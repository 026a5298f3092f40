"""Helpers of the damaged-dataset tests (issue 33.7): a small real dataset written by the project's own writer, the
damages done to it on disk, and the checks of a refusal (one line naming the file, no traceback, nothing changed).

Used by tests/deploy/test_damaged_dataset.py (``recover``, ``run``) and tests/vla/test_train_bc_damaged.py
(``python -m upright.vla.train_bc``).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil
import subprocess

import numpy as np
import pyarrow as pa

from upright.dataset_io.lerobot import EPISODES_PATH, LeRobotV3Writer, column
from upright.dataset_io.records import extra_info, frame_features

FEATURES = frame_features(("a", "b", "c"), [f"o{i}" for i in range(16)])
"""A 3-joint robot's features (``observation.state`` 12 values, ``action`` 3), as the daemon's logger writes them."""


def frames(n: int, start: float = 0.0, features: dict = FEATURES) -> pa.Table:
    """``n`` frames of ``features`` (values ``start + k`` for frame k) and their ``frame_index``."""
    dt = {"float32": np.float32, "int64": np.int64, "bool": bool}
    cols = {}
    for name, f in features.items():
        shape = (n, *f["shape"]) if f["shape"] != [1] else (n,)
        values = (start + np.arange(n)).reshape((n,) + (1,) * (len(shape) - 1))
        cols[name] = column(np.broadcast_to(values, shape).astype(dt[f["dtype"]]), f)
    return pa.table({**cols, "frame_index": pa.array(np.arange(n, dtype=np.int64))})


def make_dataset(root: pathlib.Path, journal: bool = False, features: dict = FEATURES, fps: int = 50) -> pathlib.Path:
    """A dataset of 2 episodes (5 and 4 frames, two tasks) of ``features`` at ``root``, written with LeRobotV3Writer;
    ``journal``: and the journal of a third episode a crash left (``recover`` would convert it)."""
    w = LeRobotV3Writer(root, features, fps, "small", extra_info("lift the cube", "test"))
    w.add_episode(0, frames(5, 0.0, features), "lift the cube", "success")
    w.add_episode(1, frames(4, 10.0, features), "push the cube", "stopped")
    if journal:
        table = frames(3, 20.0, features)
        path = w.journal_path(2)
        path.parent.mkdir(parents=True, exist_ok=True)
        with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, table.schema) as s:
            s.write_table(table)
    return root


def _cut(path: pathlib.Path) -> pathlib.Path:
    """Truncate ``path`` to half its bytes (a copy or a write cut short)."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _empty(path: pathlib.Path) -> pathlib.Path:
    path.write_bytes(b"")
    return path


def _without_features(path: pathlib.Path) -> pathlib.Path:
    info = json.loads(path.read_text())
    del info["features"]
    path.write_text(json.dumps(info, indent=2))
    return path


def _remove(path: pathlib.Path) -> pathlib.Path:
    path.unlink()
    return path


def _regular_file(root: pathlib.Path) -> pathlib.Path:
    shutil.rmtree(root)
    root.write_bytes(b"frames.csv written to the wrong path\n")
    return root


DAMAGES = {
    "info-truncated": (lambda r: _cut(r / "meta" / "info.json"), "is not valid JSON"),
    "info-empty": (lambda r: _empty(r / "meta" / "info.json"), "is empty (0 bytes)"),
    "info-without-features": (lambda r: _without_features(r / "meta" / "info.json"), "has no 'features'"),
    "info-missing": (lambda r: _remove(r / "meta" / "info.json"), "is missing, but"),
    "episodes-truncated": (lambda r: _cut(r / EPISODES_PATH), "is not a readable parquet file"),
    "data-truncated": (lambda r: _cut(r / "data" / "chunk-000" / "file-001.parquet"), "is not a readable parquet file"),
    "tasks-missing": (lambda r: _remove(r / "meta" / "tasks.parquet"), "is missing (the tasks table"),
    "regular-file": (_regular_file, "is a regular file, not a dataset folder"),
}
"""Damage name -> (do it to a dataset folder, returning the damaged path; the words the refusal must say)."""


def fingerprint(path: pathlib.Path) -> dict[str, str]:
    """sha256 of every file under ``path`` (or of ``path`` itself when it is a file), by relative path: a refusal
    must leave this unchanged (nothing written, created, converted or removed)."""
    if path.is_file():
        return {".": hashlib.sha256(path.read_bytes()).hexdigest()}
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def refusal_line(proc: subprocess.CompletedProcess) -> str:
    """The one stderr line of a refused command (non-zero exit, no traceback, nothing else on stderr)."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    return lines[0]
