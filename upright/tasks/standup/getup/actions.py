"""The get-up action: PD gains from each motor's reflected inertia, and the relative PD target.

The action is relative to the measured joint positions, p_target = q + β·a with β = ``env.curriculum.beta_init``
(0.6 in ``recipe=getup``, no curriculum), computed once per env step and held for the ``decimation`` physics
substeps by the motors' PD loops (the standup env's ``relative`` action mode). During the settle after a dropped
start (``env.unactuated_steps``) the target is the measured q (the action is ignored). MuJoCo Playground's
``Go1Getup`` found actions relative to the current joint position "worked better" than relative to the default pose.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from upright.robots import g1


def reflected_inertia_gains(
    armature: np.ndarray, natural_freq_hz: float, damping_ratio: float
) -> tuple[np.ndarray, np.ndarray]:
    """PD gains that give each joint's motor (its reflected rotor inertia alone) a second-order response.

    Kp = I·ω², Kd = 2·ζ·I·ω with ω = 2π·f (mjlab ``src/mjlab/utils/actuator.py`` and mjlab_playground ``g1-getup``
    ``config/g1/env_cfgs.py``, which use f = 5 Hz, ζ = 2).

    Args:
        armature: (J,) float64 reflected rotor inertia per joint, kg·m² (:func:`upright.robots.g1.joint_armature`).
        natural_freq_hz: f, Hz.
        damping_ratio: ζ.

    Returns:
        (Kp (J,) N·m/rad, Kd (J,) N·m·s/rad), float64.
    """
    omega = 2.0 * math.pi * float(natural_freq_hz)
    armature = np.asarray(armature, dtype=np.float64)
    return armature * omega**2, 2.0 * float(damping_ratio) * armature * omega


def getup_robot_info(natural_freq_hz: float, damping_ratio: float) -> g1.RobotInfo:
    """:func:`upright.robots.g1.robot_info` with the policy joints' Kp/Kd from :func:`reflected_inertia_gains`.

    The 6 held joints (waist roll/pitch, wrist pitch/yaw; locked on the 23-DoF G1) keep HoST's stiff gains, which
    hold them at their default angles as the 23-DoF robot's locked joints are held. Torque limits are the motors'.
    """
    info = g1.robot_info()
    kp, kd = info.kp.copy(), info.kd.copy()
    pol = info.policy_joint_ids
    kp[pol], kd[pol] = reflected_inertia_gains(info.armature[pol], natural_freq_hz, damping_ratio)
    return dataclasses.replace(info, kp=kp, kd=kd)


def set_actuator_gains(spec, kp: np.ndarray, kd: np.ndarray) -> None:
    """Write Kp/Kd (29,) of :data:`upright.robots.g1.JOINT_NAMES` order into the G1's ``position`` actuators of
    ``spec`` (an ``mujoco.MjSpec``; actuator i drives joint i).

    Raises:
        ValueError: the spec's actuators are not the G1's 29, in joint order.
    """
    acts = list(spec.actuators)
    if [a.target for a in acts[: len(g1.JOINT_NAMES)]] != list(g1.JOINT_NAMES):
        raise ValueError("set_actuator_gains: the spec's first actuators must drive upright.robots.g1.JOINT_NAMES")
    for act, p, d in zip(acts, kp, kd):
        act.gainprm[0] = float(p)
        act.biasprm[1] = -float(p)
        act.biasprm[2] = -float(d)
