"""``env.camera.backend=warp``: the lift cameras rendered by MuJoCo Warp's batch ray tracer, here on Warp's CPU device
(the same kernels run on CUDA). Checks that every env of the batch is drawn at its own state, that the batch agrees
with single-env renders, and that the ray tracer sees the scene where MuJoCo's OpenGL renderer sees it."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from upright.tasks.lift.config import LiftCameraCfg

pytest.importorskip("mujoco_warp")


class _Sim:
    """The one attribute the renderers read from a simulator: ``state.qpos`` (N, nq)."""

    def __init__(self, qpos: np.ndarray):
        self.state = type("State", (), {"qpos": torch.as_tensor(qpos, dtype=torch.float64)})()


@pytest.fixture(scope="module")
def scene():
    import mujoco

    from upright.robots import panda
    from upright.tasks.lift.scene import lift_scene

    model = lift_scene()
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    home = data.qpos.copy()
    moved = home.copy()
    moved[0] += 0.6  # joint1: the arm swings to its left
    moved[3] += 0.5  # joint4
    cube = model.jnt_qposadr[model.body(panda.CUBE_BODY).jntadr[0]]  # the cube's free joint: x, y, z, quaternion
    moved[cube : cube + 2] += (0.08, -0.1)  # the cube slides on the table
    return model, np.stack([home, moved])


@pytest.fixture(scope="module")
def warp_images(scene):
    from upright.tasks.lift.camera_warp import WarpCameraRenderer

    model, qpos = scene
    cfg = LiftCameraCfg(enabled=True, width=64, height=48, cameras=("front", "wrist"), backend="warp")
    renderer = WarpCameraRenderer(model, cfg, device="cpu")
    targets = torch.tensor([[0.6, 0.0, 0.3], [0.5, 0.15, 0.4]])
    batch = renderer.render(_Sim(qpos), targets)
    single = renderer.render(_Sim(qpos[1:]), targets[1:])
    renderer.close()
    return batch, single


def test_warp_batch_has_one_image_per_env_and_camera(warp_images):
    batch, _ = warp_images
    assert batch.shape == (2, 2, 48, 64, 3) and batch.dtype == torch.uint8
    for env in range(2):
        for cam in range(2):
            assert batch[env, cam].float().std() > 5, (env, cam)  # not blank
    # each env is drawn at its own state: the moved arm changes both views
    assert (batch[0].float() - batch[1].float()).abs().mean() > 2


def test_warp_batch_matches_a_single_env_render(warp_images):
    batch, single = warp_images
    assert single.shape == (1, 2, 48, 64, 3)
    assert torch.equal(batch[1], single[0])


def _changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pixels whose colour differs clearly between two images of one camera (H, W) bool."""
    return np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=-1) > 25


def test_warp_and_opengl_see_the_scene_change_in_the_same_pixels(scene, warp_images):
    from upright.gl import gl_backend_works
    from upright.tasks.lift.camera import CameraRenderer

    if not any(gl_backend_works(name) for name in ("egl", "osmesa")):
        pytest.skip("no offscreen OpenGL (EGL or OSMesa) for the reference renderer")
    model, qpos = scene
    cfg = LiftCameraCfg(enabled=True, width=64, height=48, cameras=("front",), backend="opengl")
    try:
        gl = CameraRenderer(model, cfg)
    except RuntimeError as err:  # MUJOCO_GL was fixed before this test by an earlier import
        pytest.skip(str(err))
    ref = gl.render(_Sim(qpos), torch.tensor([[0.6, 0.0, 0.3], [0.5, 0.15, 0.4]])).numpy()
    gl.close()
    batch, _ = warp_images
    warp_front = batch[:, 0].numpy()
    a, b = _changed(warp_front[0], warp_front[1]), _changed(ref[0, 0], ref[1, 0])
    assert a.sum() > 50 and b.sum() > 50
    iou = (a & b).sum() / (a | b).sum()
    assert iou > 0.6, iou


def test_auto_backend_is_opengl_without_cuda_and_bad_backends_are_refused(scene, monkeypatch):
    from upright.sim import warp_cuda_available
    from upright.tasks.lift import camera

    model, _ = scene
    assert not warp_cuda_available() or torch.cuda.is_available()
    with pytest.raises(ValueError, match="env.camera.backend='vulkan' is unknown; use one of") as err:
        camera.make_camera_renderer(model, LiftCameraCfg(enabled=True, backend="vulkan"))
    assert "\n" not in str(err.value)
    monkeypatch.setitem(sys.modules, "mujoco_warp", None)  # as if mujoco-warp were not installed
    assert not warp_cuda_available()
    with pytest.raises(RuntimeError, match=r"pip install 'upright\[warp\]', or use env.camera.backend=opengl"):
        camera.make_camera_renderer(model, LiftCameraCfg(enabled=True, backend="warp"))
