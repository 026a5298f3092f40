"""Frame logging in a separate process: the control process only writes fixed-size records to a pipe.

Control side (:class:`LoggerClient`): one ``os.write`` of one fixed-size record (< PIPE_BUF, so
atomic) per policy tick on a non-blocking pipe; if the pipe is full the frame is dropped and the
``LOGGER_DROP`` safety flag is raised, the control loop never waits on disk (an episode-end record that does not fit
is queued and sent before the next frame).

One writer: the client takes the dataset's writer lock (:class:`~upright.deploy.lerobot_dataset.DatasetLock`) before
the logger touches the dataset, hands its descriptor to the logger process (``pass_fds``) and closes its own copy
once the logger is ready, so the logger holds it for its whole life and the kernel releases it when the logger
exits or dies. A dataset whose lock another process holds is refused (``DatasetLockedError``, a RuntimeError)
before anything of it is read or written.

Start-up: the logger opens (and recovers) the dataset, then answers one JSON line on its stdout,
``{"next_episode_index": N}``; the client waits for it, so the daemon numbers its episodes as the
dataset does and a dataset that cannot be opened stops the daemon before anything moves.

Health (:meth:`LoggerClient.check`, called by the controller every policy tick; a failure is final): the logger
failed when

- its writes fail (a full disk: ENOSPC or EFBIG, EIO, ...): it stops, keeps the journal (every flushed frame stays
  readable; ``upright-deploy recover`` converts it later), writes one JSON line ``{"error": "..."}`` on its stdout,
  the client's status channel, and exits with code 3;
- the process is gone (SIGKILL, a crash): its exit status, or its pipes closed (EOF, EPIPE) with no exit status
  for ``GONE_GRACE_S``;
- it took no record for ``stall_s`` (its pipe stayed full: the process is stopped, or blocked on a dying disk).

Once failed, nothing more is sent to it; what the daemon does then is the controller's ``on_logger_failure``.

Camera images (``observation.images.<name>`` features, dtype ``image``) do not fit a pipe record: the client puts
each logged frame's images into a ring of shared-memory slots (:mod:`upright.deploy.shared_frames`, a file in
``/dev/shm`` unlinked as soon as the logger has mapped it; a memcpy per camera on the control thread, ~12 kB for
64 x 64) and the record carries the slot's stamp (``image_stamp``). The logger copies the slot when the record
arrives and stores it as PNG (LeRobot's non-video image storage, as ``record_demos`` writes). The ring holds about
4 s of frames: a logger lagging further behind finds the slot overwritten and stores a black image (counted, and
said once on its stderr); so does a frame without a camera image yet.

Logger side (``python -m upright.deploy.logger_process``, :func:`main`): reads records, appends
them to the episode's crash-safe journal every ``flush_every`` frames or ``flush_interval_s``,
reports progress in ``journal/progress.json``, and converts each finished episode into the
LeRobotDataset v3 files (:mod:`upright.deploy.lerobot_dataset`). If the daemon dies the logger
sees end-of-file and closes the open episode as ``interrupted``; if both die, the journal is
converted the next time a logger opens the dataset (or by ``upright-deploy recover``).
"""

from __future__ import annotations

import argparse
import fcntl
import io
import json
import os
import pathlib
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

from upright.deploy.lerobot_dataset import (
    OUTCOMES,
    DatasetLock,
    LeRobotV3Writer,
    atomic_write_bytes,
    column,
)
from upright.deploy.safety import FAULT_FLAGS, SafetyFlag
from upright.deploy.shared_frames import SharedFrames
from upright.deploy.state_machine import ControlSource

