"""A small LeRobotDataset v3.0 writer on pyarrow (no ``lerobot``/torch dependency), plus the crash-safe journal.

Layout written under ``root``::

    meta/info.json                              codebase_version "v3.0", fps, features, totals, paths
    meta/stats.json                             per feature: min, max, mean, std, count, q01 … q99
    meta/tasks.parquet                          task_index, task
    meta/episodes/chunk-000/file-000.parquet    one row per episode (index ranges, data file, stats, outcome)
    data/chunk-XXX/file-YYY.parquet             the frames (one episode per data file)
    journal/episode_NNNNNN.arrows               the episode being recorded (Arrow IPC stream)
    journal/quarantine/                         journals that could not be read (kept, never deleted)
    .upright-writer.lock                        the writer lock (see below)

Crash safety. While an episode is recorded its frames go to an Arrow IPC *stream* in ``journal/``:
each flush appends complete record batches, then flushes and fsyncs the file, so every flushed
frame survives a SIGKILL (or a power cut) of the daemon and of the logger. A stream cut in the
middle of a batch still reads back up to the last complete batch (:func:`read_journal`). When the
episode ends it is converted into the parquet files above (each written to a temporary name,
fsynced, then renamed) and the journal is deleted; a journal left by a crash is converted the next
time a logger opens the dataset (:meth:`LeRobotV3Writer.recover`), with outcome ``interrupted``.
A journal that cannot be read (not an Arrow stream, a read error such as EIO, columns that are not the dataset's
features) is never deleted: it is moved to ``journal/quarantine/`` and named (:attr:`LeRobotV3Writer.quarantined`).
A write that fails (a full disk, EIO, EFBIG) raises OSError and leaves every file as it was: an episode's files are
all written to temporary names first, then renamed, ``info.json`` last (:func:`write_files_together`), and a journal
is deleted only after its episode is written.

One writer. A dataset being recorded has exactly one writer: the logger process holds the writer lock
(:class:`~upright.dataset_io.lock.DatasetLock`), an advisory ``flock`` (LOCK_EX | LOCK_NB) on
``.upright-writer.lock`` in the dataset folder, for its whole life, and ``upright-deploy recover`` holds it while it
converts. A second writer is refused (:class:`~upright.dataset_io.lock.DatasetLockedError`) before it reads or writes
anything of the dataset. The kernel releases the lock when its holder dies (SIGKILL included), so the dataset of a
crashed daemon is recoverable at once.

Vector features are ``fixed_size_list<float32>[n]`` columns; shape-[1] features are scalar
columns, as LeRobot stores them. Image features (``dtype: "image"``, shape ``[H, W, 3]``) are stored in the parquet
files as LeRobot stores images that are not videos: a ``struct<bytes: binary, path: string>`` column holding one PNG
per frame (``path`` null); they get no entry in the stats (LeRobot's per-channel image stats are not computed here).
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from upright.atomic_io import (
    atomic_write_bytes,
    fsync_dir,
)
from upright.dataset_io.check import check_dataset

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
EPISODES_PATH = "meta/episodes/chunk-000/file-000.parquet"
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
IMPLICIT_FEATURES = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}

_ARROW = {
    "float32": pa.float32(),
    "float64": pa.float64(),
    "int64": pa.int64(),
    "bool": pa.bool_(),
    "int32": pa.int32(),
}


IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
"""Arrow type of an image feature: PNG bytes and an (unused) path, as LeRobot's ``datasets`` Image feature."""


def arrow_type(feature: dict) -> pa.DataType:
    """Arrow type of a LeRobot feature spec."""
    if feature["dtype"] == "image":
        return IMAGE_TYPE
    base = _ARROW[feature["dtype"]]
    shape = list(feature["shape"])
    if shape == [1]:
        return base
    if len(shape) != 1:
        raise ValueError(f"only 1-D features are supported, got shape {shape}")
    return pa.list_(base, shape[0])


def arrow_schema(features: dict[str, dict]) -> pa.Schema:
    return pa.schema([(name, arrow_type(f)) for name, f in features.items()])


