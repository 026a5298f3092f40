"""Safety checks and clamps, each a small function, plus the counters they need.

The control loop (:mod:`upright.deploy.controller`) calls them every I/O cycle (link health) and
every policy tick (everything else). A check that fails sends the robot to DAMPING; a clamp changes
the command and raises a flag. Flags are logged with every frame (``safety_flags``); their bits
(``SafetyFlag``, ``FAULT_FLAGS``) are the dataset's, defined with its record layout in
:mod:`upright.dataset_io.records`, where the daemon's modules import them from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class SafetyConfig:
    """Limits of the checks. Defaults suit the G1 at 50 Hz / 500 Hz."""

    max_consecutive_link_errors: int = 5
    """N: a motor whose replies time out or fail the CRC N times in a row -> damping."""
    max_motor_age_s: float = 0.05
    """A motor whose last good reply is older than this -> damping."""
    max_imu_age_s: float = 0.05
    """An IMU whose sequence has not advanced for this long -> damping."""
    max_target_delta: float | None = 0.5
    """Per-tick change of a joint target, rad (None: no delta clamp)."""
    clamp_torque: bool = True
    """Clamp the estimated torque kp(q*−q) − kd·dq to the joint's torque limit by moving q*."""
    limit_clamp: str = "torque"
    """How far a target may lie outside its joint's range (:func:`target_bounds`): ``torque`` (default), up to
    torque limit / Kp, where the PD law already asks the motor for its whole torque at the joint's stop; ``range``,
    not at all. upright's G1 envs never limit PD targets (only the torque), so ``range`` weakens a
    trained policy's push towards a stop: the committed get-up policy, which drives its joints near their limits
    with relative targets, got up from prone in 0 of 5 runs through the daemon and sim-robot with ``range`` and in
    5 of 5 with ``torque`` (the same five starts, yaw -1.2 to 3.0 rad; ``tests/deploy/test_getup_deploy.py`` runs
    yaw 0 with ``torque``)."""
    tilt_limit_rad: float | None = 1.0
    """Tilt (angle between body z and world z) beyond this -> damping, once armed (None: off)."""
    tilt_arm_s: float = 0.5
    """The tilt check arms after the tilt has stayed below the limit this long (a robot that starts
    lying down, as in standup, is not sent to damping for lying down; a fall after standing is)."""
    max_consecutive_overruns: int | None = 5
    """K: policy ticks in a row whose wake-up is later than ``overrun_threshold_s`` -> damping (None: overruns are
    flagged in every frame but never damp; ``upright-deploy run --sim`` only)."""
    overrun_threshold_s: float = 0.002
    """A policy tick that wakes up later than this past its deadline counts as an overrun."""
    damping_kd: float = 8.0
    """Damping command: kp = 0, kd = this (joint side, N·m·s/rad)."""
    watchdog_s: float | None = 0.25
    """The loop must come back this often (SIGALRM), else an exception sends damping (None: off)."""
    human_max_delta: float = 0.02
    """Per-tick rate limit on human (takeover) targets, rad."""
    max_consecutive_stale: int | None = 25
    """N: POLICY ticks in a row without a fresh action from a chunked policy -> damping (None: never; the joints
    keep holding). 25 ticks = 0.5 s at 50 Hz, which also covers the first chunk's inference after ``resume``."""


LIMIT_CLAMPS = ("torque", "range")
"""The values of :attr:`SafetyConfig.limit_clamp`."""


