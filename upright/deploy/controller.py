"""What happens every I/O cycle and every policy tick: checks, the state machine, targets, logging.

The loop (:mod:`upright.deploy.loop`) calls :meth:`Controller.on_cycle` after each exchange with
the robot (500 Hz by default); every ``decimation``-th cycle is a policy tick (50 Hz), where the
operator is polled, the mode's targets are computed, every safety check runs and one frame is
logged. Between policy ticks the motors keep the latest targets (the command is re-sent).

Targets per mode (joint side, robot joint order):

- ZERO_TORQUE: kp = kd = 0.
- RAMP_TO_DEFAULT: linear from the measured pose at entry to the default pose over ``ramp_s``.
- HOLD: the default pose (policy joints: ``default_joint_pos``, held joints: ``held_joint_pos``).
- POLICY: the training env's rule for the policy joints, by the file's ``action_mode``: ``relative``
  ``q_measured + β·a``, ``absolute`` ``default_joint_pos + β·a``, ``delta`` (the lift task's rule, chunked VLA
  policies) ``clip(previous target + β·a, joint limits)`` (:meth:`Controller.policy_targets`), ``ee_delta`` (the lift
  MLP policies) the env's end-effector rule on the commanded targets q_c, sent gravity-compensated
  (:class:`~upright.deploy.ee_action.EeDeltaRule`; HOLD sends the compensated home targets, q_c restarts at home on
  entry from HOLD, and follows the sent targets after HUMAN or PAUSED; a tick without a fresh object pose holds, see
  :mod:`upright.deploy.controller_targets`). On entry the targets blend from the measured pose at entry to the
  policy's over ``policy_ramp_s`` (not for ``delta`` and ``ee_delta``: their targets start at the held ones, so they
  are continuous already). A policy call that returns None (a chunked policy,
  :class:`~upright.deploy.chunk_runner.ChunkRunner`, without a fresh action) holds the current targets and raises
  ``STALE_ACTION``; ``max_consecutive_stale`` such POLICY ticks in a row fault (``STALE_FAULT``), and a
  :class:`~upright.deploy.policy.PolicyFault` (its inference worker died) faults at once (``EXCEPTION``).
- HUMAN: the operator's targets, starting from the current ones (bumpless), rate-limited (joint targets, sent as they
  are: an ``ee_delta`` arm sags by its gravity torque / Kp, up to ~0.04 rad on the Panda, from the compensated ones).
- PAUSED: the targets at the moment of the pause.
- DAMPING: kp = 0, kd = ``damping_kd``; terminal.

Held joints always get their held pose and gains outside ZERO_TORQUE and DAMPING. Every position
target then passes the clamps: target bounds (joint range ± torque limit / Kp, :func:`~upright.deploy.safety.
target_bounds`), per-tick delta, estimated torque.

Cameras (a chunked policy that reads them): the runner raises ``CAMERA_STALE`` on a tick whose chunk request was
skipped for a missing or too old frame; every logged frame carries each camera's frame as
``observation.images.<name>`` (:meth:`~upright.deploy.logger_client.LoggerClient.put_images`): on a tick that called
the policy, the frame the runner read on that tick (``tick_images``: the one a chunk requested then was given, not a
newer one that arrived later in the tick), else the camera's newest frame.

Logging. One frame per policy tick in POLICY, HUMAN and PAUSED (an episode). The tick that enters
DAMPING through a fault also logs its frame, in any mode (opening a one-frame episode when none is
open), with the fault's bits in ``safety_flags`` (bits raised between two policy ticks are kept for
the next frame) and the reason in the episode's ``upright/reason``; so every fault is in the dataset.
Episode numbers are the dataset's ``episode_index`` (they continue the dataset, run after run).

Logger failure. The logger's health is part of the safety state: every policy tick, before the operator's requests,
:meth:`~upright.deploy.logger_client.LoggerClient.check` tells whether the logger failed (its process died, e.g.
SIGKILL; its writes failed: a full disk, EIO, EFBIG; or it took no frame for ``stall_s``). On the tick that finds it,
the daemon logs one line at ERROR (``logging``, logger ``upright.deploy``) naming the failure and the reaction,
``ctl status`` reports it (``logger``: state ``failed``, its ``error``, ``failed_tick``), no frame is sent any more,
and ``ControllerConfig.on_logger_failure`` decides:

- ``hold`` (the default, ``--on-logger-failure hold``): the episode ends there (its flushed frames stay in the
  dataset's journal; ``upright-deploy recover`` converts them once the logger is gone) and POLICY, HUMAN or PAUSED
  ramp to the default pose over ``ramp_s`` (RAMP_TO_DEFAULT, from the current targets), then HOLD; ``resume`` (and
  ``--auto-engage``) is refused from then on, so nothing runs unrecorded; restart the daemon to record again.
- ``continue`` (opt-in): the policy keeps running, unrecorded.

DAMPING stays DAMPING either way.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from upright.dataset_io.records import SafetyFlag
from upright.deploy import safety as S
from upright.deploy.controller_operator import OperatorMixin
from upright.deploy.controller_recording import RecordingMixin
from upright.deploy.controller_safety import SafetyMixin
from upright.deploy.controller_targets import TargetsMixin
from upright.deploy.ee_action import EeDeltaRule
from upright.deploy.observation import ObservationBuilder, projected_gravity
from upright.deploy.protocol.go_m8010 import MotorMode
from upright.deploy.robot import JointCommand, RobotReading
from upright.deploy.robot_config import RobotConfig
from upright.deploy.safety import SafetyConfig
from upright.deploy.state_machine import Mode, StateMachine
from upright.policy_io.schema import DAEMON_ACTION_MODES
from upright.policy_io.spec import PolicySpec

LOGGER_FAILURE_REACTIONS = ("hold", "continue")
"""Values of ``ControllerConfig.on_logger_failure`` (``--on-logger-failure``)."""


@dataclass
class ControllerConfig:
    """Rates, ramps and automation of the daemon."""

    io_rate_hz: float = 500.0
    """Motor I/O rate; the policy rate is 1 / control_dt from the policy file."""
    ramp_s: float = 2.0
    """RAMP_TO_DEFAULT duration."""
    policy_ramp_s: float = 0.5
    """Blend from the measured pose into the policy's targets when POLICY is entered (0: none; ``delta`` policies
    never blend: their targets start at the held ones)."""
    auto_start: bool = False
    """Leave ZERO_TORQUE at once (no operator ``start``)."""
    auto_engage_s: float | None = None
    """Enter POLICY after this long in HOLD (None: wait for the operator's ``resume``)."""
    exit_after_damping_s: float | None = None
    """Exit this long after entering DAMPING (None: keep sending damping until stopped)."""
    stop_damping_s: float = 0.2
    """On SIGINT/SIGTERM/quit: send damping this long, then exit."""
    on_logger_failure: str = "hold"
    """What the daemon does when its logger fails (see the module's Logger failure): ``hold`` (end the episode, ramp
    to HOLD, refuse ``resume``) or ``continue`` (the policy runs on, unrecorded)."""
    safety: SafetyConfig = field(default_factory=SafetyConfig)


class Controller(SafetyMixin, TargetsMixin, OperatorMixin, RecordingMixin):
    """Per-cycle logic of the daemon.

    This class holds the state, the cycle and the policy tick (the mode's targets, the state machine's transitions);
    its parts are mixins: :class:`~upright.deploy.controller_safety.SafetyMixin` (faults, damping, clamps),
    :class:`~upright.deploy.controller_targets.TargetsMixin` (the action rule, POLICY/HUMAN/PAUSED targets),
    :class:`~upright.deploy.controller_operator.OperatorMixin` (operator commands, ``ctl status``) and
    :class:`~upright.deploy.controller_recording.RecordingMixin` (dataset frames, a failed logger).

    Args:
        spec: the policy contract (checked against ``robot``).
        robot: motors, limits.
        policy: callable (1, obs_dim) float32 -> (J,) float32 actions, or None when it has no fresh action this tick
            (a chunked policy, :class:`~upright.deploy.chunk_runner.ChunkRunner`); it may raise
            :class:`~upright.deploy.policy.PolicyFault` (damping, with its message as the reason) and may have
            ``reset()`` (called when POLICY is entered from HOLD) and ``close()`` (called by :meth:`close`).
        cfg: rates and ramps.
        logger: a :class:`~upright.deploy.logger_client.LoggerClient` or None.
        operator: an :class:`~upright.deploy.operator.OperatorServer` or None.
        keyboard: a :class:`~upright.deploy.operator.Keyboard` or None.
        cameras: name -> :class:`~upright.deploy.camera.CameraSource` whose newest frames are logged as
            ``observation.images.<name>`` (the logger's features must have them); not closed by :meth:`close`.
        object_pose: the :class:`~upright.deploy.object_pose.ObjectPoseSource` of a lift policy's cube (None: the
            policy reads no tracked input); not closed by :meth:`close`.
        object_goal: (3,) m, the lift target (robot base frame), with ``object_pose``.

    Raises:
        ValueError: ``control_dt`` is not a whole number of I/O periods, ``spec.action_mode`` is unknown, or
            ``cfg.on_logger_failure`` is neither ``hold`` nor ``continue``.
    """

    def __init__(
        self,
        spec: PolicySpec,
        robot: RobotConfig,
        policy,
        cfg: ControllerConfig,
        logger=None,
        operator=None,
        keyboard=None,
        cameras: dict | None = None,
        object_pose=None,
        object_goal: np.ndarray | None = None,
    ):
        self.spec, self.robot, self.policy, self.cfg = spec, robot, policy, cfg
        self.object_pose = object_pose
        self.object_goal = None if object_goal is None else np.asarray(object_goal, dtype=np.float64)
        if (object_pose is None) != (object_goal is None):
            raise ValueError("an object pose source and an object goal come together (--object-pose, --object-goal)")
        self.logger, self.operator, self.keyboard = logger, operator, keyboard
        self.cameras = dict(cameras or {})
        dec = spec.control_dt * cfg.io_rate_hz
        if abs(dec - round(dec)) > 1e-6 or round(dec) < 1:
            raise ValueError(
                f"control_dt {spec.control_dt} s is not a whole number of I/O periods at {cfg.io_rate_hz} Hz"
            )
        self.decimation = int(round(dec))
        if cfg.on_logger_failure not in LOGGER_FAILURE_REACTIONS:
            raise ValueError(
                f"on_logger_failure must be one of {list(LOGGER_FAILURE_REACTIONS)}, got {cfg.on_logger_failure!r}"
            )
        self.logger_error: str | None = None
        """Why the logger failed (one line), or None (no logger, or it works)."""
        self.logger_failed_tick: int | None = None
        """The policy tick that found the logger failed."""
        names = robot.joint_names
        n = len(names)
        self.pol = np.array([names.index(j) for j in spec.joint_names])
        self.held = np.array([names.index(j) for j in spec.held_joint_names], dtype=np.int64)
        self.kp, self.kd, self.default = np.zeros(n), np.zeros(n), np.zeros(n)
        self.kp[self.pol], self.kd[self.pol], self.default[self.pol] = spec.kp, spec.kd, spec.default_joint_pos
        if len(self.held):
            self.kp[self.held], self.kd[self.held] = spec.held_kp, spec.held_kd
            self.default[self.held] = spec.held_joint_pos
        self.lower, self.upper = robot.array("lower"), robot.array("upper")
        self.torque_limit = robot.array("torque_limit")
        sc = cfg.safety
        self.target_lower, self.target_upper = S.target_bounds(
            self.lower, self.upper, self.kp, self.torque_limit, sc.limit_clamp
        )
        """Bounds of every joint target sent (:func:`~upright.deploy.safety.target_bounds`), rad."""
        self.sm = StateMachine()
        self.obs = ObservationBuilder(spec)
        self.command = JointCommand.zeros(n)
        self.health = S.LinkHealth(n, sc.max_consecutive_link_errors, sc.max_motor_age_s)
        self.imu = S.ImuFreshness(sc.max_imu_age_s)
        self.overruns = S.ConsecutiveCounter(sc.max_consecutive_overruns)
        tick_hz = 1.0 / spec.control_dt
        self.tilt = S.TiltGuard(sc.tilt_limit_rad, int(round(sc.tilt_arm_s * tick_hz)))
        self.beta = float(spec.action_scale)
        """β of the action rule (the file's ``action_scale``)."""
        if spec.action_mode not in DAEMON_ACTION_MODES:
            raise ValueError(
                f"action_mode {spec.action_mode!r} is not supported (only {list(DAEMON_ACTION_MODES)}): "
                "load the file with load_policy_spec or load_chunk_policy"
            )
        self.action_mode = spec.action_mode
        """``relative``: targets around the measured pose; ``absolute``: around ``default_joint_pos``; ``delta``:
        around the previous targets; ``ee_delta``: the gripper site's step through IK (:attr:`ee`)."""
        self.ee = (
            EeDeltaRule(spec.metadata, spec.kp, spec.action_scale, spec.path)
            if spec.action_mode == "ee_delta"
            else None
        )
        """The ``ee_delta`` rule (:class:`~upright.deploy.ee_action.EeDeltaRule`), or None."""
        self.ee_ctrl = spec.default_joint_pos.copy()
        """(J,) ``ee_delta``: the commanded targets q_c (before gravity compensation), the env's ``ctrl``."""
        self.ee_home_q9 = None if self.ee is None else self.ee.measured_q9(spec.default_joint_pos)
        """(9,) ``ee_delta``: the home pose as the lift observation's ``home_q`` reads it (constant: computed once)."""
        if self.ee is not None:  # HOLD sends what the env sends at reset: the home targets, gravity-compensated
            self.default[self.pol] = self.ee.applied(spec.default_joint_pos)
        j, a = spec.num_joints, spec.num_actions
        self.last_action = np.zeros(a, np.float32)
        self.proposal = np.zeros(a, np.float32)
        self.executed = np.zeros(a, np.float32)
        self.frame = np.zeros(spec.frame_dim, np.float32)
        self.target = np.zeros(n)
        self.gravity = np.array([0.0, 0.0, -1.0])
        self.human_goal = np.zeros(j)
        self.paused_target = np.zeros(j)
        self.anchor = np.zeros(j)
        self.ramp_start = np.zeros(n)
        self.ramp_k = 0
        self.ramp_ticks = max(1, int(round(cfg.ramp_s * tick_hz)))
        self.policy_ramp_k = 0
        no_ramp = self.action_mode in ("delta", "ee_delta")  # their targets start at the held ones
        self.policy_ramp_ticks = 0 if no_ramp else int(round(cfg.policy_ramp_s * tick_hz))
        self.stale = S.ConsecutiveCounter(sc.max_consecutive_stale)
        """POLICY ticks in a row without a fresh action (chunked policies)."""
        self.hold_ticks = 0
        self.damping_ticks = 0
        self.tick = 0
        self.io_flags = SafetyFlag.NONE
        self.flags = SafetyFlag.NONE
        self.episode = (logger.next_episode_index if logger is not None else 0) - 1
        """Dataset ``episode_index`` of the current (or last) episode."""
        self.episode_open = False
        self.frame_index = 0
        self.finished = False
        self.stop_requested = False
        self.exit_code = 0
        self.lateness_ns = 0
        self.max_lateness_ns = 0
        self._period_lateness_ns = 0
        self._replies: list = []
        self._reward = 0.0
        self._done = False
        self._outcome = ""
        self.started_ns = 0
        self._in_tick = False
        self._tick_failed = False
        self._fault_unlogged = False

    # ------------------------------------------------------------------ helpers
    @property
    def mode(self) -> Mode:
        return self.sm.mode

    def start(self, now_ns: int) -> None:
        """Call once before the first cycle."""
        self.health.start(now_ns)
        self.imu.start(now_ns)
        self.started_ns = now_ns

    def _enter(self, event: str, reading: RobotReading, reason: str = "") -> bool:
        before = self.sm.mode
        if event == "estop":
            changed = self.sm.handle("estop", reason or "operator estop")
            self._outcome = "estop"
            self.damping_command(reading)
            return changed
        if not self.sm.handle(event, reason):
            return False
        after = self.sm.mode
        q_pol = reading.q[self.pol]
        if after == Mode.RAMP_TO_DEFAULT:  # from the measured pose at the start, else from the current targets
            self.ramp_start[:] = reading.q if before == Mode.ZERO_TORQUE else self.target
            self.ramp_k = 0
        elif after == Mode.HOLD:
            self.hold_ticks = 0
        elif after == Mode.POLICY:
            if before == Mode.HOLD:  # a fresh start: the env's first actuated step
                self.obs.reset()
                self.last_action[:] = 0.0
                self.ee_ctrl[:] = self.spec.default_joint_pos  # the env's reset: ctrl = the home targets
                if hasattr(self.policy, "reset"):  # a chunked policy forgets its queued actions
                    self.policy.reset()
            self.stale.count = 0
            self.anchor[:] = q_pol
            self.policy_ramp_k = 0
        elif after == Mode.HUMAN:
            # held or handed over inside the joint range: a policy target past a stop (target_bounds) would keep the
            # motor pushing into it with up to its whole torque for as long as the pause or takeover lasts
            self.human_goal[:] = np.clip(self.target[self.pol], self.lower[self.pol], self.upper[self.pol])
        elif after == Mode.PAUSED:
            self.paused_target[:] = np.clip(self.target[self.pol], self.lower[self.pol], self.upper[self.pol])
        return True

    # ------------------------------------------------------------------ cycle
    def on_cycle(self, reading: RobotReading, cycle: int, lateness_ns: int) -> None:
        """Checks of every cycle; every ``decimation``-th cycle also a policy tick."""
        now = reading.t_ns or time.monotonic_ns()
        if reading.timeout.any():
            self.io_flags |= SafetyFlag.MOTOR_TIMEOUT
        if reading.crc_error.any():
            self.io_flags |= SafetyFlag.MOTOR_CRC
        if reading.imu_timeout:
            self.io_flags |= SafetyFlag.IMU_TIMEOUT
        if reading.imu_crc_error:
            self.io_flags |= SafetyFlag.IMU_CRC
        # both checks record this exchange first, then compare ages with its end (``now``): a loop that was late
        # (no CPU) finds fresh replies, not a fault; faults found in the same cycle are named together (which came
        # first is not known within a cycle), in the reason and in the bits
        flags, reasons = SafetyFlag.NONE, []
        bad = self.health.update(reading.ok, reading.crc_error, reading.timeout, now)
        if bad.any():
            flags |= SafetyFlag.LINK_FAULT
            reasons.append(f"motor link fault: {[self.robot.joint_names[i] for i in np.flatnonzero(bad)]}")
        if self.imu.update(reading.imu_ok, reading.imu_seq, now):
            flags |= SafetyFlag.IMU_STALE
            reasons.append("IMU stale: sequence not advancing")
        if reasons:
            self.fault(flags, "; ".join(reasons))
        if self.sm.mode == Mode.DAMPING:
            self.damping_command(reading)
        self._period_lateness_ns = max(self._period_lateness_ns, lateness_ns)
        if cycle % self.decimation == 0:
            # the latest wake-up of any cycle since the previous tick: a slow tick makes the next cycles late
            self.lateness_ns = self._period_lateness_ns
            self._period_lateness_ns = 0
            self.max_lateness_ns = max(self.max_lateness_ns, self.lateness_ns)
            self._policy_tick(reading)

    def _policy_tick(self, reading: RobotReading) -> None:
        self._in_tick = True
        try:
            self._tick(reading)
        except BaseException:
            self._tick_failed = True  # the frame of the fault keeps this tick's bits (fault_outside_tick)
            raise
        finally:
            self._in_tick = False

    def _tick(self, reading: RobotReading) -> None:
        sc = self.cfg.safety
        self.tick += 1
        self.flags = self.io_flags  # bits raised by the I/O cycles since the previous tick (faults included)
        self.io_flags = SafetyFlag.NONE
        self._reward, self._done = 0.0, False
        self._policy_images = None  # set by a policy call of this tick (_active_tick), logged by _log
        self._check_logger(reading)
        self._handle_operator(reading)

        # timing
        if self.lateness_ns > sc.overrun_threshold_s * 1e9:
            self.flags |= SafetyFlag.DEADLINE_OVERRUN
        if self.overruns.update(bool(self.flags & SafetyFlag.DEADLINE_OVERRUN)):
            self.fault(SafetyFlag.OVERRUN_FAULT, f"{sc.max_consecutive_overruns} policy ticks in a row overran")
        # devices
        temp = reading.temperature
        if (temp >= self.robot.temperature_warn).any():
            self.flags |= SafetyFlag.OVERTEMP_WARN
        hot = S.overheated(temp, self.robot.temperature_limit)
        if hot.any():
            self.fault(
                SafetyFlag.OVERTEMP,
                f"motor over {self.robot.temperature_limit} °C: "
                f"{[self.robot.joint_names[i] for i in np.flatnonzero(hot)]}",
            )
        err = S.motor_errors(reading.error)
        if err.any():
            self.fault(
                SafetyFlag.MOTOR_ERROR,
                "motor error flags: "
                f"{ {self.robot.joint_names[i]: int(reading.error[i]) for i in np.flatnonzero(err)} }",
            )
        self.gravity = projected_gravity(reading.imu_quat)
        if self.tilt.update(self.gravity):
            self.fault(SafetyFlag.TILT, f"tilt {math.degrees(S.tilt_angle(self.gravity)):.0f}° beyond the limit")

        if self.sm.mode == Mode.ZERO_TORQUE and self.cfg.auto_start:
            self._enter("start", reading, "--auto-start")
        if (
            self.sm.mode == Mode.HOLD
            and self.cfg.auto_engage_s is not None
            and self.resume_refusal() is None
            and self.hold_ticks * self.spec.control_dt >= self.cfg.auto_engage_s
        ):
            # at the start of the tick: this tick already runs the policy
            self._enter("resume", reading, f"--auto-engage after {self.cfg.auto_engage_s:g} s of HOLD")
        mode = self.sm.mode
        if mode == Mode.ZERO_TORQUE:
            c = self.command
            c.mode[:] = int(MotorMode.FOC)
            c.kp[:] = c.kd[:] = c.tau[:] = c.dq[:] = 0.0
            c.q[:] = reading.q
            self.target[:] = reading.q
        elif mode == Mode.RAMP_TO_DEFAULT:
            self.ramp_k += 1
            alpha = min(1.0, self.ramp_k / self.ramp_ticks)
            self._send_targets(self.ramp_start + alpha * (self.default - self.ramp_start), reading)
            if alpha >= 1.0:
                self._enter("ramp_done", reading, f"ramp of {self.cfg.ramp_s:g} s done")
        elif mode == Mode.HOLD:
            self._send_targets(self.default.copy(), reading)
            self.hold_ticks += 1
        elif mode in (Mode.POLICY, Mode.HUMAN, Mode.PAUSED):
            self._active_tick(reading)
        if self.sm.mode == Mode.DAMPING:
            self.damping_command(reading)
            self.damping_ticks += 1
        self._log(reading)
        self._flush_replies()
        self._check_finished()

    def close(self) -> None:
        """End the open episode (outcome of the damping reason), stop the logger, close the operator channel."""
        if self.episode_open and self.logger is not None and self.logger_error is None:
            self.logger.end_episode(
                self.episode, self._outcome or ("estop" if self.sm.estop else "damping"), self.sm.damping_reason
            )
        self.episode_open = False
        if self.logger is not None:
            self.logger.close()
        if self.operator is not None:
            self.operator.close()
        if self.keyboard is not None:
            self.keyboard.close()
        if hasattr(self.policy, "close"):  # a chunked policy's inference thread
            self.policy.close()

    def _check_finished(self) -> None:
        if self.sm.mode != Mode.DAMPING:
            return
        t = self.damping_ticks * self.spec.control_dt
        if self.stop_requested and t >= self.cfg.stop_damping_s:
            self.finished = True
        if self.cfg.exit_after_damping_s is not None and t >= self.cfg.exit_after_damping_s:
            self.finished = True
            self.exit_code = 0 if self.stop_requested else 3
