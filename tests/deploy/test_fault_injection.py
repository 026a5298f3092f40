"""Fault injection over a real byte-level serial link (ptys): each fault ends in the specified state,
and no unsafe command is ever sent (checked on the joint commands and on the bytes the motors received).

The robot is small (3 policy joints + 1 held joint on one bus, a fake first-order device) so that each
scenario runs in a fraction of a second; cycles run back to back (``pace=False``), faults are
scheduled by I/O tick, the daemon's checks of age read a clock of one I/O period (2 ms) per cycle, and the fake device
answers in device time (``deploy_testlib.DeviceTimedBus``), so every scenario is deterministic, on an idle or a loaded
machine (issue 33.8: ``python benchmarks/cpu_load.py --procs 2 -- python -m pytest tests/deploy``). POLICY starts
near tick 80; faults at 150.

Part 2 (issue 13, hardening; table of cases and results in docs/fault_injection.md): operator input through
the real ``upright-deploy ctl`` and socket, faults visible in the log and in the dataset written by the real
logger process, and the README's sim walkthrough (the control socket against other users' processes:
``test_operator_socket_users.py``).
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pyarrow.parquet as pq
import pytest
from daemon_testlib import ctl_run, start_daemon, start_sim_robot, stop
from deploy_testlib import ConstantPolicy, Fault, Harness

from upright.dataset_io.lerobot import EPISODES_PATH, load_frames
from upright.dataset_io.records import SafetyFlag
from upright.deploy.controller import ControllerConfig
from upright.deploy.loop import run_loop
from upright.deploy.safety import SafetyConfig
from upright.deploy.state_machine import Mode

ONSET = 150
N = 5  # SafetyConfig.max_consecutive_link_errors
IMU_AGE_CYCLES = round(SafetyConfig().max_imu_age_s * ControllerConfig().io_rate_hz)
"""25: SafetyConfig.max_imu_age_s (50 ms) in cycles of the tick clock (2 ms)."""


def run(policy=None, faults=(), cycles=320, temperature=35, dataset=None, tick_clock=True):
    """Cycles back to back, on the tick clock unless ``tick_clock`` is False (then the wall clock)."""
    h = Harness(
        policy or ConstantPolicy(0.05), faults=faults, temperature=temperature, dataset=dataset, tick_clock=tick_clock
    )
    try:
        run_loop(h.controller, h.robot, max_cycles=cycles, pace=False, install_signals=False)
    finally:
        h.close()
    return h


def assert_policy_ran_until_stop(h):
    assert h.controller.sm.damping_reason == "max_cycles", h.controller.sm.damping_reason
    assert h.damping_tick() >= 320
    h.assert_no_unsafe_command()


def assert_damping_for(h, reason: str, within: int):
    assert h.controller.mode == Mode.DAMPING
    assert reason in h.controller.sm.damping_reason, h.controller.sm.damping_reason
    t = h.damping_tick()
    assert t is not None and ONSET < t <= ONSET + within, t
    h.assert_no_unsafe_command()


def test_nominal_run_reaches_policy():
    h = run()
    assert h.controller.tick >= 30 and h.controller.episode == 0
    assert_policy_ran_until_stop(h)


@pytest.mark.parametrize(
    "faults",
    [
        [Fault("drop", "j1", ONSET, ONSET + 1)],
        [Fault("drop", "j1", ONSET, ONSET + N - 1)],
        [Fault("corrupt", "j2", ONSET, ONSET + 2)],
        [Fault("delay", "j0", ONSET, ONSET + 50, value=0.0005)],  # within the 2 ms reply timeout
    ],
    ids=["one-dropped", "N-1-dropped", "two-corrupted", "short-delay"],
)
def test_tolerated_faults_keep_running(faults):
    assert_policy_ran_until_stop(run(faults=faults))


def test_dropped_frames_N_in_a_row_damp():
    h = run(faults=[Fault("drop", "j1", ONSET)])
    assert_damping_for(h, "motor link fault: ['j1']", N + 1)


def test_corrupted_frames_damp():
    h = run(faults=[Fault("corrupt", "j2", ONSET)])
    assert_damping_for(h, "motor link fault: ['j2']", N + 1)
    assert h.robot.reading.crc_error.any() or h.controller.health.total_crc_errors[2] >= N


def test_delayed_frames_damp():
    h = run(faults=[Fault("delay", "j0", ONSET, value=0.1)])
    assert_damping_for(h, "motor link fault: ['j0']", N + 1)
    assert h.controller.health.total_timeouts[0] >= N


def test_stale_imu_damps():
    """The IMU repeats its sample from tick ONSET on: damping, "IMU stale", when its age passes 50 ms (issue 33.8: on
    a loaded machine this used to read "motor link fault": the fake device's thread, left without a CPU, answered
    after the daemon's 2 ms reply timeout)."""
    h = run(faults=[Fault("stale_imu", None, ONSET)])
    assert_damping_for(h, "IMU stale", IMU_AGE_CYCLES + 1)
    assert h.controller.sm.damping_reason == "IMU stale: sequence not advancing"  # and no other fault


def test_lost_imu_damps():
    h = run(faults=[Fault("drop", "imu", ONSET)])
    assert_damping_for(h, "IMU stale", IMU_AGE_CYCLES + 1)


def test_a_starved_loop_is_not_a_fault_and_still_names_the_stale_imu():
    """Issue 33.8, on the wall clock: a loop that stalls 60 ms at every policy tick (a daemon without a CPU for longer
    than max_motor_age_s and max_imu_age_s, 50 ms) finds fresh replies after each stall: no fault; with the IMU
    stale from ONSET, the fault is "IMU stale" alone, found at the first cycle after the next stall."""
    assert_policy_ran_until_stop(run(ConstantPolicy(0.05, sleep_s=0.06), tick_clock=False))
    h = run(ConstantPolicy(0.05, sleep_s=0.06), faults=[Fault("stale_imu", None, ONSET)], tick_clock=False)
    assert_damping_for(h, "IMU stale", 2 * h.controller.decimation + 1)
    assert h.controller.sm.damping_reason == "IMU stale: sequence not advancing"


def test_nan_from_the_policy_damps_and_nothing_nan_is_sent():
    policy = ConstantPolicy(0.05, nan_after=12)
    h = run(policy)
    assert "NaN" in h.controller.sm.damping_reason
    assert h.controller.mode == Mode.DAMPING
    t = h.damping_tick()
    assert t is not None and t < 320
    # the tick that got NaN sent damping, not a target derived from it
    h.assert_no_unsafe_command()
    assert all(np.isfinite(c["q"]).all() for _, c in h.robot.sent)


def test_motor_error_flag_damps():
    h = run(faults=[Fault("error_flag", "j1", ONSET, value=2)])
    assert_damping_for(h, "motor error flags: {'j1': 2}", 11)


def test_overtemperature_damps():
    h = run(faults=[Fault("temperature", "h0", ONSET, value=90)])
    assert_damping_for(h, "motor over 85.0 °C: ['h0']", 11)


# ====================================================================== part 2 (issue 13): hardening
def episodes_of(root: pathlib.Path) -> list[dict]:
    return pq.read_table(root / EPISODES_PATH).to_pylist()


def fault_frames(root: pathlib.Path) -> tuple[dict, list[dict]]:
    """All frames (columns) and episodes of a dataset."""
    return load_frames(root).to_pydict(), episodes_of(root)


# ---------------------------------------------------------------- 1. operator input
LIVE_CFG = ControllerConfig(
    ramp_s=0.1, policy_ramp_s=0.0, auto_start=True, auto_engage_s=0.04, stop_damping_s=0.02,
    safety=SafetyConfig(max_consecutive_overruns=None, watchdog_s=None, max_consecutive_link_errors=10**6,
                        max_motor_age_s=5.0, max_imu_age_s=5.0),
)  # fmt: skip
"""Timing is not what the live tests are about: the loop shares this process (and its GIL) with the device thread
on a loaded machine, so the link and sensor-age checks are off too."""


class LiveDaemon:
    """The harness's control loop in a thread (cycles back to back), operated by the real ``upright-deploy ctl``
    over the real socket."""

    def __init__(self, tmp_path: pathlib.Path, policy=None, **kw):
        self.tmp = tmp_path
        self.h = Harness(policy or ConstantPolicy(0.05), cfg=LIVE_CFG, socket=tmp_path / "ctl.sock", **kw)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            run_loop(self.h.controller, self.h.robot, max_cycles=10**8, pace=False, install_signals=False)
        except BaseException as err:  # noqa: BLE001 - reported by the test
            self.error = err

    def wait_mode(self, mode: Mode, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.h.controller.sm.mode != mode:
            assert time.monotonic() < deadline and self.thread.is_alive(), (self.h.controller.sm.mode, self.error)
            time.sleep(0.01)

    def close(self):
        if self.thread.is_alive():
            ctl_run(self.tmp, "quit")
            self.thread.join(30)
        self.h.close()


@pytest.mark.slow
def test_ctl_refuses_bad_targets_with_one_line_and_the_mode_stays(tmp_path):
    """Issue 13.1: NaN/inf/out-of-limit targets, unknown joints and malformed arguments get a one-line error that names
    the valid joints or values; nothing is applied (all or nothing), the mode stays HUMAN, no damping."""
    d = LiveDaemon(tmp_path)
    try:
        d.wait_mode(Mode.POLICY)
        take = ctl_run(tmp_path, "takeover")
        assert take.returncode == 0 and json.loads(take.stdout)["mode"] == "HUMAN", take
        goal = d.h.controller.human_goal.copy()
        cases = [
            (("target", "j0=nan"), 1, "must be finite; j0 accepts [-1.000, 1.000] rad"),
            (("target", "j1=-inf"), 1, "must be finite"),
            (("target", "j0=5"), 1, "j0=5 rad is outside the joint's limits [-1.000, 1.000] rad"),
            (("target", "bogus_joint=1"), 1, "unknown joint 'bogus_joint'; joints: j0 j1 j2"),
            (("target", "j0=0.3", "j1=nan"), 1, "j1=nan: the target must be finite"),
            (("target", "j0=abc"), 2, "'j0=abc': RAD must be a number (radians), e.g. j0=0.5"),
            (("target", "j0"), 2, "'j0' is not JOINT=RAD"),
            (("target",), 2, "'target' needs JOINT=RAD pairs"),
            (("start", "now"), 2, "'start' takes no arguments"),
        ]
        for args, rc, message in cases:
            proc = ctl_run(tmp_path, *args)
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode == rc and len(lines) == 1 and message in lines[0], (args, proc.stdout, proc.stderr)
            if rc == 1:
                reply = json.loads(proc.stdout)
                assert not reply["ok"] and reply["mode"] == "HUMAN" and message in reply["error"], reply
        np.testing.assert_array_equal(d.h.controller.human_goal, goal)  # nothing of a refused request was applied
        time.sleep(0.2)
        status = json.loads(ctl_run(tmp_path, "status").stdout)
        assert status["mode"] == "HUMAN" and status["damping_reason"] == "", status
        good = ctl_run(tmp_path, "target", "j0=0.3")
        assert good.returncode == 0 and json.loads(good.stdout)["ok"], good
        assert d.h.controller.human_goal[0] == 0.3
    finally:
        d.close()
    assert d.error is None and d.h.controller.sm.damping_reason == "operator quit"
    d.h.assert_no_unsafe_command()


# ---------------------------------------------------------------- 2. faults visible: log and dataset
def test_every_state_change_is_one_log_line_with_its_reason(caplog):
    """Issue 13.2: one ``logging`` line per change of mode, DAMPING at ERROR with the fault's reason."""
    caplog.set_level(logging.INFO, logger="upright.deploy")
    run(faults=[Fault("drop", "j1", ONSET)])
    records = [r for r in caplog.records if r.name == "upright.deploy"]
    assert [r.getMessage() for r in records] == [
        "ZERO_TORQUE -> RAMP_TO_DEFAULT (--auto-start)",
        "RAMP_TO_DEFAULT -> HOLD (ramp of 0.1 s done)",
        "HOLD -> POLICY (--auto-engage after 0.04 s of HOLD)",
        "POLICY -> DAMPING (fault: motor link fault: ['j1'])",
    ]
    assert records[-1].levelno == logging.ERROR


@pytest.mark.parametrize(
    ("faults", "cycles", "bits", "reason"),
    [
        ([Fault("drop", None, ONSET)], 320, SafetyFlag.LINK_FAULT | SafetyFlag.MOTOR_TIMEOUT, "motor link fault"),
        (
            [Fault("corrupt", "j2", ONSET)],
            320,
            SafetyFlag.LINK_FAULT | SafetyFlag.MOTOR_CRC,
            "motor link fault: ['j2']",
        ),
        ([Fault("stale_imu", None, ONSET)], 320, SafetyFlag.IMU_STALE, "IMU stale"),
        ([Fault("error_flag", "j1", ONSET, value=2)], 320, SafetyFlag.MOTOR_ERROR, "motor error flags: {'j1': 2}"),
        ([Fault("temperature", "h0", ONSET, value=90)], 320, SafetyFlag.OVERTEMP, "motor over 85.0 °C: ['h0']"),
    ],
    ids=["link-stall", "corrupt", "stale-imu", "motor-error", "overtemperature"],
)
def test_the_fault_frame_is_in_the_dataset_with_its_bits_and_reason(tmp_path, faults, cycles, bits, reason):
    """Issue 13.2: the frame of the fault closes its episode with the fault's bits (a fault found by the 500 Hz
    checks between two policy ticks is not overwritten by the next tick) and the episode names the reason."""
    h = run(faults=faults, cycles=cycles, dataset=tmp_path / "ds")
    frames, episodes = fault_frames(tmp_path / "ds")
    flags = SafetyFlag(frames["safety_flags"][-1])
    assert flags & bits == bits, flags
    assert frames["control_source"][-1] == 3 and frames["next.done"][-1]
    assert [e["upright/outcome"] for e in episodes] == ["damping"]
    assert reason in episodes[0]["upright/reason"] == h.controller.sm.damping_reason
    assert sum(bool(f & int(SafetyFlag.LINK_FAULT | SafetyFlag.IMU_STALE | SafetyFlag.MOTOR_ERROR
                            | SafetyFlag.OVERTEMP)) for f in frames["safety_flags"]) == 1  # fmt: skip


def test_nan_on_the_first_policy_tick_is_in_the_dataset(tmp_path):
    """Issue 13.2: a NaN action on the very first POLICY tick used to leave no frame at all."""
    h = run(ConstantPolicy(0.05, nan_after=0), dataset=tmp_path / "ds")
    assert "NaN" in h.controller.sm.damping_reason
    frames, episodes = fault_frames(tmp_path / "ds")
    assert len(frames["frame_index"]) == 1 and frames["safety_flags"][0] & SafetyFlag.NONFINITE_ACTION
    assert episodes[0]["upright/outcome"] == "damping" and "NaN" in episodes[0]["upright/reason"]
    h.assert_no_unsafe_command()


def test_a_fault_outside_an_episode_is_a_one_frame_episode(tmp_path):
    """Issue 13.2: a link fault in HOLD (no episode is recorded in HOLD) is still in the dataset."""
    h = run(faults=[Fault("drop", "j1", 55)], dataset=tmp_path / "ds")
    assert h.controller.policy.calls == 0  # it never reached POLICY
    frames, episodes = fault_frames(tmp_path / "ds")
    assert len(frames["frame_index"]) == 1 and frames["safety_flags"][0] & SafetyFlag.LINK_FAULT
    assert frames["control_source"] == [3] and episodes[0]["upright/reason"] == "motor link fault: ['j1']"


def test_an_exception_in_the_loop_is_in_the_dataset(tmp_path):
    """Issue 13.2: the policy raising ends in damping, and its frame carries EXCEPTION and the reason."""
    h = Harness(ConstantPolicy(raise_after=5), cfg=LIVE_CFG, dataset=tmp_path / "ds")
    try:
        with pytest.raises(RuntimeError, match="policy crashed"):
            run_loop(h.controller, h.robot, max_cycles=2000, pace=False, install_signals=False)
    finally:
        h.close()
    frames, episodes = fault_frames(tmp_path / "ds")
    assert frames["safety_flags"][-1] & SafetyFlag.EXCEPTION and frames["control_source"][-1] == 3
    assert "policy crashed" in episodes[-1]["upright/reason"]
    h.assert_no_unsafe_command()


def test_episode_numbers_continue_the_dataset(tmp_path):
    """Issue 13.2: a second daemon run on the same dataset reports (ctl status) the dataset's episode_index."""
    run(dataset=tmp_path / "ds")
    h = run(dataset=tmp_path / "ds")
    frames = load_frames(tmp_path / "ds").to_pydict()
    assert sorted(set(frames["episode_index"])) == [0, 1]
    assert h.controller.episode == 1 and h.controller.status()["episode_index"] == 1


# ---------------------------------------------------------------- 2 and 3: the real processes
def wait_for_text(path: pathlib.Path, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = path.read_text() if path.exists() else ""
        if text in content:
            return content
        time.sleep(0.1)
    raise TimeoutError(f"'{text}' never appeared in {path}: {path.read_text()[-3000:] if path.exists() else ''}")


@pytest.mark.slow
def test_link_stall_of_the_sim_robot_is_logged_at_once_and_in_the_dataset(tmp_path, linear_policy):
    """Issue 13.2, end to end: SIGSTOP the sim robot; while the daemon still runs (sending damping), its log already
    has the DAMPING line with the reason (as ``journalctl -f`` would show), and the dataset's last frame has
    LINK_FAULT (it used to show 0x42001: the next tick overwrote it)."""
    sim, links = start_sim_robot(tmp_path)
    daemon = start_daemon(tmp_path, linear_policy, links, "--auto-start", "--ramp-s", "0.2", "--auto-engage", "0.1")
    try:
        wait_for_text(tmp_path / "daemon.log", "HOLD -> POLICY", 90)
        time.sleep(0.5)
        os.killpg(sim.pid, signal.SIGSTOP)
        log = wait_for_text(tmp_path / "daemon.log", "POLICY -> DAMPING (fault: motor link fault", 60)
        assert daemon.poll() is None, log  # logged when it happened, not at exit
        os.killpg(sim.pid, signal.SIGCONT)
        assert stop(daemon) == 0
    finally:
        stop(daemon)
        os.killpg(sim.pid, signal.SIGCONT)
        stop(sim)
    frames, episodes = fault_frames(tmp_path / "dataset")
    assert frames["safety_flags"][-1] & SafetyFlag.LINK_FAULT, hex(frames["safety_flags"][-1])
    assert episodes[-1]["upright/reason"].startswith("motor link fault")


REPO = pathlib.Path(__file__).resolve().parents[2]
"""The repository root: the README's commands run from there."""


def readme_walkthrough() -> list[str]:
    """The commands of the README's 'Try it in simulation' block, without the last line (the list of commands)."""
    text = (REPO / "README.md").read_text()
    block = text.split("Try it in simulation", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert "|" in lines[-1]
    return lines[:-1]


def running_or_tipped_over(status: dict) -> bool:
    """The walkthrough's policy runs: still in POLICY, or damped by the tilt guard. The committed standup policy sits
    up (which arms the 1 rad tilt guard) and may tip back over, and then the daemon damps, as it would on the robot
    (the README says so); any other damping (e.g. overruns on a loaded machine) is a failure."""
    return status.get("mode") == "POLICY" or (
        status.get("mode") == "DAMPING" and str(status.get("damping_reason")).startswith("tilt")
    )


@pytest.mark.slow
def test_readme_sim_walkthrough_works_on_this_machine(tmp_path):
    """Issue 13.3: the README's commands, as written (the committed policy, default socket in $XDG_RUNTIME_DIR,
    default flags), reach POLICY and run it on this shared 2-core machine without an overrun fault; the daemon used to
    damp within ~1 s ("5 policy ticks in a row overran") because sim-robot cannot answer 30 frames per 2 ms cycle
    here. The committed policy sits up and may tip over: a tilt damping is what the README announces."""
    commands = readme_walkthrough()
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "xdg")}
    env.pop("UPRIGHT_DEPLOY_SOCKET", None)
    (tmp_path / "xdg").mkdir(mode=0o700)
    # the policy runs as written: the committed one (upright/assets/policies/g1_standup_ground), from the repository
    # root
    subst = {"/tmp/upright-sim": str(tmp_path / "links"), "deploy_data": str(tmp_path / "dataset")}
    assert all(old in " ".join(commands) for old in subst), commands
    assert " upright/assets/policies/" in commands[1], (
        f"the walkthrough should start from a committed policy: {commands[1]}"
    )
    procs = []

    def argv(line: str) -> list[str]:
        for old, new in subst.items():
            line = line.replace(old, new)
        words = line.split()
        assert words[0] == "upright-deploy", line
        return [sys.executable, "-m", "upright.deploy.cli", *words[1:]]

    def ctl_status() -> dict:
        out = subprocess.run(argv("upright-deploy ctl status"), env=env, capture_output=True, text=True, timeout=30)
        return json.loads(out.stdout) if out.stdout else {}

    try:
        sim_line, run_line, *ctl_lines = commands
        assert "sim-robot" in sim_line and " run " in f" {run_line} " and all(" ctl " in f" {c} " for c in ctl_lines)
        procs.append(subprocess.Popen(argv(sim_line), env=env, stdout=open(tmp_path / "sim.log", "w"), cwd=REPO,
                                      stderr=subprocess.STDOUT, start_new_session=True))  # fmt: skip
        wait_for_text(tmp_path / "sim.log", "sim-robot ready", 60)
        daemon = subprocess.Popen(
            argv(run_line),
            env=env,
            stdout=open(tmp_path / "daemon.log", "w"),
            cwd=REPO,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        procs.append(daemon)
        wait_for_text(tmp_path / "daemon.log", "upright-deploy: policy", 60)
        for line in ctl_lines:
            if line.endswith("resume"):
                deadline = time.monotonic() + 60
                while ctl_status().get("mode") != "HOLD":  # as the README says: wait for HOLD
                    assert time.monotonic() < deadline and daemon.poll() is None, (tmp_path / "daemon.log").read_text()
                    time.sleep(0.2)
            out = subprocess.run(argv(line), env=env, capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, (line, out.stdout, out.stderr, (tmp_path / "daemon.log").read_text())
        assert running_or_tipped_over(ctl_status()), (tmp_path / "daemon.log").read_text()
        time.sleep(3.0)
        status = ctl_status()
        assert running_or_tipped_over(status) and status["tick"] > 0, (status, (tmp_path / "daemon.log").read_text())
        assert str(tmp_path / "xdg") in (tmp_path / "daemon.log").read_text()  # the default socket of the README
        assert subprocess.run(argv("upright-deploy ctl quit"), env=env, capture_output=True, timeout=30).returncode == 0
        assert daemon.wait(60) == 0, (tmp_path / "daemon.log").read_text()
    finally:
        for proc in procs:
            stop(proc)
    frames = load_frames(tmp_path / "dataset").to_pydict()
    policy_frames = [f for f, s in zip(frames["safety_flags"], frames["control_source"]) if s == 0]
    assert len(policy_frames) >= 20 and not any(f & int(SafetyFlag.OVERRUN_FAULT) for f in frames["safety_flags"])
