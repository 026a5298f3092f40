"""A chunked (VLA) policy at the daemon's control rate: inference off the real-time thread, an action-chunk queue,
latency compensation and stale-chunk handling.

:class:`ChunkRunner` wraps any :class:`upright.vla.policy.ChunkPolicy` (an exported VLA run by
:class:`~upright.vla.onnx_policy.OnnxChunkPolicy`, a :class:`~upright.vla.remote.RemotePolicy` client of an openpi
server, a :class:`~upright.vla.tiny.TinyVLA`) and is the controller's ``policy`` callable
(:class:`~upright.deploy.controller.Controller`): each policy tick calls it once with the tick's
``observation.state`` and gets one action, or None.

Per call (tick t, never blocking on inference):

1. A chunk the worker thread finished since the last call is taken in. It was predicted from the observation of tick
   t_obs, so its action k belongs to tick t_obs + k: the first ``t - t_obs`` actions are already in the past and are
   dropped (real-time chunking's latency compensation; :meth:`ActionChunkQueue.push`'s ``offset``). A chunk whose
   observation is older than ``max_chunk_age_s`` (wall clock), or whose actions all lie in the past, is discarded.
2. A queue whose newest chunk's observation has grown older than ``max_chunk_age_s`` is emptied.
3. When the worker is idle and fewer than ``prefetch_below`` actions are left after this tick's (queue mode; with
   ACT's temporal ensembling: whenever the worker is idle), this tick's observation goes to the worker. As long as
   inference takes less than ``prefetch_below`` ticks the queue never runs dry; ``prefetch_below = chunk_size``
   keeps the worker busy and covers any latency shorter than the chunk (LeRobot's async inference calls the same
   ratio ``chunk_size_threshold``).
4. The queue (:class:`~upright.vla.chunking.ActionChunkQueue`, shared with play and evaluation) gives this tick's
   action, (A,) float32; empty: None, and :attr:`ChunkRunner.miss_reason` says why (the controller then holds the
   targets, flags ``STALE_ACTION`` and damps after ``max_consecutive_stale`` such ticks).

Cameras. A policy that reads cameras gets ``observation.images.<name>`` (1, 3, H, W) uint8 RGB from
:class:`~upright.deploy.camera.CameraSource` s (``cameras``): every call takes each source's newest frame once (a
reference, no copy; the sources grab in their own threads) and keeps it in :attr:`ChunkRunner.tick_images`; a chunk
requested at step 3 gets exactly these frames (the worker turns them into the batch), and the controller logs them as
the tick's ``observation.images.<name>``, so a dataset frame holds the image the policy was given, never a newer
frame that arrived later in the tick. A frame
older than ``max_frame_age_s`` (wall clock since its capture), or none yet, is not used: no chunk is requested this
tick, :attr:`ChunkRunner.camera_stale` is set (the controller flags ``CAMERA_STALE``) and the queued actions, predicted
from fresh frames, still run; once the queue is empty the ticks get None as for a stale chunk (``STALE_ACTION``, then
damping after ``max_consecutive_stale``). A frame of another shape than (H, W, 3) uint8 raises
:class:`~upright.deploy.policy.PolicyFault` (a broken source; the controller damps). Sources deliver the policy's size
(sim-robot renders it, an OpenCV camera resizes in its thread); the runner does not resize.

A policy exception in the worker ends the worker; the next call raises :class:`~upright.deploy.policy.PolicyFault`
with a one-line reason (the controller damps). :meth:`ChunkRunner.close` stops and joins the thread.

The worker is a Python thread: onnxruntime, torch kernels and socket waits release the GIL, and the runner lowers
the interpreter's switch interval to ``switch_interval_s`` while it runs so that the real-time thread gets the GIL
back within that time when the worker runs Python code.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from upright.deploy.policy import PolicyFault
from upright.vla.chunking import ActionChunkQueue
from upright.vla.policy import IMAGE_PREFIX, STATE_KEY, TASK_KEY, ChunkPolicy


@dataclass
class ChunkStats:
    """Counters of a :class:`ChunkRunner` (for logs and tests)."""

    requests: int = 0
    """Observations handed to the worker."""
    chunks_used: int = 0
    """Chunks put into the queue."""
    chunks_stale: int = 0
    """Chunks discarded on arrival: observation older than ``max_chunk_age_s``, or every action in the past."""
    queue_aged_out: int = 0
    """Times the queue was emptied because its newest chunk's observation grew older than ``max_chunk_age_s``."""
    dropped_actions: int = 0
    """Actions dropped by latency compensation (they belonged to ticks already executed)."""
    empty_ticks: int = 0
    """Calls that returned None."""
    frames_stale: int = 0
    """Chunk requests skipped because a camera frame was missing or older than ``max_frame_age_s``."""
    latencies_s: list[float] = field(default_factory=list)
    """Inference time of every finished request, s (the last 1000)."""


