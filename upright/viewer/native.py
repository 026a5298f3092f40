"""The native window: MuJoCo's passive viewer (``mujoco.viewer.launch_passive``) showing the session.

The session steps in this thread at real time × speed; the window shows its display copy. Keys:

=============  ==========================================================
Space          pause / resume
→ (Right)      one step (pauses)
Backspace      reset (new episode; a recording restarts)
- / =          half / double speed (slow motion down to 1/64)
PageDown/Up    next / previous posture-terrain variant (rebuilds the env)
=============  ==========================================================

MuJoCo's own keys (rendering flags, F1 help, mouse camera) work as usual; its perturbation
(double-click drag) does not reach the physics, which runs in the env, not in the window's ``MjData``.
"""

from __future__ import annotations

import threading
import time

import mujoco

from upright.viewer.session import Session

KEY_SPACE, KEY_RIGHT, KEY_BACKSPACE, KEY_MINUS, KEY_EQUAL = 32, 262, 259, 45, 61
KEY_PAGE_UP, KEY_PAGE_DOWN = 266, 267

HELP = (
    "keys: Space pause/resume · → step · Backspace reset · -/= slower/faster · "
    "PageDown/PageUp next/previous posture-terrain variant"
)


class NativeControls:
    """Key state shared between the viewer's key callback (its thread) and the loop."""

    def __init__(self, speed: float = 1.0):
        self.lock = threading.Lock()
        self.paused = False
        self.speed = speed
        self.pending_steps = 0
        self.reset = False
        self.variant_delta = 0

    def on_key(self, key: int) -> None:
        with self.lock:
            if key == KEY_SPACE:
                self.paused = not self.paused
                print("paused" if self.paused else "playing", flush=True)
            elif key == KEY_RIGHT:
                self.paused = True
                self.pending_steps += 1
            elif key == KEY_BACKSPACE:
                self.reset = True
            elif key == KEY_MINUS:
                self.speed = max(self.speed / 2.0, 1.0 / 64.0)
                print(f"speed ×{self.speed:g}", flush=True)
            elif key == KEY_EQUAL:
                self.speed = min(self.speed * 2.0, 8.0)
                print(f"speed ×{self.speed:g}", flush=True)
            elif key == KEY_PAGE_DOWN:
                self.variant_delta += 1
            elif key == KEY_PAGE_UP:
                self.variant_delta -= 1

    def take(self) -> tuple[bool, int, bool, int, float]:
        """(paused, steps to do now, reset requested, variant change, speed), clearing one-shot requests."""
        with self.lock:
            out = (self.paused, self.pending_steps, self.reset, self.variant_delta, self.speed)
            self.pending_steps, self.reset, self.variant_delta = 0, False, 0
            return out


def switch_variant(session: Session, delta: int) -> bool:
    """Apply a PageUp/PageDown request; print what happened. True if the model changed (reopen the window)."""
    if not session.variants or len(session.variants) < 2:
        names = [v.name for v in session.variants] or ["recording"]
        print(f"only one posture/terrain variant available ({', '.join(names)}); nothing to switch to", flush=True)
        return False
    old_model = session.model
    session.set_variant((session.variant_index + delta) % len(session.variants))
    print(f"variant: {session.variant_name}", flush=True)
    return session.model is not old_model


def run_native(
    session: Session, speed: float = 1.0, duration: float | None = None, episodes: int | None = None
) -> None:
    """Show ``session`` in MuJoCo's window until it is closed (or ``duration``/``episodes`` are reached)."""
    import mujoco.viewer

    controls = NativeControls(speed)
    print(HELP, flush=True)
    while True:  # reopened when a variant switch changes the model
        before = set(threading.enumerate())
        # the right-hand panel's joint/control sliders would edit the display copy only: hidden
        viewer = mujoco.viewer.launch_passive(
            session.model, session.data, key_callback=controls.on_key, show_right_ui=False
        )
        window_threads = [t for t in threading.enumerate() if t not in before]
        try:
            reopen = _loop(viewer, session, controls, duration, episodes)
        finally:
            viewer.close()
            # the window's thread tears down GL asynchronously; exiting Python before it is done crashes
            for t in window_threads:
                t.join(timeout=10)
        if not reopen:
            return


def _loop(viewer, session: Session, controls: NativeControls, duration: float | None, episodes: int | None) -> bool:
    """Step and show until the window closes or the run is done; True when a variant switch needs a new window."""
    viewer.cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
    viewer.cam.trackbodyid = session.root_body
    viewer.cam.distance, viewer.cam.azimuth, viewer.cam.elevation = 3.0, 135.0, -20.0
    next_step = time.monotonic()
    last_refresh = 0.0
    while viewer.is_running():
        paused, steps, reset, delta, spd = controls.take()
        with viewer.lock():
            if reset:
                session.reset()
            if delta and switch_variant(session, delta):
                return True
            now = time.monotonic()
            stepped = True
            if steps:
                for _ in range(steps):
                    session.step()
            elif not paused and now >= next_step:
                if session.kind == "replay" and session.finished:
                    session.reset()
                else:
                    session.step()
                next_step = max(next_step + session.dt / spd, now - 0.25)
            else:
                stepped = False
            if paused:
                next_step = now
            if not stepped and now - last_refresh > 1 / 30:
                # the window's own UI (Backspace reset, perturbation) edits its MjData; the session's state rules
                session.refresh_display()
                last_refresh = now
        viewer.sync()
        if duration is not None and session.total_time >= duration - 1e-9:
            return False
        if duration is None and episodes is not None and session.episodes_done >= episodes:
            return False
        time.sleep(max(0.0, min(0.005, next_step - time.monotonic())) if not paused else 0.01)
    return False
