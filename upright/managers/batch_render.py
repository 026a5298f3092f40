"""One RGB frame per env from one of the scene's cameras, for reward terms that look at the scene
(:mod:`upright.managers.vlm_reward`).

Two backends, as the lift task's ``rgb`` observation group (:mod:`upright.tasks.lift.camera`,
:mod:`upright.tasks.lift.camera_warp`), but for any scene and without the lift target marker (both Warp paths use
:class:`upright.sim.warp_render.WarpBatchRenderer`):

- ``opengl``: MuJoCo's rasteriser (``mujoco.Renderer``), one env after the other from one ``MjData`` that takes that
  env's qpos; the cost grows linearly with N. Needs an offscreen GL context (``MUJOCO_GL=egl`` or ``osmesa`` before
  MuJoCo is imported; :func:`upright.gl.choose_offscreen_gl`).
- ``warp``: MuJoCo Warp's batch ray tracer, all envs in one launch (needs ``mujoco-warp``, ``pip install
  "upright[warp]"``); ``auto`` picks it when Warp sees a CUDA device.

Only ``qpos`` is read from the simulator: mocap bodies (the lift target marker) are drawn where the model puts them.
Positions, camera poses and lights are recomputed from qpos (``mj_kinematics``, ``mj_comPos`` for ``trackcom``
cameras such as the G1's ``tracking`` camera, ``mj_camlight``). Shadows, reflections and the skybox are off unless
``effects`` is set: with Mesa's software EGL on a 2-core CPU they made a 224 x 224 G1 frame take 0.43 s instead of
0.09 s (measured while two training runs shared the CPU).
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from upright.sim.warp_render import WarpBatchRenderer

BACKENDS = ("auto", "opengl", "warp")
"""Values of a renderer's ``backend``."""

_EFFECT_FLAGS = (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION, mujoco.mjtRndFlag.mjRND_SKYBOX)


def check_camera(model: mujoco.MjModel, camera: str, prefix: str = "camera") -> int:
    """The id of the model camera named ``camera``.

    Raises:
        ValueError: the model has no camera of that name (one line listing the ones it has).
    """
    cam = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, str(camera))
    if cam < 0:
        names = [model.camera(i).name for i in range(model.ncam)]
        raise ValueError(f"{prefix}={camera!r} is not a camera of the scene; its cameras: {names}")
    return cam


def make_frame_renderer(
    model: mujoco.MjModel,
    camera: str,
    width: int,
    height: int,
    backend: str = "auto",
    effects: bool = False,
    prefix: str = "camera",
    device: torch.device | str | None = None,
):
    """An :class:`OpenGLFrameRenderer` or a :class:`WarpFrameRenderer` (``auto``: Warp where torch and Warp see a CUDA
    device and mujoco-warp imports, else OpenGL). Both have ``render(sim) -> (N, H, W, 3) uint8`` and ``close()``.

    Args:
        model: the compiled scene the simulator runs.
        camera: name of one of its cameras.
        width, height: frame size, px (>= 16).
        backend: one of :data:`BACKENDS`.
        effects: draw shadows, reflections and the skybox.
        prefix: config key named in errors (e.g. ``env.vlm_reward.camera``).
        device: the env's torch device: a CUDA device is Warp's device too (one GPU per process under torchrun).

    Raises:
        ValueError: unknown camera or backend, or a size under 16 px (one line naming the fix).
        RuntimeError: the backend cannot run here (no GL context; mujoco-warp missing), with the fix.
    """
    check_camera(model, camera, prefix)
    if int(width) < 16 or int(height) < 16:
        raise ValueError(f"{prefix} frame size must be >= 16 x 16 px, got {width} x {height}")
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is unknown; use one of {list(BACKENDS)}")
    if backend == "auto":
        from upright.sim import warp_cuda_available

        backend = "warp" if torch.cuda.is_available() and warp_cuda_available() else "opengl"
    if backend == "warp":
        dev = torch.device(device) if device is not None else None
        warp_device = f"cuda:{dev.index or 0}" if dev is not None and dev.type == "cuda" else None
        return WarpFrameRenderer(model, camera, width, height, effects, device=warp_device)
    return OpenGLFrameRenderer(model, camera, width, height, effects)


class OpenGLFrameRenderer:
    """Renders ``camera`` in every env with MuJoCo's OpenGL renderer, one env at a time.

    Args: as :func:`make_frame_renderer`.

    Raises:
        RuntimeError: no OpenGL context can be created (the message says to set ``MUJOCO_GL=egl`` or ``osmesa``).
    """

    def __init__(self, model: mujoco.MjModel, camera: str, width: int, height: int, effects: bool = False):
        self.model, self.camera = model, str(camera)
        self.width, self.height, self.effects = int(width), int(height), bool(effects)
        vis = model.vis.global_
        vis.offwidth, vis.offheight = max(vis.offwidth, self.width), max(vis.offheight, self.height)
        self.data = mujoco.MjData(model)
        try:
            self.renderer = mujoco.Renderer(model, height=self.height, width=self.width)
        except Exception as err:
            raise RuntimeError(
                f"cannot render frames ({err}); set MUJOCO_GL=egl (libegl1) or MUJOCO_GL=osmesa "
                "(libosmesa6) before starting Python"
            ) from err

    def render(self, sim) -> torch.Tensor:
        """(N, H, W, 3) uint8 RGB frames of every env of ``sim`` (anything with ``state.qpos`` (N, nq)) at its current
        state, on the CPU."""
        qpos = sim.state.qpos.detach().cpu().double().numpy()
        out = np.empty((qpos.shape[0], self.height, self.width, 3), dtype=np.uint8)
        m, d = self.model, self.data
        for i in range(qpos.shape[0]):
            d.qpos[:] = qpos[i]
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)  # subtree centres of mass: trackcom cameras follow them
            mujoco.mj_camlight(m, d)
            self.renderer.update_scene(d, camera=self.camera)
            for flag in _EFFECT_FLAGS:
                self.renderer.scene.flags[flag] = self.effects
            out[i] = self.renderer.render()
        return torch.from_numpy(out)

    def close(self) -> None:
        """Free the GL context."""
        self.renderer.close()


class WarpFrameRenderer:
    """Renders ``camera`` in every env in one MuJoCo Warp batch
    (:class:`upright.sim.warp_render.WarpBatchRenderer`, context built at the first :meth:`render` for its N).

    Args: as :func:`make_frame_renderer`, plus ``device``: Warp device (default: Warp's preferred, CUDA when present).

    Raises:
        RuntimeError: ``mujoco-warp`` is not installed (the message names the extra, or ``backend=opengl``).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        camera: str,
        width: int,
        height: int,
        effects: bool = False,
        device: str | None = None,
    ):
        self._batch = WarpBatchRenderer(model, [str(camera)], width, height, effects, device=device)
        self.model, self.camera = model, str(camera)
        self.width, self.height, self.effects = self._batch.width, self._batch.height, self._batch.effects
        self.device = self._batch.device

    def render(self, sim) -> torch.Tensor:
        """(N, H, W, 3) uint8 RGB frames of every env of ``sim`` at its current state, on ``sim``'s torch device."""
        return self._batch.render(sim.state.qpos)[:, 0]

    def close(self) -> None:
        """Drop the device buffers."""
        self._batch.close()
