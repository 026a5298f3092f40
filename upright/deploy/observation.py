"""The daemon's observation builder: the training env's observation terms, for one robot.

The terms are the shared definitions of :mod:`upright.tasks.standup.observations` (the same Python
functions the batched env calls), evaluated on a one-row :class:`~upright.tasks.standup.state.StandupState`
whose fields are filled from the robot's readings. Names, scales, clip and history length come from
the policy file (:class:`~upright.policy_io.spec.PolicySpec`), so a file is the contract even if the
defaults change later.

History (POLICY mode). The env zeroes every observation frame while a robot is unactuated and
keeps the last ``H`` frames, oldest first, so its first actuated step sees ``H - 1`` zero frames
then the current frame, with ``last_action`` = 0. :meth:`ObservationBuilder.reset` followed by
:meth:`ObservationBuilder.push` reproduces exactly that: the daemon resets the history when it
enters POLICY from HOLD. While HUMAN or PAUSED the daemon keeps pushing frames (with the executed
action as ``last_action``), so a policy resumed after an intervention sees what really happened.
"""

from __future__ import annotations

import numpy as np
import torch

from upright.deploy.metadata import TERMS_BY_NAME
from upright.policy_io.spec import PolicySpec
from upright.tasks.standup.state import StandupState


def projected_gravity(quat_wxyz: np.ndarray) -> np.ndarray:
    """Unit gravity (0, 0, -1) expressed in the body frame, R(q)ᵀ·(0, 0, -1), float64 (3,)."""
    w, x, y, z = (float(v) for v in quat_wxyz)
    norm = (w * w + x * x + y * y + z * z) ** 0.5
    if not norm > 0:
        return np.full(3, np.nan)
    w, x, y, z = w / norm, x / norm, y / norm, z / norm
    # third row of R(q), negated: R^T e_z = (2(xz - wy), 2(yz + wx), 1 - 2(x² + y²))
    return -np.array([2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y)])


class ObservationBuilder:
    """Builds observation frames and the stacked policy input for one robot.

    Args:
        spec: the policy contract.
    """

    def __init__(self, spec: PolicySpec):
        torch.set_num_threads(1)
        self.spec = spec
        j = spec.num_joints
        self._terms = [(TERMS_BY_NAME[n], float(s)) for n, s in zip(spec.observation_names, spec.observation_scales)]
        self._clip = float(spec.observation_clip)
        # numpy buffers shared with the torch tensors of a one-row state (no copies per tick)
        self.q = np.zeros((1, j), np.float32)
        self.dq = np.zeros((1, j), np.float32)
        self.gyro = np.zeros((1, 3), np.float32)
        self.gravity = np.zeros((1, 3), np.float32)
        self.action = np.zeros((1, j), np.float32)
        self.beta = np.full((1,), spec.action_scale, np.float32)
        state = StandupState.zeros(1, j)
        state.q, state.dq = torch.from_numpy(self.q), torch.from_numpy(self.dq)
        state.base_ang_vel, state.projected_gravity = torch.from_numpy(self.gyro), torch.from_numpy(self.gravity)
        state.action, state.beta = torch.from_numpy(self.action), torch.from_numpy(self.beta)
        self.state = state
        self.history = np.zeros((spec.history_length, spec.frame_dim), np.float32)
        self._flat = self.history.reshape(1, -1)

    def frame(
        self, q: np.ndarray, dq: np.ndarray, gyro: np.ndarray, quat_wxyz: np.ndarray, last_action: np.ndarray
    ) -> np.ndarray:
        """One observation frame (frame_dim,) float32 from policy-joint readings.

        Args:
            q, dq: (J,) policy-joint positions (rad) and velocities (rad/s), in the spec's joint order.
            gyro: (3,) body angular velocity, rad/s.
            quat_wxyz: (4,) body orientation (w, x, y, z), body-to-world.
            last_action: (J,) the previous policy tick's action: the policy's own (clipped) action under the
                policy, the executed one after a ramp or an intervention.
        """
        self.q[0] = q
        self.dq[0] = dq
        self.gyro[0] = gyro
        self.gravity[0] = projected_gravity(quat_wxyz)
        self.action[0] = last_action
        with torch.no_grad():
            parts = [term.func(self.state) * scale for term, scale in self._terms]
            out = torch.cat(parts, dim=-1)
            if self._clip != float("inf"):
                out = out.clamp(-self._clip, self._clip)
        return out.numpy()[0]

    def reset(self) -> None:
        """Zero the history (as the env's unactuated frames)."""
        self.history.fill(0.0)

    def push(self, frame: np.ndarray) -> np.ndarray:
        """Append ``frame`` (dropping the oldest) and return the (1, H·D) float32 policy input (a view)."""
        self.history[:-1] = self.history[1:]
        self.history[-1] = frame
        return self._flat
