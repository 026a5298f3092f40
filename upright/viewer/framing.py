"""The video camera: it frames the robot so that the robot fills about half the frame height.

Two modes (:class:`VideoCamera`):

- ``track`` (the G1): the camera looks at the centre of the robot's bounding box (it follows the torso) from a
  fixed azimuth and elevation, at the distance that makes the robot's projected height ``fill`` of the frame
  height (and its width at most :data:`MAX_WIDTH` of the frame width), standing or lying. Look-at point and
  distance are smoothed (zooming out fast, in slowly) so the picture does not jitter.
- ``fixed`` (the Panda): one camera for the whole video, fitted at the first frame to the arm and to the task's
  workspace (every cube start and target: :data:`LIFT_WORKSPACE`), so a lift shows the cube rising past a still
  background to the target (a camera that followed the cube would show the cube standing still).

The robot's extent is the world-frame corners of its geoms' bounding boxes (``geom_aabb``), the geoms of the bodies
under the robot's root body (for a fixed-base arm: the bodies under the world's child that carries it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

MAX_WIDTH = 0.9
"""Largest fraction of the frame width the framed points may span (a lying G1 is wide)."""
LIFT_WORKSPACE = np.array([[x, y, z] for x in (0.5, 0.9) for y in (-0.2, 0.2) for z in (0.0, 0.45)])
"""Corners of the lift's workspace, m: cube starts x 0.7 ± 0.2, y ± 0.2 on the floor; targets 0.2-0.4 m above the
cube's start centre (``env.cube_xy_range``, ``env.target_xy_range``, ``env.target_height``, Playground's ranges)."""
TASK_VIEWS: dict[str, dict] = {
    "standup": {"mode": "track", "azimuth": 135.0, "elevation": -25.0},
    "lift": {"mode": "fixed", "azimuth": 120.0, "elevation": -25.0, "extra_points": LIFT_WORKSPACE},
}
"""Camera mode and default angles of each task (``render.azimuth``/``render.elevation`` override the angles)."""


def camera_axes(azimuth: float, elevation: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Forward, right and up unit vectors of MuJoCo's free camera at ``azimuth``/``elevation`` (degrees); the camera
    sits at ``lookat - distance * forward``."""
    az, el = math.radians(azimuth), math.radians(elevation)
    fwd = np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
    right = np.array([math.sin(az), -math.cos(az), 0.0])
    up = np.cross(right, fwd)
    return fwd, right, up


def robot_geoms(model: mujoco.MjModel, root_body: int) -> np.ndarray:
    """Geom ids of the robot: the bodies whose root is ``root_body``'s root (not the world's own geoms)."""
    root = int(model.body_rootid[root_body])
    if root == 0:
        raise ValueError(f"body {root_body} is the world; give the robot's base body")
    return np.flatnonzero(model.body_rootid[model.geom_bodyid] == root)


def arm_root_body(model: mujoco.MjModel) -> int:
    """The root body of the robot in a scene without a free-floating robot: the world's child with most bodies."""
    roots = model.body_rootid[1:]
    values, counts = np.unique(roots, return_counts=True)
    return int(values[np.argmax(counts)])


def geom_corners(model: mujoco.MjModel, data: mujoco.MjData, geoms: np.ndarray) -> np.ndarray:
    """World-frame corners (8 per geom) of the geoms' bounding boxes, (8 * len(geoms), 3)."""
    aabb = model.geom_aabb[geoms]  # (n, 6): centre, half sizes, geom frame
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)
    local = aabb[:, None, :3] + signs[None] * aabb[:, None, 3:]  # (n, 8, 3)
    rot = data.geom_xmat[geoms].reshape(-1, 3, 3)
    world = np.einsum("nij,nkj->nki", rot, local) + data.geom_xpos[geoms][:, None, :]
    return world.reshape(-1, 3)


def project(points: np.ndarray, lookat: np.ndarray, distance: float, azimuth: float, elevation: float,
            fovy: float, aspect: float) -> np.ndarray:  # fmt: skip
    """Image coordinates of ``points`` in [-1, 1] (x right, y up; the frame's edges at ±1) for the free camera."""
    fwd, right, up = camera_axes(azimuth, elevation)
    rel = np.asarray(points, float) - (np.asarray(lookat, float) - distance * fwd)
    depth = rel @ fwd
    t = math.tan(math.radians(fovy) / 2)
    return np.stack([rel @ right / (depth * t * aspect), rel @ up / (depth * t)], axis=-1)


