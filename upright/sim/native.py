"""Native MuJoCo backend: N envs on ``mujoco.batch.Batch``, stepped by a C thread pool without the GIL.

The hot path is one C call per env step (``Batch.step(nstep=decimation)``): no per-env Python work.
State rows live in numpy arrays owned by the batch; :attr:`NativeSim.state` converts them to
float32 torch tensors once per step.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch
from mujoco import batch as mj_batch

from upright.sim.base import BatchedSim, SimState


class NativeSim(BatchedSim):
    """Batched native MuJoCo (CPU).

    Args:
        model: compiled scene.
        num_envs: number of envs N.
        num_threads: worker threads (including the caller's); 0 uses every CPU.
        device: torch device for the state tensors (CPU tensors are copied there once per step).
    """

    def __init__(self, model: mujoco.MjModel, num_envs: int, num_threads: int = 0, device: str | torch.device = "cpu"):
        super().__init__(model, num_envs, device)
        # persistent=True keeps one MjData per env so that the stage computed after a step is
        # reused by the next step (no recomputation), and every bound field is per env.
        self._batch = mj_batch.Batch(model, num_envs, nthread=num_threads, persistent=True)
        self.num_threads = self._batch.nthread
        """Threads actually used."""
        b = self._batch
        self._qpos, self._qvel, self._ctrl = b.bind("qpos"), b.bind("qvel"), b.bind("ctrl")
        self._act, self._warm = b.bind("act"), b.bind("qacc_warmstart")
        self._sensordata, self._site_xpos = b.bind("sensordata"), b.bind("site_xpos")
        self._actuator_force = b.bind("actuator_force")
        self._time = b.bind("time")
        self._xfrc = b.bind("xfrc_applied")
        b.reset(stage=mujoco.mjtStage.mjSTAGE_VEL)
        self._refresh()

    @property
    def state(self) -> SimState:
        return self._state

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.asarray(array, dtype=np.float32)).to(self.device)

    def _refresh(self) -> None:
        self._state = SimState(
            qpos=self._tensor(self._qpos),
            qvel=self._tensor(self._qvel),
            sensordata=self._tensor(self._sensordata),
            site_xpos=self._tensor(self._site_xpos),
            actuator_force=self._tensor(self._actuator_force),
        )

    def step(self, ctrl: torch.Tensor, nsubsteps: int) -> None:
        per_substep = self._substep_ctrl(ctrl, nsubsteps)
        if per_substep is None:  # the hot path: one C call for all substeps
            self._ctrl[:] = ctrl.detach().to("cpu", torch.float64).numpy()
            self._batch.step(nstep=nsubsteps, stage=mujoco.mjtStage.mjSTAGE_VEL)
        else:
            controls = per_substep.detach().to("cpu", torch.float64).numpy()
            for k in range(nsubsteps):
                self._ctrl[:] = controls[k]
                self._batch.step(nstep=1, stage=mujoco.mjtStage.mjSTAGE_VEL)
        self._refresh()

    def set_body_wrench(self, body_ids: list[int], wrench: torch.Tensor) -> None:
        self._xfrc[:, list(body_ids)] = wrench.detach().to("cpu", torch.float64).numpy()

    def reset_envs(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        ids = env_ids.detach().to("cpu", torch.int64).numpy()
        if ids.size == 0:
            return
        self._batch.reset(ids, stage=mujoco.mjtStage.mjSTAGE_NONE)
        self._qpos[ids] = qpos.detach().to("cpu", torch.float64).numpy()
        self._qvel[ids] = qvel.detach().to("cpu", torch.float64).numpy()
        self._batch.forward(ids, stage=mujoco.mjtStage.mjSTAGE_VEL)
        self._refresh()

    def model_field(self, name: str) -> torch.Tensor:
        """Per-env view (N, ...) of model field ``name`` (zero-copy on CPU: writes apply at the next step).

        Raises:
            ValueError: the field cannot vary per env (MuJoCo's message lists the valid ones).
        """
        return torch.from_numpy(self._batch.expand(name))

    def set_model_field(self, name: str, env_ids: torch.Tensor, values: torch.Tensor) -> None:
        """Write rows ``env_ids`` of :meth:`model_field` (float64, in place; no ``set_const``, see the base class).

        ``body_ipos`` also moves the bodies' bounding volumes with their inertial frames (see
        :meth:`_move_body_bvh`), so write it with this method rather than through :meth:`model_field`.
        """
        field = self._batch.expand(name)
        ids = env_ids.detach().to("cpu", torch.int64).numpy()
        new = np.broadcast_to(values.detach().to("cpu", torch.float64).numpy(), field[ids].shape)
        if name == "body_ipos":
            self._move_body_bvh(ids, new - field[ids])
        field[ids] = new

    def _move_body_bvh(self, ids: np.ndarray, delta: np.ndarray) -> None:
        """Shift the bounding-volume centres of bodies whose COM (``body_ipos``) moved by ``delta`` (M, nbody, 3).

        MuJoCo stores each body's bounding-volume tree (``bvh_aabb``, used by the broadphase and midphase
        to cull geom pairs) in the body's inertial frame, which ``body_ipos`` places; ``mj_setConst`` would
        recompute it, a per-env write does not. Left stale, a 0.1 m COM offset shifts the torso's boxes
        0.1 m away from its geoms and floor contacts are culled (measured: 0.74 rad/s of qvel in one
        substep of a lying G1). MJX's collision pipeline does not use these boxes.
        """
        m = self.model
        moved = np.nonzero(np.abs(delta).max(axis=(0, 2)) > 0)[0]
        moved = [int(b) for b in moved if m.body_bvhnum[b] > 0]
        if not moved:
            return
        aabb = self._batch.expand("bvh_aabb")
        rot = np.zeros(9)
        for b in moved:
            mujoco.mju_quat2Mat(rot, m.body_iquat[b])
            adr, num = int(m.body_bvhadr[b]), int(m.body_bvhnum[b])
            shift = delta[:, b] @ rot.reshape(3, 3)  # R^T·Δ per env: Δ in the inertial frame
            aabb[ids, adr : adr + num, :3] -= shift[:, None, :]

    def close(self) -> None:
        self._batch = None  # type: ignore[assignment]
