"""The ``rgb`` observation group rendered by MuJoCo Warp's batch ray tracer (``env.camera.backend=warp``).

MuJoCo Warp (github.com/google-deepmind/mujoco_warp, ``mujoco_warp/_src/render.py``) ray-traces every world of a
batch in one kernel launch against BVHs of the scene's geoms and meshes, so on a GPU the cost of N envs' images is
one launch instead of N OpenGL draws. It runs on Warp's CPU device too (LLVM-compiled kernels), which is how this
module is tested on a machine without a GPU; there it is slower than MuJoCo's OpenGL renderer
(``benchmarks/bench_lift_env.py`` measures both).

The images are not pixel-identical to :class:`~upright.tasks.lift.camera.CameraRenderer`'s: a ray tracer with
MuJoCo Warp's shading model against OpenGL's rasteriser (both without shadows, reflections or skybox). Train and
evaluate a vision policy with one backend (set ``env.camera.backend`` explicitly), as with any change of renderer.

Needs ``mujoco-warp`` (``pip install "upright[warp]"``), which brings ``warp-lang``.
"""

from __future__ import annotations

import mujoco
import torch

from upright.robots import panda


def _import_warp():
    """(warp, mujoco_warp), with Warp's device banner off (set before mujoco_warp initialises Warp).

    Raises:
        ImportError: mujoco-warp or warp-lang is not installed.
    """
    import warp as wp

    wp.config.quiet = True
    import mujoco_warp as mjw

    return wp, mjw


class WarpCameraRenderer:
    """Renders the configured cameras of every env in one MuJoCo Warp batch.

    The render context is built at the first :meth:`render` for that call's number of envs N (and rebuilt if N
    changes); building it compiles Warp kernels once per machine (cached in Warp's kernel cache).

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
        try:
            wp, mjw = _import_warp()
        except ImportError as err:
            raise RuntimeError(
                f"env.camera.backend=warp needs mujoco-warp ({err}); pip install 'upright[warp]', "
                "or use env.camera.backend=opengl"
            ) from err
        self._mjw, self._wp = mjw, wp
        self.model = model
        self.cameras = list(cfg.cameras)
        self.width, self.height = int(cfg.width), int(cfg.height)
        self.device = str(wp.get_device(device))
        """Warp device the batch renders on."""
        self._mocap = int(model.body_mocapid[model.body(panda.TARGET_BODY).id])
        self._n = 0
        with wp.ScopedDevice(self.device):
            self._m = mjw.put_model(model)

    def _build(self, n: int) -> None:
        """(Re)allocate the batch data, render context and output buffer for ``n`` envs."""
        mjw, wp = self._mjw, self._wp
        data = mujoco.MjData(self.model)
        mujoco.mj_kinematics(self.model, data)
        with wp.ScopedDevice(self.device):
            self._d = mjw.put_data(self.model, data, nworld=n)
            self._rc = mjw.create_render_context(
                self.model,
                nworld=n,
                cam_res=(self.width, self.height),
                render_rgb=True,
                render_depth=False,
                cam_active=self.cameras,
                use_shadows=False,
                render_skybox=False,
            )
            self._rgb = wp.zeros((n, self.height, self.width), dtype=wp.vec3f)
        self._n = n

    def render(self, sim, target_pos: torch.Tensor | None = None) -> torch.Tensor:
        """(N, C, H, W, 3) uint8 images of the C cameras in every env of ``sim`` at its current state, on ``sim``'s
        torch device; the target marker is drawn at ``target_pos`` (N, 3) m (world frame) when given."""
        wp = self._wp
        qpos = sim.state.qpos.detach()
        n = qpos.shape[0]
        if n != self._n:
            self._build(n)
        with wp.ScopedDevice(self.device):
            self._d.qpos.assign(qpos.to("cpu", torch.float32).numpy())
            if target_pos is not None and self._mocap >= 0:
                mocap = self._d.mocap_pos.numpy()
                mocap[:, self._mocap] = target_pos.detach().to("cpu", torch.float32).numpy()
                self._d.mocap_pos.assign(mocap)
            self._mjw.kinematics(self._m, self._d)
            self._mjw.camlight(self._m, self._d)
            self._mjw.refit_bvh(self._m, self._d, self._rc)
            self._mjw.render(self._m, self._d, self._rc)
            images = []
            for c in range(len(self.cameras)):
                self._mjw.get_rgb(self._rc, c, self._rgb)
                rgb = wp.to_torch(self._rgb)  # (N, H, W, 3) float32 in [0, 1], on the Warp device, no copy
                images.append((rgb.clamp(0.0, 1.0) * 255.0).round().to(torch.uint8))
        return torch.stack(images, dim=1).to(qpos.device)

    def close(self) -> None:
        """Drop the device buffers."""
        self._d = self._rc = self._rgb = None
        self._n = 0