def column(values: np.ndarray, feature: dict) -> pa.Array:
    """An Arrow column from an (N,) or (N, n) numpy array, or for an image feature a sequence of N PNG ``bytes``."""
    t = arrow_type(feature)
    if feature["dtype"] == "image":
        return pa.array([{"bytes": bytes(b), "path": None} for b in values], type=t)
    if pa.types.is_fixed_size_list(t):
        flat = pa.array(np.ascontiguousarray(values).reshape(-1), type=t.value_type)
        return pa.FixedSizeListArray.from_arrays(flat, t.list_size)
    return pa.array(np.asarray(values).reshape(-1), type=t)


def parquet_bytes(table: pa.Table) -> bytes:
    """A parquet file's bytes (written in memory)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def atomic_write_parquet(path: pathlib.Path, table: pa.Table) -> None:
    """Write a parquet file via a fsynced temporary file and a rename."""
    atomic_write_bytes(path, parquet_bytes(table))


def write_files_together(files: list[tuple[pathlib.Path, bytes]]) -> None:
    """Write several files as one change: each goes to a temporary name beside it and is fsynced; only when all of them
    are written are they renamed over their final names, in the given order (put the file that commits the change,
    ``info.json``, last), and the folders fsynced.

    Raises:
        OSError: a write failed (a full disk, EIO, ...): the temporary files are removed and no final file changed.
    """
    staged: list[tuple[pathlib.Path, pathlib.Path]] = []
    try:
        for path, data in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            staged.append((tmp, path))
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in staged:
        os.replace(tmp, path)
    for folder in dict.fromkeys(path.parent for _, path in staged):
        fsync_dir(folder)


class JournalWriter:
    """Appends record batches of one episode to an Arrow IPC stream, fsynced at every flush."""

    def __init__(self, path: pathlib.Path, schema: pa.Schema):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = open(path, "wb", buffering=0)
        self._writer = pa.ipc.new_stream(self._file, schema)
        self.frames = 0
        self._sync()

    def _sync(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def write(self, batch: pa.RecordBatch) -> None:
        """Append ``batch`` and make it durable."""
        self._writer.write_batch(batch)
        self._sync()
        self.frames += batch.num_rows

    def close(self) -> None:
        try:
            self._writer.close()
        finally:
            self._file.close()


class JournalUnreadable(Exception):
    """A journal that cannot be read: a read error (EIO, ...), or not even an Arrow stream's schema reads back."""


def load_journal(path: pathlib.Path) -> pa.Table:
    """Every complete record batch of a (possibly truncated) journal: a batch cut by a crash at the end is dropped.

    The file is read with plain reads first, so a read error of the disk (EIO) is told apart from a truncated tail.

    Raises:
        JournalUnreadable: the file cannot be read (the message says why: ``[Errno 5] Input/output error``, ...) or
            is not an Arrow IPC stream (its schema does not read back).
    """
    try:
        data = pathlib.Path(path).read_bytes()
    except OSError as err:
        raise JournalUnreadable(f"cannot read it: {err.strerror or err}") from None
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(data))
        schema = reader.schema
    except (pa.ArrowInvalid, OSError) as err:
        raise JournalUnreadable(f"not an Arrow IPC stream ({len(data)} bytes; {err})") from None
    batches = []
    while True:
        try:
            batches.append(reader.read_next_batch())
        except StopIteration:
            break
        except (pa.ArrowInvalid, OSError):
            break  # truncated tail: the batch being written at the crash
    return pa.Table.from_batches(batches, schema=schema)


def read_journal(path: pathlib.Path) -> pa.Table | None:
    """:func:`load_journal`, or None if the journal cannot be read."""
    try:
        return load_journal(path)
    except JournalUnreadable:
        return None


def _stats(values: np.ndarray) -> dict[str, list]:
    v = values.astype(np.float64).reshape(len(values), -1)
    out = {
        "min": v.min(0).tolist(),
        "max": v.max(0).tolist(),
        "mean": v.mean(0).tolist(),
        "std": v.std(0).tolist(),
        "count": [int(len(v))],
    }
    for q in QUANTILES:
        out[f"q{int(round(q * 100)):02d}"] = np.quantile(v, q, axis=0).tolist()
    return out


