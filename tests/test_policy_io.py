"""upright.policy_io stays the ground floor: it imports no torch, MuJoCo or hydra, and every onnxruntime session of the
package is built by its factory."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from upright.policy_io.registry import policy_kind
from upright.policy_io.schema import PolicyMetadataError
from upright.policy_io.session import open_session

ROOT = pathlib.Path(__file__).resolve().parents[1]

CODE = """
import sys
import upright.policy_io, upright.policy_io.schema, upright.policy_io.session, upright.policy_io.spec
import upright.policy_io.source, upright.policy_io.registry, upright.policy_io.mlp
print(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "mujoco", "hydra", "omegaconf")))
"""


def test_policy_io_imports_no_torch_mujoco_or_hydra():
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout


def test_every_inference_session_is_built_by_the_factory():
    found = []
    for path in (ROOT / "upright").rglob("*.py"):
        rel = path.relative_to(ROOT / "upright")
        if rel.parts[0] == "policy_io" or any(p.startswith(".") for p in rel.parts):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{rel}:{i}" for i, line in enumerate(text.splitlines(), 1) if "InferenceSession(" in line]
    assert found == [], f"build sessions with upright.policy_io.session.open_session: {found}"


def test_factory_refuses_a_missing_or_damaged_file_in_one_line(tmp_path):
    with pytest.raises(PolicyMetadataError, match="does not exist"):
        open_session(tmp_path / "nope.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(
        PolicyMetadataError, match=r"onnxruntime cannot load it: .*python -m upright\.training\.export"
    ) as e:
        open_session(bad)
    assert "\n" not in str(e.value)


def test_policy_kind_from_names_and_metadata(tmp_path):
    assert policy_kind("ws://localhost:8000") == "chunk"
    assert policy_kind(str(tmp_path / "missing")) is None
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "model.pt").write_bytes(b"")
    assert policy_kind(str(tmp_path / "tiny")) == "chunk"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "model_10.pt").write_bytes(b"")
    assert policy_kind(str(tmp_path / "run")) == "mlp"
    (tmp_path / "run" / "base_checksum.json").write_text("{}")
    assert policy_kind(str(tmp_path / "run")) == "residual"
