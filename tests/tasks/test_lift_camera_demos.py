"""The lift task's optional rgb observation group and the demonstration recorder: images from the scene cameras
(skipped where no offscreen OpenGL exists), and a recorded dataset that reads back with pyarrow in the daemon's
schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from upright.dataset_io.records import frame_features
from upright.tasks.lift.vla_io import TASK
from upright.training.record_demos import demo_features, record


def _gl() -> str | None:
    from upright.gl import gl_backend_works

    for name in ("egl", "osmesa"):
        if gl_backend_works(name):
            return name
    return None


def test_demo_dataset_reads_back_with_the_daemon_schema(tmp_path):
    summary = record(tmp_path / "ds", episodes=3, num_envs=3, seed=5, overrides=["sim.num_threads=1"])
    assert summary["episodes"] == 3 and summary["frames"] == 3 * 150
    info = json.loads((tmp_path / "ds" / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 50 and info["total_episodes"] == 3
    explicit = {
        k: v
        for k, v in info["features"].items()
        if k not in ("timestamp", "frame_index", "episode_index", "index", "task_index")
    }
    joints = ("joint1", "joint2", "joint3", "joint4", "joint5", "joint6", "joint7", "finger_joint1")
    assert explicit == json.loads(json.dumps(frame_features(joints, explicit["observation.policy_obs"]["names"])))
    table = pq.read_table(tmp_path / "ds" / "data" / "chunk-000" / "file-001.parquet")
    assert table.num_rows == 150
    assert table.schema.field("observation.state").type.list_size == 22
    assert table.schema.field("action").type.list_size == 8
    done = table.column("next.done").to_pylist()
    assert done[-1] is True and not any(done[:-1])
    assert set(table.column("control_source").to_pylist()) == {0} and not any(table.column("intervention").to_pylist())
    actions = np.stack(table.column("action").to_numpy(zero_copy_only=False))
    assert np.abs(actions).max() <= 1.0
    assert pq.read_table(tmp_path / "ds" / "meta" / "tasks.parquet").column("task").to_pylist() == [TASK]
    outcomes = pq.read_table(tmp_path / "ds" / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    assert set(outcomes.column("upright/outcome").to_pylist()) <= {"success", "failure"}


def test_image_feature_spec():
    features = demo_features(("front", "wrist"), 64, 96)
    assert features["observation.images.front"] == {
        "dtype": "image",
        "shape": [64, 96, 3],
        "names": ["height", "width", "channel"],
    }


CAMERA_CODE = """
import sys, torch
from upright.tasks.lift.config import LiftEnvCfg
from upright.tasks.lift.env import LiftEnv
from upright.tasks.standup.config import SimCfg
from upright.training.record_demos import record
cfg = LiftEnvCfg(num_envs=2)
cfg.camera.enabled, cfg.camera.cameras, cfg.camera.width, cfg.camera.height = True, ("front", "wrist"), 64, 48
env = LiftEnv(cfg, SimCfg(num_threads=1), seed=0)
rgb = env.get_observations()["rgb"]
assert rgb.shape == (2, 2, 48, 64, 3) and rgb.dtype == torch.uint8, rgb.shape
front = rgb[0, 0].float()
# the green cube is in view of the front camera: some pixels are clearly green
green = ((front[..., 1] > 120) & (front[..., 0] < 80) & (front[..., 2] < 80)).sum().item()
assert green >= 3, green
assert rgb[0, 1].float().std() > 5  # the wrist view is not blank
s = record(sys.argv[1], episodes=1, num_envs=1, cameras=True, overrides=["sim.num_threads=1", "env.camera.width=32",
           "env.camera.height=32"])
import pyarrow.parquet as pq, io, imageio.v3 as iio
t = pq.read_table(sys.argv[1] + "/data/chunk-000/file-000.parquet")
img = iio.imread(io.BytesIO(t.column("observation.images.front")[0].as_py()["bytes"]))
assert img.shape == (32, 32, 3), img.shape
print("ok")
"""


@pytest.mark.slow
def test_rgb_group_and_recorded_images(tmp_path):
    gl = _gl()
    if gl is None:
        pytest.skip("no offscreen OpenGL (EGL or OSMesa) on this machine")
    env = {**os.environ, "MUJOCO_GL": gl, "PYOPENGL_PLATFORM": gl}
    proc = subprocess.run(
        [sys.executable, "-c", CAMERA_CODE, str(tmp_path / "img")], env=env, capture_output=True, text=True, timeout=280
    )
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
