"""Self-generated start states: an archive of states the policy's own episodes reached, binned by head height.

Not part of HoST (HoST starts every episode from the terrain's posture). It is reference state initialisation
(Peng et al., "DeepMimic", SIGGRAPH 2018, §6) without a reference motion: the references are the policy's own
states, kept in bins of head height above the feet so that the highest, rarest states it ever reached are drawn
as often as the common ones (the cell selection of Ecoffet et al., "First return, then explore", Nature 2021).
Episodes started there practise the later phases of the rise (sitting -> crouching -> standing) without the pull
force, long before a start from the lying posture gets there on its own.

Recording: every ``record_every`` env steps, up to ``record_per_step`` actuated, non-terminated envs (drawn at
random) are written into the bin of their head height, replacing the oldest entry once the bin is full. An entry
is the full simulator state (qpos, qvel), the env's observation history *before* the frame of that state, and the
last three actions, so a restored episode continues exactly as the recorded one would have (up to the
per-env domain-randomisation parameters, which belong to the env, not to the state).

Sampling: a resetting episode starts from the archive with probability ``fraction``; it picks a non-empty bin
uniformly, then an entry uniformly within it. Those episodes skip the unactuated phase, get no pull force and do
not step the curricula (they are flagged like :mod:`~upright.tasks.standup.assisted_start` episodes).
Evaluation and play never use the archive (:func:`upright.training.evaluate.make_eval_env` sets the fraction to 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class StateArchiveCfg:
    """Self-generated start states (``env.state_archive.*``). Off by default in HoST's recipe."""

    fraction: float = 0.0
    """Probability that a resetting training episode starts from an archived state, in [0, 1). 0: never (HoST)."""
    num_bins: int = 12
    """Bins of head height above the feet, evenly spaced over ``[height_min, height_max]`` (the two end bins also
    take what lies below / above)."""
    height_min: float = 0.0
    """Lower edge of the first bin, m (lying: head ~0-0.1 m above the feet)."""
    height_max: float = 1.2
    """Upper edge of the last bin, m (standing: ~1.2 m)."""
    bin_capacity: int = 256
    """Entries per bin (a ring: the oldest is replaced)."""
    record_every: int = 5
    """Env steps between recordings."""
    record_per_step: int = 32
    """Envs recorded per recording (drawn at random among the actuated, non-terminated ones)."""


def validate(cfg: StateArchiveCfg) -> None:
    """Check the settings.

    Raises:
        ValueError: a setting out of range; the message names the key and its valid range.
    """
    if not 0.0 <= cfg.fraction < 1.0:
        raise ValueError(f"env.state_archive.fraction must be in [0, 1), got {cfg.fraction}")
    if cfg.num_bins < 1 or cfg.bin_capacity < 1 or cfg.record_every < 1 or cfg.record_per_step < 1:
        raise ValueError(
            "env.state_archive.num_bins, bin_capacity, record_every and record_per_step must be >= 1; got "
            f"{cfg.num_bins}, {cfg.bin_capacity}, {cfg.record_every}, {cfg.record_per_step}"
        )
    if not cfg.height_max > cfg.height_min:
        raise ValueError(f"env.state_archive.height_max ({cfg.height_max}) must be above height_min ({cfg.height_min})")


@dataclass
class ArchivedStates:
    """M archived states (the tensors of one draw)."""

    qpos: torch.Tensor
    """(M, nq) float32 generalised positions (free base: position m, quaternion wxyz; joints rad)."""
    qvel: torch.Tensor
    """(M, nv) float32 generalised velocities (m/s, rad/s)."""
    obs_history: torch.Tensor
    """(M, H, D) float32 observation history before the frame of this state, oldest first."""
    actions: torch.Tensor
    """(M, 3, A) float32 the last three actions (newest first: a_t, a_{t-1}, a_{t-2})."""
    sub_terrain: torch.Tensor
    """(M,) int64 sub-terrain the state lies on."""


