"""``benchmarks/device/stage.py``: a bundle larger than one device call is packed, split, received chunk by chunk
(one per simulated call, each checked), joined and unpacked byte-identical; damaged, missing or foreign chunks are
errors that name the fix; a checkpoint returned in parts (files come back only up to 16 MiB) is rebuilt and checked.
Small synthetic files here; ``benchmarks/device/rehearse.sh`` runs it on the real 149 MB warp-lang wheel (README
there)."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("stage", ROOT / "benchmarks" / "device" / "stage.py")
stage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stage)
MiB = stage.MiB


@pytest.fixture()
def packed(tmp_path, monkeypatch):
    """A packed bundle of two fake wheels (3 MiB of random bytes in all) and a robot folder, in 1 MiB chunks."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "tracked.txt").write_text("x" * 1000)
    wheels = tmp_path / "whl"
    wheels.mkdir()
    (wheels / "a-1.0-py3-none-any.whl").write_bytes(os.urandom(2 * MiB))
    (wheels / "b-2.0-py3-none-any.whl").write_bytes(os.urandom(MiB + 123))
    robot = tmp_path / "menagerie" / "robot"
    (robot / "assets").mkdir(parents=True)
    (robot / "robot.xml").write_text("<mujoco/>")
    (robot / "assets" / "mesh.stl").write_bytes(os.urandom(4096))
    manifest = stage.pack(wheels, tmp_path / "menagerie", ["robot"], repo / ".devstage", 1.0, 0.0, repo)
    return repo, wheels, robot, manifest


def _call(repo: pathlib.Path, device: pathlib.Path, name: str) -> list[str]:
    """One simulated device call: the manifest and one chunk arrive in the device's copy, then ``receive``."""
    arrived = device / "repo" / ".devstage"
    arrived.mkdir(parents=True, exist_ok=True)
    for f in ("manifest.json", name):
        (arrived / f).write_bytes((repo / ".devstage" / f).read_bytes())
    return stage.receive(arrived, device / "stage")


def test_chunks_reassemble_byte_identical(packed, tmp_path):
    repo, wheels, robot, manifest = packed
    names = [c["name"] for c in manifest["chunks"]]
    assert len(names) >= 3 and all(c["bytes"] <= MiB for c in manifest["chunks"])
    assert manifest["wheels"] == ["a-1.0-py3-none-any.whl", "b-2.0-py3-none-any.whl"]
    device = tmp_path / "device"
    for k, name in enumerate(names):
        missing = _call(repo, device, name)
        assert missing == names[k + 1 :]  # each call stores its chunk; the rest are still missing
    unpacked = device / "unpacked"
    stage.assemble(device / "stage", unpacked)
    for w in wheels.iterdir():
        assert (unpacked / "wheels" / w.name).read_bytes() == w.read_bytes()
    assert (unpacked / "menagerie/robot/assets/mesh.stl").read_bytes() == (robot / "assets/mesh.stl").read_bytes()


def test_damaged_missing_and_foreign_chunks_are_errors(packed, tmp_path):
    repo, _, _, manifest = packed
    names = [c["name"] for c in manifest["chunks"]]
    device = tmp_path / "device"
    _call(repo, device, names[0])
    with pytest.raises(FileNotFoundError, match=f"chunks missing .*{names[1]}.*send them again"):
        stage.assemble(device / "stage")
    damaged = bytearray((repo / ".devstage" / names[1]).read_bytes())
    damaged[100] ^= 0xFF
    (device / "repo/.devstage" / names[1]).write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match="does not match the manifest.*send it again"):
        stage.receive(device / "repo/.devstage", device / "stage")
    other = json.loads((repo / ".devstage/manifest.json").read_text()) | {"bundle_sha256": "0" * 64}
    (device / "repo/.devstage/manifest.json").write_text(json.dumps(other))
    with pytest.raises(ValueError, match="another bundle"):
        stage.receive(device / "repo/.devstage", device / "stage")


def test_chunks_fit_beside_the_working_tree_and_the_plan_names_each_call(packed, tmp_path):
    repo, wheels, _, manifest = packed
    assert manifest["tree_mib"] < 0.01  # git ls-files -co: tracked.txt (.devstage is ignored by .git/info/exclude)
    text = stage.plan(manifest, "--train-envs 4096", [".devstage/resume"])
    calls = [line for line in text.splitlines() if line.startswith("call ")]
    assert len(calls) == len(manifest["chunks"])
    assert "device.sh receive" in calls[0] and '".devstage/chunk_00"' in calls[0]
    assert "device.sh run --train-envs 4096" in calls[-1] and '".devstage/resume"' in calls[-1]
    with pytest.raises(ValueError, match="leaves .* MiB per call"):
        stage.pack(wheels, None, [], repo / ".devstage", 70.0, 0.0, repo)
    assert "/.devstage/" in (repo / ".git/info/exclude").read_text().split()


def test_checkpoint_parts_rebuild_the_file(tmp_path):
    ckpt = tmp_path / "run" / "model_7.pt"
    ckpt.parent.mkdir()
    ckpt.write_bytes(os.urandom(5 * MiB // 2))
    out = tmp_path / "out"
    out.mkdir()
    index = stage.write_parts(ckpt, out, MiB, "checkpoint.json")
    assert [p["name"] for p in index["parts"]] == ["model_7.pt.00", "model_7.pt.01", "model_7.pt.02"]
    assert max(p.stat().st_size for p in out.glob("model_7.pt.*")) <= MiB
    rebuilt = stage.join_parts(out, "checkpoint.json", tmp_path / "resume")
    assert rebuilt.name == "model_7.pt" and rebuilt.read_bytes() == ckpt.read_bytes()
    (out / "model_7.pt.01").write_bytes(b"x" * 10)
    with pytest.raises(ValueError, match="do not rebuild model_7.pt"):
        stage.join_parts(out, "checkpoint.json", tmp_path / "resume2")
    (out / "model_7.pt.02").unlink()
    with pytest.raises(FileNotFoundError, match="model_7.pt.02 is missing"):
        stage.join_parts(out, "checkpoint.json", tmp_path / "resume3")
