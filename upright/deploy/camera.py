"""Camera sources of the daemon: the latest frame of each camera a chunked (VLA) policy reads.

A :class:`CameraSource` grabs frames in its own background thread and keeps only the newest one, so the control
tick never waits on a camera: :meth:`CameraSource.read` returns the newest ``(frame, timestamp_s)`` at once, where
``frame`` is (H, W, 3) uint8 RGB at the size the policy reads (a new array per frame, never written again) and
``timestamp_s`` the CLOCK_MONOTONIC time (``time.monotonic()``, s) at which it was captured; ``(None, -inf)`` before
the first frame. A failing camera keeps its last frame (which then ages) and says why in :attr:`CameraSource.error`;
its thread keeps retrying. The :class:`~upright.deploy.chunk_runner.ChunkRunner` checks the age.

Sources (``upright-deploy run --camera NAME=SOURCE``, :func:`open_camera`):

- ``sim`` / ``sim:DIR``: :class:`SimCamera`, the frames ``upright-deploy sim-robot --camera NAME`` renders from the
  simulated robot's current state into ``DIR/camera_<NAME>.frames`` (:mod:`upright.deploy.shared_frames`); DIR
  defaults to ``--port-dir`` (sim-robot's ``--link-dir``).
- ``/dev/videoN``, ``N`` (a V4L2 index) or a URL (``rtsp://...``): :class:`OpenCVCamera`, ``cv2.VideoCapture``;
  needs OpenCV (``pip install opencv-python-headless``). Not run on hardware in this project.

This module imports neither MuJoCo nor OpenCV at import time (the daemon's import closure).
"""

from __future__ import annotations

import math
import pathlib
import threading
import time

import numpy as np

from upright.deploy.shared_frames import SharedFrames, SharedFramesError

OPENCV_HINT = "pip install opencv-python-headless"
"""How to get OpenCV (named in the error of an OpenCV camera without it)."""


class CameraError(ValueError):
    """A camera that cannot be opened or a bad ``--camera`` argument (one line naming the fix)."""


def channel_path(folder: str | pathlib.Path, name: str) -> pathlib.Path:
    """sim-robot's frame file of camera ``name`` in ``folder`` (its ``--link-dir``): ``camera_<name>.frames``."""
    return pathlib.Path(folder) / f"camera_{name}.frames"


def _one_line(err: BaseException) -> str:
    lines = f"{type(err).__name__}: {err}".strip().splitlines()
    return lines[0] if lines else type(err).__name__


