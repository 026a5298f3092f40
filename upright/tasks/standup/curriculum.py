"""HoST's two curricula, kept per env: the vertical pull force and the action bound β.

Source: HoST spec §2 and §4 (``update_force_curriculum`` in ``env/host_ground.py``; Huang et al., RSS 2025).

* **Pull force.** An upward (+z, world frame) force on the torso, applied at every physics substep
  once the unactuated start is over **and** the pelvis is near upright (projected gravity z < -0.8; prone: no
  orientation gate, ``gravity_gate=None``).
  HoST applies 100 N to each of two bodies named ``*torso_link`` (200 N in total, ~60 % of the G1's
  weight) and lowers it by 20 N per body (40 N in total) per trigger. upright applies the same totals to
  the one ``torso_link``: 200 N, -40 N per trigger, floor 0 N.
* **β** (``p_target = q + β·a``) starts at 1.0 and drops 0.02 per trigger, floor 0.25.
* **Trigger.** When envs reset, if the mean over the resetting envs of head height above the mean foot
  height at their last step exceeds 0.9 m, the resetting envs step both curricula down.

Not HoST: ``trigger="per_env"`` steps down each resetting env whose own episode ended with the head above the
threshold, whatever the others did. HoST's batch mean fires only once most resetting envs stand, which with the
pull force barely moving happened 15 times in 1,278 iterations on this project's ground run
(``docs/standup_learning.md``); per env, the force of an env falls as soon as that env's episodes succeed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from upright.managers.curriculum import load_per_env


@dataclass
class CurriculumCfg:
    """Settings of the pull-force and β curricula (HoST defaults)."""

    enabled: bool = True
    """Apply the pull force and step β down on the trigger. False: no force, β fixed at ``beta_init``."""
    force_init: float = 200.0
    """Initial upward pull on the torso, N (HoST: 2 x 100 N)."""
    force_step: float = 40.0
    """Decrease per trigger, N (HoST: 2 x 20 N)."""
    force_min: float = 0.0
    """Floor of the pull force, N."""
    gravity_gate: float | None = -0.8
    """Force only while projected gravity z (pelvis frame, unit vector) is below this, i.e. the pelvis is near
    upright (HoST ground, spec §4). None: no orientation gate, the force acts whenever actuated (HoST ground-prone,
    spec §3 "Ground-prone config"; ``env.curriculum.gravity_gate=null``)."""
    beta_init: float = 1.0
    """Initial action bound β."""
    beta_step: float = 0.02
    """Decrease of β per trigger."""
    beta_min: float = 0.25
    """Floor of β (HoST: 0.25; slope: 0.3)."""
    threshold_height: float = 0.9
    """Trigger: mean head height above the feet of the resetting envs at their last step, m."""
    trigger: str = "batch_mean"
    """``batch_mean`` (HoST): the resetting envs step down together when their MEAN head height exceeds the
    threshold. ``per_env`` (not HoST): each resetting env whose own head height exceeds it steps down."""


class StandupCurriculum:
    """Per-env pull force (N) and β for N envs.

    Args:
        cfg: curriculum settings.
        num_envs: number of envs N.
        device: torch device of the per-env tensors.
    """

    def __init__(self, cfg: CurriculumCfg, num_envs: int, device: torch.device | str = "cpu"):
        if cfg.beta_min <= 0 or cfg.beta_init < cfg.beta_min:
            raise ValueError(f"curriculum needs 0 < beta_min <= beta_init; got {cfg.beta_min}, {cfg.beta_init}")
        if cfg.gravity_gate is not None and not -1.0 <= cfg.gravity_gate <= 1.0:
            raise ValueError(f"curriculum.gravity_gate must be in [-1, 1] or None (no gate); got {cfg.gravity_gate}")
        if cfg.trigger not in ("batch_mean", "per_env"):
            raise ValueError(f"env.curriculum.trigger must be 'batch_mean' (HoST) or 'per_env', got {cfg.trigger!r}")
        if cfg.force_min < 0 or cfg.force_init < cfg.force_min:
            raise ValueError(f"curriculum needs 0 <= force_min <= force_init; got {cfg.force_min}, {cfg.force_init}")
        self.cfg = cfg
        self.force = torch.full((num_envs,), cfg.force_init if cfg.enabled else 0.0, device=device)
        """(N,) float32 upward pull on the torso of each env, N."""
        self.beta = torch.full((num_envs,), cfg.beta_init, device=device)
        """(N,) float32 action bound β of each env."""
        self.num_triggers = 0
        """Times the trigger fired so far."""

    def pull_force(self, projected_gravity: torch.Tensor, actuated: torch.Tensor) -> torch.Tensor:
        """Upward force to apply now, (N,) float32, N: the env's force where gated on, else 0 (always 0 when
        the curriculum is disabled, e.g. in evaluation, whatever :meth:`load_state_dict` restored).

        Args:
            projected_gravity: (N, 3) gravity direction in the pelvis frame.
            actuated: (N,) bool, True once the unactuated start is over.
        """
        if not self.cfg.enabled:
            return torch.zeros_like(self.force)
        on = actuated
        if self.cfg.gravity_gate is not None:
            on = on & (projected_gravity[:, 2] < self.cfg.gravity_gate)
        return torch.where(on, self.force, torch.zeros_like(self.force))

    def on_reset(self, env_ids: torch.Tensor, head_height: torch.Tensor) -> bool:
        """Apply the trigger for the envs ``env_ids`` (M,) that are resetting.

        Args:
            env_ids: (M,) long ids of the resetting envs.
            head_height: (M,) head height above the mean foot height at their last step, m.

        Returns:
            True if the trigger fired (their β and force stepped down; ``per_env``: for at least one env).
        """
        if not self.cfg.enabled or env_ids.numel() == 0:
            return False
        c = self.cfg
        if c.trigger == "per_env":
            env_ids = env_ids[head_height > c.threshold_height]
            if env_ids.numel() == 0:
                return False
        elif head_height.mean() <= c.threshold_height:
            return False
        self.beta[env_ids] = (self.beta[env_ids] - c.beta_step).clamp(min=c.beta_min)
        self.force[env_ids] = (self.force[env_ids] - c.force_step).clamp(min=c.force_min)
        self.num_triggers += 1
        return True

    def state_dict(self) -> dict[str, torch.Tensor | int]:
        """Per-env state for checkpoints."""
        return {"force": self.force.clone(), "beta": self.beta.clone(), "num_triggers": self.num_triggers}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`; a checkpoint with another env count restores the mean per env.
        A disabled curriculum keeps its zero force (no pull force in evaluation or play).

        Raises:
            KeyError: ``state`` lacks ``force`` or ``beta``.
        """
        load_per_env(self.force, state["force"])
        load_per_env(self.beta, state["beta"])
        if not self.cfg.enabled:
            self.force.zero_()
        self.num_triggers = int(state.get("num_triggers", 0))
