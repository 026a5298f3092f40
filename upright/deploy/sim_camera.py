"""``upright-deploy sim-robot --camera NAME``: the simulated robot's cameras, rendered from its current state and
published to the daemon.

A thread of the sim-robot process renders at up to ``fps`` frames per second. For each frame it copies the live
``MjData``'s ``qpos`` and mocap poses under :attr:`~upright.deploy.sim_robot.MujocoRobotModel.lock` (between two
physics steps: a consistent state, the one the daemon drives), stamps the copy with ``time.monotonic_ns()``, computes
the kinematics on its own ``MjData`` and draws each camera with :func:`upright.tasks.lift.camera.draw` (the lift
task's render settings) through a ``mujoco.Renderer`` of the sim robot's own ``MjModel``, so the cameras are the
scene's definitions (``front`` and ``wrist`` in the lift scene, :data:`upright.tasks.lift.scene.CAMERAS`). Each
camera's frame goes into its one-slot shared-frames file ``<link-dir>/camera_<NAME>.frames``
(:mod:`upright.deploy.shared_frames`, which says why a mapped file), read by the daemon's
:class:`~upright.deploy.camera.SimCamera`. A frame's timestamp is when its state was copied, so its age at the
daemon includes the render time.

Cost: MuJoCo's renderer releases the GIL while it draws, so the pty exchange goes on in the main thread; a 64 x 64
frame of the lift scene took ~50 ms with Mesa's software EGL on the project's 2-core machine (about 10 frames/s for
two cameras). Rendering needs an offscreen OpenGL context: ``MUJOCO_GL=egl`` or ``osmesa``, chosen by the CLI before
MuJoCo is imported (:func:`upright.gl.choose_offscreen_gl`).

Fault injection: ``--fault camera_stall:NAME:START[:END]`` (:class:`~upright.deploy.pty_device.Fault`, I/O ticks;
empty NAME: every camera): the camera publishes nothing in [START, END), a frozen camera for the daemon's
stale-frame handling.
"""

from __future__ import annotations

import pathlib
import threading
import time

import mujoco

from upright.deploy.camera import channel_path
from upright.deploy.pty_device import Fault
from upright.deploy.shared_frames import SharedFrames

GL_HINT = "set MUJOCO_GL=egl (libegl1) or MUJOCO_GL=osmesa (libosmesa6) before starting sim-robot, or drop --camera"
"""How to fix a renderer that cannot start (appended to its error)."""