KIND_FRAME, KIND_EPISODE_END, KIND_CLOSE = 0, 1, 2
F_SETPIPE_SZ = 1031
REASON_BYTES = 240
"""Longest episode-end reason carried in a record (UTF-8, truncated)."""
IMAGE_RING_BYTES = 64 << 20
"""Most shared memory the image ring takes (its slots hold 4 s of frames within this)."""
PIPE_BYTES = 1 << 20
"""Size asked for the record pipe (F_SETPIPE_SZ): about 15 s of G1 frames at 50 Hz."""
STALL_S = 2.0
"""The logger failed when its pipe stays full this long (it takes no record: stopped, or blocked on its disk)."""
GONE_GRACE_S = 0.5
"""A dying process's pipes close just before its exit status can be collected (SIGKILL: the kernel closes its files,
then makes it a zombie); when :meth:`LoggerClient.check` finds the pipes closed and no exit status yet, it waits up
to this long (s; the next tick normally has it) so that the failure names the signal or the exit code; after that,
"is gone (its pipes are closed)" (issue 33.8: under load a SIGKILL was reported that way)."""
EXIT_WRITE_FAILED = 3
"""Exit code of a logger whose writes failed (after its ``{"error": ...}`` line)."""


def frame_features(
    joint_names: tuple[str, ...], frame_names: list[str], images: dict[str, tuple[int, int]] | None = None
) -> dict[str, dict]:
    """The dataset's explicit features for a policy with ``joint_names`` and observation-frame entries ``frame_names``;
    ``images``: camera name -> (H, W) px adds ``observation.images.<name>`` (dtype ``image``, shape [H, W, 3], as
    ``record_demos --cameras`` writes them)."""
    j = list(joint_names)
    f32 = lambda names: {"dtype": "float32", "shape": [len(names)], "names": list(names)}  # noqa: E731
    scalar = lambda dtype: {"dtype": dtype, "shape": [1], "names": None}  # noqa: E731
    state_names = [f"q.{n}" for n in j] + [f"dq.{n}" for n in j]
    state_names += [f"gyro.{a}" for a in "xyz"] + [f"gravity.{a}" for a in "xyz"]
    features = {
        "observation.state": f32(state_names),
        "observation.policy_obs": f32(frame_names),
        "observation.policy_action": f32(j),
        "action": f32(j),
        "action.joint_target": f32(j),
        "intervention": scalar("bool"),
        "control_source": scalar("int64"),
        "safety_flags": scalar("int64"),
        "t_mono_ns": scalar("int64"),
        "imu_time_us": scalar("int64"),
        "loop_lateness_us": scalar("float32"),
        "next.reward": scalar("float32"),
        "next.done": scalar("bool"),
    }
    for cam, (h, w) in (images or {}).items():
        features[f"observation.images.{cam}"] = {
            "dtype": "image",
            "shape": [int(h), int(w), 3],
            "names": ["height", "width", "channel"],
        }
    return features


def image_features(features: dict[str, dict]) -> dict[str, tuple[int, int]]:
    """Feature name -> (H, W) of the image features (they travel through the image ring, not the pipe)."""
    return {n: (int(f["shape"][0]), int(f["shape"][1])) for n, f in features.items() if f["dtype"] == "image"}


_NP = {"float32": np.float32, "int64": np.int64, "bool": np.bool_}


def record_dtype(features: dict[str, dict]) -> np.dtype:
    """Fixed-size pipe record: header fields (``reason`` is used by episode-end records), then one field per feature.

    Raises:
        ValueError: the record would not fit one atomic pipe write (PIPE_BUF).
    """
    fields = [
        ("kind", np.uint8),
        ("outcome", np.uint8),
        ("episode", np.int64),
        ("frame_index", np.int64),
        ("image_stamp", np.int64),
        ("reason", f"S{REASON_BYTES}"),
    ]
    for name, f in features.items():
        if f["dtype"] == "image":  # through the image ring
            continue
        shape = tuple(f["shape"])
        fields.append((name, _NP[f["dtype"]], shape) if shape != (1,) else (name, _NP[f["dtype"]]))
    dt = np.dtype(fields)
    if dt.itemsize > select.PIPE_BUF:
        raise ValueError(f"a frame record is {dt.itemsize} bytes, more than PIPE_BUF ({select.PIPE_BUF})")
    return dt


