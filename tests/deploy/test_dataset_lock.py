"""Issue 33.2: a dataset being recorded has exactly one writer.

The running daemon's logger holds the dataset's writer lock (``flock`` on ``.upright-writer.lock``) for its whole
life. ``upright-deploy recover`` and a second ``upright-deploy run`` refuse a locked dataset in one line, and every
refusal of a second daemon (socket, ports, dataset) comes before anything of the dataset or its journals is read or
written; the live journal is never touched. The lock goes with its holder (SIGKILL included), so a crashed daemon's
dataset is recoverable at once. ``recover`` never deletes a journal it cannot read (it is quarantined and named), and
on a full disk (a real EFBIG, RLIMIT_FSIZE) it fails in one line and leaves every file as it was.

Real processes throughout: the daemon against ``sim-robot`` over ptys, the logger process, the real CLI.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from daemon_testlib import ctl_run, start_daemon, start_sim_robot, stop
from deploy_testlib import wait_until as _wait_until

from upright.dataset_io.lerobot import EPISODES_PATH, LeRobotV3Writer, load_frames, load_journal
from upright.dataset_io.lock import LOCK_NAME, DatasetLock, DatasetLockedError
from upright.dataset_io.records import frame_features
from upright.deploy.logger_client import LoggerClient

CLI = [sys.executable, "-m", "upright.deploy.cli"]
FEATURES = frame_features(("a", "b", "c"), [f"o{i}" for i in range(16)])


def wait_until(condition, what: str, timeout: float = 120.0, every: float = 0.1):
    return _wait_until(condition, what, timeout, every)


def recover(root: pathlib.Path, max_file_bytes: int | None = None) -> subprocess.CompletedProcess:
    """``upright-deploy recover ROOT``; with ``max_file_bytes``, under that RLIMIT_FSIZE (a disk that fills up: writes
    past it fail with EFBIG; Python ignores SIGXFSZ), set by a launcher (preexec_fn is unsafe in a threaded process)."""
    launcher = []
    if max_file_bytes is not None:
        launcher = [
            "-c",
            "import os, resource, sys; n = int(sys.argv[1]); "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (n, n)); os.execv(sys.executable, sys.argv[2:])",
            str(max_file_bytes),
            sys.executable,
        ]
    return subprocess.run(
        [sys.executable, *launcher, "-m", "upright.deploy.cli", "recover", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def snapshot(root: pathlib.Path) -> dict[str, bytes]:
    """Every file of a dataset (the lock file aside) and its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and p.name != LOCK_NAME
    }


def fill(client: LoggerClient, i: int) -> None:
    r = client.record
    r["kind"], r["episode"], r["frame_index"] = 0, 0, i
    r["observation.state"] = np.arange(12, dtype=np.float32) + i
    r["action"] = i
    r["t_mono_ns"] = i


def flushed(root: pathlib.Path) -> int:
    try:
        return json.loads((root / "journal" / "progress.json").read_text())["frames_flushed"]
    except (OSError, ValueError, KeyError):
        return 0


# ---------------------------------------------------------------- the lock, on the logger process
def test_a_recording_dataset_refuses_every_second_writer_and_its_journal_is_untouched(tmp_path):
    """While a logger records: a second LoggerClient, ``DatasetLock.acquire`` and ``recover`` are refused, naming the
    holder, and the live journal stays where it is (a second logger used to convert and delete it at its start).
    SIGKILL of the logger releases the lock: ``recover`` then converts every flushed frame."""
    root = tmp_path / "ds"
    client = LoggerClient(root, FEATURES, fps=50, robot_type="small", task="t", flush_every=1, flush_interval_s=0.05)
    try:
        for i in range(30):
            fill(client, i)
            assert client.send()
        wait_until(lambda: flushed(root) >= 30, "30 flushed frames", every=0.02)
        journal = root / "journal" / "episode_000000.arrows"
        before = journal.read_bytes()
        holder = f"pid {client.proc.pid}: the logger of upright-deploy run (daemon pid {os.getpid()})"
        with pytest.raises(DatasetLockedError, match=re.escape(f"is being written by another process ({holder};")):
            LoggerClient(root, FEATURES, fps=50, robot_type="small", task="t")
        with pytest.raises(DatasetLockedError):
            DatasetLock.acquire(root, "test")
        proc = recover(root)
        line = one_line(proc)
        assert proc.returncode == 2 and line.startswith(
            f"upright-deploy recover: refusing: {root} is being written by another process ({holder};"
        ), line
        assert journal.read_bytes() == before and not (root / EPISODES_PATH).exists()
        for i in range(30, 40):  # and the logger goes on writing the same journal
            fill(client, i)
            assert client.send()
        wait_until(lambda: flushed(root) >= 40, "40 flushed frames", every=0.02)
        os.kill(client.proc.pid, signal.SIGKILL)
        client.proc.wait(30)
    finally:
        client.close()
    proc = recover(root)  # the lock died with its holder
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"recovered_episodes": [0], "total_episodes": 1, "quarantined": []}
    assert load_frames(root).column("frame_index").to_pylist() == list(range(40))


