"""MJX backend: N envs as one ``jax.vmap``-ed, ``jax.jit``-ed MuJoCo-MJX program, state handed to torch by DLPack.

One env step is one compiled call: ``nsubsteps`` physics steps with the control held
(``lax.fori_loop``), for all N envs at once. The state arrays it returns are wrapped as torch
tensors with DLPack (``torch.from_dlpack``), zero-copy on CPU and on a GPU, so nothing goes through
the host per step when JAX and torch share a CUDA device.

Implementation (:func:`choose_impl`): ``impl="warp"`` (MuJoCo Warp kernels, vendored by mujoco-mjx)
when ``warp-lang`` is installed and the envs live on a CUDA device, ``impl="jax"`` (pure JAX/XLA)
elsewhere. The JAX device follows the torch device: ``cpu`` -> JAX CPU, ``cuda:k`` -> JAX CUDA device k.

Physics runs in float32 (JAX's default); the native backend runs in float64. Both simulate the same
compiled ``MjModel`` (same contact set: see :mod:`upright.robots.g1`), and ``tests/test_sim_mjx.py``
states how closely their trajectories agree. The ``implicitfast`` integrator is :func:`_implicitfast`,
which treats force-saturated actuators as C MuJoCo does (``mjx.implicit`` does not).

After the ``nsubsteps`` physics steps the position/velocity stages are computed at the new state, so
``sensordata``, ``site_xpos`` etc. are current after a step (as on the native backend, which steps
with ``stage=mjSTAGE_VEL``).

Per-env model fields (:data:`PER_ENV_FIELDS`) are held as (N, ...) arrays in a vmapped model
(``in_axes=0`` for those fields, ``None`` for the rest), so domain randomisation writes them with
:meth:`MjxSim.set_model_field` without recompiling.

Compiling for the G1 takes ~20-40 s for the step and ~15-25 s for the reset program on a 2-core CPU
(per N); :func:`enable_compilation_cache` (called by :class:`MjxSim`) stores compiled programs on
disk so that later processes load them in a few seconds. Sims with the same model and N in one
process share the compiled programs.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import torch

with contextlib.redirect_stdout(io.StringIO()):  # mjx prints "Failed to import warp" when warp-lang is absent
    from mujoco import mjx
    from mujoco.mjx import warp as _mjx_warp
    from mujoco.mjx._src import forward as _mjx_forward  # _advance: the integrators' shared state update

from upright.sim.base import GEOMETRY_FIELDS, PER_ENV_FIELDS, BackendUnsupportedError, BatchedSim, SimState  # noqa: F401 (docs)

CACHE_ENV_VAR = "UPRIGHT_JAX_CACHE"
"""Environment variable: directory of JAX's persistent compilation cache; empty string disables it."""

IMPL_ENV_VAR = "UPRIGHT_MJX_IMPL"
"""Environment variable: force ``jax`` or ``warp`` instead of :func:`choose_impl`'s choice."""

NACON_PER_ENV = 256
"""Warp only: contact slots per env (``naconmax`` = N x this). The G1 scene has at most ~110 contacts."""
NJMAX_PER_ENV = 1024
"""Warp only: constraint rows per env (4 per pyramidal contact + joint limits)."""


def choose_impl(warp_installed: bool, cuda_device: bool) -> str:
    """Pick the MJX implementation: ``"warp"`` with warp-lang on a CUDA device, ``"jax"`` otherwise."""
    return "warp" if (warp_installed and cuda_device) else "jax"


def warp_installed() -> bool:
    """Whether MJX can use MuJoCo Warp here (``warp-lang`` importable)."""
    return importlib.util.find_spec("warp") is not None and bool(_mjx_warp.WARP_INSTALLED)


