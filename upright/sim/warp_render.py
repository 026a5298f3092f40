"""Camera frames of every env in one MuJoCo Warp batch: the one Warp renderer that the lift task's ``rgb`` observation
group (:mod:`upright.tasks.lift.camera_warp`) and the frame-based reward terms (:mod:`upright.managers.batch_render`)
both use.

MuJoCo Warp (github.com/google-deepmind/mujoco_warp, ``mujoco_warp/_src/render.py``) ray-traces every world of a batch
in one kernel launch against BVHs of the scene's geoms and meshes, so on a GPU the cost of N envs' frames is one launch
instead of N OpenGL draws. It runs on Warp's CPU device too (LLVM-compiled kernels), which is how it is tested on a
machine without a GPU; there it is slower than MuJoCo's OpenGL renderer (``benchmarks/bench_lift_env.py`` measures
both). Frames are not pixel-identical to OpenGL's: a ray tracer with MuJoCo Warp's shading model against a rasteriser.

Only ``qpos`` (and, when given, mocap positions) are read from the simulator. Positions, camera poses and lights are
recomputed from them (``kinematics``, ``camlight``, and ``com_pos`` when a camera follows a centre of mass, as the
G1's ``tracking`` camera does). Shadows and the skybox are off unless ``effects`` is set.

Needs ``mujoco-warp`` (``pip install "upright[warp]"``), which brings ``warp-lang``.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import torch


class WarpBatchRenderer:
    """Renders ``cameras`` in every env in one MuJoCo Warp batch.

    The render context is built at the first :meth:`render` for that call's number of envs N (and rebuilt if N
    changes); building it compiles Warp kernels once per machine (cached in Warp's kernel cache).

    Args:
        model: the compiled scene the simulator runs (its cameras are checked by the caller).
        cameras: names of the C cameras to render, in output order.
        width, height: frame size, px.
        effects: draw shadows and the skybox.
        device: Warp device (``"cuda:0"``, ``"cpu"``); default: Warp's preferred device (CUDA when present).
        option: the config key that chose this backend, named in the install error (e.g. ``env.camera.backend``).

    Raises:
        RuntimeError: ``mujoco-warp`` is not installed (one line naming the extra to install, or ``<option>=opengl``).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        cameras: Sequence[str],
        width: int,
        height: int,
        effects: bool = False,
        device: str | None = None,
        option: str = "backend",
    ):
        try:
            import warp as wp

            wp.config.quiet = True  # before mujoco_warp initialises Warp: no device banner
            import mujoco_warp as mjw
        except ImportError as err:
            raise RuntimeError(
                f"{option}=warp needs mujoco-warp ({err}); pip install 'upright[warp]', or use {option}=opengl"
            ) from err
        self._wp, self._mjw = wp, mjw
        self.model = model
        self.cameras = [str(c) for c in cameras]
        self.width, self.height, self.effects = int(width), int(height), bool(effects)
        self.device = str(wp.get_device(device))
        """Warp device the batch renders on."""
        com_modes = (mujoco.mjtCamLight.mjCAMLIGHT_TRACKCOM, mujoco.mjtCamLight.mjCAMLIGHT_TARGETBODYCOM)
        self._needs_com = any(int(model.cam_mode[model.camera(c).id]) in {int(m) for m in com_modes} for c in cameras)
        """A camera follows a subtree's centre of mass, so each frame needs ``com_pos`` (others skip it)."""
        self._n = 0
        with wp.ScopedDevice(self.device):
            self._m = mjw.put_model(model)

    def _build(self, n: int) -> None:
        """(Re)allocate the batch data, render context and output buffer for ``n`` envs."""
        wp, mjw = self._wp, self._mjw
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
                use_shadows=self.effects,
                render_skybox=self.effects,
            )
            self._rgb = wp.zeros((n, self.height, self.width), dtype=wp.vec3f)
        self._n = n

    def render(self, qpos: torch.Tensor, mocap: dict[int, torch.Tensor] | None = None) -> torch.Tensor:
        """Frames of every env at ``qpos``.

        Args:
            qpos: (N, nq) joint positions (any float dtype, any torch device).
            mocap: optional {mocap index: (N, 3) world position, m} of mocap bodies to move before rendering (e.g.
                the lift target marker); other mocap bodies stay where the model puts them.

        Returns:
            (N, C, H, W, 3) uint8 RGB frames, on ``qpos``'s device.
        """
        wp, mjw = self._wp, self._mjw
        qpos = qpos.detach()
        if qpos.shape[0] != self._n:
            self._build(qpos.shape[0])
        with wp.ScopedDevice(self.device):
            self._d.qpos.assign(qpos.to("cpu", torch.float32).numpy())
            if mocap:
                pos = self._d.mocap_pos.numpy()
                for index, value in mocap.items():
                    pos[:, index] = value.detach().to("cpu", torch.float32).numpy()
                self._d.mocap_pos.assign(pos)
            mjw.kinematics(self._m, self._d)
            if self._needs_com:
                mjw.com_pos(self._m, self._d)
            mjw.camlight(self._m, self._d)
            mjw.refit_bvh(self._m, self._d, self._rc)
            mjw.render(self._m, self._d, self._rc)
            frames = []
            for c in range(len(self.cameras)):
                mjw.get_rgb(self._rc, c, self._rgb)
                rgb = wp.to_torch(self._rgb)  # (N, H, W, 3) float32 in [0, 1] on the Warp device, no copy
                frames.append((rgb.clamp(0.0, 1.0) * 255.0).round().to(torch.uint8))
        return torch.stack(frames, dim=1).to(qpos.device)

    def close(self) -> None:
        """Drop the device buffers."""
        self._d = self._rc = self._rgb = None
        self._n = 0
