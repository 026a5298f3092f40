"""The ``rgb`` observation group rendered by MuJoCo Warp's batch ray tracer (``env.camera.backend=warp``).

The batch renderer is :class:`upright.sim.warp_render.WarpBatchRenderer` (all envs in one launch; its module says how
it differs from OpenGL). This adds the lift scene's one specific: the target marker (a mocap body) is drawn at each
env's target. Frames are not pixel-identical to :class:`~upright.tasks.lift.camera.CameraRenderer`'s (a ray tracer
against OpenGL's rasteriser, both without shadows, reflections or skybox): train and evaluate a vision policy with one
backend (set ``env.camera.backend`` explicitly), as with any change of renderer.

Needs ``mujoco-warp`` (``pip install "upright[warp]"``), which brings ``warp-lang``.
"""

from __future__ import annotations

import mujoco
import torch

from upright.robots import panda
from upright.sim.warp_render import WarpBatchRenderer


class WarpCameraRenderer:
    """Renders the configured cameras of every env of the lift scene in one MuJoCo Warp batch.

    Args:
        model: the lift scene.
        cfg: ``env.camera`` (:class:`~upright.tasks.lift.config.LiftCameraCfg`): size and cameras; already checked by
            :func:`~upright.tasks.lift.camera.check_camera_cfg`.
        device: Warp device (``"cuda:0"``, ``"cpu"``); default: Warp's preferred device (CUDA when present).

    Raises:
        RuntimeError: ``mujoco-warp`` is not installed (the message names the extra to install, or
            ``env.camera.backend=opengl``).
    """

    def __init__(self, model: mujoco.MjModel, cfg, device: str | None = None):
        self._batch = WarpBatchRenderer(
            model, list(cfg.cameras), int(cfg.width), int(cfg.height), device=device, option="env.camera.backend"
        )
        self.model, self.cameras = model, self._batch.cameras
        self.width, self.height, self.device = self._batch.width, self._batch.height, self._batch.device
        self._mocap = int(model.body_mocapid[model.body(panda.TARGET_BODY).id])

    def render(self, sim, target_pos: torch.Tensor | None = None) -> torch.Tensor:
        """(N, C, H, W, 3) uint8 images of the C cameras in every env of ``sim`` at its current state, on ``sim``'s
        torch device; the target marker is drawn at ``target_pos`` (N, 3) m (world frame) when given."""
        mocap = {self._mocap: target_pos} if target_pos is not None and self._mocap >= 0 else None
        return self._batch.render(sim.state.qpos, mocap)

    def close(self) -> None:
        """Drop the device buffers."""
        self._batch.close()
