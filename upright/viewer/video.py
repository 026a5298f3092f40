"""Headless video: MuJoCo's offscreen renderer (EGL or OSMesa, see :mod:`upright.gl`) with a camera that
frames the robot (:mod:`upright.viewer.framing`) and a strip under each frame with time, episode and the task's key
quantity (:mod:`upright.viewer.strip`). The path's suffix picks the output: ``.mp4`` (H.264, imageio-ffmpeg),
``.gif`` (PIL) or ``.png``, a poster: ``poster_frames`` frames spread over the played time, side by side."""

from __future__ import annotations

import math
import pathlib
import time
from dataclasses import dataclass

import mujoco
import numpy as np

from upright.viewer.framing import task_camera
from upright.viewer.session import Session
from upright.viewer.strip import StripReader, draw_strip, strip_height

FORMATS = (".mp4", ".gif", ".png")
"""Output suffixes of :func:`render_video`."""


@dataclass
class VideoResult:
    path: pathlib.Path
    frames: int
    sim_seconds: float
    wall_seconds: float


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
    distance: float | None = None,
    azimuth: float | None = None,
    elevation: float | None = None,
    quality: float = 6.0,
    shadows: bool = False,
    reflection: bool = False,
    task: str | None = None,
    fill: float = 0.5,
    poster_frames: int = 4,
    strip: bool = True,
    log=print,
) -> VideoResult:
    """Play ``session`` and write a video (``.mp4``, ``.gif``) or a poster (``.png``) of it.

    Args:
        session: what to play (a policy or a recording).
        path: output file; its suffix is one of :data:`FORMATS`.
        width, height: size of the rendered view, px (the strip adds :func:`~upright.viewer.strip.strip_height`).
        fps: frames per second of sim time (frames are taken from the control steps nearest each frame time).
        episodes: stop after this many episodes end (None: until ``duration`` or the recording's end).
        duration: stop after this many sim seconds (takes precedence over ``episodes``).
        distance, azimuth, elevation: camera overrides (None: the task's view, the distance fitted to ``fill``).
        shadows, reflection: MuJoCo's render flags (each about doubles the cost on software OpenGL).
        task: the task (``standup``: a camera tracking the robot; ``lift``: a fixed view of the arm's workspace).
        fill: fraction of the frame height the robot spans.
        poster_frames: frames side by side in a ``.png`` poster (only these are rendered).
        strip: draw the strip (time, episode, key quantity) under each frame.

    Returns:
        Path, frame count (played frame times), sim seconds and wall seconds.

    Raises:
        ValueError: an unknown suffix.
    """
    import imageio.v2 as imageio

    path = pathlib.Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"video={path}: the suffix must be one of {', '.join(FORMATS)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if duration is None and episodes is None and session.kind != "replay":
        episodes = 1
    renderer = make_renderer(session.model, width, height)
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = int(shadows)
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = int(reflection)
    camera = task_camera(session.model, session.root_body, task, width / height, fill, azimuth, elevation, distance)
    reader = StripReader(session.model, task, session.root_body)
    strip_h = strip_height(height) if strip else 0
    opt = mujoco.MjvOption()

    def compose(data: mujoco.MjData, cam: mujoco.MjvCamera, values) -> np.ndarray:
        renderer.update_scene(data, camera=cam, scene_option=opt)
        image = renderer.render()
        return np.concatenate([image, draw_strip(width, strip_h, values)]) if strip else image

    writer = gif = None
    if suffix == ".mp4":
        writer = imageio.get_writer(
            str(path), format="FFMPEG", mode="I", fps=fps, codec="libx264", quality=quality,
            pixelformat="yuv420p", macro_block_size=8, ffmpeg_log_level="error",
        )  # fmt: skip
    elif suffix == ".gif":
        gif = []
    snapshots = []  # poster: (qpos, mocap_pos, lookat, distance, strip values) at each frame time
    start, frames, t, next_frame = time.monotonic(), 0, 0.0, 0.0
    frame_dt = 1.0 / fps
    last_report = start
    try:
        while True:
            if t + 1e-9 >= next_frame:
                cam = camera.update(session.data, frame_dt)
                values = reader.values(session.data, session.episode_time, session.episode + 1)
                if suffix == ".png":
                    snapshots.append((session.data.qpos.copy(), session.data.mocap_pos.copy(), cam.lookat.copy(),
                                      float(cam.distance), values))  # fmt: skip
                else:
                    image = compose(session.data, cam, values)
                    if writer is not None:
                        writer.append_data(image)
                    else:
                        from PIL import Image

                        gif.append(Image.fromarray(image).quantize(colors=128))
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
        if gif:
            gif[0].save(str(path), save_all=True, append_images=gif[1:], duration=round(1000 / fps), loop=0,
                        optimize=True)  # fmt: skip
        if snapshots:
            imageio.imwrite(str(path), poster(session.model, snapshots, poster_frames, camera.cam, compose))
    finally:
        if writer is not None:
            writer.close()
        renderer.close()
    return VideoResult(path, frames, t, time.monotonic() - start)


def poster(model: mujoco.MjModel, snapshots: list, n: int, cam: mujoco.MjvCamera, compose) -> np.ndarray:
    """``n`` of ``snapshots`` evenly spread from the first to the last, rendered side by side (4 px gaps)."""
    data = mujoco.MjData(model)
    picks = np.unique(np.round(np.linspace(0, len(snapshots) - 1, max(1, n))).astype(int))
    tiles = []
    for i in picks:
        qpos, mocap, lookat, distance, values = snapshots[i]
        data.qpos[:], data.mocap_pos[:] = qpos, mocap
        mujoco.mj_forward(model, data)
        cam.lookat[:], cam.distance = lookat, distance
        tiles.append(compose(data, cam, values))
        tiles.append(np.full((tiles[-1].shape[0], 4, 3), 255, np.uint8))
    return np.concatenate(tiles[:-1], axis=1)


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
