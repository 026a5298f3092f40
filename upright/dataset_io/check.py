"""Is a folder a LeRobot v3 dataset that can be read and extended? One check for every entry point that opens one.

``upright-deploy run --dataset DS``, ``upright-deploy recover DS`` and ``python -m upright.vla.train_bc --dataset DS``
(and :class:`~upright.dataset_io.lerobot.LeRobotV3Writer`, so the logger process and ``record_demos`` too) call
:func:`check_dataset` before anything else touches ``DS``. A damaged dataset is refused with one
:class:`DatasetError`, whose message is one line naming the file and what is wrong with it, and the fix:

- ``DS`` is a regular file (or anything else that is not a folder);
- ``meta/info.json`` empty, not JSON (truncated), not an object, without ``features``, ``fps``, ``total_episodes``
  or ``total_frames``; missing while ``DS`` holds recorded files (a new dataset there would overwrite them);
- ``meta/tasks.parquet`` or the episodes table (``meta/episodes/chunk-*/file-*.parquet``) missing while
  ``info.json`` counts episodes;
- a parquet file of ``meta/`` or ``data/`` that does not read (cut short: pyarrow raises ArrowInvalid): the small
  ``meta/`` tables are read whole, the frames' files (``data/chunk-*/file-*.parquet``) their footers only.

The check only reads, never writes, and never reads a journal (``journal/``): every file it reads is replaced by an
atomic rename when a writer changes it (``info.json`` last), so checking a dataset a daemon is recording is safe.
Standard library and pyarrow only (the daemon imports it).
"""

from __future__ import annotations

import json
import os
import pathlib
import stat

import pyarrow as pa
import pyarrow.parquet as pq

INFO = "meta/info.json"
TASKS = "meta/tasks.parquet"
EPISODES_GLOB = "meta/episodes/chunk-*/file-*.parquet"
DATA_GLOB = "data/chunk-*/file-*.parquet"
RESTORE = "restore it from a copy of the dataset"
"""The fix of a damaged file (nothing in the dataset tells what it held)."""


class DatasetError(ValueError):
    """A dataset that cannot be used as it is: the message is one line naming the file, what is wrong with it, and
    the fix (nothing of the dataset was changed)."""


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a folder"


def read_info(path: str | pathlib.Path) -> dict:
    """The dataset description in ``meta/info.json`` at ``path``, checked: a JSON object with ``features`` (name ->
    ``{"dtype", "shape", ...}``), a positive ``fps``, ``total_episodes`` and ``total_frames`` (integers >= 0).

    Raises:
        DatasetError: the file cannot be read (missing, a folder, no permission), is empty, is not JSON (truncated)
            or not an object, or lacks one of those keys (the message names the file and the problem).
    """
    path = pathlib.Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DatasetError(f"{path}: cannot read it ({err.strerror or _one_line(err)}); {RESTORE}") from None
    if not data.strip():
        raise DatasetError(f"{path} is empty ({len(data)} bytes): the dataset's description is lost; {RESTORE}")
    try:
        info = json.loads(data)
    except (UnicodeDecodeError, ValueError) as err:
        raise DatasetError(
            f"{path} is not valid JSON ({len(data)} bytes, truncated or damaged: {_one_line(err)}); {RESTORE}"
        ) from None
    if not isinstance(info, dict):
        raise DatasetError(f"{path} is not a JSON object (it holds a {type(info).__name__}); {RESTORE}")
    features = info.get("features")
    if not isinstance(features, dict) or not features:
        raise DatasetError(f"{path} has no 'features' (the dataset's columns: name -> dtype, shape); {RESTORE}")
    for name, feature in features.items():
        if not isinstance(feature, dict) or "dtype" not in feature or not isinstance(feature.get("shape"), list):
            raise DatasetError(f"{path}: feature '{name}' has no dtype and shape ({feature!r}); {RESTORE}")
    fps = info.get("fps")
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0:
        raise DatasetError(f"{path} has no valid 'fps' (got {fps!r}); {RESTORE}")
    for key in ("total_episodes", "total_frames"):
        value = info.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DatasetError(f"{path} has no valid '{key}' (got {value!r}); {RESTORE}")
    return info