def default_impl(jax_device: jax.Device) -> str:
    """:func:`choose_impl` for this machine and ``jax_device``; ``UPRIGHT_MJX_IMPL`` overrides it."""
    forced = os.environ.get(IMPL_ENV_VAR, "").strip().lower()
    if forced:
        if forced not in ("jax", "warp"):
            raise ValueError(f"{IMPL_ENV_VAR} must be 'jax' or 'warp', got '{forced}'")
        return forced
    return choose_impl(warp_installed(), jax_device.platform == "gpu")


def enable_compilation_cache(path: str | os.PathLike | None = None) -> str | None:
    """Turn on JAX's persistent compilation cache, unless one is configured already.

    Args:
        path: cache directory; defaults to ``$UPRIGHT_JAX_CACHE`` or ``~/.cache/upright/jax``.
            An empty ``UPRIGHT_JAX_CACHE`` disables the cache.

    Returns:
        The cache directory in use, or None when disabled.
    """
    current = jax.config.jax_compilation_cache_dir
    if current:
        return current
    if path is None:
        env = os.environ.get(CACHE_ENV_VAR)
        if env is not None and env.strip() == "":
            return None
        path = env or Path.home() / ".cache" / "upright" / "jax"
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    return str(path)


def jax_device_for(device: torch.device) -> jax.Device:
    """The JAX device matching a torch device (``cpu`` or ``cuda:k``).

    Raises:
        RuntimeError: a CUDA torch device but JAX has no CUDA backend (install the CUDA extra).
        ValueError: another device type.
    """
    if device.type == "cpu":
        return jax.devices("cpu")[0]
    if device.type == "cuda":
        try:
            gpus = jax.devices("cuda")
        except RuntimeError as e:
            raise RuntimeError(
                f'sim.backend=mjx on {device} needs JAX with CUDA: pip install -e ".[cuda]" ({e})'
            ) from e
        return gpus[device.index or 0]
    raise ValueError(f"MJX backend supports cpu and cuda torch devices, got {device}")


def _to_jax(t: torch.Tensor, dtype: torch.dtype | None = None) -> jax.Array:
    """A private copy of ``t`` as a JAX array on the same device (DLPack; the copy owns its memory)."""
    t = t.detach()
    if dtype is not None:
        t = t.to(dtype)
    return jax.dlpack.from_dlpack(t.contiguous().clone())


def _posvel(mx: mjx.Model, d: mjx.Data) -> mjx.Data:
    """Position and velocity stages (kinematics, collisions, constraints, pos/vel sensors) at the current state."""
    d = mjx.fwd_position(mx, d)
    d = mjx.sensor_pos(mx, d)
    d = mjx.fwd_velocity(mx, d)
    return mjx.sensor_vel(mx, d)


def _implicitfast(mx: mjx.Model, d: mjx.Data) -> mjx.Data:
    """MuJoCo's ``implicitfast`` integrator, as the C engine computes it.

    Same as ``mjx.implicit`` except that, like C MuJoCo's ``mjd_actuator_vel``, an actuator whose force
    is clamped by its ``forcerange`` adds no velocity derivative (its force does not depend on the
    velocity then). ``mjx.implicit`` keeps Kd of saturated actuators in the implicit damping, which
    moves a saturated G1 joint by up to ~20 rad/s per step away from the native backend.
    """
    qderiv = jnp.zeros((mx.nv, mx.nv), dtype=d.qvel.dtype)
    if not mx.opt.disableflags & mjx.DisableBit.ACTUATION and mx.nu:
        bias_vel = mx.actuator_biasprm[:, 2] * (mx.actuator_biastype == mjx.BiasType.AFFINE)
        gain_vel = mx.actuator_gainprm[:, 2] * (mx.actuator_gaintype == mjx.GainType.AFFINE)
        ctrl = d.ctrl
        if mx.na:
            ctrl = ctrl.at[mx.actuator_dyntype != mjx.DynType.NONE].set(d.act)
        vel = bias_vel + gain_vel * ctrl
        force, lo, hi = d.actuator_force, mx.actuator_forcerange[:, 0], mx.actuator_forcerange[:, 1]
        clamped = jnp.asarray(mx.actuator_forcelimited, dtype=bool) & ((force <= lo) | (force >= hi))
        vel = jnp.where(clamped, 0.0, vel)
        moment = d._impl.actuator_moment
        qderiv = moment.T @ (moment * vel[:, None])
    if not mx.opt.disableflags & mjx.DisableBit.DAMPER:
        qderiv = qderiv - jnp.diag(mx.dof_damping)
        if mx.ntendon:
            qderiv = qderiv - d._impl.ten_J.T @ jnp.diag(mx.tendon_damping) @ d._impl.ten_J
    qm = mjx.full_m(mx, d) - mx.opt.timestep * qderiv
    factor = jax.scipy.linalg.cho_factor(qm)
    qacc = jax.scipy.linalg.cho_solve(factor, d.qfrc_smooth + d.qfrc_constraint)
    return _mjx_forward._advance(mx, d, d.act_dot, qacc)