def _table_to_numpy(col: pa.ChunkedArray) -> np.ndarray:
    arr = col.combine_chunks()
    if pa.types.is_fixed_size_list(arr.type):
        return arr.flatten().to_numpy(zero_copy_only=False).reshape(len(arr), arr.type.list_size)
    return arr.to_numpy(zero_copy_only=False)


def combine_stats(per_episode: list[dict[str, list]]) -> dict[str, list]:
    """Aggregate per-episode stats: exact min/max/mean/std/count; quantiles as count-weighted means."""
    counts = np.array([s["count"][0] for s in per_episode], dtype=np.float64)
    total = counts.sum()
    w = counts / total
    mean = sum(wi * np.asarray(s["mean"]) for wi, s in zip(w, per_episode))
    var = sum(wi * (np.asarray(s["std"]) ** 2 + (np.asarray(s["mean"]) - mean) ** 2) for wi, s in zip(w, per_episode))
    out = {
        "min": np.min([s["min"] for s in per_episode], axis=0).tolist(),
        "max": np.max([s["max"] for s in per_episode], axis=0).tolist(),
        "mean": np.asarray(mean).tolist(),
        "std": np.sqrt(var).tolist(),
        "count": [int(total)],
    }
    for key in per_episode[0]:
        if key.startswith("q"):
            out[key] = np.asarray(sum(wi * np.asarray(s[key]) for wi, s in zip(w, per_episode))).tolist()
    return out


