"""Observation terms, groups and history.

A group is an ordered tuple of :class:`ObservationTerm`; one *frame* is the concatenation over the terms of
``scale * func(state, **params) + U(-noise, noise)`` (the noise is added to the scaled value and multiplied by the
env's noise scale, 0 turns it off), clipped to ``±clip``. :class:`ObservationHistory` keeps the last H frames of
each env, oldest first, and flattens them as ``concat(frame[t-H+1], ..., frame[t])``: the layout
:data:`upright.policy_io.schema.HISTORY_LAYOUT` names. H = 1 is a plain observation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(frozen=True)
class ObservationTerm:
    """One observation term: ``scale * func(state, **params) + U(-noise, noise)``.

    Attributes:
        name: term name (written into the ONNX metadata's ``observation_names``).
        func: returns the unscaled (N, D) float tensor; its docstring's first line gives units and frame (it is
            the metadata's ``observation_descriptions`` entry).
        scale: multiplier applied before the noise.
        noise: half-width of the uniform noise added to the *scaled* value (0: none).
        params: keyword arguments of ``func``.
    """

    name: str
    func: Callable[..., torch.Tensor]
    scale: float = 1.0
    noise: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.noise < 0:
            raise ValueError(f"Observation term '{self.name}': noise must be >= 0, got {self.noise}")


def uniform_noise(shape: torch.Size, half_width: float, generator: torch.Generator | None, device) -> torch.Tensor:
    """U(-half_width, half_width) of ``shape``, drawn on the generator's device (CPU if None) and moved to
    ``device``."""
    rng_device = generator.device if generator is not None else device
    return (torch.rand(shape, generator=generator, device=rng_device).to(device) * 2.0 - 1.0) * half_width


def compute_frame(
    terms: Sequence[ObservationTerm],
    state: Any,
    noise_scale: float = 0.0,
    generator: torch.Generator | None = None,
    clip: float = 100.0,
) -> torch.Tensor:
    """One (N, sum of term widths) float32 frame of ``terms`` on ``state``.

    Args:
        terms: the group's terms, in order.
        state: the task's state dataclass (what every term reads).
        noise_scale: multiplier of every term's noise half-width (0: no noise).
        generator: torch RNG of the noise (None: torch's global RNG).
        clip: the frame is clipped to ±clip.

    Raises:
        ValueError: a term returned something other than an (N, D) tensor (the message names the term).
    """
    parts = []
    for term in terms:
        value = term.func(state, **term.params).float() * term.scale
        if value.dim() != 2:
            raise ValueError(f"Observation term '{term.name}' must return (N, D), got shape {tuple(value.shape)}")
        if noise_scale > 0 and term.noise > 0:
            value = value + uniform_noise(value.shape, noise_scale * term.noise, generator, value.device)
        parts.append(value)
    return torch.cat(parts, dim=-1).clamp(-clip, clip)


def term_dims(terms: Sequence[ObservationTerm], state: Any) -> list[int]:
    """Width D of each term on ``state`` (evaluated once)."""
    return [int(term.func(state, **term.params).shape[-1]) for term in terms]


class ObservationHistory:
    """The last ``length`` frames of N envs, oldest first.

    Args:
        num_envs: N.
        frame_dim: width of one frame.
        length: frames kept H (>= 1).
        device: torch device.

    Raises:
        ValueError: ``length`` < 1.
    """

    def __init__(self, num_envs: int, frame_dim: int, length: int = 1, device: torch.device | str = "cpu"):
        if length < 1:
            raise ValueError(f"observation history length must be >= 1, got {length}")
        self.length = length
        self.buffer = torch.zeros(num_envs, length, frame_dim, device=device)
        """(N, H, D) float32 frames, oldest first."""
        self.restarted = torch.zeros(num_envs, dtype=torch.bool, device=device)
        """(N,) envs whose next pushed frame fills every slot (:meth:`restart`)."""
        self._any_restarted = False  # a host-side flag: no device sync on pushes without a restart

    def push(self, frame: torch.Tensor) -> None:
        """Append an (N, D) frame, dropping the oldest; in envs marked by :meth:`restart`, every slot becomes it."""
        self.buffer = torch.cat([self.buffer[:, 1:], frame.unsqueeze(1)], dim=1)
        if self._any_restarted:
            fill = self.restarted[:, None, None]
            self.buffer = torch.where(fill, frame.unsqueeze(1).expand(-1, self.length, -1), self.buffer)
            self.restarted.zero_()
            self._any_restarted = False

    def restart(self, env_ids: torch.Tensor | None = None) -> None:
        """Start the history of ``env_ids`` (M,; None: every env) afresh: the next pushed frame fills all H slots
        (mjlab's history buffers after a reset; the deploy daemon's ``observation_history_start = first_frame``)."""
        if env_ids is None:
            self.restarted.fill_(True)
        else:
            self.restarted[env_ids] = True
        self._any_restarted = True

    def reset(self, env_ids: torch.Tensor, frame: torch.Tensor | None = None) -> None:
        """Clear the history of ``env_ids`` (M,): zeros, or every slot set to ``frame`` (M, D) when given."""
        if frame is None:
            self.buffer[env_ids] = 0.0
        else:
            self.buffer[env_ids] = frame.unsqueeze(1).expand(-1, self.length, -1)

    def flat(self) -> torch.Tensor:
        """(N, H·D) float32: ``concat(frame[t-H+1], ..., frame[t])``."""
        return self.buffer.flatten(1)


class HistoryObservations:
    """Observation groups that all read one H-frame history (HoST's and the lift task's layout): each env step
    appends ``frame(env)`` to :attr:`history`; every group is its flat ``concat(frame[t-H+1], ..., frame[t])``.

    Args:
        frame: ``frame(env)`` -> (N, D) float32, the env's current frame (noise and clip applied).
        history: the buffer (N, H, D).
        groups: names of the groups that read it (``actor``, ``critic``).
    """

    def __init__(self, frame: Callable[[Any], torch.Tensor], history: ObservationHistory, groups=("actor", "critic")):
        self.frame = frame
        self.history = history
        self.groups = tuple(groups)

    def update(self, env: Any) -> None:
        """Append the env's current frame."""
        self.history.push(self.frame(env))

    def get(self) -> dict[str, torch.Tensor]:
        """Group name -> (N, H·D) float32."""
        flat = self.history.flat()
        return dict.fromkeys(self.groups, flat)


class FrameObservations:
    """Observation groups of their own frames (the get-up recipe's actor and critic), each with its own history.

    Args:
        frames: group name -> ``frame(env)`` -> (N, D_g) float32, computed in this order at each update (the order
            fixes the draws of the env's noise generator).
        history: group name -> frames H_g kept for it (oldest first, :class:`ObservationHistory`); a group not
            named has one frame, no history.
        num_envs: N (needed when ``history`` names a group).
        device: torch device of the histories.

    Raises:
        ValueError: a history length < 1, or one for a group that is not in ``frames``.
    """

    def __init__(
        self,
        frames: dict[str, Callable[[Any], torch.Tensor]],
        history: dict[str, int] | None = None,
        num_envs: int = 0,
        device: torch.device | str = "cpu",
    ):
        self.frames = dict(frames)
        self.values: dict[str, torch.Tensor] = {}
        unknown = sorted(set(history or {}) - set(self.frames))
        if unknown:
            raise ValueError(f"observation history for unknown groups {unknown}; groups are {sorted(self.frames)}")
        self.history_length = {g: int(h) for g, h in (history or {}).items()}
        for g, h in self.history_length.items():
            if h < 1:
                raise ValueError(f"observation history of group '{g}' must be >= 1 frame, got {h}")
        self.histories: dict[str, ObservationHistory] = {}
        """Group -> its history, created at the first :meth:`update` (the frame width is known then)."""
        self._num_envs, self._device = int(num_envs), device

    def update(self, env: Any) -> None:
        """Compute every group's frame from the env's current state (and push it into the group's history)."""
        frames = {g: f(env) for g, f in self.frames.items()}
        for g, h in self.history_length.items():
            if h == 1:
                continue
            if g not in self.histories:
                hist = ObservationHistory(self._num_envs, frames[g].shape[1], h, self._device)
                hist.restart()  # the first frame fills the history
                self.histories[g] = hist
            self.histories[g].push(frames[g])
            frames[g] = self.histories[g].flat()
        self.values = frames

    def restart(self, env_ids: torch.Tensor) -> None:
        """Start the histories of ``env_ids`` (M,) afresh: the next frame fills every slot (call at reset; before the
        first :meth:`update` there is nothing to restart, the first frame fills every history)."""
        for hist in self.histories.values():
            hist.restart(env_ids)

    def get(self) -> dict[str, torch.Tensor]:
        """Group name -> (N, H_g·D_g) float32 (the last :meth:`update`'s)."""
        return dict(self.values)