def _integrator(mx: mjx.Model):
    kind = int(mx.opt.integrator)
    if kind == int(mujoco.mjtIntegrator.mjINT_EULER):
        return mjx.euler
    if kind == int(mujoco.mjtIntegrator.mjINT_RK4):
        return mjx.rungekutta4
    if kind == int(mujoco.mjtIntegrator.mjINT_IMPLICITFAST):
        return _implicitfast
    raise NotImplementedError(
        f"MJX does not implement integrator {mujoco.mjtIntegrator(kind).name}; use euler, implicitfast or rk4"
    )


def _jax_step(mx: mjx.Model, d: mjx.Data) -> mjx.Data:
    """One physics step: ``mjx.step`` with :func:`_integrator`'s integrator (C-matching ``implicitfast``)."""
    return _integrator(mx)(mx, mjx.forward(mx, d))


def _advance(impl: str, mx: mjx.Model, fields: dict, d: mjx.Data, ctrl: jax.Array, nsub: jax.Array) -> mjx.Data:
    """One env: ``nsub`` physics steps with ``ctrl`` held; ``fields`` are this env's per-env model fields."""
    mx = mx.tree_replace(fields)
    d = d.replace(ctrl=ctrl)
    if impl == "jax":
        # nsub steps, then the position/velocity stages at the new state (as the native backend's
        # stage=mjSTAGE_VEL). Computing those stages inside the loop body instead (to skip them in the
        # next step's forward) made XLA's CPU runtime deadlock at N = 512 (jax 0.10.2).
        d = jax.lax.fori_loop(0, nsub, lambda _, d: _jax_step(mx, d), d)
        return _posvel(mx, d)
    d = jax.lax.fori_loop(0, nsub, lambda _, d: mjx.step(mx, d), d)
    force = d.actuator_force  # of the last substep, as on the native backend
    return mjx.forward(mx, d).replace(actuator_force=force)


def _reset(
    impl: str, mx: mjx.Model, fields: dict, d: mjx.Data, d0: mjx.Data, done: jax.Array, qpos: jax.Array, qvel: jax.Array
) -> mjx.Data:
    """One env: if ``done``, fresh data (``mj_resetData``) with ``qpos``/``qvel``, position/velocity stages current."""
    mx = mx.tree_replace(fields)
    d = d.where(done, d0.replace(qpos=qpos, qvel=qvel))
    new = _posvel(mx, d) if impl == "jax" else mjx.forward(mx, d)
    return d.where(done, new)


_PROGRAMS: dict[str, tuple] = {}


def _programs(impl: str) -> tuple:
    """The jitted, vmapped (advance, reset) programs for ``impl``, shared by every :class:`MjxSim`.

    Sharing them means a second sim with the same model and N (e.g. a test's, or an eval env's) reuses
    the compiled code instead of compiling again. Arguments: (model, per-env fields, data, ...).
    """
    if impl not in _PROGRAMS:
        adv = functools.partial(_advance, impl)
        rst = functools.partial(_reset, impl)
        _PROGRAMS[impl] = (
            jax.jit(jax.vmap(adv, in_axes=(None, 0, 0, 0, None))),
            jax.jit(jax.vmap(rst, in_axes=(None, 0, 0, None, 0, 0, 0))),
        )
    return _PROGRAMS[impl]