@dataclass
class _Request:
    generation: int
    state: np.ndarray
    tick: int
    t_obs: float
    images: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class _Result:
    generation: int
    chunk: np.ndarray
    tick: int
    t_obs: float


def _one_line(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".strip().splitlines()
    line = text[0] if text else type(err).__name__
    return line if len(line) <= 200 else line[:197] + "..."


class ChunkRunner:
    """Runs ``policy`` in a background thread and serves one action per policy tick (module docstring).

    Args:
        policy: the chunked policy; ``chunk_size`` H and ``action_dim`` A are read from it. Its batch is
            ``{"observation.state": (1, S) float32, "task": [instruction]}``.
        instruction: the task string passed as ``task`` (e.g. ``"lift the cube"``; empty: none).
        control_dt: seconds per policy tick (used for the default ``max_chunk_age_s`` and the messages).
        max_chunk_age_s: a chunk whose observation is older than this (wall clock, s) is not executed; default
            2·H·control_dt.
        prefetch_below: k, 1..H: request the next chunk when fewer than k actions remain after this tick's; default
            H // 2 (at least 1).
        temporal_ensemble_coeff: None: queue mode (each new chunk replaces the queued one); m >= 0: ACT's temporal
            ensembling over every chunk received (requests whenever the worker is idle).
        cameras: name -> :class:`~upright.deploy.camera.CameraSource` of every camera the policy reads (module
            docstring); each frame must be (``height``, ``width``, 3) uint8 of its source. The runner reads them but
            does not close them.
        max_frame_age_s: a frame older than this (s, by ``clock``, which must then be ``time.monotonic``: the
            sources' timestamps) is not used for inference.
        clock: monotonic seconds (tests may pass another).
        switch_interval_s: the interpreter's GIL switch interval while the worker runs (None: leave it).
        join_timeout_s: :meth:`close` waits this long for an inference in flight.

    Raises:
        ValueError: ``prefetch_below`` outside 1..H, a non-positive ``max_chunk_age_s``, ``max_frame_age_s`` or
            ``control_dt``, or a policy without integer ``chunk_size`` / ``action_dim``.
    """

    def __init__(
        self,
        policy: ChunkPolicy,
        instruction: str = "",
        *,
        control_dt: float,
        max_chunk_age_s: float | None = None,
        prefetch_below: int | None = None,
        temporal_ensemble_coeff: float | None = None,
        cameras: dict | None = None,
        max_frame_age_s: float = 0.2,
        clock=time.monotonic,
        switch_interval_s: float | None = 0.0005,
        join_timeout_s: float = 5.0,
    ):
        h, a = getattr(policy, "chunk_size", None), getattr(policy, "action_dim", None)
        if not isinstance(h, int) or not isinstance(a, int) or h < 1 or a < 1:
            raise ValueError(f"{type(policy).__name__} has no positive integer chunk_size / action_dim ({h}, {a})")
        if not control_dt > 0:
            raise ValueError(f"control_dt must be > 0 s, got {control_dt}")
        self.policy, self.instruction = policy, str(instruction)
        self.chunk_size, self.action_dim, self.control_dt = h, a, float(control_dt)
        self.max_chunk_age_s = 2.0 * h * control_dt if max_chunk_age_s is None else float(max_chunk_age_s)
        if not self.max_chunk_age_s > 0:
            raise ValueError(f"max_chunk_age_s must be > 0 s, got {max_chunk_age_s}")
        self.prefetch_below = max(1, h // 2) if prefetch_below is None else int(prefetch_below)
        if not 1 <= self.prefetch_below <= h:
            raise ValueError(f"prefetch_below must be in 1..chunk_size={h}, got {prefetch_below}")
        self.queue = ActionChunkQueue(1, h, a, temporal_ensemble_coeff=temporal_ensemble_coeff)
        self.cameras = dict(cameras or {})
        self.max_frame_age_s = float(max_frame_age_s)
        if not self.max_frame_age_s > 0:
            raise ValueError(f"max_frame_age_s must be > 0 s, got {max_frame_age_s}")
        self.camera_stale = False
        """The last call skipped a chunk request: a camera frame was missing or older than ``max_frame_age_s``."""
        self._camera_miss = ""
        self.tick_images: dict[str, np.ndarray | None] = {}
        """Camera name -> the frame the last call read from it (None: none yet), the one a chunk requested by that call
        was given; empty after a call that raised before reading them (module docstring)."""
        self.clock = clock
        self.join_timeout_s = join_timeout_s
        self.stats = ChunkStats()
        self.tick = 0
        """Calls so far (the tick index of the last call)."""
        self.miss_reason = ""
        """Why the last call returned None (one line), else empty."""
        self._generation = 0
        self._newest_t_obs: float | None = None
        self._cv = threading.Condition()
        self._request: _Request | None = None
        self._result: _Result | None = None
        self._busy = False
        self._busy_since = 0.0
        self._failure: str | None = None
        self._closing = False
        self._old_switch = None
        if switch_interval_s is not None:
            self._old_switch = sys.getswitchinterval()
            sys.setswitchinterval(switch_interval_s)
        self._thread = threading.Thread(target=self._work, name="upright-chunk-policy", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ worker thread
    def batch(self, state: np.ndarray, images: dict[str, np.ndarray] | None = None) -> dict:
        """The policy batch of one observation: ``observation.state`` (1, S) float32, ``task`` [instruction] and, per
        camera, ``observation.images.<name>`` (1, 3, H, W) uint8 from an (H, W, 3) uint8 frame of ``images``."""
        batch = {STATE_KEY: torch.from_numpy(np.asarray(state, np.float32).reshape(1, -1))}
        for name, frame in (images or {}).items():
            batch[IMAGE_PREFIX + name] = torch.from_numpy(np.ascontiguousarray(frame.transpose(2, 0, 1))[None])
        if self.instruction:
            batch[TASK_KEY] = [self.instruction]
        return batch

    def predict(self, state: np.ndarray, images: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """One synchronous inference: the (H, A) float32 chunk for ``state`` (S,) or (1, S) and the camera frames
        ``images`` (name -> (H, W, 3) uint8; needed when the runner has cameras).

        Raises:
            ValueError: the policy returned another shape than (1, H, A), or NaN/inf.
            Exception: whatever the policy raises.
        """
        with torch.no_grad():
            out = self.policy.predict_action_chunk(self.batch(state, images))
        chunk = np.asarray(out.detach().cpu().numpy() if isinstance(out, torch.Tensor) else out, np.float32)
        if chunk.shape != (1, self.chunk_size, self.action_dim):
            raise ValueError(
                f"the policy returned a chunk of shape {chunk.shape}, expected "
                f"(1, {self.chunk_size}, {self.action_dim})"
            )
        if not np.isfinite(chunk).all():
            raise ValueError("the policy returned NaN/inf in its action chunk")
        return chunk[0]

    def _work(self) -> None:
        while True:
            with self._cv:
                while self._request is None and not self._closing:
                    self._cv.wait()
                if self._closing:
                    return
                req, self._request = self._request, None
            t0 = time.perf_counter()
            try:
                chunk = self.predict(req.state, req.images)
            except BaseException as err:  # noqa: BLE001 - any failure of the policy is a fault of the daemon
                with self._cv:
                    self._failure = f"chunked policy worker failed: {_one_line(err)}"
                    self._busy = False
                return
            with self._cv:
                lat = self.stats.latencies_s
                lat.append(time.perf_counter() - t0)
                if len(lat) > 1000:
                    del lat[:-1000]
                self._result = _Result(req.generation, chunk, req.tick, req.t_obs)
                self._busy = False

    # ------------------------------------------------------------------ control thread
    def __call__(self, obs: np.ndarray) -> np.ndarray | None:
        """This tick's action, (A,) float32, or None when no fresh action is queued (:attr:`miss_reason` says why).

        Args:
            obs: (1, S) or (S,) float32 ``observation.state`` of this tick.

        Raises:
            PolicyFault: the worker failed (one-line reason), or the runner is closed.
        """
        self.tick_images = {}
        if self._failure is not None:
            raise PolicyFault(self._failure)
        if self._closing:
            raise PolicyFault("chunked policy runner is closed")
        self.tick += 1
        self.camera_stale = False
        now = self.clock()
        # each camera is read once per tick: the frame a request gets is the frame the tick logs (tick_images)
        reads = {name: src.read() for name, src in self.cameras.items()}
        self.tick_images = {name: frame for name, (frame, _) in reads.items()}
        with self._cv:
            res, self._result = self._result, None
            busy, busy_since = self._busy, self._busy_since
        q = self.queue
        if res is not None and res.generation == self._generation:
            self._take(res, now)
        if self._newest_t_obs is not None and now - self._newest_t_obs > self.max_chunk_age_s:
            if int(q.remaining()[0]) > 0:
                self.stats.queue_aged_out += 1
            q.reset()
            self._newest_t_obs = None
        left = int(q.remaining()[0])
        if not busy and (q.ensembling or max(left - 1, 0) < self.prefetch_below):
            images = self._frames(now, reads)
            if images is not None:
                with self._cv:
                    self._request = _Request(
                        self._generation, np.array(obs, np.float32).reshape(-1), self.tick, now, images
                    )
                    self._busy, self._busy_since = True, now
                    self.stats.requests += 1
                    self._cv.notify()
        if left > 0:
            self.miss_reason = ""
            return q.pop()[0].numpy()
        self.stats.empty_ticks += 1
        if busy:
            self.miss_reason = f"queue empty, inference in flight for {now - busy_since:.3f} s"
        elif self.camera_stale:
            self.miss_reason = f"queue empty: {self._camera_miss}"
        else:
            self.miss_reason = (
                "queue empty, first chunk requested"
                if self.stats.chunks_used == 0
                else (f"queue empty: no chunk newer than max_chunk_age_s={self.max_chunk_age_s:g} s")
            )
        return None

    def _frames(self, now: float, reads: dict[str, tuple]) -> dict[str, np.ndarray] | None:
        """The frames of ``reads`` (name -> this tick's ``(frame, timestamp_s)`` of each camera), or None (and
        :attr:`camera_stale`) when one is missing or too old.

        Raises:
            PolicyFault: a frame that is not (H, W, 3) uint8 of its source (one line).
        """
        images = {}
        for name, src in self.cameras.items():
            frame, t = reads[name]
            if frame is None or now - t > self.max_frame_age_s:
                why = getattr(src, "error", None)
                age = "no frame yet" if frame is None else f"frame {now - t:.3f} s old"
                self._camera_miss = (
                    f"camera {name}: {age} (max_frame_age_s {self.max_frame_age_s:g} s){f'; {why}' if why else ''}"
                )
                self.camera_stale = True
                self.stats.frames_stale += 1
                return None
            shape = (src.height, src.width, 3)
            if not isinstance(frame, np.ndarray) or frame.shape != shape or frame.dtype != np.uint8:
                got = f"{getattr(frame, 'shape', None)} {getattr(frame, 'dtype', type(frame).__name__)}"
                raise PolicyFault(f"camera {name} gave a corrupt frame: {got}, expected {shape} uint8")
            images[name] = frame
        return images

    def _take(self, res: _Result, now: float) -> None:
        """Put a finished chunk into the queue, without the actions of ticks already executed."""
        elapsed = self.tick - res.tick
        if now - res.t_obs > self.max_chunk_age_s or elapsed >= self.chunk_size:
            self.stats.chunks_stale += 1
            return
        self.queue.push(torch.from_numpy(res.chunk).unsqueeze(0), offset=elapsed)
        self.stats.chunks_used += 1
        self.stats.dropped_actions += elapsed
        self._newest_t_obs = res.t_obs

    def reset(self) -> None:
        """Forget the queued actions and any inference in flight (its chunk will be ignored); call at an episode's
        start (the controller does on HOLD -> POLICY)."""
        self._generation += 1
        self.queue.reset()
        self._newest_t_obs = None
        with self._cv:
            self._result = None
            if self._request is not None:  # not yet taken by the worker: it never runs
                self._request = None
                self._busy = False

    @property
    def failure(self) -> str | None:
        """The worker's one-line failure, or None."""
        return self._failure

    @property
    def alive(self) -> bool:
        """Whether the worker thread runs."""
        return self._thread.is_alive()

    def close(self) -> None:
        """Stop the worker and join it (waiting up to ``join_timeout_s`` for an inference in flight); close the policy
        when it has ``close()`` (a remote client). Idempotent."""
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(self.join_timeout_s)
        if self._old_switch is not None:
            sys.setswitchinterval(self._old_switch)
            self._old_switch = None
        close = getattr(self.policy, "close", None)
        if callable(close):
            close()