def _check_parquet(path: pathlib.Path, whole: bool, columns: tuple[str, ...] = ()) -> None:
    """Read ``path`` (``whole``: every row; else its footer, the schema and row groups) and require ``columns``.

    Raises:
        DatasetError: it does not read (cut short, damaged, a folder, no permission) or lacks a column.
    """
    try:
        size = path.stat().st_size
    except OSError as err:
        raise DatasetError(f"{path}: cannot read it ({err.strerror or _one_line(err)}); {RESTORE}") from None
    try:
        schema = pq.read_table(path).schema if whole else pq.read_metadata(path).schema.to_arrow_schema()
    except (pa.ArrowException, OSError) as err:  # a truncated file: ArrowInvalid (no footer); EIO, EISDIR: OSError
        why = _one_line(err).replace(f"Could not open Parquet input source '{path}': ", "")
        raise DatasetError(
            f"{path} is not a readable parquet file ({size} bytes, truncated or damaged: {why}); {RESTORE}"
        ) from None
    for name in columns:
        if schema.get_field_index(name) < 0:
            raise DatasetError(f"{path} has no column '{name}' (columns: {', '.join(schema.names)}); {RESTORE}")


def check_dataset(root: str | pathlib.Path) -> dict | None:
    """Check the dataset folder ``root`` before it is read or extended; return its ``meta/info.json`` (as
    :func:`read_info`), or None when ``root`` holds no dataset yet (it does not exist, or is a folder without
    ``meta/info.json`` and without recorded files: a writer makes a new dataset there; journals do not count).

    Reads only (``info.json``, then the ``meta/`` tables whole and the footers of the ``data/`` files); never a journal.

    Raises:
        DatasetError: one line naming the file and what is wrong (see the module's list): ``root`` is not a folder,
            ``info.json`` is damaged or missing beside recorded files, the tasks or episodes table is missing while
            ``info.json`` counts episodes, or a parquet file does not read.
    """
    root = pathlib.Path(root)
    try:
        mode = os.stat(root).st_mode
    except FileNotFoundError:
        return None
    except OSError as err:  # ENOTDIR: a folder of its path is a file; EACCES, ELOOP, ...
        raise DatasetError(
            f"{root}: cannot use this path as a dataset folder ({err.strerror or _one_line(err)})"
        ) from err
    if not stat.S_ISDIR(mode):
        raise DatasetError(f"{root} is {_kind(mode)}, not a dataset folder; name a folder (or move the file away)")
    info_path = root / INFO
    if not os.path.lexists(info_path):  # a writer makes it before any other file, and never removes it
        recorded = [p for p in (root / TASKS, *root.glob(EPISODES_GLOB), *root.glob(DATA_GLOB)) if os.path.lexists(p)]
        if recorded:
            raise DatasetError(
                f"{info_path} is missing, but {root} holds {len(recorded)} recorded files "
                f"({recorded[0]}, ...); {RESTORE} (a new dataset here would overwrite them)"
            )
        return None
    info = read_info(info_path)
    episodes = sorted(root.glob(EPISODES_GLOB))  # after info.json: every episode it counts is in them
    data = sorted(root.glob(DATA_GLOB))
    counts = f"{info_path} counts {info['total_episodes']} episodes"
    if info["total_episodes"] > 0:  # both are written before info.json counts an episode, and never removed
        if not os.path.lexists(root / TASKS):
            raise DatasetError(
                f"{root / TASKS} is missing (the tasks table: task_index -> instruction; {counts}); {RESTORE}"
            )
        if not episodes:
            raise DatasetError(
                f"{root / 'meta/episodes/chunk-000/file-000.parquet'} is missing (the episodes table; "
                f"{counts}); {RESTORE}"
            )
    if os.path.lexists(root / TASKS):
        _check_parquet(root / TASKS, whole=True, columns=("task_index", "task"))
    for path in episodes:
        _check_parquet(path, whole=True)
    for path in data:
        _check_parquet(path, whole=False)
    return info