def fit_view(points: np.ndarray, azimuth: float, elevation: float, fovy: float, aspect: float,
             fill: float = 0.5, max_width: float = MAX_WIDTH) -> tuple[np.ndarray, float]:  # fmt: skip
    """Look-at point and distance at which ``points`` span ``fill`` of the frame height (or ``max_width`` of its
    width, whichever needs the larger distance), centred in the frame.

    Returns:
        ``(lookat, distance)``.
    """
    points = np.asarray(points, float)
    lookat = 0.5 * (points.min(0) + points.max(0))
    fwd, right, up = camera_axes(azimuth, elevation)
    depth_span = float(np.abs((points - lookat) @ fwd).max())
    distance = 1.0
    for _ in range(3):  # distance for the extent, then re-centre the projected box, twice
        lo, hi = depth_span + 1e-3, depth_span + 100.0
        for _ in range(50):  # the projected extent shrinks as the distance grows: bisection
            mid = 0.5 * (lo + hi)
            xy = project(points, lookat, mid, azimuth, elevation, fovy, aspect)
            span = xy.max(0) - xy.min(0)
            too_big = span[1] > 2 * fill or span[0] > 2 * max_width
            lo, hi = (mid, hi) if too_big else (lo, mid)
        distance = hi
        xy = project(points, lookat, distance, azimuth, elevation, fovy, aspect)
        centre = 0.5 * (xy.min(0) + xy.max(0))
        t = math.tan(math.radians(fovy) / 2)
        lookat = lookat + distance * t * (centre[0] * aspect * right + centre[1] * up)
    return lookat, distance


@dataclass
class VideoCamera:
    """The camera of :func:`~upright.viewer.video.render_video` (see the module doc).

    Args:
        model: the scene.
        root_body: the robot's base body (its free-floating body; for ``fixed`` any body of the arm's tree).
        mode: ``track`` or ``fixed``.
        azimuth, elevation: view angles, degrees.
        aspect: frame width / height.
        fill: fraction of the frame height the robot spans.
        distance: a fixed distance, m (None: fitted).
        extra_points: world points the ``fixed`` view also frames (the task's workspace).
        smoothing_s: time constant of the ``track`` camera's look-at and zoom-in, s (zoom-out is 4x faster).
    """

    model: mujoco.MjModel
    root_body: int
    mode: str = "track"
    azimuth: float = 135.0
    elevation: float = -20.0
    aspect: float = 4 / 3
    fill: float = 0.5
    distance: float | None = None
    extra_points: np.ndarray | None = None
    smoothing_s: float = 0.4

    def __post_init__(self) -> None:
        if self.mode not in ("track", "fixed"):
            raise ValueError(f"camera mode must be 'track' or 'fixed', got {self.mode!r}")
        self.geoms = robot_geoms(self.model, self.root_body)
        self.fovy = float(self.model.vis.global_.fovy)
        self.cam = mujoco.MjvCamera()
        self.cam.type = mujoco.mjtCamera.mjCAMERA_FREE
        self.cam.azimuth, self.cam.elevation = self.azimuth, self.elevation
        self._state: tuple[np.ndarray, float] | None = None

    def target(self, data: mujoco.MjData) -> tuple[np.ndarray, float]:
        """Look-at point and distance that frame ``data``'s robot now (no smoothing)."""
        points = geom_corners(self.model, data, self.geoms)
        lookat, distance = fit_view(points, self.azimuth, self.elevation, self.fovy, self.aspect, self.fill)
        if self.mode == "fixed" and self.extra_points is not None:  # the robot at fill, centred on robot + workspace,
            union = np.concatenate([points, self.extra_points])  # farther if that is needed to see all of it
            lookat, fits = fit_view(union, self.azimuth, self.elevation, self.fovy, self.aspect, MAX_WIDTH)
            distance = max(distance, fits)
        if self.distance is not None:
            distance = self.distance
        return lookat, distance

    def reset(self) -> None:
        """Forget the smoothing state (the next :meth:`update` frames the robot exactly)."""
        self._state = None

    def update(self, data: mujoco.MjData, dt: float = 0.0) -> mujoco.MjvCamera:
        """The camera for ``data``, ``dt`` seconds after the previous call (the ``fixed`` view is fitted once)."""
        if self._state is None:
            self._state = self.target(data)
        elif self.mode == "track":
            lookat, distance = self.target(data)
            old_lookat, old_distance = self._state
            a = 1.0 - math.exp(-dt / self.smoothing_s)
            a_zoom = 1.0 - math.exp(-dt / (self.smoothing_s / 4 if distance > old_distance else self.smoothing_s))
            self._state = (old_lookat + a * (lookat - old_lookat), old_distance + a_zoom * (distance - old_distance))
        self.cam.lookat[:] = self._state[0]
        self.cam.distance = self._state[1]
        return self.cam


def task_camera(model: mujoco.MjModel, root_body: int, task: str | None, aspect: float, fill: float = 0.5,
                azimuth: float | None = None, elevation: float | None = None,
                distance: float | None = None) -> VideoCamera:  # fmt: skip
    """The video camera of ``task`` (:data:`TASK_VIEWS`; an unknown task gets ``standup``'s tracking view)."""
    view = dict(TASK_VIEWS.get(task or "", TASK_VIEWS["standup"]))
    if view["mode"] == "fixed":
        root_body = arm_root_body(model)
    return VideoCamera(
        model, root_body, mode=view["mode"], aspect=aspect, fill=fill, distance=distance,
        azimuth=view["azimuth"] if azimuth is None else azimuth,
        elevation=view["elevation"] if elevation is None else elevation,
        extra_points=view.get("extra_points"),
    )  # fmt: skip
