"""The logger process's writer: the dataset, the open episode's crash-safe journal, its images and progress.

Used by :func:`upright.deploy.logger_process.main` (see :mod:`upright.deploy.logger_process`).
"""

from __future__ import annotations

import io
import json
import os
import sys
import time

import numpy as np
import pyarrow as pa

from upright.dataset_io.lerobot import LeRobotV3Writer, atomic_write_bytes, column
from upright.dataset_io.lock import DatasetLock
from upright.dataset_io.records import OUTCOMES, extra_info
from upright.deploy.logger_records import (
    KIND_CLOSE,
    KIND_EPISODE_END,
    KIND_FRAME,
    image_features,
    record_dtype,
)
from upright.deploy.shared_frames import SharedFrames


def _png(image: np.ndarray) -> bytes:
    import imageio.v3 as iio

    buf = io.BytesIO()
    iio.imwrite(buf, image, extension=".png")
    return buf.getvalue()


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
        from upright.dataset_io.lerobot import JournalWriter

        self.episode_key = key
        self.episode_index = self.writer.next_episode_index
        schema = self.writer.schema.append(pa.field("frame_index", pa.int64()))
        self.journal = JournalWriter(self.writer.journal_path(self.episode_index), schema)

    def finish(self, outcome: str, reason: str = "") -> None:
        """Flush and convert the open episode into the dataset (a journal that does not read back is quarantined, not
        deleted).

        Raises:
            OSError: a write failed; the journal is kept (see :mod:`upright.deploy.logger_process`'s Health).
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
