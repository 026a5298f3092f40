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
  policies) ``clip(previous target + β·a, joint limits)`` (:meth:`Controller.policy_targets`). On entry the targets
  blend from the measured pose at entry to the policy's over ``policy_ramp_s`` (not for ``delta``: its targets start
  at the held ones, so they are continuous already). A policy call that returns None (a chunked policy,
  :class:`~upright.deploy.chunk_runner.ChunkRunner`, without a fresh action) holds the current targets and raises
  ``STALE_ACTION``; ``max_consecutive_stale`` such POLICY ticks in a row fault (``STALE_FAULT``), and a
  :class:`~upright.deploy.policy.PolicyFault` (its inference worker died) faults at once (``EXCEPTION``).
- HUMAN: the operator's targets, starting from the current ones (bumpless), rate-limited.
- PAUSED: the targets at the moment of the pause.
- DAMPING: kp = 0, kd = ``damping_kd``; terminal.

Held joints always get their held pose and gains outside ZERO_TORQUE and DAMPING. Every position
target then passes the clamps: joint limits, per-tick delta, estimated torque.

Cameras (a chunked policy that reads them): the runner raises ``CAMERA_STALE`` on a tick whose chunk request was
skipped for a missing or too old frame; every logged frame carries each camera's newest frame as
``observation.images.<name>`` (:meth:`~upright.deploy.logger_process.LoggerClient.put_images`).

Logging. One frame per policy tick in POLICY, HUMAN and PAUSED (an episode). The tick that enters
DAMPING through a fault also logs its frame, in any mode (opening a one-frame episode when none is
open), with the fault's bits in ``safety_flags`` (bits raised between two policy ticks are kept for
the next frame) and the reason in the episode's ``upright/reason``; so every fault is in the dataset.
Episode numbers are the dataset's ``episode_index`` (they continue the dataset, run after run).