def extra_info(task: str, policy: str) -> dict:
    """upright keys added to info.json: the codes of control_source, safety_flags and outcomes."""
    return {
        "upright": {
            "task": task,
            "policy": policy,
            "control_source_codes": {s.name.lower(): int(s) for s in ControlSource},
            "safety_flag_bits": {f.name: int(f) for f in SafetyFlag if f.value},
            "episode_outcomes": list(OUTCOMES),
            "fault_flags": int(FAULT_FLAGS),
            "notes": "action = executed action in policy units, the policy file's action rule inverted "
            "((target - q) / action_scale for action_mode relative, (target - default_joint_pos) / action_scale "
            "for absolute, (target - previous target) / action_scale for delta); "
            "observation.policy_action = the policy's proposal; intervention = control_source == human; "
            "a fault (safety_flags & fault_flags) ends its episode on that frame, the episode's "
            "upright/reason says why",
        }
    }


def _png(image: np.ndarray) -> bytes:
    import imageio.v3 as iio

    buf = io.BytesIO()
    iio.imwrite(buf, image, extension=".png")
    return buf.getvalue()


def _ring_path() -> pathlib.Path:
    shm = pathlib.Path("/dev/shm")
    folder = shm if shm.is_dir() and os.access(shm, os.W_OK) else pathlib.Path(tempfile.gettempdir())
    return folder / f"upright-logger-{os.getpid()}-{secrets.token_hex(4)}.frames"


