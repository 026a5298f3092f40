"""Behaviour-cloning data from LeRobotDataset v3 folders written by :mod:`upright.training.record_demos` (or by the
deploy daemon's logger, :mod:`upright.dataset_io.lerobot`), as tensors, with ACT/LeRobot chunk targets.

Read with pyarrow only: ``meta/info.json`` (features, fps), ``meta/tasks.parquet`` (task_index -> instruction) and
every ``data/chunk-*/file-*.parquet`` (frames, in ``index`` order), after
:func:`~upright.dataset_io.check.check_dataset` (a damaged dataset is one ``DatasetError`` line naming the file).
Image features are PNG bytes in the parquet (``struct<bytes, path>``, LeRobot's non-video image storage) and are
decoded with imageio.
"""

from __future__ import annotations

import io
import pathlib
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

from upright.dataset_io.check import DatasetError, check_dataset
from upright.vla.policy import IMAGE_PREFIX, STATE_KEY

RECORD_HINT = "record one with python -m upright.training.record_demos --episodes N --out DIR"
"""How to make a dataset (appended to the errors)."""


@dataclass
class BCData:
    """Frames of one or more datasets, in order (N frames, E episodes).

    Attributes:
        state: (N, S) float32, the ``state_key`` feature (``observation.state`` by default).
        action: (N, A) float32, the ``action`` feature (lift: deltas in [-1, 1], policy units).
        images: camera name -> (N, 3, H, W) uint8 RGB, channels first.
        episode: (N,) int64 episode number, unique over the concatenated datasets (0..E-1, consecutive frames).
        task_id: (N,) int64 index into ``tasks``.
        tasks: the instruction strings.
        state_names, action_names: the features' ``names``.
        fps: frames per second.
    """

    state: torch.Tensor
    action: torch.Tensor
    images: dict[str, torch.Tensor]
    episode: torch.Tensor
    task_id: torch.Tensor
    tasks: list[str]
    state_names: list[str]
    action_names: list[str]
    fps: float
    sources: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.state.shape[0])

    @property
    def num_episodes(self) -> int:
        """E."""
        return int(torch.unique(self.episode).numel())

    def task_strings(self, idx: torch.Tensor) -> list[str]:
        """The instruction of each frame in ``idx`` (M,) -> M strings."""
        return [self.tasks[int(i)] for i in self.task_id[idx]]


def _column(table: pa.Table, name: str) -> np.ndarray:
    arr = table.column(name).combine_chunks()
    if pa.types.is_fixed_size_list(arr.type):
        return arr.flatten().to_numpy(zero_copy_only=False).reshape(len(arr), arr.type.list_size)
    return arr.to_numpy(zero_copy_only=False)


def _decode_images(column: pa.ChunkedArray) -> torch.Tensor:
    import imageio.v3 as iio

    frames = [iio.imread(io.BytesIO(v["bytes"]), extension=".png") for v in column.to_pylist()]
    arr = np.stack(frames)
    if arr.ndim != 4 or arr.shape[-1] < 3:
        raise ValueError(f"image frames must be (H, W, 3) RGB, got {arr.shape[1:]}")
    return torch.from_numpy(np.ascontiguousarray(arr[..., :3].transpose(0, 3, 1, 2)))


