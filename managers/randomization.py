"""Domain-randomisation terms shared by every task: per-env model fields drawn at env creation or at reset, and an
action delay in physics substeps.

A :class:`ModelFieldTerm` draws one value per env (or per entry of its index, ``per_entry=True``) from U(lo, hi) and
writes ``nominal * value`` (``scale``), ``nominal + value`` (``add``) or ``value`` (``set``) into every one of its
targets (:class:`FieldTarget`: a per-env ``MjModel`` field and an index into one env's row), with the same draw,
e.g. Kp as ``actuator_gainprm[:, 0]`` and ``-actuator_biasprm[:, 1]`` together. Writes go through
:meth:`upright.sim.base.BatchedSim.set_model_field`, so the same term works on every backend for the fields of
:data:`upright.sim.PER_ENV_FIELDS`. Nominal values are read once, when the randomiser is built.
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
                if term.operation == "scale":
                    rows[t.field][index] = current * d
                elif term.operation == "add":
                    rows[t.field][index] = current + d
                else:
                    rows[t.field][index] = d.expand_as(current)
        for field, row in rows.items():
            self.sim.set_model_field(field, env_ids, row)


class ActionDelay:
    """Hold the previous control for the first ``delay`` physics substeps of an env step, per env.

    A delay of d substeps (d·dt_physics s) means the policy's new targets reach the actuators d substeps late, as a
    computation and bus latency does on a robot. d is drawn per env at reset from {0, ..., max_substeps}.

    Args:
        num_envs: N.
        max_substeps: largest delay, substeps (<= decimation; 0 turns the delay off).
        decimation: physics substeps per env step.
        generator: torch RNG of the draws.
        device: torch device.

    Raises:
        ValueError: ``max_substeps`` outside [0, decimation].
    """

    def __init__(self, num_envs: int, max_substeps: int, decimation: int, generator: torch.Generator, device="cpu"):
        if not 0 <= max_substeps <= decimation:
            raise ValueError(f"action delay must be 0..decimation={decimation} substeps, got {max_substeps}")
        self.max_substeps = max_substeps
        self.decimation = decimation
        self.rng = generator
        self.delay = torch.zeros(num_envs, dtype=torch.long, device=device)
        """(N,) int64 delay of each env, physics substeps."""

    def on_reset(self, env_ids: torch.Tensor) -> None:
        """Draw new delays for ``env_ids``."""
        if self.max_substeps > 0 and env_ids.numel():
            d = torch.randint(0, self.max_substeps + 1, (int(env_ids.numel()),), generator=self.rng)
            self.delay[env_ids] = d.to(self.delay.device)

    def controls(self, previous: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """The control of an env step: (N, nu) ``new`` when no env has a delay, else (decimation, N, nu) with
        ``previous`` in the first ``delay`` substeps of each env and ``new`` after."""
        if self.max_substeps == 0 or not bool(self.delay.any()):
            return new
        k = torch.arange(self.decimation, device=new.device).view(-1, 1, 1)
        late = k < self.delay.to(new.device).view(1, -1, 1)
        return torch.where(late, previous.unsqueeze(0), new.unsqueeze(0))