class SimCameraPublisher:
    """Renders ``cameras`` of the sim robot in a background thread and publishes them (module docstring).

    Args:
        robot: the :class:`~upright.deploy.sim_robot.MujocoRobotModel` the daemon drives (its model, data and lock).
        cameras: camera names of the scene.
        height, width: image size, px (>= 16, as the lift task's camera group).
        link_dir: folder of the frame files (sim-robot's ``--link-dir``).
        fps: at most this many frames per second per camera.
        faults: ``camera_stall`` faults (other kinds are ignored).
        ready_timeout_s: how long to wait for the renderer's OpenGL context.

    Raises:
        ValueError: an unknown camera (the message lists the scene's), a size < 16 px or ``fps`` <= 0.
        RuntimeError: the renderer cannot start (the message names ``MUJOCO_GL``).
    """

    def __init__(
        self,
        robot,
        cameras: list[str] | tuple[str, ...],
        height: int,
        width: int,
        link_dir: str | pathlib.Path,
        fps: float = 30.0,
        faults: list[Fault] | tuple[Fault, ...] = (),
        ready_timeout_s: float = 60.0,
    ):
        m = robot.model
        known = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_CAMERA, i) for i in range(m.ncam)]
        unknown = [c for c in cameras if c not in known]
        if unknown or not cameras or len(set(cameras)) != len(cameras):
            raise ValueError(
                f"sim-robot --camera: unknown, repeated or no cameras {list(cameras)}; the scene's cameras: {known}"
            )
        if height < 16 or width < 16:
            raise ValueError(f"sim-robot --camera-size must be >= 16x16 px, got {height}x{width}")
        if not fps > 0:
            raise ValueError(f"sim-robot --camera-fps must be > 0, got {fps}")
        self.robot, self.cameras = robot, tuple(cameras)
        self.height, self.width, self.period = int(height), int(width), 1.0 / fps
        self.faults = [f for f in faults if f.kind == "camera_stall"]
        # the offscreen buffer must hold the image (MuJoCo's default is 640 x 480)
        m.vis.global_.offwidth = max(int(m.vis.global_.offwidth), self.width)
        m.vis.global_.offheight = max(int(m.vis.global_.offheight), self.height)
        size = (self.height, self.width)
        self.files = {c: SharedFrames.create(channel_path(link_dir, c), {c: size}) for c in cameras}
        self.frames = dict.fromkeys(cameras, 0)
        """Frames published per camera."""
        self.error: str | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sim-robot-cameras", daemon=True)
        self._thread.start()
        if not self._ready.wait(ready_timeout_s) or self.error:
            self.close()
            raise RuntimeError(f"sim-robot cannot render cameras ({self.error or 'no OpenGL context'}); {GL_HINT}")

    @property
    def paths(self) -> dict[str, pathlib.Path]:
        """Camera name -> its frame file."""
        return {c: f.path for c, f in self.files.items()}

    def _stalled(self, camera: str) -> bool:
        tick = self.robot.io_tick
        return any(f.active(tick, camera) for f in self.faults)

    def _run(self) -> None:
        robot = self.robot
        m, live = robot.model, robot.data
        d = mujoco.MjData(m)
        try:
            from upright.tasks.lift.camera import draw

            renderer = mujoco.Renderer(m, height=self.height, width=self.width)
        except Exception as err:  # noqa: BLE001 - MuJoCo raises several types when no GL context exists
            self.error = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            self._ready.set()
            return
        self._ready.set()
        stamp = 0
        next_t = time.monotonic()
        try:
            while not self._stop.is_set():
                live_cams = [c for c in self.cameras if not self._stalled(c)]
                if live_cams:
                    with robot.lock:
                        d.qpos[:] = live.qpos
                        d.mocap_pos[:] = live.mocap_pos
                        d.mocap_quat[:] = live.mocap_quat
                        sim_ns = int(round(live.time * 1e9))
                        t_ns = time.monotonic_ns()
                    mujoco.mj_kinematics(m, d)
                    mujoco.mj_camlight(m, d)
                    stamp += 1
                    for c in live_cams:
                        image = draw(renderer, d, c)
                        self.files[c].write(stamp, {c: image}, t_ns, aux=sim_ns)
                        self.frames[c] += 1
                next_t += self.period
                now = time.monotonic()
                if next_t < now:  # slower than fps: render back to back
                    next_t = now
                self._stop.wait(max(0.0, next_t - now))
        except Exception as err:  # noqa: BLE001 - reported at exit; the daemon sees the frames age
            self.error = f"{type(err).__name__}: {err}"
        finally:
            renderer.close()

    def close(self) -> None:
        """Stop the thread, mark the files closed and remove them. Idempotent."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(5.0)
        alive = self._thread.is_alive()  # a renderer stuck in OpenGL: keep its mapping, just remove the files
        for f in self.files.values():
            f.mark_closed()
            if alive:
                f.path.unlink(missing_ok=True)
            else:
                f.close(unlink=True)
        self.files = {}


def describe(publisher: SimCameraPublisher) -> str:
    """One line for sim-robot's start-up message."""
    files = " ".join(f"{c}={p}" for c, p in publisher.paths.items())
    return f"cameras {publisher.height}x{publisher.width} px, up to {1 / publisher.period:g} frames/s: {files}"
