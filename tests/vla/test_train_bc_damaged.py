"""Issue 33.7: ``python -m upright.vla.train_bc`` on a dataset damaged on disk (the damages of
tests/deploy/dataset_damage.py: ``meta/info.json`` truncated, empty, without ``features`` or removed; the episodes
table or a data file cut short; ``meta/tasks.parquet`` removed; a regular file in the dataset's place): one stderr line
naming the file and what is wrong, exit 2, no traceback, the dataset byte for byte as before and ``--out`` untouched.
The same check (``upright.dataset_io.check``) refuses them in ``upright-deploy run`` and ``recover``."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "deploy"))
from dataset_damage import DAMAGES, fingerprint, make_dataset, refusal_line


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_train_bc_refuses_a_damaged_dataset_in_one_line(tmp_path, damage):
    """Before (the sound dataset first): a truncated or empty info.json: `train_bc: Unterminated string starting at:
    line 137 column 16 (char 2231)` (no file named; a traceback when the damaged dataset came first: dataset_cameras);
    without features: `dataset ... has no 'observation.state' feature; record it with record_demos`; a cut episodes
    table: trained (exit 0); a cut data file: pyarrow's `Could not open Parquet input source ...: Parquet magic bytes
    not found in footer`; a missing tasks table: `train_bc: .../meta/tasks.parquet` (the path alone); a missing
    info.json or a file: `no LeRobot dataset at ...; record one with ...`."""
    good = make_dataset(tmp_path / "good")
    root = make_dataset(tmp_path / "ds")
    do, says = DAMAGES[damage]
    damaged = do(root)
    before = fingerprint(root)
    out = tmp_path / "run"
    out.mkdir()
    (out / "model.pt").write_bytes(b"the previous run's model")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "upright.vla.train_bc",
            "--dataset",
            str(good),
            "--dataset",
            str(root),
            "--out",
            str(out),
            "--steps",
            "1",
            "--batch-size",
            "4",
            "--chunk-size",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = refusal_line(proc)
    assert proc.returncode == 2 and line.startswith("train_bc: "), line
    assert f"{damaged} " in line and says in line, line
    assert fingerprint(root) == before
    assert [p.name for p in out.iterdir()] == ["model.pt"]
    assert (out / "model.pt").read_bytes() == b"the previous run's model"


def test_train_bc_names_a_data_file_damaged_inside(tmp_path):
    """A data file whose footer is intact but whose pages are overwritten passes the check (footers only) and fails
    when it is read: the line names it. Before: an `OSError: Couldn't deserialize thrift: ...` traceback."""
    root = make_dataset(tmp_path / "ds")
    damaged = root / "data" / "chunk-000" / "file-001.parquet"
    data = bytearray(damaged.read_bytes())
    data[4:400] = b"\xab" * 396
    damaged.write_bytes(bytes(data))
    before = fingerprint(root)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "upright.vla.train_bc",
            "--dataset",
            str(root),
            "--out",
            str(tmp_path / "run"),
            "--steps",
            "1",
            "--batch-size",
            "4",
            "--chunk-size",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = refusal_line(proc)
    assert proc.returncode == 2 and line.startswith(f"train_bc: {damaged} does not read ("), line
    assert fingerprint(root) == before and not (tmp_path / "run").exists()
