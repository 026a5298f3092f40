"""Headless video: MuJoCo's offscreen renderer (EGL or OSMesa, see :mod:`upright.viewer.gl`) with a
camera that tracks the robot, written to MP4 (H.264) with imageio-ffmpeg."""

from __future__ import annotations

import math
import pathlib
import time
from dataclasses import dataclass

import mujoco
import numpy as np

from upright.viewer.session import Session


@dataclass
class VideoResult:
    path: pathlib.Path
    frames: int
    sim_seconds: float
    wall_seconds: float


def tracking_camera(session: Session, distance: float, azimuth: float, elevation: float) -> mujoco.MjvCamera:
    """A camera that follows the robot's base body (MuJoCo's tracking camera)."""
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
    cam.trackbodyid = session.root_body
    cam.fixedcamid = -1
    cam.distance, cam.azimuth, cam.elevation = distance, azimuth, elevation
    return cam


def make_renderer(model: mujoco.MjModel, width: int, height: int) -> mujoco.Renderer:
    """An offscreen renderer of ``width`` x ``height`` (the model's offscreen buffer is enlarged if needed).

    Raises:
        RuntimeError: no OpenGL context (the message says which Debian packages give EGL or OSMesa).
    """
    vis = model.vis.global_
    vis.offwidth, vis.offheight = max(vis.offwidth, width), max(vis.offheight, height)
    try:
        return mujoco.Renderer(model, height=height, width=width)
    except Exception as err:
        import os

        raise RuntimeError(
            f"cannot create an offscreen OpenGL context (MUJOCO_GL={os.environ.get('MUJOCO_GL', '<unset>')}): {err}. "
            "Headless rendering needs EGL (Debian: libegl1 libegl-mesa0) or OSMesa (libosmesa6, MUJOCO_GL=osmesa)."
        ) from err


def render_video(
    session: Session,
    path: str | pathlib.Path,
    width: int = 640,
    height: int = 480,
    fps: int = 25,
    episodes: int | None = 1,
    duration: float | None = None,
    distance: float = 3.0,
    azimuth: float = 135.0,
    elevation: float = -20.0,
    quality: float = 6.0,
    shadows: bool = False,
    reflection: bool = False,
    log=print,
) -> VideoResult:
    """Play ``session`` and write an MP4 of it.

    Args:
        session: what to play (a policy or a recording).
        path: output ``.mp4``.
        fps: frames per second of sim time (frames are taken from the control steps nearest each frame time).
        episodes: stop after this many episodes end (None: until ``duration`` or the recording's end).
        duration: stop after this many sim seconds (takes precedence over ``episodes``).
        shadows, reflection: MuJoCo's render flags (each about doubles the cost on software OpenGL).

    Returns:
        Path, frame count, sim seconds and wall seconds.
    """
    import imageio.v2 as imageio

    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if duration is None and episodes is None and session.kind != "replay":
        episodes = 1
    renderer = make_renderer(session.model, width, height)
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = int(shadows)
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = int(reflection)
    cam = tracking_camera(session, distance, azimuth, elevation)
    opt = mujoco.MjvOption()
    writer = imageio.get_writer(
        str(path), format="FFMPEG", mode="I", fps=fps, codec="libx264", quality=quality,
        pixelformat="yuv420p", macro_block_size=8, ffmpeg_log_level="error",
    )  # fmt: skip
    start, frames, t, next_frame = time.monotonic(), 0, 0.0, 0.0
    frame_dt = 1.0 / fps
    last_report = start
    try:
        while True:
            if t + 1e-9 >= next_frame:
                renderer.update_scene(session.data, camera=cam, scene_option=opt)
                writer.append_data(renderer.render())
                frames += 1
                next_frame += frame_dt
            if duration is not None and t + 1e-9 >= duration:
                break
            if duration is None and episodes is not None and session.episodes_done >= episodes:
                break
            if session.kind == "replay" and session.finished:
                break
            session.step()
            if session.kind == "replay" and session.finished:
                break
            t += session.dt
            if duration is None and episodes is not None and session.episodes_done >= episodes:
                break  # the env has already reset: don't show the next episode's first frame
            now = time.monotonic()
            if now - last_report > 5.0:
                log(f"  {t:.1f} s sim, {frames} frames")
                last_report = now
    finally:
        writer.close()
        renderer.close()
    return VideoResult(path, frames, t, time.monotonic() - start)


def frame_differences(path: str | pathlib.Path) -> np.ndarray:
    """Mean absolute difference between consecutive frames of a video (for tests: does anything move?)."""
    import imageio.v2 as imageio

    reader = imageio.get_reader(str(path), format="FFMPEG")
    diffs, prev = [], None
    try:
        for frame in reader:
            f = frame.astype(np.int16)
            if prev is not None:
                diffs.append(float(np.abs(f - prev).mean()))
            prev = f
    finally:
        reader.close()
    return np.array(diffs) if diffs else np.zeros(0) + math.nan
