"""Rendering of the gymnasium envs: ``rgb_array`` frames with MuJoCo's offscreen renderer (the headless-video
renderer of :mod:`upright.viewer.video`) and the ``human`` window (MuJoCo's passive viewer, as
:mod:`upright.viewer.native` uses it). Both draw a display copy (one ``MjData``) of one env, with a camera that
tracks the robot.

Headless machines need EGL or OSMesa, chosen through ``MUJOCO_GL`` before MuJoCo is first imported (``make`` does it
with :func:`upright.gl.choose_offscreen_gl` when it is the first to import MuJoCo).
"""

from __future__ import annotations

import warnings

import mujoco
import numpy as np

from upright.gl import has_display
from upright.viewer.video import make_renderer

CAMERA = {"distance": 3.0, "azimuth": 135.0, "elevation": -20.0}
"""Tracking camera of both modes (the viewer's defaults)."""


def _camera(body: int) -> mujoco.MjvCamera:
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
    cam.trackbodyid = body
    cam.fixedcamid = -1
    cam.distance, cam.azimuth, cam.elevation = CAMERA["distance"], CAMERA["azimuth"], CAMERA["elevation"]
    return cam


class FrameRenderer:
    """Offscreen frames of ``model`` at given generalised positions.

    Args:
        model: compiled scene.
        body: body id the camera tracks.
        width, height: frame size, pixels.

    Raises:
        RuntimeError: no OpenGL context (the message names the Debian packages for EGL or OSMesa).
    """

    def __init__(self, model: mujoco.MjModel, body: int, width: int = 640, height: int = 480):
        self.model = model
        self.data = mujoco.MjData(model)
        self.renderer = make_renderer(model, width, height)
        self.camera = _camera(body)

    def rgb(self, qpos: np.ndarray) -> np.ndarray:
        """(H, W, 3) uint8 frame of the scene with ``qpos`` (nq,) float64."""
        self.data.qpos[:] = qpos
        mujoco.mj_forward(self.model, self.data)
        self.renderer.update_scene(self.data, camera=self.camera)
        return self.renderer.render().copy()

    def close(self) -> None:
        self.renderer.close()


class HumanWindow:
    """MuJoCo's passive viewer window showing the env; without a display (no ``DISPLAY``/``WAYLAND_DISPLAY``) it
    warns once and shows nothing, so code written for ``render_mode="human"`` still runs on a headless machine."""

    def __init__(self, model: mujoco.MjModel, body: int):
        self.model = model
        self.data = mujoco.MjData(model)
        self.viewer = None
        if not has_display():
            warn_once(
                "render_mode='human' needs a display (DISPLAY or WAYLAND_DISPLAY is unset): nothing is shown; "
                "use render_mode='rgb_array' on a headless machine"
            )
            return
        from mujoco import viewer as mujoco_viewer

        self.viewer = mujoco_viewer.launch_passive(model, self.data, show_left_ui=False, show_right_ui=False)
        cam = _camera(body)
        self.viewer.cam.type, self.viewer.cam.trackbodyid = cam.type, cam.trackbodyid
        self.viewer.cam.distance, self.viewer.cam.azimuth, self.viewer.cam.elevation = (
            cam.distance,
            cam.azimuth,
            cam.elevation,
        )

    def show(self, qpos: np.ndarray) -> None:
        """Draw the scene at ``qpos`` (nq,) float64 (no-op without a window or once it was closed)."""
        if self.viewer is None or not self.viewer.is_running():
            return
        with self.viewer.lock():
            self.data.qpos[:] = qpos
            mujoco.mj_forward(self.model, self.data)
        self.viewer.sync()

    def close(self) -> None:
        if self.viewer is not None:
            self.viewer.close()
            self.viewer = None


def warn_once(message: str, _seen: set[str] = set()) -> None:  # noqa: B006 (a process-wide memo)
    """Issue a gymnasium-style UserWarning once per process per message."""
    if message not in _seen:
        _seen.add(message)
        warnings.warn(message, UserWarning, stacklevel=3)
