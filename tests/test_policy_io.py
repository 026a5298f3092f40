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


def test_a_policy_load_parses_the_file_once_and_a_replaced_file_again(tmp_path, monkeypatch):
    """Loading the daemon's spec asks for the metadata, the graph and a dry run: the file is parsed for reading once
    (plus the dry run's own session), and a file replaced at the same path is read anew, not served from the cache."""
    import os
    import shutil

    import onnxruntime as ort

    from upright.deploy.metadata import load_policy_spec
    from upright.policy_io import onnx_info
    from upright.policy_io.schema import graph_io, read_raw_metadata

    made = []
    real = ort.InferenceSession

    def counting(*args, **kwargs):
        made.append(kwargs.get("sess_options") or (args[1] if len(args) > 1 else None))
        return real(*args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", counting)
    onnx_info._read_version.cache_clear()
    path = tmp_path / "policy.onnx"
    shutil.copy(ROOT / "upright" / "assets" / "policies" / "g1_standup_ground" / "policy.onnx", path)
    spec = load_policy_spec(path)
    readers = [o for o in made if o.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL]
    assert len(readers) == 1, f"{len(readers)} parses to read one policy file"
    meta = read_raw_metadata(path)
    meta["joint_names"] = "changed by the caller"
    assert read_raw_metadata(path)["joint_names"] == list(spec.joint_names)
    inputs, _ = graph_io(path)
    assert len(readers) == 1 and inputs

    # the same path, other bytes (a re-exported policy): read again
    shutil.copy(ROOT / "upright" / "assets" / "policies" / "panda_lift" / "policy.onnx", path)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert read_raw_metadata(path)["joint_names"] != list(spec.joint_names)
    # a damaged file is an error each time, never a cached success
    path.write_bytes(b"not a model")
    with pytest.raises(PolicyMetadataError, match="not a readable ONNX file"):
        read_raw_metadata(path)