Logger failure. The logger's health is part of the safety state: every policy tick, before the operator's requests,
:meth:`~upright.deploy.logger_process.LoggerClient.check` tells whether the logger failed (its process died, e.g.
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

from upright.deploy import safety as S
from upright.deploy.observation import ObservationBuilder, projected_gravity
from upright.deploy.policy import PolicyFault
from upright.deploy.protocol.go_m8010 import MotorMode
from upright.deploy.robot import JointCommand, RobotReading
from upright.deploy.robot_config import RobotConfig
from upright.deploy.safety import SafetyConfig, SafetyFlag
from upright.deploy.state_machine import Mode, StateMachine, log
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


class Controller:
    """Per-cycle logic of the daemon.

    Args:
        spec: the policy contract (checked against ``robot``).
        robot: motors, limits.
        policy: callable (1, obs_dim) float32 -> (J,) float32 actions, or None when it has no fresh action this tick
            (a chunked policy, :class:`~upright.deploy.chunk_runner.ChunkRunner`); it may raise
            :class:`~upright.deploy.policy.PolicyFault` (damping, with its message as the reason) and may have
            ``reset()`` (called when POLICY is entered from HOLD) and ``close()`` (called by :meth:`close`).
        cfg: rates and ramps.
        logger: a :class:`~upright.deploy.logger_process.LoggerClient` or None.
        operator: an :class:`~upright.deploy.operator.OperatorServer` or None.
        keyboard: a :class:`~upright.deploy.operator.Keyboard` or None.
        cameras: name -> :class:`~upright.deploy.camera.CameraSource` whose newest frames are logged as
            ``observation.images.<name>`` (the logger's features must have them); not closed by :meth:`close`.

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
    ):
        self.spec, self.robot, self.policy, self.cfg = spec, robot, policy, cfg
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
        around the previous targets."""
        j = spec.num_joints
        self.last_action = np.zeros(j, np.float32)
        self.proposal = np.zeros(j, np.float32)
        self.executed = np.zeros(j, np.float32)
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
        self.policy_ramp_ticks = 0 if self.action_mode == "delta" else int(round(cfg.policy_ramp_s * tick_hz))
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

    def start(self, now_ns: int) -> None:
        """Call once before the first cycle."""
        self.health.start(now_ns)
        self.imu.start(now_ns)
        self.started_ns = now_ns

    def damping_command(self, reading: RobotReading | None = None) -> JointCommand:
        """kp = 0, kd = damping_kd, tau = 0 on every motor (written into :attr:`command`)."""
        c = self.command
        c.mode[:] = int(MotorMode.FOC)
        c.kp[:] = 0.0
        c.kd[:] = self.cfg.safety.damping_kd
        c.dq[:] = 0.0
        c.tau[:] = 0.0
        if reading is not None:
            c.q[:] = reading.q
        return c

    def fault(self, flag: SafetyFlag, reason: str) -> None:
        """Go to DAMPING now (the command is damping from this call on).

        ``flag`` goes into the frame of this policy tick, or, between ticks, of the next one; the first fault
        also makes that frame be logged (see the module's Logging).
        """
        if self._in_tick:
            self.flags |= flag
        else:  # an I/O-cycle check: keep the bit for the next policy tick's frame
            self.io_flags |= flag
        if self.sm.mode != Mode.DAMPING:
            self.sm.handle("fault", reason)
            self._outcome = "damping"
            self._fault_unlogged = True
        self.damping_command()

    def fault_outside_tick(self, flag: SafetyFlag, reason: str, reading: RobotReading | None) -> None:
        """The loop itself failed (an exception, the watchdog): DAMPING, and log the frame of the fault now
        with ``reading`` (the last one; None: no frame), since no policy tick follows."""
        self._in_tick = True
        try:
            if not self._tick_failed:  # raised between policy ticks: the last frame's bits are not this frame's
                self.flags = SafetyFlag.NONE
            self.flags |= self.io_flags
            self.io_flags = SafetyFlag.NONE
            self.fault(flag, reason)
            if reading is not None and self._fault_unlogged:
                self._log(reading)
        finally:
            self._in_tick = False

    def request_stop(self, reason: str) -> None:
        """SIGINT / SIGTERM / quit: damping, then exit after ``stop_damping_s``."""
        self.stop_requested = True
        if self.sm.mode != Mode.DAMPING:
            self.sm.handle("stop", reason)
            self._outcome = "stopped"
            self.damping_ticks = 0
        self.damping_command()

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
                if hasattr(self.policy, "reset"):  # a chunked policy forgets its queued actions
                    self.policy.reset()
            self.stale.count = 0
            self.anchor[:] = q_pol
            self.policy_ramp_k = 0
        elif after == Mode.HUMAN:
            self.human_goal[:] = self.target[self.pol]
        elif after == Mode.PAUSED:
            self.paused_target[:] = self.target[self.pol]
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

    def _check_logger(self, reading: RobotReading) -> None:
        """Find a failed logger on this tick and carry out ``cfg.on_logger_failure`` (see the module's Logger
        failure): one ERROR line, then HOLD (ending the episode) or continue."""
        if self.logger is None or self.logger_error is not None:
            return
        error = self.logger.check()
        if error is None:
            return
        self.logger_error, self.logger_failed_tick = error, self.tick
        mode = self.sm.mode
        root = getattr(self.logger, "root", "the dataset")
        kept = (
            (
                f"episode {self.episode} ends here (its flushed frames stay in {root}/journal: "
                f"`upright-deploy recover {root}` converts them)"
            )
            if self.episode_open
            else "no episode was open"
        )
        if mode == Mode.DAMPING:
            what = "already DAMPING"
        elif self.cfg.on_logger_failure == "continue":
            what = f"--on-logger-failure continue: {mode.name} continues, unrecorded"
        else:
            what = (
                f"--on-logger-failure hold: {kept}; "
                f"{'ramping to HOLD; ' if mode in (Mode.POLICY, Mode.HUMAN, Mode.PAUSED) else ''}"
                "'resume' is refused until the daemon is restarted"
            )
        log.error("logger failed: %s; %s", error, what)
        if self.cfg.on_logger_failure == "hold" and mode != Mode.DAMPING:
            self.episode_open = False  # nothing more reaches the dataset: the episode is over
            self._outcome = ""
            self._enter("logger_failed", reading, f"logger failed: {error}")

    def resume_refusal(self) -> str | None:
        """Why ``resume`` is refused (the logger failed under ``on_logger_failure`` hold), or None."""
        if self.logger_error is None or self.cfg.on_logger_failure != "hold":
            return None
        return (
            f"the logger failed ({self.logger_error}): nothing could be recorded; restart the daemon "
            "(or run it with --on-logger-failure continue)"
        )

    def _active_tick(self, reading: RobotReading) -> None:
        pol, spec = self.pol, self.spec
        q_pol, dq_pol = reading.q[pol], reading.dq[pol]
        frame = self.obs.frame(q_pol, dq_pol, reading.imu_gyro, reading.imu_quat, self.last_action)
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
        if getattr(self.policy, "camera_stale", False):
            self.flags |= SafetyFlag.CAMERA_STALE
        mode = self.sm.mode
        fresh = out is not None
        if fresh:
            action = np.asarray(out, dtype=np.float32).reshape(-1)
            if action.shape != (spec.num_joints,) or not S.all_finite(action):
                self.proposal[:] = 0.0
                self.fault(SafetyFlag.NONFINITE_ACTION, "NaN/inf (or a wrong shape) in the policy's action")
                return
            self.proposal[:] = action
            a = np.clip(action, -spec.action_clip, spec.action_clip)
        else:  # a chunked policy without a fresh action: hold (POLICY), N ticks in a row -> damping
            self.proposal[:] = 0.0
            self.flags |= SafetyFlag.STALE_ACTION
        if self.stale.update(not fresh and mode == Mode.POLICY):
            why = getattr(self.policy, "miss_reason", "") or "no action"
            self.fault(
                SafetyFlag.STALE_FAULT,
                f"chunked policy: no fresh action for {self.stale.count} policy ticks in a row ({why})",
            )
            return
        origin = self.action_origin(q_pol)
        ramping = False
        if mode == Mode.POLICY and not fresh:
            tgt = self.target[pol].copy()  # hold the current targets
        elif mode == Mode.POLICY:
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
        else:
            self.executed[:] = self.executed_action(self.target[pol], q_pol, origin)
        # The observation's last action follows training: under the policy it is the policy's (clipped) action,
        # even when a deploy-only clamp (joint limits, delta, torque) changed the target; the training env
        # never clamps, so the executed action would put the policy out of distribution. After a ramp, a held
        # (stale) tick or an intervention it is the executed one, so a resumed policy sees what really happened.
        self.last_action[:] = a if own else self.executed

    def _send_targets(self, full: np.ndarray, reading: RobotReading) -> bool:
        """Clamp ``full`` (limits, delta from the last position command, torque), make it the command."""
        sc, c = self.cfg.safety, self.command
        clamped = False
        if S.clamp_to_limits(full, self.lower, self.upper):
            self.flags |= SafetyFlag.TARGET_LIMIT_CLAMPED
            clamped = True
        if (c.kp > 0).any():  # a position command is running: limit the jump from it
            if S.clamp_delta(full, c.q, sc.max_target_delta):
                self.flags |= SafetyFlag.DELTA_CLAMPED
                clamped = True
        if sc.clamp_torque and S.clamp_torque(full, reading.q, reading.dq, self.kp, self.kd, self.torque_limit):
            self.flags |= SafetyFlag.TORQUE_CLAMPED
            clamped = True
        if not S.all_finite(full):  # cannot happen after the checks above; never send it anyway
            self.fault(SafetyFlag.NONFINITE_ACTION, "non-finite target")
            return True
        c.mode[:] = int(MotorMode.FOC)
        c.q[:] = full
        c.kp[:] = self.kp
        c.kd[:] = self.kd
        c.dq[:] = 0.0
        c.tau[:] = 0.0
        self.target[:] = full
        return clamped

    # ------------------------------------------------------------------ operator
    def _handle_operator(self, reading: RobotReading) -> None:
        requests = []
        if self.operator is not None:
            requests += self.operator.poll()
        if self.keyboard is not None:
            requests += [({"cmd": cmd}, None) for cmd in self.keyboard.poll()]
        for req, client in requests:
            reply = self._apply(req, reading, "operator" if client is not None else "keyboard")
            if client is not None:
                self._replies.append((client, reply))

    def _apply(self, req: dict, reading: RobotReading, source: str = "operator") -> dict:
        cmd = str(req.get("cmd", ""))
        ok, error = True, None
        if cmd == "resume" and self.resume_refusal() is not None:
            ok, error = False, f"'resume' refused: {self.resume_refusal()}"
        elif cmd in ("start", "resume", "pause", "takeover", "release", "estop"):
            ok = self._enter(cmd, reading, f"{source} {cmd}")
            if not ok:
                error = f"'{cmd}' is not possible in mode {self.sm.mode.name}"
        elif cmd in ("mark-success", "mark-failure"):
            if self.episode_open or self.sm.mode in (Mode.POLICY, Mode.HUMAN, Mode.PAUSED):
                self._reward = 1.0 if cmd == "mark-success" else 0.0
                self._done = True
                self._outcome = "success" if cmd == "mark-success" else "failure"
            else:
                ok, error = False, "no episode is being recorded"
        elif cmd == "target":
            if self.sm.mode != Mode.HUMAN:
                ok, error = False, "targets are accepted in HUMAN mode only (takeover first)"
            else:
                error = self.set_human_targets(req.get("targets"))
                ok = error is None
        elif cmd == "quit":
            self.request_stop(f"{source} quit")
        elif cmd != "status":
            ok, error = (
                False,
                (
                    f"unknown command '{cmd}'; commands: start resume pause takeover release estop "
                    "mark-success mark-failure status target quit"
                ),
            )
        reply = {"ok": ok, "cmd": cmd}
        if error:
            reply["error"] = error
        return reply

    def set_human_targets(self, targets) -> str | None:
        """Set HUMAN-mode goals from ``{joint: rad}`` (policy joints, absolute joint-side angles, rad).

        All or nothing: a target that is not a policy joint, not a finite number, or outside the joint's limits
        refuses the whole request and changes nothing. Returns None, or the one-line error for the reply.
        """
        names = self.spec.joint_names
        if not isinstance(targets, dict) or not targets:
            return f"'target' needs JOINT=RAD pairs, e.g. target {names[0]}=0.1; joints: {' '.join(names)}"
        goal = self.human_goal.copy()
        for name, value in targets.items():
            if name not in names:
                return f"unknown joint '{name}'; joints: {' '.join(names)}"
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return f"{name}={value!r}: the target must be a number (rad)"
            v = float(value)
            i = names.index(name)
            lo, hi = float(self.lower[self.pol[i]]), float(self.upper[self.pol[i]])
            if not math.isfinite(v):
                return f"{name}={v}: the target must be finite; {name} accepts [{lo:.3f}, {hi:.3f}] rad"
            if not lo <= v <= hi:
                return f"{name}={v:g} rad is outside the joint's limits [{lo:.3f}, {hi:.3f}] rad"
            goal[i] = v
        self.human_goal[:] = goal
        return None

    def _flush_replies(self) -> None:
        for client, reply in self._replies:
            reply.update(self.status())
            self.operator.reply(client, reply)
        self._replies.clear()

    def status(self) -> dict:
        """A snapshot for ``ctl status`` and every reply."""
        return {
            "mode": self.sm.mode.name,
            "damping_reason": self.sm.damping_reason,
            "episode_index": self.episode if self.episode_open or self._last_frame_logged else None,
            "frame_index": self._last_frame_index,
            "tick": self.tick,
            "link_timeouts": int(self.health.total_timeouts.sum()),
            "link_crc_errors": int(self.health.total_crc_errors.sum()),
            "max_lateness_us": self.max_lateness_ns / 1e3,
            "logger_dropped": getattr(self.logger, "dropped", 0),
            "logger": {
                "state": "off" if self.logger is None else "ok" if self.logger_error is None else "failed",
                "error": self.logger_error,
                "failed_tick": self.logger_failed_tick,
                "on_failure": self.cfg.on_logger_failure,
            },
        }

    _last_frame_logged = False
    _last_frame_index: int | None = None
    _logger_dropped = False

    # ------------------------------------------------------------------ logging
    def _log(self, reading: RobotReading) -> None:
        mode = self.sm.mode
        self._last_frame_logged = False
        self._last_frame_index = None
        fault_frame, self._fault_unlogged = self._fault_unlogged, False
        in_episode_mode = mode in (Mode.POLICY, Mode.HUMAN, Mode.PAUSED)
        if not self.episode_open:
            if not (in_episode_mode or fault_frame):
                return
            self.episode += 1
            self.episode_open = True
            self.frame_index = 0
        ending = mode == Mode.DAMPING or self._done
        recording = self.logger is not None and self.logger_error is None
        if recording:
            r = self.logger.record
            r["kind"] = 0
            r["episode"] = self.episode
            r["frame_index"] = self.frame_index
            pol = self.pol
            j = self.spec.num_joints
            st = r["observation.state"]
            st[:j] = reading.q[pol]
            st[j : 2 * j] = reading.dq[pol]
            st[2 * j : 2 * j + 3] = reading.imu_gyro
            st[2 * j + 3 :] = self.gravity
            damping = mode == Mode.DAMPING
            r["observation.policy_obs"] = 0.0 if damping else self.frame
            r["observation.policy_action"] = 0.0 if damping else self.proposal
            r["action"] = 0.0 if damping else self.executed
            r["action.joint_target"] = self.command.q[pol]
            r["intervention"] = mode == Mode.HUMAN
            r["control_source"] = int(self.sm.control_source)
            r["t_mono_ns"] = reading.t_ns
            r["imu_time_us"] = reading.imu_time_us
            r["loop_lateness_us"] = self.lateness_ns / 1e3  # worst wake-up of this policy period
            r["next.reward"] = self._reward
            r["next.done"] = ending
            if self.cameras:
                self.logger.put_images({f"observation.images.{n}": c.read()[0] for n, c in self.cameras.items()})
            if self._logger_dropped:  # the previous frame could not be handed over
                self.flags |= SafetyFlag.LOGGER_DROP
            r["safety_flags"] = int(self.flags)
            self._logger_dropped = not self.logger.send()
        self._last_frame_logged = True
        self._last_frame_index = self.frame_index
        self.frame_index += 1
        if ending:
            outcome = self._outcome or ("estop" if self.sm.estop else "damping")
            if recording:
                self.logger.end_episode(self.episode, outcome, self.sm.damping_reason if mode == Mode.DAMPING else "")
            self.episode_open = False
            if mode != Mode.DAMPING:
                self._outcome = ""

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
