"""The optional ``rgb`` observation group of the lift task: images of the scene's cameras for every env.

On CPU it renders with MuJoCo's own OpenGL renderer (``mujoco.Renderer``), which needs an offscreen GL context:
``MUJOCO_GL=egl`` (Mesa or a GPU driver) or ``MUJOCO_GL=osmesa``, set before MuJoCo is imported
(:func:`upright.gl.choose_offscreen_gl` picks one). Each env is drawn in turn from one ``MjData`` that takes
that env's qpos (and the target marker's position), so the cost grows linearly with N. Shadows, floor reflections and
the skybox are off: with Mesa's software EGL on this project's 2-core CPU they made a 64 x 64 frame of the Panda's
~137,000-triangle visual meshes take 456 ms instead of ~50 ms. This group is for
demonstrations and vision-policy work, not for state-based training (``env.camera.enabled`` is off by default).
``benchmarks/bench_lift_env.py`` measures frames/s per core. On a GPU, ``env.camera.backend=auto`` (the default)
renders with MuJoCo Warp's batch ray tracer instead (:mod:`upright.tasks.lift.camera_warp`);
:func:`make_camera_renderer` picks the backend.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from upright.robots import panda
from upright.tasks.lift.scene import CAMERAS


def draw(renderer: mujoco.Renderer, data: mujoco.MjData, camera: str) -> np.ndarray:
    """(H, W, 3) uint8 RGB image of ``camera`` at ``data``'s state (kinematics and camera/light poses already
    computed: ``mj_kinematics`` + ``mj_camlight``), with shadows, reflections and the skybox off (module docstring).
    The one drawing routine of the lift cameras: :class:`CameraRenderer` and ``upright-deploy sim-robot --camera``
    (:mod:`upright.deploy.sim_camera`) both use it."""
    renderer.update_scene(data, camera=camera)
    for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION, mujoco.mjtRndFlag.mjRND_SKYBOX):
        renderer.scene.flags[flag] = False
    return renderer.render()


BACKENDS = ("auto", "opengl", "warp")
"""Values of ``env.camera.backend``."""


def check_camera_cfg(cfg) -> None:
    """Check ``env.camera`` (:class:`~upright.tasks.lift.config.LiftCameraCfg`).

    Raises:
        ValueError: an unknown or empty camera list, a size < 16 px or an unknown backend (one line naming the valid
            values).
    """
    cams = list(cfg.cameras)
    unknown = [c for c in cams if c not in CAMERAS]
    if unknown or not cams:
        raise ValueError(f"env.camera.cameras: unknown or empty {unknown or cams}; valid cameras: {list(CAMERAS)}")
    if cfg.width < 16 or cfg.height < 16:
        raise ValueError(f"env.camera.width/height must be >= 16 px, got {cfg.width} x {cfg.height}")
    if cfg.backend not in BACKENDS:
        raise ValueError(f"env.camera.backend={cfg.backend!r} is unknown; use one of {list(BACKENDS)}")


def make_camera_renderer(model: mujoco.MjModel, cfg):
    """The renderer of ``env.camera``: :class:`CameraRenderer` (``opengl``) or
    :class:`~upright.tasks.lift.camera_warp.WarpCameraRenderer` (``warp``; ``auto`` picks it when mujoco-warp is
    installed and a CUDA device is present). Both have ``render(sim, target_pos) -> (N, C, H, W, 3) uint8`` and
    ``close()``.

    Raises:
        ValueError: see :func:`check_camera_cfg`.
        RuntimeError: the chosen backend cannot run here (no GL context; mujoco-warp missing), with the fix.
    """
    check_camera_cfg(cfg)
    backend = cfg.backend
    if backend == "auto":
        from upright.sim import warp_cuda_available

        backend = "warp" if warp_cuda_available() else "opengl"
    if backend == "warp":
        from upright.tasks.lift.camera_warp import WarpCameraRenderer

        return WarpCameraRenderer(model, cfg)
    return CameraRenderer(model, cfg)


class CameraRenderer:
    """Renders the configured cameras of every env with MuJoCo's OpenGL renderer (``env.camera.backend=opengl``).

    Args:
        model: the lift scene.
        cfg: ``env.camera`` (:class:`~upright.tasks.lift.config.LiftCameraCfg`): size and cameras.

    Raises:
        ValueError: see :func:`check_camera_cfg`.
        RuntimeError: no OpenGL context can be created (the message says to set ``MUJOCO_GL=egl`` or ``osmesa``).
    """

    def __init__(self, model: mujoco.MjModel, cfg):
        check_camera_cfg(cfg)
        self.model = model
        self.cameras = list(cfg.cameras)
        self.width, self.height = int(cfg.width), int(cfg.height)
        self.data = mujoco.MjData(model)
        try:
            self.renderer = mujoco.Renderer(model, height=self.height, width=self.width)
        except Exception as err:
            raise RuntimeError(
                f"cannot render cameras ({err}); set MUJOCO_GL=egl (libegl1) or MUJOCO_GL=osmesa (libosmesa6) before "
                "starting Python, or turn the camera group off with env.camera.enabled=false"
            ) from err
        self._mocap = int(model.body_mocapid[model.body(panda.TARGET_BODY).id])

    def render(self, sim, target_pos: torch.Tensor | None = None) -> torch.Tensor:
        """(N, C, H, W, 3) uint8 images of the C cameras in every env of ``sim`` at its current state; the target marker
        is drawn at ``target_pos`` (N, 3) m when given."""
        qpos = sim.state.qpos.detach().cpu().double().numpy()
        targets = None if target_pos is None else target_pos.detach().cpu().double().numpy()
        out = np.empty((qpos.shape[0], len(self.cameras), self.height, self.width, 3), dtype=np.uint8)
        d = self.data
        for i in range(qpos.shape[0]):
            d.qpos[:] = qpos[i]
            if targets is not None and self._mocap >= 0:
                d.mocap_pos[self._mocap] = targets[i]
            mujoco.mj_kinematics(self.model, d)
            mujoco.mj_camlight(self.model, d)
            for c, cam in enumerate(self.cameras):
                out[i, c] = draw(self.renderer, d, cam)
        return torch.from_numpy(out)

    def close(self) -> None:
        """Free the GL context."""
        self.renderer.close()