class CameraSource:
    """A camera whose newest frame is kept by a background thread (module docstring).

    Subclasses implement :meth:`_grab` (blocking is fine: it runs in the thread) and may override :meth:`_release`.

    Args:
        name: the camera's name (the policy's ``observation.images.<name>``).
        height, width: the frame size delivered, px.
        describe: what the source is, for messages (e.g. ``sim:/tmp/links``).
    """

    def __init__(self, name: str, height: int, width: int, describe: str):
        if height < 1 or width < 1:
            raise CameraError(f"camera {name}: size must be >= 1 px, got {height}x{width}")
        self.name, self.height, self.width, self.describe = name, int(height), int(width), describe
        self._latest: tuple[np.ndarray | None, float] = (None, -math.inf)
        self._error: str | None = None
        self.frames = 0
        """Frames received so far."""
        self._stop = threading.Event()
        self._new = threading.Condition()
        self._thread: threading.Thread | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        """(H, W, 3): the shape of every frame."""
        return (self.height, self.width, 3)

    @property
    def error(self) -> str | None:
        """Why the source has no fresh frame (one line), or None while it works."""
        return self._error

    def start(self) -> CameraSource:
        """Start the grab thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"upright-camera-{self.name}", daemon=True)
            self._thread.start()
        return self

    def read(self) -> tuple[np.ndarray | None, float]:
        """The newest ``(frame (H, W, 3) uint8, timestamp_s)``, or ``(None, -inf)`` before the first; never blocks."""
        return self._latest

    def wait_frame(self, timeout_s: float) -> tuple[np.ndarray, float]:
        """Block until the first frame (start-up only, never in the loop).

        Raises:
            CameraError: no frame within ``timeout_s`` (one line with the source's error).
        """
        deadline = time.monotonic() + timeout_s
        with self._new:
            while self._latest[0] is None and not self._stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._new.wait(min(left, 0.1))
        frame, t = self._latest
        if frame is None:
            why = f": {self._error}" if self._error else ""
            raise CameraError(f"camera {self.name} ({self.describe}) gave no frame within {timeout_s:g} s{why}")
        return frame, t

    def _publish(self, frame: np.ndarray, t: float) -> None:
        self._latest = (frame, t)  # one reference assignment: atomic for the reading thread
        self.frames += 1
        self._error = None
        with self._new:
            self._new.notify_all()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                got = self._grab()
            except Exception as err:  # noqa: BLE001 - a camera fails in many ways; keep the last frame, retry
                self._error = _one_line(err)
                self._stop.wait(0.2)
                continue
            if got is not None:
                self._publish(*got)

    def _grab(self) -> tuple[np.ndarray, float] | None:
        """The next frame and its capture time (s, CLOCK_MONOTONIC), or None for none yet (return soon)."""
        raise NotImplementedError

    def _release(self) -> None:
        """Free the device (called once by :meth:`close`, after the thread stopped)."""

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop the thread and free the device. Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None and self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)
        self._release()


class SimCamera(CameraSource):
    """The frames of ``upright-deploy sim-robot --camera NAME`` (:mod:`upright.deploy.sim_camera`): rendered from the
    simulated robot's current state, read from its shared-frames file (:func:`channel_path`) by polling every
    ``poll_s``. A restarted sim-robot (a new file) is picked up; the frames' age is the wall-clock time since the
    simulated state was read for them.

    Args:
        folder: sim-robot's ``--link-dir``.
        name, height, width: the camera and the policy's image size, px.
        poll_s: seconds between two checks for a new frame.

    Raises:
        CameraError: no file (sim-robot not started with ``--camera NAME``), a file without that camera, or another
            image size (one line naming sim-robot's ``--camera-size``).
    """

    def __init__(self, folder: str | pathlib.Path, name: str, height: int, width: int, poll_s: float = 0.004):
        super().__init__(name, height, width, f"sim:{folder}")
        self.path = channel_path(folder, name)
        self.poll_s = poll_s
        self._file = self._open()
        self._stamp = 0
        self._last_check = time.monotonic()
        self.sim_time_s = math.nan
        """Simulated time (s) of the newest frame's state."""
        self.start()

    def _open(self) -> SharedFrames:
        try:
            f = SharedFrames.open(self.path)
        except FileNotFoundError:
            raise CameraError(
                f"camera {self.name}: no sim-robot camera at {self.path}; start sim-robot with "
                f"--camera {self.name} --link-dir {self.path.parent}"
            ) from None
        except (OSError, SharedFramesError) as err:
            raise CameraError(f"camera {self.name}: cannot read {self.path}: {_one_line(err)}") from None
        if self.name not in f.shapes:
            f.close()
            raise CameraError(f"camera {self.name}: {self.path} holds cameras {list(f.names)}")
        if f.shapes[self.name] != (self.height, self.width):
            h, w = f.shapes[self.name]
            f.close()
            raise CameraError(
                f"camera {self.name}: sim-robot renders {h}x{w} px, the policy reads "
                f"{self.height}x{self.width}: restart sim-robot with --camera-size "
                f"{self.height}x{self.width}"
            )
        return f

    def _grab(self) -> tuple[np.ndarray, float] | None:
        f = self._file
        newest = f.newest
        if newest != self._stamp and newest > 0:
            got = f.read(newest, (self.name,))
            if got is not None:
                self._stamp = newest
                self._last_check = time.monotonic()
                self.sim_time_s = got[3] / 1e9
                return got[1][self.name], got[2] / 1e9
        now = time.monotonic()
        if now - self._last_check > 0.5:  # nothing new for a while: sim-robot gone or restarted?
            self._last_check = now
            if f.closed:
                self._error = f"sim-robot closed camera {self.name} ({self.path})"
            if f.replaced():
                try:
                    self._file = self._open()
                except CameraError as err:
                    self._error = str(err)
                else:
                    f.close()
                    self._stamp = 0
                    self._error = None
                    return None
            elif not f.closed:
                age = now - self._latest[1]
                self._error = (
                    f"no new frame from sim-robot's camera {self.name} for {age:.1f} s"
                    if age < math.inf
                    else f"no frame from sim-robot's camera {self.name} yet"
                )
        self._stop.wait(self.poll_s)
        return None

    def _release(self) -> None:
        self._file.close()


def _device(text: str) -> int | str:
    """``N`` -> int index; ``/dev/...`` or ``scheme://...`` -> str.

    Raises:
        CameraError: anything else.
    """
    if text.isdigit():
        return int(text)
    if text.startswith("/dev/") or "://" in text:
        return text
    raise CameraError(f"camera device {text!r}: expected /dev/videoN, a V4L2 index N, or a URL (rtsp://...)")


class OpenCVCamera(CameraSource):
    """A V4L2 (or any ``cv2.VideoCapture``) camera: frames are converted BGR -> RGB and resized to ``height`` x
    ``width`` (``cv2.INTER_AREA``; the whole image, not a crop: match the aspect ratio the policy was trained on)
    in the grab thread; the capture time is when ``read()`` returned. After 10 failed reads in a row the device is
    reopened. Not tested on hardware.

    Args:
        device: ``/dev/videoN``, an index ``N`` (int or digits) or a URL.
        name, height, width: the camera and the policy's image size, px.
        fps: ask the device for this frame rate (None: its default).

    Raises:
        CameraError: a malformed device, OpenCV not installed (the message names ``pip install
            opencv-python-headless``), a device path that does not exist, or a device that does not open.
    """

    def __init__(self, device: int | str, name: str, height: int, width: int, fps: float | None = None):
        super().__init__(name, height, width, str(device))
        self.device = _device(str(device)) if isinstance(device, str) else int(device)
        if isinstance(self.device, int) and self.device < 0:
            raise CameraError(f"camera {name}: V4L2 index must be >= 0, got {self.device}")
        try:
            import cv2
        except ImportError:
            raise CameraError(f"camera {name}={device} needs OpenCV: {OPENCV_HINT}") from None
        self._cv2 = cv2
        if isinstance(self.device, str) and self.device.startswith("/dev/") and not pathlib.Path(self.device).exists():
            raise CameraError(f"camera {name}: {self.device} does not exist (ls /dev/video*; v4l2-ctl --list-devices)")
        self.fps = fps
        self._cap = self._open_capture()
        self._failures = 0
        self.start()

    def _open_capture(self):
        cv2 = self._cv2
        local = isinstance(self.device, int) or str(self.device).startswith("/dev/")
        cap = cv2.VideoCapture(self.device, cv2.CAP_V4L2) if local else cv2.VideoCapture(self.device)
        if not cap.isOpened():
            cap.release()
            raise CameraError(
                f"camera {self.name}: OpenCV cannot open {self.device} (in use, or no permission: "
                "is the user in group 'video'?)"
            )
        cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)  # the newest frame, not a queued one
        if self.fps:
            cap.set(cv2.CAP_PROP_FPS, float(self.fps))
        return cap

    def _grab(self) -> tuple[np.ndarray, float] | None:
        cv2 = self._cv2
        ok, bgr = self._cap.read()
        t = time.monotonic()
        if not ok or bgr is None or bgr.ndim != 3 or bgr.shape[2] != 3:
            self._failures += 1
            self._error = f"camera {self.name}: read from {self.device} failed ({self._failures} in a row)"
            if self._failures >= 10:
                self._cap.release()
                self._cap = self._open_capture()  # raises: retried by the thread after 0.2 s
                self._failures = 0
            self._stop.wait(0.05)
            return None
        self._failures = 0
        rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        if rgb.shape[:2] != (self.height, self.width):
            rgb = cv2.resize(rgb, (self.width, self.height), interpolation=cv2.INTER_AREA)
        return np.ascontiguousarray(rgb, np.uint8), t

    def _release(self) -> None:
        self._cap.release()


def parse_size(text: str) -> tuple[int, int]:
    """``HxW`` (e.g. ``64x64``) -> (H, W) px.

    Raises:
        CameraError: not two positive integers joined by ``x``.
    """
    h, sep, w = text.lower().partition("x")
    if not sep or not h.strip().isdigit() or not w.strip().isdigit() or int(h) < 1 or int(w) < 1:
        raise CameraError(f"image size '{text}': expected HxW in px, e.g. 64x64")
    return int(h), int(w)


def parse_camera_args(items: list[str] | None) -> dict[str, str]:
    """``--camera NAME=SOURCE`` items -> {name: source}.

    Raises:
        CameraError: an item without ``=``, an empty name or source, or a name given twice.
    """
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, source = item.partition("=")
        name, source = name.strip(), source.strip()
        if not sep or not name or not source:
            raise CameraError(f"--camera expects NAME=SOURCE (e.g. front=sim or wrist=/dev/video0), got '{item}'")
        if name in out:
            raise CameraError(f"--camera {name} is given twice")
        out[name] = source
    return out


def open_camera(name: str, source: str, height: int, width: int, port_dir: str | None = None) -> CameraSource:
    """The :class:`CameraSource` of ``--camera NAME=SOURCE`` (module docstring), delivering ``height`` x ``width``.

    Raises:
        CameraError: ``sim`` without ``--port-dir``, or the source's own error (one line naming the fix).
    """
    if source == "sim" or source.startswith("sim:"):
        folder = source[4:] or port_dir
        if not folder:
            raise CameraError(
                f"--camera {name}=sim reads sim-robot's --link-dir: give --port-dir DIR or --camera {name}=sim:DIR"
            )
        return SimCamera(folder, name, height, width)
    return OpenCVCamera(source, name, height, width)
