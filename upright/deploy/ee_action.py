"""The ``ee_delta`` action rule on the robot: the lift env's end-effector action term, in numpy, for one arm.

A lift MLP policy outputs a (4,) action: the gripper site's translation ``ee_action_scale``·a[:3] m (world frame, the
robot base) and the finger's ``action_scale``·a[3] m. The env (:class:`upright.tasks.lift.actions.PandaTargetAction`)
keeps the commanded targets q_c (8,) (7 arm joints, rad; the finger, m), moves the arm's part by the damped
least-squares IK step that realises the translation at q_c (:func:`~upright.policy_io.kinematics.dls_joint_step`), the
finger's by the finger step, clips q_c to the control range, and sends q_c + g(q_c)/Kp to the PD (gravity
compensation, ``ee_gravity_compensation``). :class:`EeDeltaRule` does the same from the policy file alone: the chain
(``kinematic_chain``), the IK settings (``ik_*``, ``ee_*``) and the control range (``ctrl_lower`` / ``ctrl_upper``).

Differences from the env: the anti-windup bound ``ee_max_lead_down`` always applies (the env gates it on its
curriculum level only while training with the curriculum; evaluation and deployment apply it), and the measured site
is forward kinematics of the encoders (the env reads MuJoCo's site, the same thing).
"""

from __future__ import annotations

import math

import numpy as np

from upright.policy_io.kinematics import KinematicChain, bound_lead, bound_lead_down, dls_joint_step
from upright.policy_io.schema import PolicyMetadataError

EE_KEYS = (
    "kinematic_chain",
    "ee_action_scale",
    "ee_action_names",
    "ik_damping",
    "ik_rotation_weights",
    "ik_null_gain",
    "ik_home_joint_pos",
    "ee_gravity_compensation",
    "ctrl_lower",
    "ctrl_upper",
)
"""Metadata keys an ``ee_delta`` policy file must carry for the daemon (``ee_min_height``, ``ee_max_lead`` and
``ee_max_lead_down`` are optional: None or absent means no bound)."""

REFRESH_HINT = "add them with python -m upright.training.export --refresh-metadata FILE (the weights stay)"


