"""The daemon's observation builder: the training env's observation terms, for one robot.

The terms are the neutral definitions of :mod:`upright.policy_io.obs_terms` (the same Python functions the
batched env calls on its torch state), evaluated here with numpy on a one-row :class:`NeutralReading` whose arrays
are filled from the robot's readings; float32 throughout, as the env's frames. Names, scales, clip and history length
come from the policy file (:class:`~upright.policy_io.spec.PolicySpec`), so a file is the contract even if the
defaults change later. numpy only: no torch, no task module (the robot computer's slim install runs this).

History (POLICY mode). HoST's env zeroes every observation frame while a robot is unactuated and
keeps the last ``H`` frames, oldest first, so its first actuated step sees ``H - 1`` zero frames
then the current frame, with ``last_action`` = 0. :meth:`ObservationBuilder.reset` followed by
:meth:`ObservationBuilder.push` reproduces exactly that: the daemon resets the history when it
enters POLICY from HOLD. A file whose ``observation_history_start`` is ``first_frame`` (the get-up
recipe's env: the first frame after a reset fills every slot) gets that instead: the first push after
:meth:`ObservationBuilder.reset` fills the history. While HUMAN or PAUSED the daemon keeps pushing
frames (with the executed action as ``last_action``), so a policy resumed after an intervention sees
what really happened.
"""

from __future__ import annotations

import numpy as np

from upright.policy_io.obs_terms import terms_for
from upright.policy_io.spec import PolicySpec


def projected_gravity(quat_wxyz: np.ndarray) -> np.ndarray:
    """Unit gravity (0, 0, -1) expressed in the body frame, R(q)ᵀ·(0, 0, -1), float64 (3,)."""
    w, x, y, z = (float(v) for v in quat_wxyz)
    norm = (w * w + x * x + y * y + z * z) ** 0.5
    if not norm > 0:
        return np.full(3, np.nan)
    w, x, y, z = w / norm, x / norm, y / norm, z / norm
    # third row of R(q), negated: R^T e_z = (2(xz - wy), 2(yz + wx), 1 - 2(x² + y²))
    return -np.array([2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y)])


class NeutralReading:
    """One robot reading as the terms of :mod:`upright.policy_io.obs_terms` read it: one row of float32 arrays."""

    def __init__(self, num_joints: int, beta: float, num_actions: int | None = None):
        self.q = np.zeros((1, num_joints), np.float32)
        """(1, J) policy-joint positions, rad."""
        self.dq = np.zeros((1, num_joints), np.float32)
        """(1, J) policy-joint velocities, rad/s."""
        self.base_ang_vel = np.zeros((1, 3), np.float32)
        """(1, 3) IMU gyro, body frame, rad/s."""
        self.projected_gravity = np.zeros((1, 3), np.float32)
        """(1, 3) unit gravity in the body frame."""
        self.action = np.zeros((1, num_joints if num_actions is None else num_actions), np.float32)
        """(1, A) the previous policy tick's action."""
        self.beta = np.full((1,), beta, np.float32)
        """(1,) the action scale β of the policy file."""


class ObservationBuilder:
    """Builds observation frames and the stacked policy input for one robot.

    Args:
        spec: the policy contract.
    """

    def __init__(self, spec: PolicySpec):
        self.spec = spec
        terms = terms_for(spec.action_mode)
        self._terms = [(terms[n], float(s)) for n, s in zip(spec.observation_names, spec.observation_scales)]
        self._clip = float(spec.observation_clip)
        self.state = NeutralReading(spec.num_joints, spec.action_scale, spec.num_actions)
        self.history = np.zeros((spec.history_length, spec.frame_dim), np.float32)
        self._flat = self.history.reshape(1, -1)
        self._fill_first = spec.metadata.get("observation_history_start", "zeros") == "first_frame"
        """The first push after a reset fills every slot (``observation_history_start = first_frame``)."""
        self._restarted = True

    def frame(
        self,
        q: np.ndarray,
        dq: np.ndarray,
        gyro: np.ndarray,
        quat_wxyz: np.ndarray,
        last_action: np.ndarray,
        **extra: np.ndarray,
    ) -> np.ndarray:
        """One observation frame (frame_dim,) float32 from policy-joint readings.

        Args:
            q, dq: (J,) policy-joint positions (rad) and velocities (rad/s), in the spec's joint order (a lift
                reading: the 9 chain coordinates, finger_joint2 mirroring the finger).
            gyro: (3,) body angular velocity, rad/s.
            quat_wxyz: (4,) body orientation (w, x, y, z), body-to-world.
            last_action: (A,) the previous policy tick's action: the policy's own (clipped) action under the
                policy, the executed one after a ramp or an intervention.
            extra: further reading attributes a task's terms read, each (D,) (lift: ``home_q``, ``ctrl``,
                ``gripper_pos``, ``cube_pos``, ``cube_quat``, ``target_pos``; :mod:`upright.policy_io.obs_terms`).
        """
        state = self.state
        for name, value in (("q", q), ("dq", dq)):
            arr = getattr(state, name)
            if arr.shape[1] == np.shape(value)[-1]:
                arr[0] = value
            else:
                setattr(state, name, np.asarray(value, np.float32).reshape(1, -1))
        state.base_ang_vel[0] = gyro
        state.projected_gravity[0] = projected_gravity(quat_wxyz)
        state.action[0] = last_action
        for name, value in extra.items():
            setattr(state, name, np.asarray(value, np.float32).reshape(1, -1))
        # float32 array x Python float stays float32 (as the env's float32 tensor x float), and so does the clip
        out = np.concatenate([term.func(state) * scale for term, scale in self._terms], axis=-1)
        if self._clip != float("inf"):
            out = np.clip(out, -self._clip, self._clip)
        return out[0]

    def reset(self) -> None:
        """Zero the history (as HoST's env's unactuated frames); with ``observation_history_start = first_frame`` the
        next :meth:`push` fills it instead."""
        self.history.fill(0.0)
        self._restarted = True

    def push(self, frame: np.ndarray) -> np.ndarray:
        """Append ``frame`` (dropping the oldest; filling every slot if it is the first after a reset and the file
        says ``first_frame``) and return the (1, H·D) float32 policy input (a view)."""
        if self._fill_first and self._restarted:
            self.history[:] = frame
        else:
            self.history[:-1] = self.history[1:]
            self.history[-1] = frame
        self._restarted = False
        return self._flat
