"""The controller's recording: one dataset frame per policy tick, and what a failed logger changes.

A part of :class:`~upright.deploy.controller.Controller` (see :mod:`upright.deploy.controller`'s Logging and
Logger failure).
"""

from __future__ import annotations

from upright.dataset_io.records import SafetyFlag
from upright.deploy.robot import RobotReading
from upright.deploy.state_machine import Mode, log


class RecordingMixin:
    """Logs the frame of each policy tick (episodes, fault frames) and reacts to a failed logger.

    A mixin of :class:`~upright.deploy.controller.Controller`: it uses the attributes that the controller's
    ``__init__`` sets and calls its other methods.
    """

    _last_frame_logged = False
    _last_frame_index: int | None = None
    _logger_dropped = False
    _policy_images: dict | None = None
    """The camera frames the policy read on this tick (a chunked policy's ``tick_images``), or None: logged instead
    of the cameras' newest frames, so a dataset frame holds the image the policy was given."""

    def _check_logger(self, reading: RobotReading) -> None:
        """Find a failed logger on this tick and carry out ``cfg.on_logger_failure`` (see
        :mod:`upright.deploy.controller`'s Logger failure): one ERROR line, then HOLD (ending the episode) or
        continue."""
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
        """Why ``resume`` is refused (the logger failed under ``on_logger_failure`` hold; a lift policy's object pose
        source has no fresh pose), or None."""
        pose = self.pose_refusal()
        if pose is not None:
            return pose
        if self.logger_error is None or self.cfg.on_logger_failure != "hold":
            return None
        return (
            f"the logger failed ({self.logger_error}): nothing could be recorded; restart the daemon "
            "(or run it with --on-logger-failure continue)"
        )

    def _log(self, reading: RobotReading) -> None:
        mode = self.sm.mode
        self._last_frame_logged = False
        self._last_frame_index = None
        fault_frame, self._fault_unlogged = self._fault_unlogged, False
        images, self._policy_images = self._policy_images, None  # this tick's only
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
                seen = images or {}
                self.logger.put_images(
                    {f"observation.images.{n}": seen[n] if n in seen else c.read()[0] for n, c in self.cameras.items()}
                )
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