def test_the_lock_is_released_when_the_logger_exits(tmp_path):
    root = tmp_path / "ds"
    client = LoggerClient(root, FEATURES, fps=50, robot_type="small", task="t")
    assert client.close() == 0
    DatasetLock.acquire(root, "test").close()
    second = LoggerClient(root, FEATURES, fps=50, robot_type="small", task="t")
    assert second.close() == 0


# ---------------------------------------------------------------- recover: unreadable journals, a full disk
def journal_table(n: int, features=FEATURES) -> pa.Table:
    from upright.dataset_io.lerobot import column

    dt = {"float32": np.float32, "int64": np.int64, "bool": bool}
    cols = {
        name: column(np.full((n, *f["shape"]) if f["shape"] != [1] else n, 1, dtype=dt[f["dtype"]]), f)
        for name, f in features.items()
    }
    return pa.table({**cols, "frame_index": pa.array(np.arange(n, dtype=np.int64))})


def write_journal(path: pathlib.Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
        w.write_table(table)


def test_recover_quarantines_a_journal_it_cannot_read_and_names_it(tmp_path):
    """Not an Arrow stream, a journal of another dataset (other columns), a folder in a journal's place: each is moved
    to journal/quarantine/ unchanged and named on stderr and in the JSON; the good journal becomes the episode; an
    empty (0-byte) one is removed. (Every one of them used to be deleted; the other dataset's raised KeyError.)"""
    root = tmp_path / "ds"
    LeRobotV3Writer(root, FEATURES, 50, "small")
    jdir = root / "journal"
    write_journal(jdir / "episode_000000.arrows", journal_table(7))
    (jdir / "episode_000001.arrows").write_bytes(b"not an arrow stream\x00" * 50)
    other = {"foo": {"dtype": "float32", "shape": [2], "names": None}}
    write_journal(jdir / "episode_000002.arrows", journal_table(5, other))
    (jdir / "episode_000003.arrows").mkdir()
    (jdir / "episode_000004.arrows").write_bytes(b"")
    kept = {n: (jdir / n).read_bytes() for n in ("episode_000001.arrows", "episode_000002.arrows")}
    proc = recover(root)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["recovered_episodes"] == [0] and out["total_episodes"] == 1 and len(out["quarantined"]) == 3, out
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 3, proc.stderr
    assert "episode_000001.arrows cannot be converted (not an Arrow IPC stream" in lines[0]
    assert "episode_000002.arrows cannot be converted (it has no column 'observation.state'" in lines[1]
    assert "episode_000003.arrows cannot be converted (cannot read it: Is a directory)" in lines[2]
    for line, q in zip(lines, out["quarantined"]):
        assert line.endswith(f"; kept as {q}") and pathlib.Path(q).parent == jdir / "quarantine"
    moved = {pathlib.Path(q).name.split(".")[0]: pathlib.Path(q) for q in out["quarantined"]}
    for name, data in kept.items():
        assert moved[name.split(".")[0]].read_bytes() == data
    assert not list(jdir.glob("episode_*.arrows"))
    assert load_frames(root).num_rows == 7


def test_the_logger_quarantines_too(tmp_path):
    """The logger's own recovery at start keeps an unreadable journal (quarantined) instead of deleting it."""
    root = tmp_path / "ds"
    LeRobotV3Writer(root, FEATURES, 50, "small")
    bad = root / "journal" / "episode_000000.arrows"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"garbage" * 10)
    client = LoggerClient(root, FEATURES, fps=50, robot_type="small", task="t")
    assert client.close() == 0
    q = list((root / "journal" / "quarantine").iterdir())
    assert len(q) == 1 and q[0].read_bytes() == b"garbage" * 10


def test_recover_on_a_full_disk_fails_in_one_line_and_keeps_everything(tmp_path):
    """The disk fills up while the episode is written (EFBIG past 4 kB: the data file does not fit): one line, exit 1,
    the journal and every file of the dataset byte for byte as before, no temporary file; with room, the same recover
    converts it."""
    root = tmp_path / "ds"
    w = LeRobotV3Writer(root, FEATURES, 50, "small")
    w.add_episode(0, journal_table(3), "t", "success")
    write_journal(root / "journal" / "episode_000001.arrows", journal_table(400))
    before = snapshot(root)
    proc = recover(root, max_file_bytes=4096)
    line = one_line(proc)
    assert proc.returncode == 1 and line.startswith(
        f"upright-deploy recover: cannot write {root}: [Errno 27] File too large (converting "
    ), line
    assert "episode_000001.arrows, which is kept); nothing is lost: run recover again once there is room" in line
    assert snapshot(root) == before
    proc = recover(root)
    assert proc.returncode == 0 and json.loads(proc.stdout)["recovered_episodes"] == [1], proc.stderr
    assert load_frames(root).num_rows == 403


