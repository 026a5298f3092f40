"""Issue 33.3: the logger's health is part of the safety state.

The failures are real: the logger process (the real ``upright.deploy.logger_process``) is SIGKILLed, its writes fail
with a real EFBIG (``prlimit`` RLIMIT_FSIZE on that process: a disk that fills up) or a real ENOSPC (its journal is
``/dev/full``), or it is stopped (SIGSTOP) so that it takes no frame. Within one policy tick of the failure the
daemon logs it at ERROR and carries out ``--on-logger-failure``: ``hold`` (default) ends the episode, ramps to HOLD
and refuses ``resume``; ``continue`` keeps the policy running. ``ctl status`` (the real CLI, the real socket) reports
the logger's state, and what was flushed before the failure stays readable and is recovered by the real
``upright-deploy recover`` while the daemon still runs (the dead logger's writer lock is gone with it).
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import resource
import signal
import subprocess
import sys
import threading
import time

import pytest
from daemon_testlib import ctl_run, start_daemon, start_sim_robot, stop
from deploy_testlib import ConstantPolicy, Harness
from deploy_testlib import wait_until as _wait_until

from upright.dataset_io.lerobot import EPISODES_PATH, load_frames, load_journal
from upright.dataset_io.records import frame_features
from upright.deploy.controller import Controller, ControllerConfig
from upright.deploy.logger_client import LoggerClient
from upright.deploy.loop import run_loop
from upright.deploy.safety import SafetyConfig
from upright.deploy.state_machine import Mode

DEADLINE_S = 60.0
"""Generous: a loaded 2-core machine."""


def live_cfg(on_failure: str = "hold") -> ControllerConfig:
    """The live harness's timing (checks of the link and sensor age off: the loop shares this process with the device
    thread on a loaded machine; they are not what these tests are about)."""
    return ControllerConfig(
        ramp_s=0.1,
        policy_ramp_s=0.0,
        auto_start=True,
        auto_engage_s=0.04,
        stop_damping_s=0.02,
        on_logger_failure=on_failure,
        safety=SafetyConfig(
            max_consecutive_overruns=None,
            watchdog_s=None,
            max_consecutive_link_errors=10**6,
            max_motor_age_s=5.0,
            max_imu_age_s=5.0,
        ),
    )


def wait_until(condition, what: str, timeout: float = DEADLINE_S, every: float = 0.01):
    return _wait_until(condition, what, timeout, every)


class LiveLogged:
    """The harness's control loop in a thread (cycles back to back) with the real logger process writing ``ds`` and
    the real operator socket; ``logger_kw`` go to :class:`LoggerClient`."""

    def __init__(self, tmp: pathlib.Path, on_failure: str = "hold", **logger_kw):
        self.tmp, self.root = tmp, tmp / "ds"
        self.h = Harness(ConstantPolicy(0.05), cfg=live_cfg(on_failure), socket=tmp / "ctl.sock")
        spec = self.h.spec
        names = [f"{n}.{i}" for n, d in zip(spec.observation_names, spec.observation_dims) for i in range(d)]
        self.logger = LoggerClient(
            self.root,
            frame_features(spec.joint_names, names),
            fps=50,
            robot_type="small",
            task="test",
            flush_every=1,
            **logger_kw,
        )
        self.h.logger = self.logger
        self.h.controller = Controller(
            spec, self.h.robot_cfg, self.h.controller.policy, self.h.cfg, logger=self.logger, operator=self.h.operator
        )
        self.c = self.h.controller
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            run_loop(self.c, self.h.robot, max_cycles=10**8, pace=False, install_signals=False)
        except BaseException as err:  # noqa: BLE001 - reported by the test
            self.error = err

    def flushed(self) -> int:
        path = self.root / "journal" / "progress.json"
        try:
            return json.loads(path.read_text())["frames_flushed"]
        except (OSError, ValueError, KeyError):
            return 0

    def status(self) -> dict:
        proc = ctl_run(self.tmp, "status")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def close(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            ctl_run(self.tmp, "quit")
            self.thread.join(30)
        self.h.close()


def wait_dead(pid: int) -> None:
    """Block until the child ``pid`` has exited, without reaping it (the controller's poll does that)."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    except ChildProcessError:  # already reaped by the controller's thread
        pass


def inject(d: LiveLogged, kind: str) -> str:
    """Make the logger fail; return the text its failure must name."""
    pid = d.logger.proc.pid
    if kind == "sigkill":
        os.kill(pid, signal.SIGKILL)
        return "was killed by SIGKILL"
    if kind == "efbig":  # a disk that fills up: writes past the journal's current size fail with EFBIG
        journal = d.root / "journal" / "episode_000000.arrows"
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (journal.stat().st_size, journal.stat().st_size))
        return "File too large"
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["sigkill", "efbig"])
def test_a_failed_logger_ends_the_episode_and_holds_within_one_tick(tmp_path, caplog, kind):
    """SIGKILL of the logger, or its journal writes failing with EFBIG, in POLICY: within one policy tick of the
    logger's exit, one ERROR line naming it; the episode ends, the robot ramps (bumpless, bounded steps) to HOLD,
    ``ctl resume`` is refused in one line, ``ctl status`` says ``failed`` with the error. Every frame flushed before
    reads back, and ``recover`` converts them while the daemon still runs. (It used to stay in POLICY, dropping every
    frame; only ``logger_dropped`` showed it.)"""
    caplog.set_level(logging.INFO, logger="upright.deploy")
    d = LiveLogged(tmp_path)
    try:
        d.start()
        wait_until(lambda: d.c.sm.mode == Mode.POLICY and d.flushed() >= 20, "POLICY and 20 flushed frames")
        flushed = d.flushed()
        text = inject(d, kind)
        wait_dead(d.logger.proc.pid)
        seen = d.c.tick  # the logger is gone: the next tick must find it
        wait_until(lambda: d.c.logger_error is not None, "the failure to be found")
        assert d.c.logger_failed_tick <= seen + 1, (d.c.logger_failed_tick, seen)
        assert text in d.c.logger_error, d.c.logger_error
        # the control thread sets logger_error, then logs: wait for the record, then require exactly one
        wait_until(lambda: [r for r in caplog.records if r.levelno == logging.ERROR], "the ERROR line")
        errors = [r for r in caplog.records if r.name == "upright.deploy" and r.levelno == logging.ERROR]
        assert len(errors) == 1 and errors[0].getMessage().startswith(
            f"logger failed: {d.c.logger_error}; --on-logger-failure hold: episode 0 ends here"
        )
        wait_until(lambda: d.c.sm.mode == Mode.HOLD, "HOLD")
        status = d.status()
        assert status["mode"] == "HOLD" and status["logger"]["state"] == "failed", status
        assert text in status["logger"]["error"] and status["logger"]["on_failure"] == "hold"
        resume = ctl_run(tmp_path, "resume")
        lines = resume.stderr.strip().splitlines()
        assert resume.returncode == 1 and len(lines) == 1 and "'resume' refused: the logger failed" in lines[0], resume
        time.sleep(0.3)
        assert d.c.sm.mode == Mode.HOLD and d.c.sm.damping_reason == ""
        # what was flushed is intact, and the dataset is recoverable now (the dead logger's lock went with it)
        table = load_journal(d.root / "journal" / "episode_000000.arrows")
        assert table.num_rows >= flushed and table.column("frame_index").to_pylist() == list(range(table.num_rows))
        rec = subprocess.run(
            [sys.executable, "-m", "upright.deploy.cli", "recover", str(d.root)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert rec.returncode == 0 and json.loads(rec.stdout)["recovered_episodes"] == [0], rec
        assert load_frames(d.root).num_rows == table.num_rows
    finally:
        d.close()
    assert d.error is None and d.c.sm.damping_reason == "operator quit"
    d.h.assert_no_unsafe_command()
    messages = [r.getMessage() for r in caplog.records if r.name == "upright.deploy"]
    assert any(m.startswith("POLICY -> RAMP_TO_DEFAULT (logger failed: ") for m in messages), messages
    assert "RAMP_TO_DEFAULT -> HOLD (ramp of 0.1 s done)" in messages


def test_a_full_disk_is_found_and_holds(tmp_path, caplog):
    """ENOSPC (the temporary file of the logger's first progress.json is /dev/full: a real 'No space left on device'
    on its first flush): the logger reports it on its status channel and exits 3; the daemon names the error at ERROR
    and goes to HOLD; the journal's first frame reads back."""
    caplog.set_level(logging.INFO, logger="upright.deploy")
    d = LiveLogged(tmp_path)
    full = d.root / "journal" / f".progress.json.tmp-{d.logger.proc.pid}"  # atomic_write's temporary name
    full.parent.mkdir(parents=True, exist_ok=True)
    full.symlink_to("/dev/full")
    try:
        d.start()
        wait_until(lambda: d.c.logger_error is not None, "the failure to be found")
        assert d.c.logger_error == (
            f"the logger process (pid {d.logger.proc.pid}) could not write {d.root}: "
            "OSError: [Errno 28] No space left on device"
        )
        wait_until(lambda: d.c.sm.mode == Mode.HOLD, "HOLD")
        assert d.logger.proc.wait(30) == 3
        assert d.status()["logger"]["state"] == "failed"
        assert load_journal(d.root / "journal" / "episode_000000.arrows").num_rows >= 1
    finally:
        d.close()
        full.unlink(missing_ok=True)
    errors = [r.getMessage() for r in caplog.records if r.name == "upright.deploy" and r.levelno == logging.ERROR]
    assert len(errors) == 1 and "No space left on device" in errors[0], errors
    d.h.assert_no_unsafe_command()


def test_continue_is_an_explicit_opt_in(tmp_path, caplog):
    """``on_logger_failure="continue"``: the same ERROR line, the status says failed, and the policy keeps running."""
    caplog.set_level(logging.INFO, logger="upright.deploy")
    d = LiveLogged(tmp_path, on_failure="continue")
    try:
        d.start()
        wait_until(lambda: d.c.sm.mode == Mode.POLICY and d.flushed() >= 5, "POLICY")
        os.kill(d.logger.proc.pid, signal.SIGKILL)
        wait_until(lambda: d.c.logger_error is not None, "the failure to be found")
        tick = d.c.tick
        wait_until(lambda: d.c.tick >= tick + 20, "20 more ticks")
        assert d.c.sm.mode == Mode.POLICY
        status = d.status()
        assert status["mode"] == "POLICY" and status["logger"]["state"] == "failed", status
        assert status["logger"]["on_failure"] == "continue"
    finally:
        d.close()
    errors = [r.getMessage() for r in caplog.records if r.name == "upright.deploy" and r.levelno == logging.ERROR]
    assert len(errors) == 1 and "--on-logger-failure continue: POLICY continues, unrecorded" in errors[0], errors


def test_a_stopped_logger_is_a_failure_after_its_pipe_stays_full(tmp_path):
    """SIGSTOP of the logger (as a process blocked on a dying disk): the pipe fills, and once it stayed full for
    ``stall_s`` the logger failed (the daemon used to drop frames forever); the daemon holds."""
    d = LiveLogged(tmp_path, stall_s=0.5, pipe_bytes=4096)
    try:
        d.start()
        wait_until(lambda: d.c.sm.mode == Mode.POLICY and d.flushed() >= 5, "POLICY")
        os.kill(d.logger.proc.pid, signal.SIGSTOP)
        wait_until(lambda: d.c.logger_error is not None, "the failure to be found")
        assert "took no frame for 0.5 s" in d.c.logger_error
        wait_until(lambda: d.c.sm.mode == Mode.HOLD, "HOLD")
    finally:
        os.kill(d.logger.proc.pid, signal.SIGCONT)
        d.close()
    d.h.assert_no_unsafe_command()


def test_no_logger_no_check_and_status_says_off(tmp_path):
    h = Harness(ConstantPolicy(0.05), cfg=live_cfg())
    try:
        assert h.controller.status()["logger"] == {
            "state": "off",
            "error": None,
            "failed_tick": None,
            "on_failure": "hold",
        }
    finally:
        h.close()
    with pytest.raises(ValueError, match="on_logger_failure must be one of"):
        Controller(h.spec, h.robot_cfg, ConstantPolicy(0.05), ControllerConfig(on_logger_failure="ignore"))


# ---------------------------------------------------------------- end to end: the real daemon
def logger_pid_of(daemon: subprocess.Popen) -> int:
    """The pid of the daemon's logger process (its child running upright.deploy.logger_process)."""
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == daemon.pid and b"upright.deploy.logger_process" in cmdline:
            return int(entry.name)
    raise LookupError("no logger process")


@pytest.mark.slow
def test_the_daemon_holds_when_its_logger_is_killed(tmp_path, linear_policy):
    """``upright-deploy run`` (default --on-logger-failure hold) against sim-robot: SIGKILL its logger in POLICY. The
    daemon's log has the ERROR line at once, ``ctl status`` reports the logger failed and the mode reaches HOLD,
    ``ctl resume`` is refused, ``recover`` converts the flushed frames while the daemon still runs, and ``ctl quit``
    exits 0."""
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
    log = tmp_path / "daemon.log"
    try:
        wait_until(lambda: "HOLD -> POLICY" in log.read_text(), "POLICY", timeout=120, every=0.1)
        progress = tmp_path / "dataset" / "journal" / "progress.json"
        wait_until(
            lambda: progress.exists() and json.loads(progress.read_text())["frames_flushed"] >= 10,
            "10 flushed frames",
            timeout=120,
            every=0.1,
        )
        pid = logger_pid_of(daemon)
        os.kill(pid, signal.SIGKILL)
        text = wait_until(
            lambda: "logger failed:" in log.read_text() and log.read_text(), "the ERROR line", timeout=60, every=0.1
        )
        assert f"logger failed: the logger process (pid {pid}) was killed by SIGKILL; --on-logger-failure hold" in text
        assert daemon.poll() is None
        wait_until(lambda: json.loads(ctl_run(tmp_path, "status").stdout)["mode"] == "HOLD", "HOLD", every=0.2)
        status = json.loads(ctl_run(tmp_path, "status").stdout)
        assert status["logger"]["state"] == "failed" and "SIGKILL" in status["logger"]["error"], status
        assert ctl_run(tmp_path, "resume").returncode == 1
        rec = subprocess.run(
            [sys.executable, "-m", "upright.deploy.cli", "recover", str(tmp_path / "dataset")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert rec.returncode == 0 and json.loads(rec.stdout)["recovered_episodes"] == [0], rec
        assert ctl_run(tmp_path, "quit").returncode == 0
        assert daemon.wait(60) == 0, log.read_text()[-3000:]
    finally:
        stop(daemon)
        stop(sim)
    assert "Traceback" not in log.read_text()
    import pyarrow.parquet as pq

    episodes = pq.read_table(tmp_path / "dataset" / EPISODES_PATH).to_pylist()
    assert [e["upright/outcome"] for e in episodes] == ["interrupted"] and episodes[0]["length"] >= 10


def test_closed_pipes_wait_for_the_exit_status_that_names_the_signal():
    """Issue 33.8: the kernel closes a SIGKILLed process's pipes just before its exit status can be collected; a check
    in between (a loaded machine) said "is gone (its pipes are closed)" instead of "was killed by SIGKILL". The check
    now waits for the status (the next tick has it), and says "gone" only when none comes for GONE_GRACE_S."""
    from types import SimpleNamespace

    from upright.deploy.logger_client import GONE_GRACE_S

    def client(codes):
        c = object.__new__(LoggerClient)  # the check's state only: no process, no dataset
        c.failed, c._gone, c._gone_since, c._stalled, c.stall_s = None, True, None, False, 2.0
        c._read_status = lambda: None
        c.proc = SimpleNamespace(pid=4242, poll=lambda: codes.pop(0) if len(codes) > 1 else codes[0])
        return c

    dying = client([None, -signal.SIGKILL])
    assert dying.check() is None  # pipes closed, no exit status yet: not "gone" at once
    assert dying.check() == "the logger process (pid 4242) was killed by SIGKILL"
    alive = client([None])  # pipes closed, and the process does not exit
    assert alive.check() is None
    alive._gone_since -= GONE_GRACE_S
    assert alive.check() == "the logger process (pid 4242) is gone (its pipes are closed)"
