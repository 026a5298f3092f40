"""MuJoCo Warp backend (``sim.backend=warp``): N envs as the N worlds of one ``mujoco_warp`` model, stepped by Warp
kernels, the state shared with torch without going through the host.

- **Zero-copy tensors.** Every buffer the task touches (``qpos``, ``qvel``, ``ctrl``, ``xfrc_applied``, the per-env
  model fields, ...) is a Warp array viewed as a torch tensor with ``wp.to_torch`` (same memory, CPU or CUDA).
  Controls are written into Warp's ``ctrl`` in place. :attr:`WarpSim.state` is a device-side snapshot (one clone of
  each state tensor per step, taken when first read) because Warp updates its arrays in place, and the
  :class:`~upright.sim.base.SimState` contract is that tensors kept from an earlier step keep their values.
- **Graphs.** Each operation (``nsubsteps`` physics steps, a reset, the state refresh) is captured once as a graph
  and replayed with one launch. On CUDA it is a CUDA graph launched on torch's current stream, so torch's writes
  before it and reads after it are ordered without a host sync. Warp 1.19 captures and replays CPU graphs too: on
  the CPU the same captured path runs (identical results to one-by-one launches, 7x faster for 4 G1 envs on 2
  cores, as Python no longer dispatches every kernel); ``graph=False`` / ``UPRIGHT_WARP_GRAPH=0`` launches kernels
  one by one. The tests run both paths.
- **Stepping.** One physics step is ``mjw.step2`` (actuation, acceleration, constraint solve, acceleration-stage
  sensors, integration) followed by the position/velocity stages and sensors at the new state, so after
  ``nsubsteps`` steps the state, sites and position/velocity sensors are current, as on the native backend
  (``stage=mjSTAGE_VEL``), with no extra pass; acceleration-stage sensors (contact, accelerometer) and
  ``actuator_force`` are those of the last substep. ``rk4`` uses ``mjw.step`` and one refresh after the substeps.
- **Per-env model fields** (:data:`~upright.sim.base.PER_ENV_FIELDS` and ``extra_fields``) are model arrays with a
  leading dimension of N (``put_model(batch_sizes=...)``); writes through :meth:`WarpSim.set_model_field` (or the
  live view :meth:`WarpSim.model_field`) apply at the next step, no recompilation or recapture.
- **Contact and constraint buffers** are sized per world: ``nconmax`` contacts (pooled over the N worlds, as
  ``naconmax`` = N x nconmax, which also bounds the broadphase's candidate pairs) and ``njmax`` constraint rows
  (a hard limit per world). After every step and reset the backend reads Warp's per-world overflow flags and the
  counters themselves (``nacon``, ``ncollision``, ``nefc``): an overflow raises :class:`WarpOverflowError` (or warns,
  ``overflow="warn"``) naming the variable to raise; contacts are never dropped silently. Warp's own in-kernel
  prints are turned off in favour of that one message.

Physics runs in float32 (the native backend in float64); ``tests/sim/test_sim_warp.py`` states how closely the two
agree. Warp compiles its kernels at the first step of a process that has not compiled them before (about 25 s for
the G1 scene on 2 CPU cores) and caches them on disk (``~/.cache/warp``).

Needs ``mujoco-warp`` (``pip install -e ".[warp]"``), which brings ``warp-lang``.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable

import mujoco
import numpy as np
import torch
import warp as wp

# No banner or per-module "load took" lines (set before mujoco_warp initialises Warp): Warp >= 1.19 logs by level,
# earlier ones had `quiet`.
if hasattr(wp, "LOG_WARNING"):
    wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)
else:
    wp.config.quiet = True
import mujoco_warp as mjw
from mujoco_warp._src import types as _mjw_types
from mujoco_warp._src import warp_util as _mjw_util

from upright.sim.base import PER_ENV_FIELDS, BatchedSim, SimState

NCONMAX_PER_ENV = 128
"""Default contact slots per env. Native StandupEnv rollouts with random actions peaked at 46 contacts per env
(prone on the ground; 27-37 on platform, wall and slope); the slots also hold the broadphase's candidate pairs."""
NJMAX_PER_ENV = 512
"""Default constraint rows per env (4 per pyramidal condim-3 contact, plus joint limits): native peak 187."""
NCONMAX_ENV_VAR = "UPRIGHT_WARP_NCONMAX"
"""Environment variable: contact slots per env (overrides :data:`NCONMAX_PER_ENV`)."""
NJMAX_ENV_VAR = "UPRIGHT_WARP_NJMAX"
"""Environment variable: constraint rows per env (overrides :data:`NJMAX_PER_ENV`)."""
OVERFLOW_ENV_VAR = "UPRIGHT_WARP_OVERFLOW"
"""Environment variable: ``error`` (default) or ``warn`` on a buffer overflow."""
GRAPH_ENV_VAR = "UPRIGHT_WARP_GRAPH"
"""Environment variable: ``0`` launches kernels one by one instead of replaying captured graphs (``1``: the
default)."""

