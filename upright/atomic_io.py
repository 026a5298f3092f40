"""Crash-safe file writes, shared by training (checkpoints, ``policy.onnx``, run configs) and the deploy daemon's
dataset writer (parquet files, ``meta/*.json``). Standard library only, so the daemon can import it (it never imports
training or torch; ``tests/deploy/test_import_boundary.py``)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable
from typing import Any


def fsync_dir(folder: pathlib.Path) -> None:
    """fsync a folder so a rename inside it is durable; best effort (some filesystems refuse a folder fsync)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | pathlib.Path, write: Callable[[pathlib.Path], Any]) -> pathlib.Path:
    """Crash-safe file write: ``write(tmp)`` fills a temporary file beside ``path``, which is fsynced and renamed over
    ``path`` (then the folder is fsynced). A crash, a kill or a full disk at any point leaves ``path`` as it was
    before (or absent), never truncated; the temporary file is removed when ``write`` raises.

    Args:
        path: the final file.
        write: called with the temporary path (same folder, so the rename is atomic); must create that file.

    Returns:
        ``path`` as a Path.

    Raises:
        Whatever ``write``, the fsync or the rename raise (OSError for a full disk).
    """
    path = pathlib.Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        tmp.with_name(tmp.name + ".data").unlink(missing_ok=True)  # the ONNX exporter's side file, if any
        raise
    fsync_dir(path.parent)
    return path


def atomic_write_text(path: str | pathlib.Path, text: str) -> pathlib.Path:
    """:func:`atomic_write` of a UTF-8 text file (e.g. a run config: ``OmegaConf.to_yaml(cfg, resolve=True)``)."""
    return atomic_write(path, lambda tmp: pathlib.Path(tmp).write_text(text, encoding="utf-8"))


def atomic_write_bytes(path: str | pathlib.Path, data: bytes) -> pathlib.Path:
    """:func:`atomic_write` of ``data``, creating the parent folders first."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, lambda tmp: pathlib.Path(tmp).write_bytes(data))