class StateArchive:
    """Head-height-binned ring buffers of simulator states (see the module docstring).

    Args:
        cfg: settings (checked with :func:`validate`).
        nq, nv: sizes of qpos and qvel.
        history_shape: (H, D) of the env's observation history.
        num_actions: A.
        device: torch device of the stored tensors.

    Raises:
        ValueError: bad settings (:func:`validate`).
    """

    def __init__(
        self,
        cfg: StateArchiveCfg,
        nq: int,
        nv: int,
        history_shape: tuple[int, int],
        num_actions: int,
        device: torch.device | str = "cpu",
    ) -> None:
        validate(cfg)
        self.cfg = cfg
        b, c = cfg.num_bins, cfg.bin_capacity
        z = lambda *s: torch.zeros(*s, device=device)  # noqa: E731
        self.qpos, self.qvel = z(b, c, nq), z(b, c, nv)
        self.obs_history = z(b, c, *history_shape)
        self.actions = z(b, c, 3, num_actions)
        self.sub_terrain = torch.zeros(b, c, dtype=torch.long, device=device)
        self.count = torch.zeros(b, dtype=torch.long, device=device)
        """(B,) entries written into each bin so far (the bin holds min(count, capacity))."""
        self.steps = 0
        """Recording calls so far."""

    def bin_of(self, head_height: torch.Tensor) -> torch.Tensor:
        """(M,) int64 bin index of head heights (M,) m."""
        c = self.cfg
        x = (head_height - c.height_min) / (c.height_max - c.height_min) * c.num_bins
        return x.floor().long().clamp(0, c.num_bins - 1)

    @property
    def filled(self) -> torch.Tensor:
        """(B,) int64 entries held per bin."""
        return self.count.clamp(max=self.cfg.bin_capacity)

    def record(
        self,
        eligible: torch.Tensor,
        head_height: torch.Tensor,
        qpos: torch.Tensor,
        qvel: torch.Tensor,
        obs_history: torch.Tensor,
        actions: torch.Tensor,
        sub_terrain: torch.Tensor,
        rng: torch.Generator,
    ) -> int:
        """Maybe record some envs (every ``record_every`` calls). Returns the number of entries written.

        Args:
            eligible: (N,) bool, envs whose current state may be recorded (actuated, not terminated).
            head_height: (N,) head height above the feet, m.
            qpos, qvel: (N, nq), (N, nv) the simulator state.
            obs_history: (N, H, D) observation history *before* the frame of this state.
            actions: (N, 3, A) the last three actions, newest first.
            sub_terrain: (N,) int64.
            rng: the env's generator (CPU).
        """
        self.steps += 1
        if self.steps % self.cfg.record_every:
            return 0
        ids = eligible.nonzero(as_tuple=False).flatten()
        if ids.numel() == 0:
            return 0
        pick = torch.randperm(ids.numel(), generator=rng)[: self.cfg.record_per_step].to(ids.device)
        ids = ids[pick]
        bins = self.bin_of(head_height[ids])
        cap = self.cfg.bin_capacity
        for b in bins.unique().tolist():
            sel = ids[bins == b]
            k = sel.numel()
            slots = (self.count[b] + torch.arange(k, device=sel.device)) % cap
            self.qpos[b, slots] = qpos[sel].float()
            self.qvel[b, slots] = qvel[sel].float()
            self.obs_history[b, slots] = obs_history[sel]
            self.actions[b, slots] = actions[sel]
            self.sub_terrain[b, slots] = sub_terrain[sel]
            self.count[b] += k
        return int(ids.numel())

    def sample(self, m: int, rng: torch.Generator) -> ArchivedStates | None:
        """Draw ``m`` states: a non-empty bin uniformly, then an entry uniformly. None while the archive is empty."""
        filled = self.filled
        nonempty = (filled > 0).nonzero(as_tuple=False).flatten()
        if nonempty.numel() == 0:
            return None
        dev = filled.device
        b = nonempty[torch.randint(nonempty.numel(), (m,), generator=rng).to(dev)]
        slot = (torch.rand(m, generator=rng).to(dev) * filled[b]).long().clamp(max=self.cfg.bin_capacity - 1)
        return ArchivedStates(
            qpos=self.qpos[b, slot],
            qvel=self.qvel[b, slot],
            obs_history=self.obs_history[b, slot],
            actions=self.actions[b, slot],
            sub_terrain=self.sub_terrain[b, slot],
        )

    def state_dict(self) -> dict[str, torch.Tensor | int]:
        """Everything, for checkpoints (a resumed run keeps its start states)."""
        return {
            "qpos": self.qpos,
            "qvel": self.qvel,
            "obs_history": self.obs_history,
            "actions": self.actions,
            "sub_terrain": self.sub_terrain,
            "count": self.count,
            "steps": self.steps,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`; an archive of another shape (other settings) is ignored with a warning."""
        for name in ("qpos", "qvel", "obs_history", "actions", "sub_terrain", "count"):
            if tuple(state[name].shape) != tuple(getattr(self, name).shape):
                print(f"WARNING: state archive in the checkpoint has another shape ({name}); starting it empty.")
                return
        for name in ("qpos", "qvel", "obs_history", "actions", "sub_terrain", "count"):
            getattr(self, name).copy_(state[name])
        self.steps = int(state.get("steps", 0))
