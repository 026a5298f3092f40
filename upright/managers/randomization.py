"""Domain-randomisation terms shared by every task: per-env model fields drawn at env creation or at reset, and an
action delay in physics substeps.

A :class:`ModelFieldTerm` draws one value per env (or per entry of its index, ``per_entry=True``) from U(lo, hi) and
writes ``nominal * value`` (``scale``), ``nominal + value`` (``add``) or ``value`` (``set``) into every one of its
targets (:class:`FieldTarget`: a per-env ``MjModel`` field and an index into one env's row), with the same draw,
e.g. Kp as ``actuator_gainprm[:, 0]`` and ``-actuator_biasprm[:, 1]`` together. Writes go through
:meth:`upright.sim.base.BatchedSim.set_model_field`, so the same term works on every backend for the fields of
:data:`upright.sim.PER_ENV_FIELDS`. Nominal values are read once, when the randomiser is built.

:class:`ActionDelay` delays each env's controls by a whole number of physics substeps (any length, a ring of the
last env steps' controls); the task draws the delays at reset (lift: U{0..max}; standup: HoST's range, or a fixed
robustness-test delay).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

OPERATIONS = ("scale", "add", "set")
WHEN = ("startup", "reset")


@dataclass(frozen=True)
class FieldTarget:
    """One per-env model field and the index into one env's row of it, e.g. ``("body_mass", (cube_body,))`` or
    ``("actuator_gainprm", (slice(0, 7), 0))``."""

    field: str
    index: tuple
    power: float = 1.0
    """Exponent of the draw on this target, ``scale`` terms only: e.g. 2 for a body's inertia under a length factor
    (I ∝ m·L²)."""


@dataclass(frozen=True)
class ModelFieldTerm:
    """Draw U(lo, hi) per env and apply it to every target.

    Attributes:
        name: term name (logged).
        targets: fields written with the same draw; their indexed shapes must match when ``per_entry``.
        lo, hi: range of the draw (a factor for ``scale``, an offset for ``add``, a value for ``set``).
        operation: ``scale`` | ``add`` | ``set``.
        when: ``startup`` (once, at env creation) or ``reset`` (at every reset of the env).
        per_entry: one draw per indexed entry (e.g. per joint) instead of one per env.
    """

    name: str
    targets: tuple[FieldTarget, ...]
    lo: float
    hi: float
    operation: str = "scale"
    when: str = "reset"
    per_entry: bool = False

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise ValueError(f"Randomisation term '{self.name}': operation must be one of {OPERATIONS}")
        if self.when not in WHEN:
            raise ValueError(f"Randomisation term '{self.name}': when must be one of {WHEN}")
        if self.hi < self.lo:
            raise ValueError(f"Randomisation term '{self.name}': range ({self.lo}, {self.hi}) has hi < lo")


class ModelFieldRandomizer:
    """Applies :class:`ModelFieldTerm` s to a batched sim.

    Args:
        sim: the backend (:class:`upright.sim.base.BatchedSim`).
        terms: the terms.
        generator: torch RNG (CPU) of the draws.

    Raises:
        ValueError: a field cannot vary per env on this backend (the backend's message lists the valid ones), or one
            field is randomised both at startup and at reset.
    """

    def __init__(self, sim, terms: Sequence[ModelFieldTerm], generator: torch.Generator):
        self.sim = sim
        self.terms = list(terms)
        self.rng = generator
        self._nominal: dict[str, torch.Tensor] = {}
        when_of: dict[str, str] = {}
        for term in self.terms:
            for t in term.targets:
                if when_of.setdefault(t.field, term.when) != term.when:
                    raise ValueError(f"Field '{t.field}' is randomised both at startup and at reset; pick one")
        for term in self.terms:
            for t in term.targets:
                if t.field not in self._nominal:
                    self._nominal[t.field] = sim.model_field(t.field)[0].detach().clone().cpu()
        self.last_draw: dict[str, torch.Tensor] = {}
        """Most recent draw of each term, (M,) or (M, entries) float32 (for logging and tests)."""

    def nominal(self, field: str) -> torch.Tensor:
        """The compiled model's value of ``field`` (one env's row, CPU)."""
        return self._nominal[field]

    def apply(self, env_ids: torch.Tensor, when: str) -> None:
        """Draw and write every term with ``term.when == when`` for the envs ``env_ids`` (M,).

        Each touched field is rebuilt from its nominal value, every term's draw applied to it in term order, then
        written once (so two terms on different entries of one field, e.g. Kp and Kd in ``actuator_biasprm``,
        both hold)."""
        m = int(env_ids.numel())
        if m == 0:
            return
        rows: dict[str, torch.Tensor] = {}
        for term in self.terms:
            if term.when != when:
                continue
            first = self._nominal[term.targets[0].field][term.targets[0].index]
            shape = (m, *first.shape) if term.per_entry else (m,)
            draw = (term.lo + (term.hi - term.lo) * torch.rand(shape, generator=self.rng)).to(torch.float64)
            self.last_draw[term.name] = draw.float()
            for t in term.targets:
                if t.field not in rows:
                    nominal = self._nominal[t.field].to(torch.float64)
                    rows[t.field] = nominal.expand(m, *nominal.shape).clone()
                index = (slice(None), *t.index)
                current = rows[t.field][index]
                d = draw if term.per_entry else draw.reshape(m, *([1] * (current.dim() - 1)))
                if t.power != 1.0:
                    if term.operation != "scale":
                        raise ValueError(
                            f"Randomisation term '{term.name}': a target power applies to scale terms only"
                        )
                    d = d**t.power
                if term.operation == "scale":
                    rows[t.field][index] = current * d
                elif term.operation == "add":
                    rows[t.field][index] = current + d
                else:
                    rows[t.field][index] = d.expand_as(current)
        for field, row in rows.items():
            self.sim.set_model_field(field, env_ids, row)


class ActionDelay:
    """Per-env action delay in physics substeps, of any length: a ring of the last env steps' controls.

    A delay of d substeps (d·dt_physics s) means the policy's new targets reach the actuators d substeps late, as a
    computation and bus latency does on a robot: substep j (0-based) of env step t of an env with delay d uses the
    control commanded at env step t - ceil((d - j) / decimation) (or t when d <= j), so the actuators see the
    command stream shifted by exactly d substeps. With d <= decimation that is the previous env step's control for
    the first d substeps and the new one after. The task draws each env's delay at its reset (:meth:`reset`); it is
    held until the next one.

    Args:
        num_envs: N.
        nu: actuators (the width of a control).
        decimation: physics substeps per env step.
        max_delay: the longest delay that will be set, substeps (>= 0; sizes the ring; 0 turns the delay off).
        device: torch device.

    Raises:
        ValueError: ``max_delay`` < 0 or ``decimation`` < 1.
    """

    def __init__(self, num_envs: int, nu: int, decimation: int, max_delay: int, device: torch.device | str = "cpu"):
        if max_delay < 0 or decimation < 1:
            raise ValueError(f"action delay needs max_delay >= 0 and decimation >= 1, got {max_delay}, {decimation}")
        self.decimation = decimation
        self.depth = -(-max_delay // decimation) + 1
        """Env-step controls kept (the current one plus ceil(max_delay / decimation) earlier ones)."""
        self.max_delay = max_delay
        self.buffer = torch.zeros(self.depth, num_envs, nu, device=device)
        """(depth, N, nu) float32 ring of controls (the task's units, e.g. PD targets in rad); slot ``head`` is the
        newest."""
        self.head = 0
        self.delay = torch.zeros(num_envs, dtype=torch.long, device=device)
        """(N,) int64 delay of each env, substeps."""
        self._substep = torch.arange(decimation, device=device)[:, None]
        self._envs = torch.arange(num_envs, device=device)[None, :]

    def reset(self, env_ids: torch.Tensor, ctrl: torch.Tensor, delay: torch.Tensor) -> None:
        """Fill the history of ``env_ids`` (M,) with ``ctrl`` (M, nu) (the control at reset) and set their delay
        (M,) int, substeps.

        Raises:
            ValueError: a delay below 0 or above ``max_delay``.
        """
        if delay.numel() and (int(delay.min()) < 0 or int(delay.max()) > self.max_delay):
            raise ValueError(f"action delay must lie in [0, {self.max_delay}] substeps, got {delay.tolist()}")
        self.buffer[:, env_ids] = ctrl.to(self.buffer.dtype).unsqueeze(0)
        self.delay[env_ids] = delay.to(self.delay.device, torch.long)

    def push(self, ctrl: torch.Tensor) -> torch.Tensor:
        """Record this env step's control (N, nu); return what to give ``BatchedSim.step``.

        Returns:
            ``ctrl`` itself (N, nu) when every delay is 0 (the held-control hot path), else (decimation, N, nu)
            per-substep controls.
        """
        if self.depth == 1:
            return ctrl
        self.head = (self.head + 1) % self.depth
        self.buffer[self.head] = ctrl
        if not bool(self.delay.any()):
            return ctrl
        ahead = self.delay[None, :] - self._substep + self.decimation - 1  # (decimation, N): ceil via floor
        lag = torch.div(ahead, self.decimation, rounding_mode="floor")
        slot = (self.head - lag.clamp(min=0)) % self.depth
        return self.buffer[slot, self._envs]
