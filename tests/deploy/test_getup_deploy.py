"""End to end: the committed get-up policy (``upright/assets/policies/g1_getup``) gets up through the daemon
(``upright-deploy run``) and ``upright-deploy sim-robot`` over pseudo-terminals, with the daemon's default safety layer
(target-delta and torque clamps, tilt limit), from lying on its back and on its front.

sim-robot runs in lockstep, so a loaded machine slows the run down without changing it."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest
from daemon_testlib import start_daemon, start_sim_robot, stop

from upright.dataset_io.lerobot import load_frames

ROOT = pathlib.Path(__file__).resolve().parents[2]
POLICY = ROOT / "upright" / "assets" / "policies" / "g1_getup" / "policy.onnx"

STANDING_HEAD = 1.0
"""Head above the feet, m, that counts as standing (the G1's is about 1.28 m upright, 0 lying)."""


@pytest.mark.slow
@pytest.mark.parametrize("posture", ["supine", "prone"])
def test_the_committed_getup_policy_stands_up_through_the_daemon(tmp_path, posture):
    """2 s ramp to the default pose lying down, then the policy for ~7.9 s: standing (pelvis above 0.7 m, head above
    1.0 m) through the last 2 s. Measured: standing from ~2 s after the policy engaged, head 1.27-1.28 m."""
    args = ["--lockstep-dt", "0.002", "--record", str(tmp_path / "trace.npz")]
    if posture == "prone":  # the sim-robot's supine start turned onto its front: pitch +90 degrees instead of -90
        from upright.deploy.sim_robot import g1_standup_scene

        qpos = g1_standup_scene().init_qpos.copy()
        qpos[3:7] = (math.sqrt(0.5), 0.0, math.sqrt(0.5), 0.0)
        np.savez(tmp_path / "prone.npz", qpos=qpos)
        args += ["--init-state", str(tmp_path / "prone.npz")]
    sim, links = start_sim_robot(tmp_path, *args)
    try:
        daemon = start_daemon(tmp_path, POLICY, links, "--auto-start", "--auto-engage", "0.1", "--duration", "10")
        assert daemon.wait(600) == 0, (tmp_path / "daemon.log").read_text()[-3000:]
    finally:
        stop(sim)
    log = (tmp_path / "daemon.log").read_text()
    assert "HOLD -> POLICY" in log and "POLICY -> DAMPING (stop: max_cycles)" in log, log[-3000:]
    trace = np.load(tmp_path / "trace.npz")
    time, head, pelvis = trace["time"], trace["head_height"], trace["qpos"][:, 2]
    assert head[time < 1.0].max() < 0.3  # it started lying down
    last = time > time[-1] - 2.0
    assert pelvis[last].min() > 0.7 and head[last].min() > STANDING_HEAD, (pelvis[last].min(), head[last].min())
    frames = load_frames(tmp_path / "dataset").to_pydict()
    assert sum(c == 0 for c in frames["control_source"]) > 300  # the policy's ticks (50 Hz) were recorded