def load_dataset(
    root: str | pathlib.Path, cameras: tuple[str, ...] = (), state_key: str = STATE_KEY, max_episodes: int | None = None
) -> BCData:
    """Read a LeRobotDataset v3 folder into :class:`BCData`.

    Args:
        root: the dataset folder (``meta/info.json`` inside).
        cameras: cameras whose ``observation.images.<camera>`` to decode (none: no images read).
        state_key: the feature used as the policy's state, e.g. ``observation.state`` (q, q̇, gyro, gravity) or
            ``observation.policy_obs`` (the lift task's 49-value observation, cube and target included).
        max_episodes: keep the first this many episodes (None: all).

    Raises:
        FileNotFoundError: no dataset at ``root`` (no ``meta/info.json``) or no data files.
        ~upright.dataset_io.check.DatasetError: a damaged dataset, or ``root`` is a file (a ValueError; one line
            naming the file: :func:`~upright.dataset_io.check.check_dataset`), or a data file that does not read.
        ValueError: a needed feature is missing (the message names the flag to record it with), or
            ``max_episodes`` < 1.
    """
    root = pathlib.Path(root)
    info = check_dataset(root)
    if info is None:
        raise FileNotFoundError(f"no LeRobot dataset at {root} (meta/info.json missing); {RECORD_HINT}")
    features = info["features"]
    needed = {state_key: "", "action": ""} | {IMAGE_PREFIX + c: " --cameras" for c in cameras}
    for key, flag in needed.items():
        if key not in features:
            raise ValueError(
                f"dataset {root} has no '{key}' feature; record it with{flag or ' record_demos'}"
                f"{' (env.camera.cameras lists the cameras)' if flag else ''}"
            )
    if max_episodes is not None and max_episodes < 1:
        raise ValueError(f"max_episodes must be >= 1, got {max_episodes}")
    files = sorted(root.glob("data/chunk-*/file-*.parquet"))
    if not files:
        raise FileNotFoundError(f"dataset {root} has no data/chunk-*/file-*.parquet files; {RECORD_HINT}")
    columns = [state_key, "action", "episode_index", "task_index", "index", *(IMAGE_PREFIX + c for c in cameras)]
    tables = []
    for f in files:
        try:
            t = pq.read_table(f, columns=columns)
        except (pa.ArrowException, OSError) as err:  # damaged inside (check_dataset reads the footers only)
            raise DatasetError(
                f"{f} does not read ({' '.join(str(err).split())}); restore it from a copy of the dataset"
            ) from None
        if max_episodes is not None:
            t = t.filter(pc.less(t.column("episode_index"), max_episodes))
        if t.num_rows:
            tables.append(t)
    table = pa.concat_tables(tables).sort_by("index")
    tasks_table = pq.read_table(root / "meta" / "tasks.parquet")
    task_of = dict(zip(tasks_table.column("task_index").to_pylist(), tasks_table.column("task").to_pylist()))
    tasks = [task_of[i] for i in sorted(task_of)]
    position = {i: k for k, i in enumerate(sorted(task_of))}
    _, episode = np.unique(_column(table, "episode_index"), return_inverse=True)

    def names(key: str) -> list[str]:
        return list(features[key].get("names") or [f"{key}.{i}" for i in range(features[key]["shape"][0])])

    return BCData(
        state=torch.from_numpy(_column(table, state_key).astype(np.float32)),
        action=torch.from_numpy(_column(table, "action").astype(np.float32)),
        images={c: _decode_images(table.column(IMAGE_PREFIX + c)) for c in cameras},
        episode=torch.from_numpy(episode.astype(np.int64)),
        task_id=torch.from_numpy(np.array([position[int(i)] for i in _column(table, "task_index")], np.int64)),
        tasks=tasks,
        state_names=names(state_key),
        action_names=names("action"),
        fps=float(info["fps"]),
        sources=[str(root)],
    )


def concat(datasets: list[BCData]) -> BCData:
    """One :class:`BCData` from several (episode numbers and task ids renumbered; tasks merged by string).

    Raises:
        ValueError: the datasets differ in state or action names, cameras, image sizes or fps.
    """
    first = datasets[0]

    def sizes(data: BCData) -> dict[str, tuple[int, ...]]:
        return {c: tuple(v.shape[1:]) for c, v in data.images.items()}

    for d in datasets[1:]:
        same = (
            d.state_names == first.state_names
            and d.action_names == first.action_names
            and d.fps == first.fps
            and sizes(d) == sizes(first)
        )
        if not same:
            raise ValueError(
                f"datasets {first.sources} and {d.sources} differ in state/action names, cameras, image "
                "size or fps; train on datasets recorded with the same options"
            )
    tasks: list[str] = []
    for d in datasets:
        tasks += [t for t in d.tasks if t not in tasks]
    offset, episodes, task_ids = 0, [], []
    for d in datasets:
        episodes.append(d.episode + offset)
        offset += int(d.episode.max()) + 1
        remap = torch.tensor([tasks.index(t) for t in d.tasks], dtype=torch.int64)
        task_ids.append(remap[d.task_id])
    return BCData(
        state=torch.cat([d.state for d in datasets]),
        action=torch.cat([d.action for d in datasets]),
        images={c: torch.cat([d.images[c] for d in datasets]) for c in first.images},
        episode=torch.cat(episodes),
        task_id=torch.cat(task_ids),
        tasks=tasks,
        state_names=first.state_names,
        action_names=first.action_names,
        fps=first.fps,
        sources=[s for d in datasets for s in d.sources],
    )


def chunk_targets(action: torch.Tensor, episode: torch.Tensor, chunk_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """ACT/LeRobot chunk targets: for frame t the actions t..t+H-1 of its own episode.

    Args:
        action: (N, A) float32 actions in frame order.
        episode: (N,) int64 episode of each frame; an episode's frames are consecutive.
        chunk_size: H >= 1.

    Returns:
        ``targets`` (N, H, A) float32, steps past the episode's last frame padded with its last action, and
        ``is_pad`` (N, H) bool, True on those padded steps (LeRobot's ``action_is_pad``).

    Raises:
        ValueError: ``chunk_size`` < 1 or mismatched lengths.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    n = action.shape[0]
    if episode.shape != (n,):
        raise ValueError(f"episode must be ({n},), got {tuple(episode.shape)}")
    idx = torch.arange(n)
    # last frame of each frame's episode: episodes are runs of equal values
    change = torch.ones(n, dtype=torch.bool)
    change[:-1] = episode[1:] != episode[:-1]
    ends = idx[change]  # last index of each run
    run = torch.cumsum(torch.cat([torch.zeros(1, dtype=torch.long), change[:-1].long()]), 0)
    last = ends[run]  # (N,)
    steps = idx.unsqueeze(1) + torch.arange(chunk_size).unsqueeze(0)  # (N, H)
    is_pad = steps > last.unsqueeze(1)
    steps = torch.minimum(steps, last.unsqueeze(1))
    return action[steps], is_pad