class LeRobotV3Writer:
    """Creates or extends a LeRobotDataset v3.0 at ``root``.

    Args:
        root: dataset folder.
        features: explicit features (name -> {dtype, shape, names}); the implicit ones are added.
        fps: frames per second.
        robot_type: written to info.json.
        extra_info: more keys for info.json (upright's codes for control_source and safety_flags).

    Raises:
        ~upright.dataset_io.check.DatasetError: ``root`` is not a folder or holds a damaged dataset (one line
            naming the file: :func:`~upright.dataset_io.check.check_dataset`); nothing was written.
        ValueError: ``root`` holds a dataset with different features or fps.
    """

    def __init__(
        self,
        root: str | pathlib.Path,
        features: dict[str, dict],
        fps: int,
        robot_type: str,
        extra_info: dict | None = None,
    ):
        self.root = pathlib.Path(root)
        self.features = dict(features)
        self.fps = int(fps)
        info_path = self.root / "meta" / "info.json"
        info = check_dataset(self.root)
        if info is not None:
            explicit = {k: v for k, v in info["features"].items() if k not in IMPLICIT_FEATURES}
            if explicit != self.features or info["fps"] != self.fps:
                raise ValueError(f"{self.root} holds a dataset with other features or fps; use another --dataset")
            self.info = info
        else:
            self.info = {
                "codebase_version": CODEBASE_VERSION, "robot_type": robot_type, "total_episodes": 0,
                "total_frames": 0, "total_tasks": 0, "chunks_size": CHUNKS_SIZE, "data_files_size_in_mb": 100,
                "video_files_size_in_mb": 200, "fps": self.fps, "splits": {}, "data_path": DATA_PATH,
                "video_path": None, "features": {**self.features, **IMPLICIT_FEATURES},
            }  # fmt: skip
        if extra_info:
            self.info.update(extra_info)
        if not info_path.is_file():  # self-describing from the first frame on (recovery needs the features)
            atomic_write_bytes(info_path, json.dumps(self.info, indent=2).encode())
        self.schema = arrow_schema(self.features)
        self.journal_dir = self.root / "journal"
        self.quarantined: list[tuple[pathlib.Path, pathlib.Path, str]] = []
        """(journal, its path in ``journal/quarantine/``, why) of every journal this writer could not convert."""

    # ------------------------------------------------------------ episodes
    @property
    def next_episode_index(self) -> int:
        """Index the next episode gets (journals not yet converted count too)."""
        pending = [int(p.stem.split("_")[1]) for p in self.journal_dir.glob("episode_*.arrows")]
        return max([self.info["total_episodes"] - 1, *pending]) + 1

    def journal_path(self, episode_index: int) -> pathlib.Path:
        return self.journal_dir / f"episode_{episode_index:06d}.arrows"

    def _episodes(self) -> pa.Table | None:
        path = self.root / EPISODES_PATH
        return pq.read_table(path) if path.is_file() else None

    def _tasks(self) -> list[str]:
        path = self.root / "meta" / "tasks.parquet"
        return pq.read_table(path).column("task").to_pylist() if path.is_file() else []

    def add_episode(self, episode_index: int, frames: pa.Table, task: str, outcome: str, reason: str = "") -> None:
        """Write one finished episode (columns: the explicit features and ``frame_index``); ``outcome`` and
        ``reason`` (why it ended: a fault's message, ``operator quit``, ...) go to its ``upright/outcome`` and
        ``upright/reason`` in the episodes table.

        All or nothing: the data file, ``tasks.parquet``, the episodes table, ``stats.json`` and ``info.json`` are
        written together (:func:`write_files_together`, ``info.json`` last).

        Raises:
            ValueError: ``episode_index`` is not the next one, or the table lacks a feature.
            OSError: a write failed (a full disk, EIO, ...); no file of the dataset changed.
        """
        if episode_index != self.info["total_episodes"]:
            raise ValueError(f"episode {episode_index} is not the next one ({self.info['total_episodes']})")
        n = frames.num_rows
        files: list[tuple[pathlib.Path, bytes]] = []
        tasks = self._tasks()
        new_task = task not in tasks
        if new_task:
            tasks.append(task)
        task_index = tasks.index(task)
        start = int(self.info["total_frames"])
        frame_index = np.arange(n, dtype=np.int64)
        cols = {name: frames.column(name) for name in self.features}
        cols["timestamp"] = pa.array((frame_index / self.fps).astype(np.float32))
        cols["frame_index"] = pa.array(frame_index)
        cols["episode_index"] = pa.array(np.full(n, episode_index, np.int64))
        cols["index"] = pa.array(np.arange(start, start + n, dtype=np.int64))
        cols["task_index"] = pa.array(np.full(n, task_index, np.int64))
        chunk, file = divmod(episode_index, CHUNKS_SIZE)
        data_path = self.root / DATA_PATH.format(chunk_index=chunk, file_index=file)
        files.append((data_path, parquet_bytes(pa.table(cols))))
        if new_task:
            files.append((self.root / "meta" / "tasks.parquet", parquet_bytes(
                pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()), "task": pa.array(tasks, pa.string())})
            )))  # fmt: skip

        row: dict[str, Any] = {
            "episode_index": episode_index, "tasks": [task], "length": n,
            "dataset_from_index": start, "dataset_to_index": start + n,
            "data/chunk_index": chunk, "data/file_index": file,
            "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0, "upright/outcome": outcome,
            "upright/reason": reason,
        }  # fmt: skip
        stats = {}
        for name, feat in {**self.features, **IMPLICIT_FEATURES}.items():
            if n and feat["dtype"] not in ("string", "image"):
                stats[name] = _stats(_table_to_numpy(pa.chunked_array([cols[name]])).reshape(n, -1))
                for key, value in stats[name].items():
                    row[f"stats/{name}/{key}"] = value
        old = self._episodes()
        new = pa.Table.from_pylist([row])
        episodes = pa.concat_tables([old, new], promote_options="default") if old is not None else new
        files.append((self.root / EPISODES_PATH, parquet_bytes(episodes)))

        info = {**self.info, "total_episodes": episode_index + 1, "total_frames": start + n, "total_tasks": len(tasks),
                "splits": {"train": f"0:{episode_index + 1}"}}  # fmt: skip
        if stats:
            all_stats = self._all_episode_stats(episodes)
            files.append((self.root / "meta" / "stats.json", json.dumps(all_stats, indent=1).encode()))
        files.append((self.root / "meta" / "info.json", json.dumps(info, indent=2).encode()))
        write_files_together(files)
        self.info = info

    def _all_episode_stats(self, episodes: pa.Table) -> dict:
        out = {}
        for name in {**self.features, **IMPLICIT_FEATURES}:
            keys = [c for c in episodes.column_names if c.startswith(f"stats/{name}/")]
            if not keys:
                continue
            per_ep = []
            for i in range(episodes.num_rows):
                s = {k.rsplit("/", 1)[1]: episodes.column(k)[i].as_py() for k in keys}
                if s.get("count") and s["count"][0]:
                    per_ep.append(s)
            if per_ep:
                out[name] = combine_stats(per_ep)
        return out

    def journal_problem(self, table: pa.Table) -> str | None:
        """Why a journal's table is not an episode of this dataset (a column missing or of another type), or None."""
        expected = self.schema.append(pa.field("frame_index", pa.int64()))
        for field in expected:
            i = table.schema.get_field_index(field.name)
            if i < 0:
                return f"it has no column '{field.name}' (a journal of another dataset?)"
            if table.schema.field(i).type != field.type:
                return f"its column '{field.name}' is {table.schema.field(i).type}, this dataset's is {field.type}"
        return None

    def quarantine(self, path: pathlib.Path, why: str) -> pathlib.Path:
        """Move a journal that cannot be converted to ``journal/quarantine/`` (a new name, never overwriting) and
        record it in :attr:`quarantined`; return its new path.

        Raises:
            OSError: the move failed (the journal stays where it was).
        """
        folder = self.journal_dir / "quarantine"
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"{path.stem}.{time.strftime('%Y%m%d-%H%M%S')}"
        dst = folder / f"{stem}{path.suffix}"
        k = 0
        while dst.exists():
            k += 1
            dst = folder / f"{stem}-{k}{path.suffix}"
        os.rename(path, dst)
        self.quarantined.append((path, dst, why))
        return dst

    def convert_journal(self, path: pathlib.Path, task: str, outcome: str, reason: str = "") -> int | None:
        """Make the journal at ``path`` the next episode (``outcome``, ``reason``), then delete it; return its
        ``episode_index``, or None when it held no frame (deleted) or could not be read (quarantined, not deleted:
        see :meth:`quarantine`).

        Raises:
            OSError: writing the episode failed (a full disk, EIO, ...): the journal and every dataset file are kept
                as they were, so a later call converts it.
        """
        if path.is_file() and not path.is_symlink() and path.stat().st_size == 0:  # a crash before its schema
            path.unlink()
            return None
        try:
            table = load_journal(path)
        except JournalUnreadable as err:
            self.quarantine(path, str(err))
            return None
        problem = self.journal_problem(table) if table.num_rows else None
        if problem is not None:
            self.quarantine(path, problem)
            return None
        index = None
        if table.num_rows:
            index = int(self.info["total_episodes"])
            self.add_episode(index, table, task, outcome, reason)
        path.unlink()
        return index

    def recover(self, task: str, reason: str = "recovered from the journal after a crash") -> list[int]:
        """Convert journals left by a crash into episodes (outcome ``interrupted``, ``reason``); return their indices.

        A journal that cannot be read is quarantined, not deleted (:attr:`quarantined` lists it); an empty one is
        deleted. The caller must hold the dataset's :class:`~upright.dataset_io.lock.DatasetLock`.

        Raises:
            OSError: writing an episode failed (a full disk, EIO, ...); the message names the journal, which is kept
                with every journal not converted yet (the episodes converted before stay).
        """
        done = []
        for path in sorted(self.journal_dir.glob("episode_*.arrows")):
            try:
                index = self.convert_journal(path, task, "interrupted", reason)
            except OSError as err:
                why = f"{err.strerror or err} (converting {path}, which is kept)"
                raise (OSError(err.errno, why) if err.errno else OSError(why)) from err
            if index is not None:
                done.append(index)
        return done


def load_frames(root: str | pathlib.Path) -> pa.Table:
    """All frames of a dataset (every data file), in index order."""
    files = sorted(pathlib.Path(root).glob("data/chunk-*/file-*.parquet"))
    if not files:
        raise FileNotFoundError(f"no data files under {root}")
    return pa.concat_tables([pq.read_table(f) for f in files]).sort_by("index")
