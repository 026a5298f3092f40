"""The writer lock of a dataset (:class:`DatasetLock`): a dataset being recorded has exactly one writer.

The logger process of ``upright-deploy run`` holds it for its whole life and ``upright-deploy recover`` while it
converts; a second writer is refused (:class:`DatasetLockedError`) before it reads or writes anything of the dataset
(:mod:`upright.dataset_io.lerobot` describes the layout).
"""

from __future__ import annotations

import errno
import fcntl
import os
import pathlib

LOCK_NAME = ".upright-writer.lock"
"""The writer lock's file in the dataset folder (:class:`DatasetLock`)."""


class DatasetLockedError(RuntimeError):
    """Another process holds the dataset's writer lock (a daemon's logger records it, or ``recover`` converts it)."""


class DatasetLock:
    """The advisory writer lock of a dataset: ``fcntl.flock(LOCK_EX | LOCK_NB)`` on ``root/.upright-writer.lock``.

    flock locks belong to the open file: a child that inherits the descriptor (``pass_fds``) holds the same lock,
    which lasts until every copy of the descriptor is closed, and the kernel releases it when the holders die
    (SIGKILL included). The file holds one line naming the holder (for the refusal's message only).
    """

    def __init__(self, fd: int, root: pathlib.Path):
        self.fd = fd
        self.root = root

    @classmethod
    def acquire(cls, root: str | pathlib.Path, holder: str, create: bool = True) -> DatasetLock:
        """Take the lock of the dataset at ``root`` (``create``: make the folder if missing) without waiting.

        Raises:
            DatasetLockedError: another process holds it (the message names the holder); nothing of the dataset
                was read or written.
            OSError: the lock file cannot be opened (no folder, no permission, ...).
        """
        root = pathlib.Path(root)
        if create:
            root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            try:
                who = os.pread(fd, 200, 0).decode(errors="replace").strip()
            except OSError:
                who = ""
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise DatasetLockedError(
                    f"{root} is being written by another process ({who or 'holder unknown'}; "
                    f"it holds {root / LOCK_NAME})"
                ) from None
            raise
        lock = cls(fd, root)
        lock.stamp(holder)
        return lock

    @classmethod
    def adopt(cls, fd: int, root: str | pathlib.Path, holder: str) -> DatasetLock:
        """The lock whose descriptor ``fd`` this process inherited (checked: flock on a held lock's own open file
        succeeds; raises :class:`DatasetLockedError` when ``fd`` is not that lock's)."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise DatasetLockedError(f"descriptor {fd} is not the writer lock of {root}") from None
        lock = cls(fd, pathlib.Path(root))
        lock.stamp(holder)
        return lock

    def stamp(self, holder: str) -> None:
        """Write ``pid <pid> (<holder>)`` into the lock file; best effort (a full disk must not fail the lock)."""
        try:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, f"pid {os.getpid()}: {holder}\n".encode(), 0)
        except OSError:
            pass

    def close(self) -> None:
        """Close this copy of the descriptor (the lock is released once no process has one left)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
