"""The action term interface: how a policy's action becomes the actuators' targets for one env step.

A task's env holds one :class:`ActionTerm` (:attr:`upright.envs.ManagerBasedRlEnv.action_term`); the env core calls
:meth:`ActionTerm.process` first in every env step and sends what it returns to the actuators for ``decimation``
physics steps (after the event terms, e.g. an actuation delay, have seen it). The terms: joint position targets
relative to the measured q or about a default pose (:mod:`upright.tasks.standup.actions`), joint-target deltas and
gripper-site deltas through differential IK (:mod:`upright.tasks.lift.actions`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch


class ActionTerm(ABC):
    """Turns the policy's (N, A) action into (N, nu) actuator targets."""

    num_actions: int
    """A: the width of the policy's action."""

    @abstractmethod
    def process(self, env: Any, actions: torch.Tensor) -> torch.Tensor:
        """The actuator targets of this env step for ``actions`` (N, A) float32 (clipped, scaled, mapped; units of
        the actuators' ``ctrl``: rad for position actuators, m for the Panda's finger).

        Raises:
            ValueError: ``actions`` is not (N, A).
        """

    def applied(self, env: Any) -> torch.Tensor | None:
        """(N,) bool: the envs whose action took effect at the last :meth:`process` (None: all of them)."""
        return None
