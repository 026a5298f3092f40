"""Camera images shared between processes through a memory-mapped file: a ring of slots, each slot one uint8
(H, W, 3) RGB image per camera, written and read without locks (a per-slot seqlock).

Two users:

- sim-robot's cameras (:mod:`upright.deploy.sim_camera`) publish each rendered frame into a one-slot file per camera,
  ``<link-dir>/camera_<name>.frames``, next to the pty links; the daemon's
  :class:`~upright.deploy.camera.SimCamera` reads it.
- the daemon's logger (:class:`~upright.deploy.logger_client.LoggerClient`) puts the images of each logged frame
  into a ring of N slots that the logger process reads when that frame's record arrives through its pipe.

Why a mapped file and not a socket or a pipe. A camera is a latest-frame device: the writer overwrites, the reader
takes whatever is newest, nothing queues. A stream (unix socket, pipe) queues frames, so a slow reader either blocks
the writer or needs its own drop logic, and a 12-150 kB frame is not one atomic write. The mapped file has neither
problem: a dead or slow reader costs the writer nothing, a dead writer shows as a timestamp that stops advancing
(the staleness the daemon checks anyway), either side can start first, and reading the newest frame is one copy. It
lives in the folder the daemon already names with ``--port-dir``. Same machine only.

Layout (native byte order, one file):

- header (:data:`HEADER`): ``magic`` ``b"UPRTFRM1"``, ``slots`` N, ``count`` K cameras, ``newest`` (the stamp of the
  slot written last, 0: none), ``closed`` (the writer closed the file);
- K names (64 bytes, UTF-8, NUL-padded), K heights, K widths (uint32);
- N slots, each :data:`SLOT` (``stamp``, ``t_ns``, ``aux``) then the K images, row-major RGB.

Seqlock. The writer sets the slot's ``stamp`` to -1, writes the images and times, then sets ``stamp`` to the new
(positive, increasing) value and ``newest`` to it. A reader copies the slot and accepts it only if ``stamp`` was the
same positive value before and after the copy; a torn or overwritten slot reads as None. Every field is written by
one numpy store (x86 keeps stores in order; on weakly ordered CPUs a torn read is still caught by the second stamp
check in all but a vanishing window).
"""

from __future__ import annotations

import mmap
import os
import pathlib
import tempfile

import numpy as np

MAGIC = b"UPRTFRM1"
NAME_BYTES = 64
HEADER = np.dtype(
    [("magic", "S8"), ("slots", "<u4"), ("count", "<u4"), ("newest", "<i8"), ("closed", "<u4"), ("pad", "<u4")]
)
"""The file's fixed header."""
SLOT = np.dtype([("stamp", "<i8"), ("t_ns", "<i8"), ("aux", "<i8")])
"""The header of every slot: ``stamp`` (0: empty, -1: being written), ``t_ns`` (CLOCK_MONOTONIC ns of the images),
``aux`` (the writer's: sim-robot's simulated time in ns, the logger's record number)."""


class SharedFramesError(ValueError):
    """A file that is not a shared-frames file, or another layout than expected (one line)."""


def _align(n: int) -> int:
    return (n + 63) // 64 * 64


