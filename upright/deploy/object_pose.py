"""An object pose source for the daemon: the pose of the manipulated object (the lift task's cube) from a tracker.

A lift policy reads the cube's position and orientation (``gripper_to_cube``, ``cube_to_target``,
``cube_orientation``), which no joint encoder gives: on a real cell they come from a tracker (a camera with a fiducial
or a pose estimator, a motion-capture system). ``upright-deploy run --object-pose udp://HOST:PORT`` takes them as UDP
datagrams, one JSON object each::

    {"seq": 17, "pos": [0.55, 0.02, 0.03], "quat": [1.0, 0.0, 0.0, 0.0]}

``pos`` is the object's centre in m and ``quat`` its orientation (w, x, y, z, object-to-world), both in the robot's
base frame (the frame the policy was trained in: z up, the base at the origin); ``seq`` increases with each new
measurement. A reader thread keeps the newest valid sample and stamps it with the receive time (``time.monotonic_ns``);
the controller takes a sample only while it is younger than ``max_age_s`` (:meth:`ObjectPoseSource.fresh`), so a
tracker that stops, or one that repeats a ``seq``, is stale (the daemon holds its targets, raises ``OBJECT_STALE``,
and faults after ``--max-stale-ticks`` such ticks).

A datagram that is not such an object (malformed or deeply nested JSON, a missing key, a non-finite or overflowing
value, a quaternion of norm outside [0.5, 2], a position beyond :data:`MAX_RANGE_M` of the base, more than
:data:`MAX_DATAGRAM` bytes), one from another sender than the tracker's, or one whose ``seq`` does not increase while
the newest sample is fresh, is dropped and counted (:attr:`ObjectPoseSource.rejected`,
:attr:`ObjectPoseSource.last_rejection`): a broken sender cannot stop the reader, and no other host can inject a pose.
The tracker's host is the bound address when it is a loopback one (127.x: the tracker runs on the robot computer),
else it must be named (``--object-pose-from IP``). A tracker that restarts its ``seq`` is taken again once the newest
sample is stale.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from dataclasses import dataclass

import numpy as np

MAX_DATAGRAM = 1024
"""Bytes; a longer datagram is dropped."""
MAX_RANGE_M = 3.0
"""A position farther than this from the robot's base is dropped (no arm reaches it)."""


@dataclass(frozen=True)
class PoseSample:
    """One object pose, robot base frame."""

    pos: np.ndarray
    """(3,) float64 m."""
    quat: np.ndarray
    """(4,) float64 unit quaternion (w, x, y, z), object-to-world."""
    seq: int
    t_ns: int
    """``time.monotonic_ns()`` at reception."""


def parse_pose_url(url: str) -> tuple[str, int]:
    """(host, port) of ``udp://HOST:PORT``.

    Raises:
        ValueError: another form (one line naming the expected one).
    """
    text = str(url)
    host, sep, port = text.removeprefix("udp://").rpartition(":")
    if not text.startswith("udp://") or not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--object-pose {url!r}: expected udp://HOST:PORT, e.g. udp://127.0.0.1:5566")
    return host, int(port)


def decode_pose(data: bytes) -> tuple[int, np.ndarray, np.ndarray]:
    """(seq, pos (3,), unit quat (4,)) of one datagram.

    Raises:
        ValueError: not a valid pose datagram (module docstring; the message says why).
    """
    if len(data) > MAX_DATAGRAM:
        raise ValueError(f"datagram of {len(data)} bytes (at most {MAX_DATAGRAM})")
    try:
        msg = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"not JSON ({err})") from None
    if not isinstance(msg, dict) or not {"seq", "pos", "quat"} <= msg.keys():
        raise ValueError("not an object with seq, pos and quat")
    seq = msg["seq"]
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise ValueError(f"seq {seq!r} is not an integer")
    try:
        pos = np.asarray(msg["pos"], dtype=np.float64)
        quat = np.asarray(msg["quat"], dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"pos or quat is not a list of numbers ({err})") from None
    if pos.shape != (3,) or quat.shape != (4,):
        raise ValueError(f"pos has shape {pos.shape} and quat {quat.shape}, expected (3,) and (4,)")
    if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(quat))):
        raise ValueError("non-finite pos or quat")
    norm = float(np.linalg.norm(quat))
    if not 0.5 <= norm <= 2.0:
        raise ValueError(f"quat norm {norm:.3g} is not about 1")
    if float(np.linalg.norm(pos)) > MAX_RANGE_M:
        raise ValueError(f"pos {pos.tolist()} is more than {MAX_RANGE_M:g} m from the base")
    return seq, pos, quat / norm


def encode_pose(seq: int, pos, quat) -> bytes:
    """The datagram of one pose (what a tracker, or ``upright-deploy sim-robot --object-pose``, sends)."""
    return json.dumps({"seq": int(seq), "pos": [float(v) for v in pos], "quat": [float(v) for v in quat]}).encode()


