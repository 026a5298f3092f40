"""What ``play.py`` runs once Hydra has composed the ``play`` config."""

from __future__ import annotations

import random
import signal

import numpy as np
import torch
from omegaconf import DictConfig

from upright.gl import has_display
from upright.viewer.config import ViewerKind


class PlayError(Exception):
    """A user error ``play.py`` reports in one message and exit status 2 (bad policy, bad replay, ...)."""


def choose_viewer(cfg: DictConfig) -> ViewerKind:
    """``video=`` forces video; ``auto`` is native with a display (DISPLAY/WAYLAND_DISPLAY), else web."""
    kind = cfg.viewer if isinstance(cfg.viewer, ViewerKind) else ViewerKind(str(cfg.viewer))
    if cfg.get("video"):
        return ViewerKind.video
    if kind == ViewerKind.auto:
        return ViewerKind.native if has_display() else ViewerKind.web
    return kind


def play(cfg: DictConfig) -> int:
    """Build the session, show it with the chosen viewer, write ``record=`` if asked. Returns an exit status.

    Raises:
        PlayError: a bad policy, replay, variant or viewer choice (the message says what to change).
    """
    from upright.policy_io.source import PolicyLoadError
    from upright.robots.menagerie import ModelNotFoundError
    from upright.viewer.session import NonFiniteActionError, make_session
    from upright.viewer.trajectory import TrajectoryError

    kind = choose_viewer(cfg)
    if kind == ViewerKind.video and not cfg.get("video"):
        raise PlayError("viewer=video needs video=<out.mp4>")
    if kind == ViewerKind.video:
        from upright.viewer.video import FORMATS

        if not str(cfg.video).lower().endswith(FORMATS):
            raise PlayError(f"video={cfg.video}: give a {', '.join(FORMATS)} path (a video, a GIF or a poster image)")
    if kind == ViewerKind.native and not has_display():
        raise PlayError("viewer=native needs a display (DISPLAY or WAYLAND_DISPLAY); use viewer=web or video=out.mp4")
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    try:
        session = make_session(cfg)
    except (PolicyLoadError, TrajectoryError) as err:
        raise PlayError(str(err)) from None
    except ValueError as err:  # nothing to play, unknown variant
        raise PlayError(str(err)) from None
    except ModelNotFoundError as err:
        raise PlayError(str(err)) from None
    print(
        f"Playing {session.description} [{session.variant_name or 'recording'}] with the {kind.value} viewer",
        flush=True,
    )
    if cfg.get("record"):
        session.start_recording(model_name=_model_name(cfg), task=str(cfg.task_name))

    def _sigterm(signum, frame):  # stop like Ctrl-C: close the viewer, write record=
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        if kind == ViewerKind.video:
            from upright.viewer.video import render_video

            r = cfg.render
            res = render_video(
                session, cfg.video, width=r.width, height=r.height, fps=r.fps, episodes=cfg.get("episodes"),
                duration=cfg.get("duration"), distance=r.distance, azimuth=r.azimuth, elevation=r.elevation,
                quality=r.quality, shadows=r.shadows, reflection=r.reflection, task=str(cfg.task_name), fill=r.fill,
                poster_frames=r.poster_frames, strip=r.strip,
            )  # fmt: skip
            size_kb = res.path.stat().st_size / 1024
            print(f"Wrote {res.path} ({res.frames} frames, {res.sim_seconds:.1f} s sim, {size_kb:.0f} KiB, "
                  f"{res.wall_seconds:.1f} s wall)", flush=True)  # fmt: skip
        elif kind == ViewerKind.native:
            from upright.viewer.native import run_native

            run_native(session, speed=cfg.speed, duration=cfg.get("duration"), episodes=cfg.get("episodes"))
        else:
            from upright.viewer.web import WebViewer

            viewer = WebViewer(session, cfg.web, speed=cfg.speed)
            try:
                viewer.run(duration=cfg.get("duration"), episodes=cfg.get("episodes"))
            finally:
                viewer.stop()
    except KeyboardInterrupt:
        print("\nStopped.", flush=True)
    except NonFiniteActionError as err:
        message = str(err)
        if kind == ViewerKind.video:
            import pathlib

            pathlib.Path(cfg.video).unlink(missing_ok=True)  # an MP4 of a broken run must not pass for a result
            message += f"; no video written to {cfg.video}"
        raise PlayError(message) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        if session.recorder is not None:
            out = session.recorder.save(str(cfg.record), source=session.description)
            print(f"Recorded {len(session.recorder.qpos)} frames to {out}", flush=True)
        session.close()
    return 0


def _model_name(cfg: DictConfig) -> str:
    from upright.tasks.spec import task_specs

    spec = task_specs().get(str(cfg.task_name))
    return spec.robot if spec is not None and spec.robot else str(cfg.task_name)