_OT = _mjw_types.OverflowType
_OVERFLOW_FIXES: dict[int, str] = {
    int(_OT.NEFC): f"constraint rows above njmax per env: raise {NJMAX_ENV_VAR}",
    int(_OT.NJMAX_NNZ): f"constraint Jacobian non-zeros above njmax_nnz: raise {NJMAX_ENV_VAR}",
    int(_OT.BROADPHASE): f"broadphase candidate pairs above N x nconmax: raise {NCONMAX_ENV_VAR}",
    int(_OT.NARROWPHASE): f"contacts above N x nconmax: raise {NCONMAX_ENV_VAR}",
    int(_OT.CCD): f"convex-collision contacts above N x nconmax: raise {NCONMAX_ENV_VAR}",
    int(_OT.HFIELD): "height-field collisions above MuJoCo Warp's limit: coarsen the height field",
    int(_OT.CONTACT_MATCH): "contact-sensor matches above the limit (64): raise the scene's numeric "
    '"contact_sensor_maxmatch"',
    int(_OT.NVMAX): "active DOFs above nvmax (sleeping islands): disable sleep",
    int(_OT.EPA_HORIZON): "EPA horizon buffer overflow (convex collisions): simplify the colliding meshes",
    int(_OT.TACTILE): "tactile-sensor pairs overflow: reduce the tactile sensors",
}
"""Buffer overflows that lose contacts or constraints, with the fix. ``ITERATIONS``/``LS_ITERATIONS`` (the solver
stopped at its iteration cap, as C MuJoCo does every step it has not converged) are not buffer overflows."""
_OVERFLOW_MASK = sum(_OVERFLOW_FIXES)


class WarpOverflowError(RuntimeError):
    """A MuJoCo Warp contact or constraint buffer overflowed: contacts or constraint rows were dropped."""


class WarpOverflowWarning(RuntimeWarning):
    """As :class:`WarpOverflowError`, with ``overflow="warn"``."""


def batchable_fields() -> tuple[str, ...]:
    """``MjModel`` fields that MuJoCo Warp can hold per world (its ``Model`` arrays with a leading ``*`` dimension)."""
    out = []
    for f in dataclasses.fields(_mjw_types.Model):
        shape = getattr(f.type, "shape", ()) if _mjw_util.is_array_spec(f.type) else ()
        if shape and shape[0] == "*":
            out.append(f.name)
    return tuple(out)


def _setting(value, env_var: str, default, parse: Callable, what: str):
    """``value`` if given, else ``$env_var`` if set, else ``default``; parsed and checked by ``parse``."""
    source = "argument"
    if value is None:
        raw = os.environ.get(env_var, "").strip()
        value, source = (raw, env_var) if raw else (default, "default")
    try:
        return parse(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} from {source} must be {parse.__doc__}, got {value!r}; set {env_var}") from None


def _positive_int(v) -> int:
    """a positive integer"""
    if isinstance(v, (bool, float)) or int(v) <= 0:
        raise ValueError
    return int(v)


def _overflow_mode(v) -> str:
    """'error' or 'warn'"""
    if str(v).lower() not in ("error", "warn"):
        raise ValueError
    return str(v).lower()


def _flag(v) -> bool | None:
    """1, 0 or unset"""
    if v is None or isinstance(v, bool):
        return v
    if str(v) not in ("0", "1"):
        raise ValueError
    return str(v) == "1"


def warp_device_for(device: torch.device) -> str:
    """The Warp device name for a torch device: ``cpu`` -> ``cpu``, ``cuda[:k]`` -> ``cuda:k``.

    Raises:
        RuntimeError: a CUDA torch device but Warp sees no CUDA device (driver or warp-lang build).
        ValueError: another device type.
    """
    if device.type == "cpu":
        return "cpu"
    if device.type == "cuda":
        if not wp.is_cuda_available():
            raise RuntimeError(
                f"sim.backend=warp on {device}: Warp sees no CUDA device (check the driver), or use device=cpu"
            )
        return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"
    raise ValueError(f"sim.backend=warp supports cpu and cuda torch devices, got {device}")


