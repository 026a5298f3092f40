"""The controller's operator commands: requests from the socket and the keyboard, replies, ``ctl status``.

A part of :class:`~upright.deploy.controller.Controller`.
"""

from __future__ import annotations

import math

from upright.deploy.robot import RobotReading
from upright.deploy.state_machine import Mode


class OperatorMixin:
    """Polls the operator channel and the keyboard every policy tick, applies their commands, replies.

    A mixin of :class:`~upright.deploy.controller.Controller`: it uses the attributes that the controller's
    ``__init__`` sets and calls its other methods.
    """

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
        refusal = self.resume_refusal() if cmd == "resume" else self.pose_refusal() if cmd == "release" else None
        if refusal is not None:
            ok, error = False, f"'{cmd}' refused: {refusal}"
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
            "object_pose": None if self.object_pose is None else self.object_pose.describe(),
        }