class ObjectPoseSource:
    """A UDP pose receiver with a reader thread (module docstring).

    Args:
        url: ``udp://HOST:PORT`` to bind (127.0.0.1 for a tracker on the robot computer).
        max_age_s: a sample older than this is stale (s).
        sender: the tracker's IP address: datagrams from any other are dropped. None: the bound host, which must then
            be a loopback address.

    Raises:
        ValueError: a bad ``url``, a non-loopback bind without ``sender``, or the port cannot be bound (one line naming
            the fix).
    """

    def __init__(self, url: str, max_age_s: float = 0.1, sender: str | None = None):
        if not max_age_s > 0:
            raise ValueError(f"--object-pose-max-age-ms must be > 0, got {max_age_s * 1e3:g}")
        self.url = str(url)
        self.max_age_s = float(max_age_s)
        host, port = parse_pose_url(url)
        if sender is None and not host.startswith("127."):
            raise ValueError(
                f"--object-pose {url}: a pose stream from the network needs its sender, --object-pose-from IP (the "
                "tracker's address); any other host could send a pose"
            )
        try:
            self.sender = socket.gethostbyname(sender or host)
        except OSError as err:
            raise ValueError(f"--object-pose-from {sender}: not an address ({err})") from None
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._sock.bind((host, port))
        except OSError as err:
            self._sock.close()
            raise ValueError(f"--object-pose {url}: cannot bind {host}:{port} ({err.strerror or err})") from None
        self._sock.settimeout(0.05)
        self._lock = threading.Lock()
        self._sample: PoseSample | None = None
        self.received = 0
        """Valid datagrams."""
        self.rejected = 0
        """Datagrams dropped as invalid (or with a ``seq`` not above the newest)."""
        self.last_rejection = ""
        """Why the last one was dropped."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="object-pose", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                data, (address, _port) = self._sock.recvfrom(MAX_DATAGRAM + 1)
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            t_ns = time.monotonic_ns()
            try:
                if address != self.sender:
                    raise ValueError(f"from {address}, not the tracker's {self.sender}")
                seq, pos, quat = decode_pose(data)
                newest = self._sample
                if newest is not None and seq <= newest.seq and t_ns - newest.t_ns <= self.max_age_s * 1e9:
                    raise ValueError(f"seq {seq} is not above the newest {newest.seq}")
            except Exception as err:  # noqa: BLE001 - whatever a datagram does (RecursionError, OverflowError), drop it
                self.rejected += 1
                self.last_rejection = (
                    f"{type(err).__name__}: {err}"[:200] if not isinstance(err, ValueError) else str(err)
                )
                continue
            with self._lock:
                self._sample = PoseSample(pos, quat, seq, t_ns)
            self.received += 1

    def latest(self) -> PoseSample | None:
        """The newest valid sample, however old (None before the first)."""
        with self._lock:
            return self._sample

    def fresh(self, now_ns: int | None = None) -> PoseSample | None:
        """The newest sample if it is younger than ``max_age_s`` at ``now_ns`` (default: now), else None."""
        sample = self.latest()
        now = time.monotonic_ns() if now_ns is None else now_ns
        if sample is None or now - sample.t_ns > self.max_age_s * 1e9:
            return None
        return sample

    def describe(self, now_ns: int | None = None) -> str:
        """One line: the URL, the newest sample's age and the counts."""
        sample = self.latest()
        now = time.monotonic_ns() if now_ns is None else now_ns
        age = "none yet" if sample is None else f"newest {(now - sample.t_ns) / 1e6:.0f} ms old (seq {sample.seq})"
        return f"{self.url}: {age}, {self.received} received, {self.rejected} rejected"

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=1.0)


def goal_from_text(text: str) -> np.ndarray:
    """(3,) float64 m of ``X,Y,Z`` (the lift target, robot base frame).

    Raises:
        ValueError: not three finite numbers, or not a reachable goal (one line naming the form).
    """
    try:
        goal = np.array([float(v) for v in str(text).split(",")], dtype=np.float64)
    except ValueError:
        goal = np.zeros(0)
    if goal.shape != (3,) or not all(math.isfinite(v) for v in goal):
        raise ValueError(f"--object-goal {text!r}: expected X,Y,Z in m (robot base frame), e.g. 0.6,0.0,0.25")
    if float(np.linalg.norm(goal)) > MAX_RANGE_M or goal[2] < 0.0:
        raise ValueError(
            f"--object-goal {text!r}: {goal.tolist()} m is not a reachable goal (at most {MAX_RANGE_M:g} m from the "
            "base, above the table at z = 0); the values are metres in the robot base frame, e.g. 0.6,0.0,0.25"
        )
    return goal