# ---------------------------------------------------------------- end to end: the real daemon
def fake_ports(tmp: pathlib.Path, n: int = 5) -> tuple[pathlib.Path, list[int]]:
    """A --port-dir of n fresh ptys (nobody answers); returns it and the master descriptors."""
    folder = tmp / "other_ports"
    folder.mkdir()
    masters = []
    for i in range(n):
        master, slave = os.openpty()
        (folder / f"bus{i}").symlink_to(os.ttyname(slave))
        os.set_blocking(master, False)
        masters.append(master)
    return folder, masters


@pytest.mark.slow
def test_recover_and_a_second_daemon_refuse_the_dataset_a_daemon_records(tmp_path, linear_policy):
    """A daemon records (POLICY, journal growing). ``recover DS`` is refused in one line; a second ``run --dataset DS``
    is refused by the socket (the same one), by its ports (the same ones) or, on other ports, by the dataset's lock,
    each in one line, before any byte on its ports and without touching the journal. The first daemon then finishes
    its episode: every frame in order, no journal left, no traceback. (recover used to convert and delete the live
    journal, and so did the second daemon's logger before its ports refused it; the first logger then crashed at its
    episode's end and the later frames were lost.)"""
    sim, links = start_sim_robot(tmp_path)
    daemon = start_daemon(
        tmp_path,
        linear_policy,
        links,
        "--auto-start",
        "--ramp-s",
        "0.2",
        "--auto-engage",
        "0.1",
        "--tilt-limit",
        "none",
    )
    root = tmp_path / "dataset"
    journal = root / "journal" / "episode_000000.arrows"
    masters: list[int] = []
    try:
        wait_until(lambda: flushed(root) >= 10, "10 flushed frames")
        proc = recover(root)
        line = one_line(proc)
        assert proc.returncode == 2 and f"refusing: {root} is being written by another process (pid " in line, line
        assert "a daemon is recording it: recover it after that daemon exits" in line
        assert journal.exists() and not (root / EPISODES_PATH).exists()

        def second(port_dir: pathlib.Path, sock: pathlib.Path) -> subprocess.CompletedProcess:
            n = flushed(root)
            out = subprocess.run(
                [
                    *CLI,
                    "run",
                    "--policy",
                    str(linear_policy),
                    "--port-dir",
                    str(port_dir),
                    "--dataset",
                    str(root),
                    "--socket",
                    str(sock),
                    "--no-keyboard",
                    "--sim",
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert out.returncode == 2 and journal.exists() and not (root / EPISODES_PATH).exists(), out.stderr
            assert load_journal(journal).num_rows >= n  # the journal still grows: the first logger writes it
            return out

        out = second(links, tmp_path / "ctl.sock")  # the running daemon's socket
        assert f"refusing to start: another daemon already listens on {tmp_path / 'ctl.sock'}" in one_line(out)
        out = second(links, tmp_path / "second.sock")
        line = one_line(out)
        assert "cannot open the robot's serial ports: [Errno 11] Could not exclusively lock port" in line
        port_dir, masters = fake_ports(tmp_path)
        out = second(port_dir, tmp_path / "third.sock")
        line = one_line(out)
        assert line.startswith(
            f"upright-deploy: refusing to start: {root} is being written by another process (pid "
        ), line
        assert line.endswith("one dataset has one writer: stop that daemon first, or use another --dataset")
        for m in masters:  # refused before a byte reached its ports
            with pytest.raises(BlockingIOError):
                os.read(m, 4096)
        assert json.loads(ctl_run(tmp_path, "status").stdout)["mode"] == "POLICY"
        assert ctl_run(tmp_path, "quit").returncode == 0
        assert daemon.wait(60) == 0, (tmp_path / "daemon.log").read_text()[-3000:]
    finally:
        stop(daemon)
        stop(sim)
        for m in masters:
            os.close(m)
    log = (tmp_path / "daemon.log").read_text()
    assert "Traceback" not in log and "logger failed" not in log, log[-3000:]
    frames = load_frames(root).to_pydict()
    assert frames["frame_index"] == list(range(len(frames["frame_index"]))) and len(frames["frame_index"]) >= 10
    episodes = pq.read_table(root / EPISODES_PATH).to_pylist()
    assert [e["upright/outcome"] for e in episodes] == ["stopped"], episodes
    assert not list((root / "journal").glob("episode_*.arrows"))
    proc = recover(root)  # nobody writes it now
    assert proc.returncode == 0 and json.loads(proc.stdout)["recovered_episodes"] == [], proc.stderr