class EeDeltaRule:
    """The end-effector delta rule of one policy file (module docstring).

    Args:
        meta: the file's decoded metadata.
        kp: (8,) the policy joints' Kp (gravity compensation divides by the arm's).
        finger_scale: m of finger target per unit a[3] (the file's ``action_scale``).
        path: the file, for messages.

    Raises:
        PolicyMetadataError: a key of :data:`EE_KEYS` is missing or malformed (one line naming it and the fix).
    """

    def __init__(self, meta: dict, kp: np.ndarray, finger_scale: float, path: str = "<policy>"):
        missing = [k for k in EE_KEYS if k not in meta]
        if missing:
            raise PolicyMetadataError(f"{path}: an ee_delta policy needs metadata keys {missing}; {REFRESH_HINT}")
        try:
            self.chain = KinematicChain.from_metadata(meta["kinematic_chain"])
        except (ValueError, TypeError, KeyError) as err:
            raise PolicyMetadataError(f"{path}: kinematic_chain is malformed ({err}); {REFRESH_HINT}") from None
        if self.chain.num_q != 9:
            raise PolicyMetadataError(f"{path}: kinematic_chain has {self.chain.num_q} coordinates, expected 9")
        self.num_actions = len(meta["ee_action_names"])
        if self.num_actions != 4:
            raise PolicyMetadataError(f"{path}: ee_action_names has {self.num_actions} entries, expected 4")
        try:
            self.ee_scale = float(meta["ee_action_scale"])
            self.finger_scale = float(finger_scale)
            self.damping = float(meta["ik_damping"])
            self.weights = np.concatenate([np.ones(3), np.asarray(meta["ik_rotation_weights"], dtype=np.float64)])
            self.null_gain = float(meta["ik_null_gain"])
            self.home = np.asarray(meta["ik_home_joint_pos"], dtype=np.float64)
            self.lower = np.asarray(meta["ctrl_lower"], dtype=np.float64)
            self.upper = np.asarray(meta["ctrl_upper"], dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise PolicyMetadataError(f"{path}: an ee_delta setting is not a number ({err}); {REFRESH_HINT}") from None
        if not isinstance(meta["ee_gravity_compensation"], bool):
            raise PolicyMetadataError(f"{path}: ee_gravity_compensation must be true or false; {REFRESH_HINT}")
        self.gravity_compensation = meta["ee_gravity_compensation"]
        bounds = {}
        for key in ("ee_min_height", "ee_max_lead", "ee_max_lead_down"):
            value = meta.get(key)
            try:
                bounds[key] = None if value is None else float(value)
            except (TypeError, ValueError):
                bounds[key] = math.nan
            if bounds[key] is not None and not math.isfinite(bounds[key]):
                raise PolicyMetadataError(f"{path}: {key} = {value!r} is not a number or null; {REFRESH_HINT}")
        self.min_height = bounds["ee_min_height"]
        """m, world z: the commanded site's floor (None: none)."""
        self.max_lead = bounds["ee_max_lead"]
        """m: how far the commanded site may run ahead of the measured one (None: no bound)."""
        self.max_lead_down = bounds["ee_max_lead_down"]
        """m: how far the commanded site may run below the measured one (None: no bound)."""
        positive = {"ee_action_scale": self.ee_scale, "action_scale": self.finger_scale, "ik_damping": self.damping}
        bad = [k for k, v in positive.items() if not (math.isfinite(v) and v > 0)]
        if bad or not (math.isfinite(self.null_gain) and self.null_gain >= 0):
            raise PolicyMetadataError(
                f"{path}: {bad or ['ik_null_gain']} must be positive finite numbers; {REFRESH_HINT}"
            )
        self.kp_arm = np.asarray(kp, dtype=np.float64)[:7]
        if (
            self.home.shape != (7,)
            or self.lower.shape != (8,)
            or self.upper.shape != (8,)
            or self.weights.shape != (6,)
        ):
            raise PolicyMetadataError(
                f"{path}: ik_home_joint_pos (7), ctrl_lower / ctrl_upper (8) or ik_rotation_weights (3) have the "
                f"wrong length; {REFRESH_HINT}"
            )
        self.home_rotation = self.chain.site_frames(self._q9(np.append(self.home, 0.0)))[1][0]
        if not np.all(np.isfinite(self.home_rotation)):
            raise PolicyMetadataError(f"{path}: ik_home_joint_pos gives a non-finite hand orientation; {REFRESH_HINT}")

    @staticmethod
    def _q9(ctrl: np.ndarray) -> np.ndarray:
        """(1, 9) chain coordinates of 8 actuated values (the finger's for both slides)."""
        c = np.asarray(ctrl, dtype=np.float64).reshape(-1)
        return np.concatenate([c[:8], c[7:8]])[None]

    def measured_q9(self, q8: np.ndarray) -> np.ndarray:
        """(9,) float64 chain coordinates of the 8 measured policy joints (finger_joint2 mirrors finger_joint1)."""
        return self._q9(q8)[0]

    def site(self, q8: np.ndarray) -> np.ndarray:
        """(3,) m the gripper site at the 8 joint values ``q8`` (forward kinematics; world frame)."""
        return self.chain.site_frames(self._q9(q8))[0][0]

    def step(
        self, ctrl: np.ndarray, action: np.ndarray, q_measured: np.ndarray, measured_site: np.ndarray | None = None
    ) -> np.ndarray:
        """The new commanded targets q_c (8,) float64 from the current ``ctrl`` (8,) and the clipped ``action`` (4,),
        with ``q_measured`` (8,) the encoders (for the anti-windup bounds) and ``measured_site`` (3,) m its gripper
        site if the caller already has it (:meth:`site` of ``q_measured``; computed here when None)."""
        a = np.asarray(action, dtype=np.float64)
        frames = self.chain.site_frames(self._q9(ctrl), columns=7)
        d = self.ee_scale * a[None, :3]
        if self.max_lead is not None or self.max_lead_down is not None:
            measured = (self.site(q_measured) if measured_site is None else np.asarray(measured_site, np.float64))[None]
            if self.max_lead is not None:
                d = bound_lead(frames[0], measured, d, self.max_lead)
            if self.max_lead_down is not None:
                d = bound_lead_down(frames[0], measured, d, self.max_lead_down)
        q_arm = np.asarray(ctrl, dtype=np.float64)[None, :7]
        dq = dls_joint_step(
            q_arm, d, frames, self.home, self.home_rotation, self.weights, self.damping, self.null_gain,
            self.min_height,
        )[0]  # fmt: skip
        step = np.concatenate([dq, [self.finger_scale * a[3]]])
        return np.clip(np.asarray(ctrl, dtype=np.float64) + step, self.lower, self.upper)

    def applied(self, ctrl: np.ndarray) -> np.ndarray:
        """(8,) the PD targets sent for commanded ``ctrl`` (8,): the arm's q_c + g(q_c)/Kp (with gravity
        compensation), clipped to the control range."""
        ctrl = np.asarray(ctrl, dtype=np.float64)
        if not self.gravity_compensation:
            return ctrl.copy()
        out = ctrl.copy()
        out[:7] += self.chain.gravity_torques(self._q9(ctrl))[0, :7] / self.kp_arm
        return np.clip(out, self.lower, self.upper)

    def command_of(self, targets: np.ndarray) -> np.ndarray:
        """(8,) commanded q_c whose :meth:`applied` targets are about ``targets`` (8,) (three fixed-point steps of
        q_c = t − g(q_c)/Kp, from q_c = t): where the rule resumes after targets it did not make (an intervention, a
        pause)."""
        t = np.asarray(targets, dtype=np.float64)
        c = t.copy()
        for _ in range(3 if self.gravity_compensation else 0):
            g = self.chain.gravity_torques(self._q9(c))[0, :7]
            c = t.copy()
            c[:7] -= g / self.kp_arm
        return np.clip(c, self.lower, self.upper)

    def action_between(self, ctrl_before: np.ndarray, ctrl_after: np.ndarray, clip: float) -> np.ndarray:
        """(4,) float32 the action that moves the commanded site and finger from ``ctrl_before`` to ``ctrl_after``
        ((8,) each): site displacement / ``ee_action_scale``, finger change / the finger scale, clipped to ±clip (what
        the policy reads as its last action after targets it did not make)."""
        d = (self.site(ctrl_after) - self.site(ctrl_before)) / self.ee_scale
        f = (float(ctrl_after[7]) - float(ctrl_before[7])) / self.finger_scale
        return np.clip(np.append(d, f), -clip, clip).astype(np.float32)