class LoggerClient:
    """Starts the logger process and hands it records without ever blocking.

    Args:
        root: dataset folder.
        features: from :func:`frame_features` (image features go through the image ring: :meth:`put_images`).
        fps: policy rate.
        robot_type, task, policy: written into info.json.
        flush_every: frames per journal flush.
        flush_interval_s: longest time between flushes.
        ready_timeout_s: how long to wait for the logger to open the dataset.
        stall_s: the logger failed when its pipe stays full this long (see the module's Health).
        pipe_bytes: size asked for the record pipe.

    Raises:
        ~upright.deploy.lerobot_dataset.DatasetLockedError: another process writes ``root`` (a daemon's logger,
            ``recover``): refused before anything of the dataset is read or written (a RuntimeError).
        RuntimeError: the logger process could not open ``root`` (its own message is on stderr), or did not
            answer within ``ready_timeout_s``.
        OSError: the lock file cannot be made (no permission, ...).
    """

    def __init__(
        self,
        root: str | pathlib.Path,
        features: dict[str, dict],
        fps: int,
        robot_type: str,
        task: str,
        policy: str = "",
        flush_every: int = 10,
        flush_interval_s: float = 0.2,
        ready_timeout_s: float = 60.0,
        stall_s: float = STALL_S,
        pipe_bytes: int = PIPE_BYTES,
    ):
        self.root = pathlib.Path(root)
        self.dtype = record_dtype(features)
        self.record = np.zeros((), self.dtype)
        self.record["image_stamp"] = -1
        self._bytes = memoryview(self.record.reshape(1).view(np.uint8))
        self.stall_s = float(stall_s)
        self.dropped = 0
        self.sent = 0
        self.failed: str | None = None
        """Why the logger failed (one line), or None while it works (:meth:`check`)."""
        self._pending: list[bytes] = []
        self._full_since: float | None = None
        self._stalled = False
        self._gone = False
        self._gone_since: float | None = None
        """Monotonic time (s) when :meth:`check` first found the pipes closed and no exit status yet."""
        self._status_buf = b""
        self.images: SharedFrames | None = None
        """The image ring (None: no image features)."""
        self._image_stamp = 0
        # the writer lock first: a second writer is refused before the logger reads or writes the dataset
        lock = DatasetLock.acquire(root, f"upright-deploy run (daemon pid {os.getpid()}), starting its logger")
        schema = {
            "root": str(root),
            "features": features,
            "fps": fps,
            "robot_type": robot_type,
            "task": task,
            "policy": policy,
            "flush_every": flush_every,
            "flush_interval_s": flush_interval_s,
            "lock_fd": lock.fd,
        }
        try:
            shapes = image_features(features)
            if shapes:
                slot = sum(h * w * 3 for h, w in shapes.values()) + 64
                slots = int(max(16, min(4 * fps, IMAGE_RING_BYTES // slot)))
                self.images = SharedFrames.create(_ring_path(), shapes, slots)
                schema["image_ring"] = str(self.images.path)
            try:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "upright.deploy.logger_process", "--schema", json.dumps(schema)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    close_fds=True,
                    pass_fds=(lock.fd,),
                    bufsize=0,
                )
                self.next_episode_index = self._wait_ready(root, ready_timeout_s)
                """The dataset's next ``episode_index`` when the logger opened it (after recovering journals)."""
            finally:
                if self.images is not None:  # mapped by the logger (or it failed): nothing left behind in /dev/shm
                    self.images.path.unlink(missing_ok=True)
        except BaseException:
            if self.images is not None:
                self.images.close()
            raise
        finally:
            lock.close()  # the logger holds the lock from here on (its inherited copy), until it exits or dies
        self._fd = self.proc.stdin.fileno()
        try:
            fcntl.fcntl(self._fd, F_SETPIPE_SZ, int(pipe_bytes))
        except OSError:
            pass
        os.set_blocking(self._fd, False)
        os.set_blocking(self.proc.stdout.fileno(), False)

    def _wait_ready(self, root, timeout_s: float) -> int:
        out = self.proc.stdout
        line = b""
        closed = False
        deadline = time.monotonic() + timeout_s
        while not line.endswith(b"\n"):  # byte by byte: nothing after the ready line is consumed here
            ready, _, _ = select.select([out], [], [], max(0.0, deadline - time.monotonic()))
            byte = out.read(1) if ready else b""
            if not byte:
                closed = bool(ready)  # end of file: the logger exited (or is exiting); else the time is up
                break
            line += byte
        try:
            return int(json.loads(line)["next_episode_index"])
        except (ValueError, KeyError, TypeError):
            pass
        try:  # a logger that closed its stdout is exiting: it is not "still opening" (it used to be said so)
            self.proc.wait(5.0 if closed else 0.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"the logger process did not open the dataset {root} within {timeout_s:g} s") from None
        raise RuntimeError(
            f"the logger process could not open the dataset {root} (its error is above); "
            "use another --dataset, or --no-log"
        )

    # ------------------------------------------------------------------ health
    def _read_status(self) -> None:
        """Read what the logger wrote on its status channel (non-blocking); an ``{"error": ...}`` line fails it."""
        fd = self.proc.stdout.fileno()
        while True:
            try:
                data = os.read(fd, 4096)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                data = b""
            if not data:  # end of file: the process closed it (it exited, or is exiting)
                self._gone = True
                break
            self._status_buf += data
        *lines, self._status_buf = self._status_buf.split(b"\n")
        for line in lines:
            try:
                error = json.loads(line).get("error")
            except (ValueError, AttributeError):
                continue
            if error and self.failed is None:
                self.failed = str(error)

    def check(self) -> str | None:
        """The logger's failure (one line), or None while it works; cheap enough for every policy tick (a
        non-blocking read of its status channel and a ``waitpid(WNOHANG)``). A failure is final: see the module's
        Health for what counts."""
        if self.failed is not None:
            return self.failed
        self._read_status()
        if self.failed is None:
            code = self.proc.poll()
            if code is not None:
                self._read_status()  # its last line comes before its exit
            if self.failed is not None:
                pass
            elif code is not None and code < 0:
                self.failed = f"the logger process (pid {self.proc.pid}) was killed by {signal.Signals(-code).name}"
            elif code is not None:
                self.failed = f"the logger process (pid {self.proc.pid}) exited with code {code}"
            elif self._gone and self._gone_for() >= GONE_GRACE_S:
                self.failed = f"the logger process (pid {self.proc.pid}) is gone (its pipes are closed)"
            elif self._stalled:
                self.failed = (
                    f"the logger process (pid {self.proc.pid}) took no frame for {self.stall_s:g} s: its "
                    "pipe stayed full (the process is stopped, or blocked on its disk)"
                )
        return self.failed

    def _gone_for(self) -> float:
        """Seconds since :meth:`check` first found the pipes closed while the exit status was not there yet."""
        now = time.monotonic()
        if self._gone_since is None:
            self._gone_since = now
        return now - self._gone_since

    def _full(self) -> None:
        now = time.monotonic()
        if self._full_since is None:
            self._full_since = now
        elif now - self._full_since >= self.stall_s:
            self._stalled = True

    def _write_pending(self) -> bool:
        """Write the queued control records; False if one did not fit (or the pipe is gone)."""
        while self._pending:
            try:
                os.write(self._fd, self._pending[0])
            except BlockingIOError:
                self._full()
                return False
            except OSError:  # EPIPE: the logger is gone
                self._gone = True
                return False
            self._pending.pop(0)
            self._full_since = None
        return True

    # ------------------------------------------------------------------ records
    def put_images(self, images: dict[str, np.ndarray | None]) -> None:
        """Put this frame's images (feature name -> (H, W, 3) uint8; None or a wrong shape/dtype: black) into the next
        ring slot and its stamp into :attr:`record` (call before :meth:`send`; without images the frame's are black).
        Never blocks: one copy per image."""
        if self.images is None:
            return
        clean = {}
        for name, (h, w) in self.images.shapes.items():
            img = images.get(name)
            ok = isinstance(img, np.ndarray) and img.shape == (h, w, 3) and img.dtype == np.uint8
            clean[name] = img if ok else None
        self._image_stamp += 1
        self.images.write(self._image_stamp, clean, time.monotonic_ns())
        self.record["image_stamp"] = self._image_stamp

    def send(self) -> bool:
        """Write the current :attr:`record` (after any queued episode end); False (and count a drop) if the pipe is
        full or closed, or the logger failed. Never blocks."""
        try:
            if self.failed is not None or not self._write_pending():
                self.dropped += 1
                return False
            os.write(self._fd, self._bytes)
        except BlockingIOError:
            self.dropped += 1
            self._full()
            return False
        except OSError:  # EPIPE: the logger is gone
            self.dropped += 1
            self._gone = True
            return False
        finally:
            self.record["image_stamp"] = -1
        self._full_since = None
        self.sent += 1
        return True

    def end_episode(self, episode: int, outcome: str, reason: str = "") -> None:
        """Tell the logger the episode ended, with ``outcome`` (one of OUTCOMES) and why (``reason`` is kept to
        REASON_BYTES of UTF-8). Never blocks: a record that does not fit the pipe now is queued and written before
        the next frame (nothing is sent to a failed logger)."""
        if self.failed is None:
            self._pending.append(self._control_record(KIND_EPISODE_END, episode, OUTCOMES.index(outcome), reason))
            self._write_pending()

    def _control_record(self, kind: int, episode: int = -1, outcome: int = 0, reason: str = "") -> bytes:
        rec = np.zeros((), self.dtype)
        rec["kind"], rec["episode"], rec["outcome"] = kind, episode, outcome
        rec["reason"] = reason.encode()[:REASON_BYTES]
        return rec.reshape(1).view(np.uint8).tobytes()

    def _write_blocking(self, deadline_s: float = 1.0) -> None:
        """Write the queued records, waiting up to ``deadline_s`` for room (only on the way out, :meth:`close`)."""
        deadline = time.monotonic() + deadline_s
        while not self._write_pending() and not self._gone and time.monotonic() < deadline:
            time.sleep(0.001)

    def close(self, timeout: float = 30.0) -> int | None:
        """Ask the logger to finish (it converts the open episode), wait for it; return its exit code. A failed logger
        is not asked: its pipe is closed and it gets 5 s to exit before it is killed (its journal stays)."""
        try:
            if self.proc.poll() is None:
                if self.check() is None:
                    self._pending.append(self._control_record(KIND_CLOSE))
                    self._write_blocking()
                else:
                    timeout = min(timeout, 5.0)
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
                try:
                    return self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            return self.proc.poll()
        finally:
            if self.images is not None:
                self.images.close()
            try:
                self.proc.stdout.close()
            except OSError:
                pass


class _Logger:
    """The logger process's state: the dataset writer, the open episode and its journal."""

    def __init__(self, schema: dict):
        self.features = schema["features"]
        self.task = schema["task"]
        self.dtype = record_dtype(self.features)
        holder = f"the logger of upright-deploy run (daemon pid {os.getppid()})"
        if schema.get("lock_fd") is not None:  # the client's lock, inherited: held until this process exits
            self.lock = DatasetLock.adopt(int(schema["lock_fd"]), schema["root"], holder)
        else:
            self.lock = DatasetLock.acquire(schema["root"], holder)
        self.writer = LeRobotV3Writer(
            schema["root"],
            self.features,
            schema["fps"],
            schema["robot_type"],
            extra_info(schema["task"], schema.get("policy", "")),
        )
        recovered = self.writer.recover(self.task, "recovered from the journal: the daemon and its logger died")
        if recovered:
            print(f"logger: recovered interrupted episodes {recovered}", file=sys.stderr, flush=True)
        self._said_quarantined = 0
        self._say_quarantined()
        self.flush_every = int(schema.get("flush_every", 10))
        self.flush_interval = float(schema.get("flush_interval_s", 0.2))
        self.episode_key: int | None = None
        self.episode_index = -1
        self.journal = None
        self.pending: list[np.ndarray] = []
        self.image_names = list(image_features(self.features))
        self.pending_png: dict[str, list[bytes]] = {n: [] for n in self.image_names}
        self.ring = SharedFrames.open(schema["image_ring"]) if self.image_names else None
        self.images_lost = 0
        """Frames stored with black images: the ring slot was overwritten (the logger lagged) or held none."""
        self._black = {n: _png(np.zeros((*self.ring.shapes[n], 3), np.uint8)) for n in self.image_names}
        self.last_flush = time.monotonic()
        self.progress_path = self.writer.journal_dir / "progress.json"

    def _say_quarantined(self) -> None:
        for src, dst, why in self.writer.quarantined[self._said_quarantined :]:
            print(f"logger: journal {src} cannot be converted ({why}); kept as {dst}", file=sys.stderr, flush=True)
        self._said_quarantined = len(self.writer.quarantined)

    def _batch(self, records: np.ndarray) -> pa.RecordBatch:
        cols = [
            column(self.pending_png[name] if f["dtype"] == "image" else records[name], f)
            for name, f in self.features.items()
        ]
        cols.append(pa.array(records["frame_index"].astype(np.int64)))
        return pa.RecordBatch.from_arrays(cols, schema=self.writer.schema.append(pa.field("frame_index", pa.int64())))

    def _progress(self) -> None:
        atomic_write_bytes(
            self.progress_path,
            json.dumps(
                {
                    "episode_index": self.episode_index,
                    "frames_flushed": self.journal.frames if self.journal else 0,
                    "total_episodes": self.writer.info["total_episodes"],
                    "total_frames": self.writer.info["total_frames"],
                    "images_lost": self.images_lost,
                }
            ).encode(),
        )

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        if not self.pending or self.journal is None:
            return
        self.journal.write(self._batch(np.concatenate(self.pending)))
        self.pending.clear()
        for v in self.pending_png.values():
            v.clear()
        self._progress()

    def _open(self, key: int) -> None:
        from upright.deploy.lerobot_dataset import JournalWriter

        self.episode_key = key
        self.episode_index = self.writer.next_episode_index
        schema = self.writer.schema.append(pa.field("frame_index", pa.int64()))
        self.journal = JournalWriter(self.writer.journal_path(self.episode_index), schema)

    def finish(self, outcome: str, reason: str = "") -> None:
        """Flush and convert the open episode into the dataset (a journal that does not read back is quarantined, not
        deleted).

        Raises:
            OSError: a write failed; the journal is kept (see the module's Health).
        """
        if self.journal is None:
            return
        self.flush()
        self.journal.close()
        path = self.journal.path
        index = self.writer.info["total_episodes"]
        if index != self.episode_key:
            print(
                f"logger: the daemon's episode {self.episode_key} is written as episode_index {index}",
                file=sys.stderr,
                flush=True,
            )
        self.writer.convert_journal(path, self.task, outcome, reason)
        self._say_quarantined()
        self.journal = None
        self.episode_key = None
        self._progress()

    def _images(self, stamp: int) -> None:
        """PNG of this frame's images from the ring (black when the slot is gone or none was put)."""
        got = self.ring.read(stamp) if stamp > 0 else None
        for name in self.image_names:
            self.pending_png[name].append(self._black[name] if got is None else _png(got[1][name]))
        if got is None:
            self.images_lost += 1
            if self.images_lost == 1:
                print(
                    "logger: a frame without its camera images (none yet, or the logger lagged more than the image "
                    "ring holds): stored black; counted in progress.json images_lost",
                    file=sys.stderr,
                    flush=True,
                )

    def handle(self, records: np.ndarray) -> bool:
        """Process records; return False on a close record."""
        for rec in records:
            kind = int(rec["kind"])
            if kind == KIND_FRAME:
                if self.episode_key is not None and int(rec["episode"]) != self.episode_key:
                    self.finish("stopped", "the daemon started the next episode without ending this one")
                if self.journal is None:
                    self._open(int(rec["episode"]))
                self.pending.append(rec.reshape(1))
                if self.image_names:
                    self._images(int(rec["image_stamp"]))
                if sum(len(p) for p in self.pending) >= self.flush_every:
                    self.flush()
            elif kind == KIND_EPISODE_END:
                if self.episode_key is not None and int(rec["episode"]) == self.episode_key:
                    self.finish(OUTCOMES[int(rec["outcome"])], bytes(rec["reason"]).decode(errors="replace"))
            elif kind == KIND_CLOSE:
                self.finish("stopped", "the daemon closed the logger")
                return False
        return True


def _report_failure(log: _Logger, err: BaseException) -> None:
    """One line on stderr (naming the journal kept) and one ``{"error": ...}`` line on stdout (the client's status
    channel)."""
    root = log.writer.root
    text = " ".join(str(err).split()) or type(err).__name__
    error = f"the logger process (pid {os.getpid()}) could not write {root}: {type(err).__name__}: {text}"
    kept = f"; the flushed frames are kept in {log.journal.path}" if log.journal is not None else ""
    print(
        f"upright-deploy logger: {error}{kept} (`upright-deploy recover {root}` converts them once there is room)",
        file=sys.stderr,
        flush=True,
    )
    try:
        sys.stdout.write(json.dumps({"error": error}) + "\n")
        sys.stdout.flush()
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    """The logger process. Exit codes: 0 after the daemon's close record or end of file, 2 when the dataset cannot be
    opened (or another process holds its lock), 3 when a write failed (EXIT_WRITE_FAILED: a full disk, EIO, ...;
    reported on stdout first, the journal kept)."""
    parser = argparse.ArgumentParser(description="upright deploy logger process (started by the daemon)")
    parser.add_argument("--schema", required=True, help="JSON: root, features, fps, robot_type, task, ...")
    args = parser.parse_args(argv)
    # SIGINT (Ctrl-C in the terminal) and SIGTERM (systemctl stop signals the whole cgroup) reach the logger too; it
    # must outlive them to write the daemon's last episode, and it exits anyway when the daemon's pipe closes
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:  # never compete with the control process: normal scheduling, lower priority, any CPU
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
        os.nice(5)
    except OSError:
        pass
    try:
        log = _Logger(json.loads(args.schema))
    except (ValueError, OSError, RuntimeError, pa.ArrowException) as err:  # another dataset in the folder, ...
        print(f"upright-deploy logger: {err}", file=sys.stderr, flush=True)
        return 2
    sys.stdout.write(json.dumps({"next_episode_index": log.writer.next_episode_index}) + "\n")
    sys.stdout.flush()
    fd = sys.stdin.buffer.fileno()
    size = log.dtype.itemsize
    buf = bytearray()
    running = True
    try:
        while running:
            wait = max(0.0, log.flush_interval - (time.monotonic() - log.last_flush))
            ready, _, _ = select.select([fd], [], [], wait)
            if ready:
                data = os.read(fd, 1 << 16)
                if not data:  # the daemon is gone
                    log.finish("interrupted", "the daemon exited without ending the episode")
                    break
                buf += data
                n = len(buf) // size
                if n:
                    records = np.frombuffer(bytes(buf[: n * size]), dtype=log.dtype)
                    del buf[: n * size]
                    running = log.handle(records)
            if running and time.monotonic() - log.last_flush >= log.flush_interval:
                log.flush()
    except (OSError, pa.ArrowException) as err:  # a full disk (ENOSPC, EFBIG), EIO, ...: stop, keep the journal
        _report_failure(log, err)
        os._exit(EXIT_WRITE_FAILED)  # no clean-up that could write (the journal writer's end-of-stream marker)
    return 0


if __name__ == "__main__":
    sys.exit(main())