class SharedFrames:
    """A mapped shared-frames file (module docstring); make one with :meth:`create` or :meth:`open`.

    Attributes:
        path: the file.
        names: the K camera names; ``shapes``: their (H, W).
        slots: N.
        writable: opened by :meth:`create`.
    """

    def __init__(self, path: pathlib.Path, mm: mmap.mmap, writable: bool):
        self.path, self._mm, self.writable = path, mm, writable
        buf = memoryview(mm)
        self._header = np.frombuffer(buf, HEADER, 1)
        h = self._header[0]
        if bytes(h["magic"]) != MAGIC:
            raise SharedFramesError(f"{path} is not a shared-frames file (magic {bytes(h['magic'])!r})")
        n, k = int(h["slots"]), int(h["count"])
        off = HEADER.itemsize
        names = np.frombuffer(buf, f"S{NAME_BYTES}", k, off)
        off += k * NAME_BYTES
        dims = np.frombuffer(buf, "<u4", 2 * k, off).reshape(2, k)
        off = _align(off + 8 * k)
        self.names = tuple(bytes(x).decode() for x in names)
        self.shapes = {nm: (int(dims[0, i]), int(dims[1, i])) for i, nm in enumerate(self.names)}
        self.slots = n
        size = _align(SLOT.itemsize + sum(hh * ww * 3 for hh, ww in self.shapes.values()))
        if len(mm) < off + n * size:
            raise SharedFramesError(f"{path} is truncated ({len(mm)} bytes, its header needs {off + n * size})")
        self._slot_heads, self._images = [], []
        for s in range(n):
            base = off + s * size
            self._slot_heads.append(np.frombuffer(buf, SLOT, 1, base))
            imgs, o = {}, base + SLOT.itemsize
            for nm, (hh, ww) in self.shapes.items():
                imgs[nm] = np.frombuffer(buf, np.uint8, hh * ww * 3, o).reshape(hh, ww, 3)
                o += hh * ww * 3
            self._images.append(imgs)
        if not writable:
            for arr in [self._header, *self._slot_heads, *(a for d in self._images for a in d.values())]:
                arr.flags.writeable = False
        self._stat = os.stat(path) if path.exists() else None

    # ------------------------------------------------------------------ construction
    @classmethod
    def create(cls, path: str | pathlib.Path, shapes: dict[str, tuple[int, int]], slots: int = 1) -> SharedFrames:
        """Create (or replace, atomically: a temporary file renamed over ``path``) a file for ``shapes`` (name ->
        (H, W) px) with ``slots`` slots, every slot empty, its pages already touched; mode 0600.

        Raises:
            ValueError: no camera, a name longer than 32 bytes, a size < 1 px or ``slots`` < 1.
        """
        path = pathlib.Path(path)
        if not shapes or slots < 1:
            raise ValueError(f"shared frames need at least one camera and one slot, got {list(shapes)}, {slots} slots")
        for nm, (hh, ww) in shapes.items():
            if len(nm.encode()) > NAME_BYTES or not nm or hh < 1 or ww < 1:
                raise ValueError(f"camera {nm!r} {hh}x{ww}: names are 1-{NAME_BYTES} bytes, sizes >= 1 px")
        k = len(shapes)
        off = _align(HEADER.itemsize + k * NAME_BYTES + 8 * k)
        size = _align(SLOT.itemsize + sum(hh * ww * 3 for hh, ww in shapes.values()))
        head = np.zeros(1, HEADER)
        head["magic"], head["slots"], head["count"] = MAGIC, slots, k
        meta = head.tobytes() + np.array([n.encode() for n in shapes], f"S{NAME_BYTES}").tobytes()
        meta += np.array([[h for h, _ in shapes.values()], [w for _, w in shapes.values()]], "<u4").tobytes()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            os.write(fd, meta)
            os.ftruncate(fd, off + slots * size)
            os.replace(tmp, path)
            mm = mmap.mmap(fd, off + slots * size)
            np.frombuffer(mm, np.uint8)[len(meta) :] = 0  # touch every page now, not on the writer's first frames
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        finally:
            os.close(fd)
        return cls(path, mm, writable=True)

    @classmethod
    def open(cls, path: str | pathlib.Path) -> SharedFrames:
        """Map an existing file read-only.

        Raises:
            FileNotFoundError: no file at ``path``.
            SharedFramesError: not a shared-frames file, or truncated.
        """
        path = pathlib.Path(path)
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if size < HEADER.itemsize:
                raise SharedFramesError(f"{path} is not a shared-frames file ({size} bytes)")
            mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        return cls(path, mm, writable=False)

    # ------------------------------------------------------------------ writer
    def write(
        self, stamp: int, images: dict[str, np.ndarray | None], t_ns: int, aux: int = 0, slot: int | None = None
    ) -> None:
        """Publish ``images`` (name -> (H, W, 3) uint8; a missing name or None: black) into ``slot`` (default
        ``stamp % slots``) under ``stamp`` (> 0, increasing), taken at ``t_ns`` (CLOCK_MONOTONIC ns).

        Raises:
            ValueError: a read-only file, ``stamp`` < 1, or an image of another shape than the file's.
        """
        if not self.writable:
            raise ValueError(f"{self.path} is open read-only")
        if stamp < 1:
            raise ValueError(f"stamps start at 1, got {stamp}")
        s = stamp % self.slots if slot is None else slot
        head, imgs = self._slot_heads[s], self._images[s]
        head["stamp"] = -1
        for nm, dst in imgs.items():
            src = images.get(nm)
            if src is None:
                dst.fill(0)
            elif src.shape != dst.shape:
                head["stamp"] = 0
                raise ValueError(f"camera {nm}: image of shape {src.shape}, this file holds {dst.shape}")
            else:
                np.copyto(dst, src, casting="unsafe")
        head["t_ns"], head["aux"] = t_ns, aux
        head["stamp"] = stamp
        self._header["newest"] = stamp

    def mark_closed(self) -> None:
        """Tell readers that the writer is gone (:attr:`closed`)."""
        if self.writable:
            self._header["closed"] = 1

    # ------------------------------------------------------------------ reader
    @property
    def newest(self) -> int:
        """The stamp written last (0: none yet)."""
        return int(self._header["newest"][0])

    @property
    def closed(self) -> bool:
        """The writer marked the file closed."""
        return bool(self._header["closed"][0])

    def read(
        self, stamp: int | None = None, names: tuple[str, ...] | None = None, slot: int | None = None
    ) -> tuple[int, dict[str, np.ndarray], int, int] | None:
        """A consistent copy of one slot: ``(stamp, {name: (H, W, 3) uint8 new array}, t_ns, aux)``, or None when the
        slot is empty, being written, or (``stamp`` given) holds another stamp (overwritten, or not written yet).

        Args:
            stamp: the stamp expected (default: :attr:`newest`); the slot is ``stamp % slots`` unless ``slot``.
            names: the cameras to copy (default all).
        """
        want = self.newest if stamp is None else int(stamp)
        if want < 1:
            return None
        s = want % self.slots if slot is None else slot
        head = self._slot_heads[s]
        if int(head["stamp"][0]) != want:
            return None
        out = {nm: self._images[s][nm].copy() for nm in (names or self.names)}
        t_ns, aux = int(head["t_ns"][0]), int(head["aux"][0])
        if int(head["stamp"][0]) != want:
            return None
        return want, out, t_ns, aux

    def replaced(self) -> bool:
        """Whether ``path`` now names another file than the mapped one (the writer restarted) or none."""
        try:
            st = os.stat(self.path)
        except OSError:
            return True
        return self._stat is None or (st.st_ino, st.st_dev) != (self._stat.st_ino, self._stat.st_dev)

    def close(self, unlink: bool = False) -> None:
        """Unmap; ``unlink``: also remove ``path`` if it is still this file. Idempotent."""
        if self._mm is None:
            return
        if unlink and not self.replaced():
            try:
                os.unlink(self.path)
            except OSError:
                pass
        self._header = None
        self._slot_heads, self._images = [], []
        try:
            self._mm.close()
        except BufferError:  # a view is still referenced somewhere: the mapping goes with it
            pass
        self._mm = None
