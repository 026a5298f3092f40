"""``examples/standalone_getup.py``: the committed get-up policy in a MuJoCo loop of its own, which reads only the ONNX
file and its metadata and Menagerie's G1 file as it ships (no upright code, no upright scene)."""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from upright.robots.menagerie import model_path

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "standalone_getup.py"
POLICY = ROOT / "upright" / "assets" / "policies" / "g1_getup" / "policy.onnx"


@pytest.fixture(scope="module")
def standalone():
    spec = importlib.util.spec_from_file_location("standalone_getup", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_loop_imports_nothing_of_upright():
    tree = ast.parse(SCRIPT.read_text())
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert imported and not [m for m in imported if m.split(".")[0] == "upright"], imported


def _success_rate(standalone, posture: str, episodes: int, zero_actions: bool = False) -> float:
    meta = standalone.read_metadata(POLICY)
    model = standalone.build_model(pathlib.Path(model_path("unitree_g1", "g1_mjlab.xml")), meta)
    session = ort.InferenceSession(str(POLICY), providers=["CPUExecutionProvider"])
    if zero_actions:  # the same loop with a policy that does nothing: the robot must stay down
        inputs = session.get_inputs()

        class Zero:
            def get_inputs(self):
                return inputs

            def run(self, _outputs, feeds):
                return [np.zeros((1, len(meta["joint_names"])), np.float32)]

        session = Zero()
    loop = standalone.GetupLoop(model, meta, session)
    rng = np.random.default_rng(0)
    ok = 0
    for _ in range(episodes):
        loop.reset(posture, rng)
        stood = fell = False
        for _ in range(250):  # 5 s of 20 ms control periods
            loop.step()
            z = float(loop.d.qpos[2])
            stood = stood or z > 0.7
            fell = fell or (stood and z < 0.5)
        ok += stood and not fell
    return ok / episodes


@pytest.mark.parametrize("posture", ["supine", "prone"])
def test_the_committed_policy_gets_up_in_a_loop_of_its_own(standalone, posture):
    """Measured 20 / 20 from each posture (seed 0, 5 s); 8 of 10 leaves room for the random starts of another
    platform's float arithmetic."""
    assert _success_rate(standalone, posture, episodes=10) >= 0.8


def test_the_loop_can_fail_a_policy_that_does_nothing(standalone):
    assert _success_rate(standalone, "supine", episodes=2, zero_actions=True) == 0.0


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args, "--episodes", "1"], capture_output=True, text=True)


def test_files_it_cannot_run_are_one_line_naming_the_fix(tmp_path):
    host = ROOT / "upright" / "assets" / "policies" / "g1_standup_ground" / "policy.onnx"
    proc = _run("--policy", str(host))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "not a get-up policy" in proc.stderr and "play.py" in proc.stderr
    older = onnx.load(str(POLICY))  # a get-up file exported before the armature keys
    kept = [(p.key, p.value) for p in older.metadata_props if "armature" not in p.key]
    del older.metadata_props[:]
    for key, value in kept:
        entry = older.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(older, str(tmp_path / "older.onnx"))
    proc = _run("--policy", str(tmp_path / "older.onnx"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "['armature', 'held_armature'] missing" in proc.stderr and "--refresh-metadata" in proc.stderr
    proc = _run("--policy", str(POLICY), "--model", str(tmp_path / "none.xml"))
    assert proc.returncode == 2 and "set MENAGERIE_ROOT or pass --model" in proc.stderr
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    proc = _run("--policy", str(tmp_path / "junk.onnx"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not a readable policy.onnx" in proc.stderr
