"""The control side of the logger: :class:`LoggerClient` starts the logger process, hands it records without
ever blocking and reports its health (see :mod:`upright.deploy.logger_process` for the design).
"""

from __future__ import annotations

import fcntl
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

from upright.dataset_io.lock import DatasetLock
from upright.dataset_io.records import OUTCOMES
from upright.deploy.logger_records import KIND_CLOSE, KIND_EPISODE_END, REASON_BYTES, image_features, record_dtype
from upright.deploy.shared_frames import SharedFrames

F_SETPIPE_SZ = 1031
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


def _ring_path() -> pathlib.Path:
    shm = pathlib.Path("/dev/shm")
    folder = shm if shm.is_dir() and os.access(shm, os.W_OK) else pathlib.Path(tempfile.gettempdir())
    return folder / f"upright-logger-{os.getpid()}-{secrets.token_hex(4)}.frames"


class LoggerClient:
    """Starts the logger process and hands it records without ever blocking.

    Args:
        root: dataset folder.
        features: from :func:`~upright.dataset_io.records.frame_features` (image features go through the image
            ring: :meth:`put_images`).
        fps: policy rate.
        robot_type, task, policy: written into info.json.
        flush_every: frames per journal flush.
        flush_interval_s: longest time between flushes.
        ready_timeout_s: how long to wait for the logger to open the dataset.
        stall_s: the logger failed when its pipe stays full this long (see :mod:`upright.deploy.logger_process`'s
            Health).
        pipe_bytes: size asked for the record pipe.

    Raises:
        ~upright.dataset_io.lock.DatasetLockedError: another process writes ``root`` (a daemon's logger,
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
        non-blocking read of its status channel and a ``waitpid(WNOHANG)``). A failure is final: see
        :mod:`upright.deploy.logger_process`'s Health for what counts."""
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