class WarpSim(BatchedSim):
    """Batched MuJoCo Warp: N worlds of one model, on Warp's CPU or CUDA device.

    Args:
        model: compiled scene.
        num_envs: number of envs N.
        device: torch device of the state tensors; Warp runs on the same device (:func:`warp_device_for`).
        extra_fields: model fields beyond :data:`PER_ENV_FIELDS` to hold per env (any of :func:`batchable_fields`).
        nconmax: contact slots per env (default ``$UPRIGHT_WARP_NCONMAX`` or :data:`NCONMAX_PER_ENV`).
        njmax: constraint rows per env (default ``$UPRIGHT_WARP_NJMAX`` or :data:`NJMAX_PER_ENV`).
        overflow: ``"error"`` (raise :class:`WarpOverflowError`) or ``"warn"`` on a buffer overflow (default
            ``$UPRIGHT_WARP_OVERFLOW`` or ``"error"``).
        graph: replay each operation as a captured graph (default ``$UPRIGHT_WARP_GRAPH``, else True); on a CPU whose
            Warp cannot capture, it falls back to one-by-one launches with a warning.

    Raises:
        ValueError: bad sizes, mode or device, or an ``extra_fields`` entry MuJoCo Warp cannot hold per world (the
            message names the fix).
        NotImplementedError: the model uses a feature MuJoCo Warp does not support (its own message).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        num_envs: int,
        device: str | torch.device = "cpu",
        extra_fields: tuple[str, ...] = (),
        nconmax: int | None = None,
        njmax: int | None = None,
        overflow: str | None = None,
        graph: bool | None = None,
    ):
        super().__init__(model, num_envs, device)
        self.per_env_fields = (*PER_ENV_FIELDS, *(f for f in extra_fields if f not in PER_ENV_FIELDS))
        """Fields held per env (:data:`PER_ENV_FIELDS` and the ``extra_fields`` asked for)."""
        bad = [f for f in self.per_env_fields if f not in batchable_fields()]
        if bad:
            raise ValueError(f"MuJoCo Warp cannot vary {bad} per env; drop them from extra_fields")
        self.nconmax = _setting(nconmax, NCONMAX_ENV_VAR, NCONMAX_PER_ENV, _positive_int, "nconmax")
        """Contact slots per env (``naconmax`` = N x this, pooled over the worlds)."""
        self.njmax = _setting(njmax, NJMAX_ENV_VAR, NJMAX_PER_ENV, _positive_int, "njmax")
        """Constraint rows per env."""
        self.overflow = _setting(overflow, OVERFLOW_ENV_VAR, "error", _overflow_mode, "overflow")
        """``error`` or ``warn``: what a buffer overflow does."""
        self.wp_device = wp.get_device(warp_device_for(self.device))
        """Warp device the physics runs on."""
        forced = _setting(graph, GRAPH_ENV_VAR, None, _flag, "graph")
        self.use_graph = True if forced is None else forced
        """Whether operations run as captured graphs (CUDA graphs on a GPU)."""
        if self.use_graph and self.wp_device.is_cuda and not wp.is_mempool_enabled(self.wp_device):
            raise ValueError(
                f"CUDA graphs need Warp's memory pool on {self.wp_device}: "
                f"wp.set_mempool_enabled('{self.wp_device}', True), or set {GRAPH_ENV_VAR}=0"
            )
        n = num_envs
        with wp.ScopedDevice(self.wp_device):
            self._m = mjw.put_model(model, batch_sizes=dict.fromkeys(self.per_env_fields, n))
            self._m.opt.warn_overflow = 0  # overflows are reported by _check_overflow, once, with the fix
            self._d = mjw.put_data(model, mujoco.MjData(model), nworld=n, nconmax=self.nconmax, njmax=self.njmax)
            self._reset_mask = wp.zeros(n, dtype=bool)
        d, view = self._d, wp.to_torch
        self._qpos, self._qvel, self._ctrl, self._xfrc = view(d.qpos), view(d.qvel), view(d.ctrl), view(d.xfrc_applied)
        self._sensordata, self._site_xpos = view(d.sensordata), view(d.site_xpos)
        self._actuator_force, self._overflow = view(d.actuator_force), view(d.overflow)
        self._nacon, self._ncollision, self._nefc = view(d.nacon), view(d.ncollision), view(d.nefc)
        self._mask = view(self._reset_mask)
        self._fields = {f: view(getattr(self._m, f)).view(n, *np.shape(getattr(model, f))) for f in self.per_env_fields}
        self._graphs: dict[tuple, wp.Graph] = {}
        self._streams: dict[int, wp.Stream] = {}
        self._state: SimState | None = None
        # Load (compile on first use) every kernel the operations launch, before any graph is captured (a capture
        # cannot load modules); the state this leaves is overwritten by the reset below.
        for op in (("refresh",), ("advance", 1), ("reset",)):
            self._launch(op, plain=True)
        # every row starts at qpos0, zero velocity, with its pos/vel stages current (as the native backend)
        self.reset_envs(torch.arange(n), torch.as_tensor(model.qpos0).expand(n, -1), torch.zeros(n, model.nv))

    # ------------------------------------------------------------------ operations
    def _refresh_stages(self) -> None:
        """Position and velocity stages and their sensors at the current state (acceleration sensors untouched)."""
        m, d = self._m, self._d
        mjw.fwd_position(m, d, factorize=True)  # factorize: step2 solves with this M factor
        mjw.sensor_pos(m, d)
        mjw.fwd_velocity(m, d)
        mjw.sensor_vel(m, d)

    def _ops(self, op: tuple) -> None:
        """Issue the Warp launches of operation ``op`` (on the current Warp device and stream)."""
        m, d = self._m, self._d
        if op[0] == "advance":
            if m.opt.integrator == int(mujoco.mjtIntegrator.mjINT_RK4):  # step2 would integrate with Euler
                for _ in range(op[1]):
                    mjw.step(m, d)
                self._refresh_stages()
                return
            for _ in range(op[1]):  # the stages of the state the step starts from are current
                mjw.step2(m, d)
                self._refresh_stages()
        elif op[0] == "reset":
            mjw.reset_data(m, d, reset=self._reset_mask)
        elif op[0] == "refresh":
            self._refresh_stages()
        else:
            raise ValueError(f"unknown operation {op}")

    def _torch_stream(self) -> wp.Stream:
        """Torch's current CUDA stream on this device, as a Warp stream (cached by handle)."""
        ts = torch.cuda.current_stream(self.device)
        if ts.cuda_stream not in self._streams:
            self._streams[ts.cuda_stream] = wp.stream_from_torch(ts)
        return self._streams[ts.cuda_stream]

    def _launch(self, op: tuple, plain: bool = False) -> None:
        """Run operation ``op``: its captured graph (captured at first use), or plain launches.

        On CUDA both run on torch's current stream, ordered after the torch writes that precede the call.
        """
        with wp.ScopedDevice(self.wp_device):
            if plain or not self.use_graph:
                if self.wp_device.is_cuda:
                    with wp.ScopedStream(self._torch_stream()):
                        self._ops(op)
                else:
                    self._ops(op)
                return
            graph = self._graphs.get(op)
            if graph is None:
                # captured on Warp's own stream (a capture cannot use the legacy default stream); replayed below on
                # torch's. A capture records launches without running them.
                try:
                    with wp.ScopedCapture(device=self.wp_device, force_module_load=False) as capture:
                        self._ops(op)
                except RuntimeError as err:
                    if self.wp_device.is_cuda:
                        raise
                    warnings.warn(
                        f"Warp cannot capture CPU graphs here ({err}); launching kernels one by one "
                        f"(set {GRAPH_ENV_VAR}=0 to skip this attempt)",
                        RuntimeWarning,
                        stacklevel=3,
                    )
                    self.use_graph = False
                    self._launch(op)
                    return
                graph = self._graphs[op] = capture.graph
            wp.capture_launch(graph, stream=self._torch_stream() if self.wp_device.is_cuda else None)

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> SimState:
        if self._state is None:
            self._state = SimState(
                qpos=self._qpos.clone(),
                qvel=self._qvel.clone(),
                sensordata=self._sensordata.clone(),
                site_xpos=self._site_xpos.clone(),
                actuator_force=self._actuator_force.clone(),
            )
        return self._state

    def step(self, ctrl: torch.Tensor, nsubsteps: int) -> None:
        per_substep = self._substep_ctrl(ctrl, nsubsteps)
        if per_substep is None:
            self._ctrl.copy_(ctrl.detach())
            self._launch(("advance", int(nsubsteps)))
        else:
            for k in range(nsubsteps):
                self._ctrl.copy_(per_substep[k].detach())
                self._launch(("advance", 1))
        self._state = None
        self._check_overflow()

    def set_body_wrench(self, body_ids: list[int], wrench: torch.Tensor) -> None:
        self._xfrc[:, list(body_ids)] = wrench.detach().to(self.device, torch.float32)

    def reset_envs(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """``mj_resetData`` of rows ``env_ids`` (M,) (Warp's ``reset_data``: controls, wrenches, warm start, time),
        then their qpos (M, nq) and qvel (M, nv); the position/velocity stages are recomputed for all rows (the other
        rows' state is unchanged)."""
        ids = env_ids.detach().to(self.device, torch.long)
        if ids.numel() == 0:
            return
        self._mask.zero_()
        self._mask[ids] = True
        self._launch(("reset",))
        self._qpos[ids] = qpos.detach().to(self.device, torch.float32)
        self._qvel[ids] = qvel.detach().to(self.device, torch.float32)
        self._actuator_force[ids] = 0.0
        self._launch(("refresh",))
        self._state = None
        self._check_overflow()

    # ------------------------------------------------------------------ buffers
    def _check_overflow(self) -> None:
        """Raise (or warn) if any world overflowed a contact or constraint buffer since its last reset.

        Reads Warp's per-world overflow flags (set at each step's time advance) and the counters themselves (the
        contact pool's ``nacon`` and broadphase ``ncollision`` against ``naconmax``, each world's ``nefc`` against
        ``njmax``), so an overflow in the collision pass of a reset or of the refresh after the last substep is caught
        too. One device-to-host read of a boolean per call (a sync on CUDA).
        """
        pool = self.num_envs * self.nconmax
        flags = self._overflow & _OVERFLOW_MASK
        rows_over = self._nefc > self.njmax
        contacts_over = self._nacon[0] > pool
        candidates_over = self._ncollision[0] > pool
        if not bool(flags.any() | rows_over.any() | contacts_over | candidates_over):
            return
        union = int(np.bitwise_or.reduce(flags.cpu().numpy()))
        union |= int(_OT.NEFC) * bool(rows_over.any()) | int(_OT.NARROWPHASE) * bool(contacts_over)
        union |= int(_OT.BROADPHASE) * bool(candidates_over)
        envs = ((flags != 0) | rows_over).nonzero().flatten().tolist()
        where = f"{len(envs)} of {self.num_envs} envs (e.g. env {envs[0]})" if envs else "the contact pool of all envs"
        fixes = "; ".join(fix for bit, fix in _OVERFLOW_FIXES.items() if union & bit)
        use = self.usage()
        msg = (
            f"MuJoCo Warp buffer overflow in {where}, contacts or constraints were dropped: {fixes} (now "
            f"nconmax={self.nconmax}, njmax={self.njmax}; {use['contacts']} contacts in all, up to "
            f"{use['max_constraint_rows']} rows in one env)"
        )
        if self.overflow == "error":
            raise WarpOverflowError(msg)
        warnings.warn(msg, WarpOverflowWarning, stacklevel=3)
        self._overflow.zero_()  # report again only if it happens again (the counters are recomputed every pass)

    def usage(self) -> dict[str, int]:
        """Buffer use at the current state: ``contacts`` (all envs, against ``naconmax`` = N x nconmax) and
        ``max_constraint_rows`` (the fullest env, against ``njmax``). Reads device memory (a sync on CUDA)."""
        return {
            "contacts": int(self._nacon[0]),
            "naconmax": self.num_envs * self.nconmax,
            "max_constraint_rows": int(self._nefc.max()),
            "njmax": self.njmax,
        }

    def contact_counts(self) -> torch.Tensor:
        """(N,) int64 number of contacts of each env at the current state (``mjData.ncon`` per env)."""
        count = min(int(self._nacon[0]), self.num_envs * self.nconmax)
        worlds = wp.to_torch(self._d.contact.worldid)[:count].long()
        return torch.bincount(worlds, minlength=self.num_envs)

    def constraint_rows(self) -> torch.Tensor:
        """(N,) int64 number of constraint rows of each env at the current state (``mjData.nefc`` per env)."""
        return self._nefc.long().clone()

    # ------------------------------------------------------------------ per-env model
    def model_field(self, name: str) -> torch.Tensor:
        """Live view (N, ...) of per-env model field ``name`` (float32, same shape per env as the ``MjModel`` field):
        writes apply at the next step.

        Raises:
            ValueError: ``name`` is not among :attr:`per_env_fields`.
        """
        if name not in self._fields:
            raise ValueError(
                f"'{name}' cannot vary per env on this Warp sim (per-env fields: "
                f"{', '.join(self.per_env_fields)}); pass it in make_sim(..., extra_fields=...)"
            )
        return self._fields[name]

    def close(self) -> None:
        self._graphs.clear()
        self._state = None
        self._fields = {}
        self._m = self._d = None  # type: ignore[assignment]
