"""The controller's policy, human and paused targets: the action rule of the policy file and the active tick.

A lift (``ee_delta``) policy's tick also needs the object's pose: without a fresh sample from the object pose source
the policy is not called, ``OBJECT_STALE`` is raised and POLICY holds its targets (``max_consecutive_stale`` such
ticks in a row fault, ``STALE_FAULT``); HUMAN and PAUSED go on as usual.

A part of :class:`~upright.deploy.controller.Controller` (see :mod:`upright.deploy.controller` for the targets
per mode).
"""

from __future__ import annotations

import numpy as np

from upright.dataset_io.records import SafetyFlag
from upright.deploy import safety as S
from upright.deploy.policy import PolicyFault
from upright.deploy.robot import RobotReading
from upright.deploy.state_machine import Mode


class TargetsMixin:
    """The action rule (``relative``, ``absolute``, ``delta``, ``ee_delta``) and the targets of POLICY, HUMAN and
    PAUSED.

    A mixin of :class:`~upright.deploy.controller.Controller`: it uses the attributes that the controller's
    ``__init__`` sets and calls its other methods.
    """

    def action_origin(self, q_pol: np.ndarray) -> np.ndarray:
        """(J,) float64 the pose, rad, that action 0 targets: the measured policy-joint angles ``q_pol`` (J,)
        (``relative``), the policy's ``default_joint_pos`` (``absolute``) or the policy joints' current PD targets
        (``delta``: the previous tick's targets, the held default pose on entry from HOLD; a copy)."""
        if self.action_mode == "absolute":
            return self.default[self.pol]
        if self.action_mode == "delta":
            return self.target[self.pol].copy()
        return np.asarray(q_pol, dtype=np.float64)

    def policy_targets(self, a: np.ndarray, q_pol: np.ndarray, origin: np.ndarray | None = None) -> np.ndarray:
        """(J,) float64 PD targets of the policy joints, rad (m for a prismatic joint), for the (clipped) action ``a``
        (J,): the training env's rule, origin + β·a (``origin`` (J,), default :meth:`action_origin`), before any ramp
        or clamp; ``delta`` clips it to the joint limits as part of the rule (the lift env clips to its ctrl range,
        which equals the Panda's joint limits)."""
        origin = self.action_origin(q_pol) if origin is None else origin
        tgt = origin + self.beta * np.asarray(a, dtype=np.float64)
        if self.action_mode == "delta":
            np.clip(tgt, self.lower[self.pol], self.upper[self.pol], out=tgt)
        return tgt

    def executed_action(self, targets: np.ndarray, q_pol: np.ndarray, origin: np.ndarray | None = None) -> np.ndarray:
        """(J,) float32 the action, in policy units, that :meth:`policy_targets` maps to ``targets`` (J,) rad:
        (targets - origin) / β, ``origin`` (J,) as there (default :meth:`action_origin`; pass the one taken before
        the targets were sent in ``delta`` mode, whose origin is the targets)."""
        origin = self.action_origin(q_pol) if origin is None else origin
        return ((np.asarray(targets, dtype=np.float64) - origin) / self.beta).astype(np.float32)

    def pose_refusal(self) -> str | None:
        """Why the policy may not take over (``resume``, ``release``): a lift policy's object pose source has no fresh
        pose; else None."""
        source = self.object_pose
        if source is not None and source.fresh() is None:
            return f"no fresh object pose ({source.describe()}): start the tracker (or check its address and frame)"
        return None

    def _frame_inputs(self, q_pol: np.ndarray, dq_pol: np.ndarray) -> tuple | None:
        """(q, dq, extra readings) of this tick's observation frame (:meth:`ObservationBuilder.frame
        <upright.deploy.observation.ObservationBuilder.frame>`), or None when a lift policy has no fresh object pose.

        A lift (``ee_delta``) policy reads the 9 chain coordinates (finger_joint2 mirrors the finger), its home pose,
        the commanded targets q_c, the gripper site (forward kinematics of the encoders) and, from the object pose
        source, the cube's pose and the goal."""
        if self.ee is None:
            return q_pol, dq_pol, {}
        ee = self.ee
        extra = {
            "home_q": self.ee_home_q9,
            "ctrl": self.ee_ctrl,
            "gripper_pos": ee.site(q_pol),  # the IK step's anti-windup bounds read it again this tick
        }
        if self.object_pose is not None:
            sample = self.object_pose.fresh()
            if sample is None:
                return None
            extra.update(cube_pos=sample.pos, cube_quat=sample.quat, target_pos=self.object_goal)
        return ee.measured_q9(q_pol), ee.measured_q9(dq_pol), extra

    def _active_tick(self, reading: RobotReading) -> None:
        pol, spec = self.pol, self.spec
        q_pol, dq_pol = reading.q[pol], reading.dq[pol]
        inputs = self._frame_inputs(q_pol, dq_pol)
        out = None
        if inputs is None:  # a lift policy without a fresh object pose: no policy call this tick (module docstring)
            self.flags |= SafetyFlag.OBJECT_STALE
        else:
            q_in, dq_in, extra = inputs
            frame = self.obs.frame(q_in, dq_in, reading.imu_gyro, reading.imu_quat, self.last_action, **extra)
            if not S.all_finite(frame):
                self.fault(SafetyFlag.NONFINITE_OBS, "NaN/inf in the observation")
                return
            self.frame[:] = frame
            obs_in = self.obs.push(frame)
            try:
                out = self.policy(obs_in)
            except PolicyFault as err:
                self.proposal[:] = 0.0
                self.fault(SafetyFlag.EXCEPTION, str(err))
                return
            finally:  # the frames the policy read (and a chunk it requested got) are the ones this tick logs
                self._policy_images = getattr(self.policy, "tick_images", None)
            if getattr(self.policy, "camera_stale", False):
                self.flags |= SafetyFlag.CAMERA_STALE
        mode = self.sm.mode
        fresh = out is not None
        if fresh:
            action = np.asarray(out, dtype=np.float32).reshape(-1)
            if action.shape != (spec.num_actions,) or not S.all_finite(action):
                self.proposal[:] = 0.0
                self.fault(SafetyFlag.NONFINITE_ACTION, "NaN/inf (or a wrong shape) in the policy's action")
                return
            self.proposal[:] = action
            a = np.clip(action, -spec.action_clip, spec.action_clip)
        else:  # a chunked policy without a fresh action, or no object pose: hold (POLICY), N ticks in a row -> damping
            self.proposal[:] = 0.0
            if inputs is not None:
                self.flags |= SafetyFlag.STALE_ACTION
        if self.stale.update(not fresh and mode == Mode.POLICY):
            if inputs is None:
                why = f"lift policy: no fresh object pose for {self.stale.count} policy ticks in a row"
                self.fault(SafetyFlag.STALE_FAULT, f"{why} ({self.object_pose.describe()})")
            else:
                why = getattr(self.policy, "miss_reason", "") or "no action"
                self.fault(
                    SafetyFlag.STALE_FAULT,
                    f"chunked policy: no fresh action for {self.stale.count} policy ticks in a row ({why})",
                )
            return
        ee = self.ee
        origin = self.action_origin(q_pol) if ee is None else None
        ctrl_before = self.ee_ctrl.copy()
        ramping = False
        if mode == Mode.POLICY and not fresh:
            tgt = self.target[pol].copy()  # hold the current targets
        elif mode == Mode.POLICY:
            if ee is not None:  # ee_delta: the IK step on the commanded targets, then gravity compensation
                self.ee_ctrl = ee.step(self.ee_ctrl, a, q_pol, extra["gripper_pos"])
                tgt = ee.applied(self.ee_ctrl)
            else:
                tgt = self.policy_targets(a, q_pol, origin)
            if self.policy_ramp_k < self.policy_ramp_ticks:
                self.policy_ramp_k += 1
                alpha = self.policy_ramp_k / self.policy_ramp_ticks
                tgt = self.anchor + alpha * (tgt - self.anchor)
                ramping = True
                self.flags |= SafetyFlag.RAMPING
        elif mode == Mode.HUMAN:
            prev = self.target[pol]
            step = self.cfg.safety.human_max_delta
            tgt = prev + np.clip(self.human_goal - prev, -step, step)
        else:
            tgt = self.paused_target.copy()
        full = self.default.copy()
        full[pol] = tgt
        clamped = self._send_targets(full, reading)
        own = mode == Mode.POLICY and fresh and not ramping  # the policy's action made these targets
        if own and not clamped:
            self.executed[:] = a
        elif ee is not None:  # targets the rule did not make (or clamped): q_c follows what was sent
            if clamped or fresh or mode != Mode.POLICY:  # (a held, unclamped stale tick keeps q_c as it is)
                self.ee_ctrl = ee.command_of(self.target[pol])
            self.executed[:] = ee.action_between(ctrl_before, self.ee_ctrl, spec.action_clip)
        else:
            self.executed[:] = self.executed_action(self.target[pol], q_pol, origin)
        # The observation's last action follows training: under the policy it is the policy's (clipped) action,
        # even when a deploy-only clamp (target bounds, delta, torque) changed the target; the training env
        # never clamps, so the executed action would put the policy out of distribution. After a ramp, a held
        # (stale) tick or an intervention it is the executed one, so a resumed policy sees what really happened.
        self.last_action[:] = a if own else self.executed