class MjxSim(BatchedSim):
    """Batched MuJoCo-MJX (JAX; Warp kernels on CUDA when available).

    Args:
        model: compiled scene.
        num_envs: number of envs N.
        device: torch device of the state tensors; the JAX device follows it.
        impl: ``"jax"`` or ``"warp"``; None picks with :func:`default_impl`.
        cache_dir: persistent compilation cache directory (see :func:`enable_compilation_cache`).
        extra_fields: model fields beyond :data:`PER_ENV_FIELDS` to hold per env (e.g. :data:`GEOMETRY_FIELDS`).

    State tensors alias JAX buffers (zero-copy): treat them as read-only. Each step returns new
    buffers, so tensors from earlier steps stay valid.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        num_envs: int,
        device: str | torch.device = "cpu",
        impl: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        extra_fields: tuple[str, ...] = (),
    ):
        super().__init__(model, num_envs, device)
        self.per_env_fields = (*PER_ENV_FIELDS, *(f for f in extra_fields if f not in PER_ENV_FIELDS))
        """Fields held per env (:data:`PER_ENV_FIELDS` and the ``extra_fields`` asked for)."""
        enable_compilation_cache(cache_dir)
        self.jax_device = jax_device_for(self.device)
        """JAX device the physics runs on."""
        self.impl = impl or default_impl(self.jax_device)
        """MJX implementation in use: ``jax`` or ``warp``."""
        n = num_envs
        try:
            mx = mjx.put_model(model, device=self.jax_device, impl=self.impl)
        except NotImplementedError as err:  # a feature of this model MJX does not have: say which, and what runs it
            raise BackendUnsupportedError(
                f"sim.backend=mjx (impl={self.impl}) cannot run this model: {err} "
                "Use sim.backend=warp (a GPU) or sim.backend=native."
            ) from err
        if self.impl == "jax":
            _integrator(mx)  # fail early on an unsupported integrator
        self._mx = mx
        # Per-env model: PER_ENV_FIELDS as (N, ...) arrays, vmapped with in_axes=0 and written into the
        # shared model inside the program (a vmapped model).
        self._fields = {
            f: jax.device_put(jnp.broadcast_to(getattr(mx, f), (n, *getattr(mx, f).shape)), self.jax_device)
            for f in self.per_env_fields
        }

        make_kwargs = {}
        if self.impl == "warp":
            make_kwargs = {"naconmax": n * NACON_PER_ENV, "njmax": NJMAX_PER_ENV}
        impl_ = self.impl

        def init_one(_):
            return mjx.make_data(model, device=self.jax_device, impl=impl_, **make_kwargs)

        with jax.default_device(self.jax_device):
            # Fresh-data template (mj_resetData state), one row; and N rows of it, as MJX's own benchmarks build them.
            # device_put commits the arrays to the device, as the compiled steps' outputs are: same signature,
            # so the reset program compiled here is reused for every later reset.
            self._d0 = jax.device_put(jax.jit(init_one)(0), self.jax_device)
            d = jax.device_put(jax.jit(jax.vmap(init_one))(jnp.arange(n)), self.jax_device)

        self._advance, self._reset = _programs(self.impl)
        self._d = d
        self._state: SimState | None = None
        self._nsub_cache: dict[int, jax.Array] = {}
        # every row starts at qpos0, zero velocity, with its pos/vel stages current (as the native backend)
        all_ids = torch.arange(n)
        self.reset_envs(
            all_ids,
            torch.as_tensor(model.qpos0, dtype=torch.float32).expand(n, -1),
            torch.zeros(n, model.nv),
        )

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> SimState:
        if self._state is None:
            d = self._d
            if self.jax_device.platform == "cpu":
                jax.block_until_ready(d.qpos)
            self._state = SimState(
                qpos=torch.from_dlpack(d.qpos),
                qvel=torch.from_dlpack(d.qvel),
                sensordata=torch.from_dlpack(d.sensordata),
                site_xpos=torch.from_dlpack(d.site_xpos),
                actuator_force=torch.from_dlpack(d.actuator_force),
            )
        return self._state

    def _nsub(self, nsubsteps: int) -> jax.Array:
        if nsubsteps not in self._nsub_cache:
            self._nsub_cache[nsubsteps] = jax.device_put(jnp.int32(nsubsteps), self.jax_device)
        return self._nsub_cache[nsubsteps]

    def step(self, ctrl: torch.Tensor, nsubsteps: int) -> None:
        per_substep = self._substep_ctrl(ctrl, nsubsteps)
        if per_substep is None:
            c = _to_jax(ctrl.to(self.device), torch.float32)
            self._d = self._advance(self._mx, self._fields, self._d, c, self._nsub(nsubsteps))
        else:  # one call of the same compiled program per substep (nsub is a traced argument: no recompile)
            for k in range(nsubsteps):
                c = _to_jax(per_substep[k].to(self.device), torch.float32)
                self._d = self._advance(self._mx, self._fields, self._d, c, self._nsub(1))
        self._state = None

    def set_body_wrench(self, body_ids: list[int], wrench: torch.Tensor) -> None:
        xfrc = torch.from_dlpack(self._d.xfrc_applied).clone()
        xfrc[:, list(body_ids)] = wrench.detach().to(xfrc.device, xfrc.dtype)
        self._d = self._d.replace(xfrc_applied=_to_jax(xfrc))

    def reset_envs(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Masked over all N envs (one compiled program for any subset); other rows are left untouched."""
        ids = env_ids.detach().to(self.device, torch.long)
        if ids.numel() == 0:
            return
        n, dev = self.num_envs, self.device
        done = torch.zeros(n, dtype=torch.bool, device=dev)
        done[ids] = True
        full_q = torch.zeros(n, self.model.nq, dtype=torch.float32, device=dev)
        full_v = torch.zeros(n, self.model.nv, dtype=torch.float32, device=dev)
        full_q[ids] = qpos.detach().to(dev, torch.float32)
        full_v[ids] = qvel.detach().to(dev, torch.float32)
        self._d = self._reset(
            self._mx, self._fields, self._d, self._d0, _to_jax(done), _to_jax(full_q), _to_jax(full_v)
        )
        self._state = None

    # ------------------------------------------------------------------ per-env model
    def _check_field(self, name: str) -> None:
        if name not in self.per_env_fields:
            raise ValueError(
                f"'{name}' cannot vary per env on this MJX sim (per-env fields: "
                f"{', '.join(self.per_env_fields)}); pass it in make_sim(..., extra_fields=...)"
            )

    def model_field(self, name: str) -> torch.Tensor:
        """A COPY (N, ...) of per-env model field ``name`` (float32): writes to it do not apply; use
        :meth:`set_model_field`.

        Raises:
            ValueError: ``name`` is not among :attr:`per_env_fields`.
        """
        self._check_field(name)
        return torch.from_dlpack(self._fields[name]).clone()

    def set_model_field(self, name: str, env_ids: torch.Tensor, values: torch.Tensor) -> None:
        self._check_field(name)
        current = self.model_field(name).to(self.device)
        ids = env_ids.detach().to(self.device, torch.long)
        current[ids] = values.detach().to(self.device, torch.float32).expand_as(current[ids])
        self._fields = {**self._fields, name: _to_jax(current)}

    def close(self) -> None:
        self._d = self._d0 = self._mx = self._fields = None  # type: ignore[assignment]
        self._state = None
