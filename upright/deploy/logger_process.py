"""Frame logging in a separate process: the control process only writes fixed-size records to a pipe.

Control side (:class:`~upright.deploy.logger_client.LoggerClient`): one ``os.write`` of one fixed-size record
(< PIPE_BUF, so atomic) per policy tick on a non-blocking pipe; if the pipe is full the frame is dropped and the
``LOGGER_DROP`` safety flag is raised, the control loop never waits on disk (an episode-end record that does not fit
is queued and sent before the next frame).

One writer: the client takes the dataset's writer lock (:class:`~upright.dataset_io.lock.DatasetLock`) before
the logger touches the dataset, hands its descriptor to the logger process (``pass_fds``) and closes its own copy
once the logger is ready, so the logger holds it for its whole life and the kernel releases it when the logger
exits or dies. A dataset whose lock another process holds is refused (``DatasetLockedError``, a RuntimeError)
before anything of it is read or written.

Start-up: the logger opens (and recovers) the dataset, then answers one JSON line on its stdout,
``{"next_episode_index": N}``; the client waits for it, so the daemon numbers its episodes as the
dataset does and a dataset that cannot be opened stops the daemon before anything moves.

Health (:meth:`~upright.deploy.logger_client.LoggerClient.check`, called by the controller every policy tick; a
failure is final): the logger failed when

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
LeRobotDataset v3 files (:mod:`upright.dataset_io.lerobot`). If the daemon dies the logger
sees end-of-file and closes the open episode as ``interrupted``; if both die, the journal is
converted the next time a logger opens the dataset (or by ``upright-deploy recover``).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import time

import numpy as np
import pyarrow as pa

from upright.deploy.logger_writer import _Logger, _report_failure

EXIT_WRITE_FAILED = 3
"""Exit code of a logger whose writes failed (after its ``{"error": ...}`` line)."""


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