def target_bounds(
    lower: np.ndarray, upper: np.ndarray, kp: np.ndarray, torque_limit: np.ndarray, mode: str
) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) bounds of the joint targets, each (n,) float64: the joint range widened by
    ``torque_limit / kp`` (``mode`` ``torque``; joints with kp = 0 are not widened) or a copy of the joint range
    (``range``). Units follow the joint: rad for a hinge (kp N·m/rad, torque limit N·m), m for a slide (N/m, N).

    Raises:
        ValueError: an unknown ``mode`` (``SafetyConfig.limit_clamp``, ``--limit-clamp``).
    """
    if mode not in LIMIT_CLAMPS:
        raise ValueError(f"limit clamp {mode!r}: use one of {LIMIT_CLAMPS}")
    if mode == "range":
        return lower.copy(), upper.copy()
    margin = np.where(kp > 0, torque_limit / np.where(kp > 0, kp, 1.0), 0.0)
    return lower - margin, upper + margin


def all_finite(x: np.ndarray) -> bool:
    """True when no element is NaN or inf."""
    return bool(np.isfinite(x).all())


def clamp_to_limits(target: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> bool:
    """Clamp ``target`` in place to [lower, upper]; return whether anything changed."""
    changed = bool(((target < lower) | (target > upper)).any())
    np.clip(target, lower, upper, out=target)
    return changed


def clamp_delta(target: np.ndarray, previous: np.ndarray, max_delta: float | None) -> bool:
    """Clamp ``target`` in place to previous ± max_delta; return whether anything changed."""
    if max_delta is None:
        return False
    lo, hi = previous - max_delta, previous + max_delta
    changed = bool(((target < lo) | (target > hi)).any())
    np.clip(target, lo, hi, out=target)
    return changed


def clamp_torque(
    target: np.ndarray, q: np.ndarray, dq: np.ndarray, kp: np.ndarray, kd: np.ndarray, limit: np.ndarray
) -> bool:
    """Move ``target`` (in place) so that the estimated torque kp(q*−q) − kd·dq stays within ±limit.

    Joints with kp = 0 are left alone. Returns whether anything changed.
    """
    tau = kp * (target - q) - kd * dq
    over = (np.abs(tau) > limit) & (kp > 0)
    if not over.any():
        return False
    tau_c = np.clip(tau, -limit, limit)
    target[over] = (q + (tau_c + kd * dq) / np.where(kp > 0, kp, 1.0))[over]
    return True


def tilt_angle(gravity_body: np.ndarray) -> float:
    """Angle between the body's z axis and world up, rad, from the projected gravity (0 when upright)."""
    gz = float(gravity_body[2])
    norm = float(np.linalg.norm(gravity_body))
    if not norm > 0 or not math.isfinite(norm):
        return math.pi
    return math.acos(max(-1.0, min(1.0, -gz / norm)))


def overheated(temperature: np.ndarray, limit: float) -> np.ndarray:
    """bool per motor: temperature at or above ``limit``."""
    return temperature >= limit


def motor_errors(error: np.ndarray) -> np.ndarray:
    """bool per motor: a non-zero error field."""
    return error != 0


class LinkHealth:
    """Per-motor consecutive failure counters and last-good times (the 500 Hz checks).

    Args:
        n: number of motors.
        max_consecutive: N in a row -> fault.
        max_age_s: last good reply older than this -> fault.
    """

    def __init__(self, n: int, max_consecutive: int, max_age_s: float):
        self.consecutive = np.zeros(n, np.int64)
        self.last_good_ns = np.zeros(n, np.int64)
        self.total_timeouts = np.zeros(n, np.int64)
        self.total_crc_errors = np.zeros(n, np.int64)
        self.max_consecutive = max_consecutive
        self.max_age_ns = int(max_age_s * 1e9)

    def start(self, now_ns: int) -> None:
        self.last_good_ns[:] = now_ns

    def update(self, ok: np.ndarray, crc_error: np.ndarray, timeout: np.ndarray, now_ns: int) -> np.ndarray:
        """Count this exchange; return bool per motor: faulted (N in a row, or too old)."""
        self.total_timeouts += timeout
        self.total_crc_errors += crc_error
        self.consecutive[ok] = 0
        self.consecutive[~ok] += 1
        self.last_good_ns[ok] = now_ns
        return (self.consecutive >= self.max_consecutive) | (now_ns - self.last_good_ns > self.max_age_ns)


class ImuFreshness:
    """The IMU's sequence must advance: returns stale when it has not for ``max_age_s``."""

    def __init__(self, max_age_s: float):
        self.max_age_ns = int(max_age_s * 1e9)
        self.last_seq = -1
        self.last_new_ns = 0

    def start(self, now_ns: int) -> None:
        self.last_new_ns = now_ns

    def update(self, ok: bool, seq: int, now_ns: int) -> bool:
        """Record one exchange; return True when the IMU is stale."""
        if ok and seq != self.last_seq:
            self.last_seq = seq
            self.last_new_ns = now_ns
        return now_ns - self.last_new_ns > self.max_age_ns


class ConsecutiveCounter:
    """Counts events in a row; :meth:`update` returns True once the count reaches ``limit`` (None: never)."""

    def __init__(self, limit: int | None):
        self.limit = limit
        self.count = 0

    def update(self, event: bool) -> bool:
        self.count = self.count + 1 if event else 0
        return self.limit is not None and self.count >= self.limit


class TiltGuard:
    """Tilt check with arming (see :attr:`SafetyConfig.tilt_arm_s`)."""

    def __init__(self, limit_rad: float | None, arm_ticks: int):
        self.limit = limit_rad
        self.arm_ticks = max(1, arm_ticks)
        self.below = 0
        self.armed = False

    def update(self, gravity_body: np.ndarray) -> bool:
        """Return True when armed and tilted beyond the limit."""
        if self.limit is None:
            return False
        tilt = tilt_angle(gravity_body)
        if tilt <= self.limit:
            self.below += 1
            if self.below >= self.arm_ticks:
                self.armed = True
            return False
        self.below = 0
        return self.armed
