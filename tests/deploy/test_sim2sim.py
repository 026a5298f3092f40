"""End to end: the daemon (`upright-deploy run`) drives `upright-deploy sim-robot` over pseudo-terminals,
byte for byte as on the real robot; compared with the training env, scripted through `upright-deploy ctl`,
and killed with SIGKILL.

sim-robot runs in lockstep (physics advances with the daemon's I/O tick), so a loaded machine slows the
run down but does not change it: the daemon + sim-robot trajectory is reproducible bit for bit.
"""

from __future__ import annotations

import json
import os
import signal
import time

import numpy as np
import onnxruntime as ort
import pyarrow.parquet as pq
import pytest
import torch
from daemon_testlib import ctl, start_daemon, start_sim_robot, stop, wait_for_mode

from upright.dataset_io.lerobot import load_frames, read_journal
from upright.deploy import safety as S
from upright.deploy.metadata import load_policy_spec
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.curriculum import CurriculumCfg
from upright.tasks.standup.env import StandupEnv
from upright.tasks.standup.randomization import DomainRandCfg

PARITY_ARGS = [
    "--auto-start",
    "--ramp-s",
    "0.2",
    "--auto-engage",
    "0.1",
    "--policy-ramp-s",
    "0",
    "--max-target-delta",
    "none",
    "--no-torque-clamp",
    "--tilt-limit",
    "none",
]
"""Training-equivalent settings: no entry blend, no delta or torque clamp (the motors' torque limits still
apply, as in training). The daemon's target bounds (the joint range widened by torque limit / Kp,
:func:`upright.deploy.safety.target_bounds`) cannot be switched off; the env comparator applies them."""


STANDING_HEAD = 0.8
"""Head height (m, above the feet) that counts as standing: the G1's is about 1.2 m upright, 0 lying down."""


def env_rollout(policy, qpos, qvel, steps):
    """The training env from the given physics state, as at its first actuated step, with the deploy's
    target bounds on the PD targets; returns head heights after each step, actions and the first frame.
    As on the robot: no pull force, β fixed at the policy's exported action scale."""
    beta = float(load_policy_spec(policy).action_scale)
    curriculum = CurriculumCfg(enabled=False, beta_init=beta, beta_min=beta)
    env = StandupEnv(
        StandupEnvCfg(num_envs=1, obs_noise=False, curriculum=curriculum, domain_rand=DomainRandCfg(enabled=False)),
        SimCfg(num_threads=1),
    )  # nominal robot
    step = env.sim.step
    info = env.robot
    lo, hi = S.target_bounds(
        env.joint_lower.double().numpy(), env.joint_upper.double().numpy(), info.kp, info.torque_limit, "torque"
    )  # all 29 actuators, as the daemon bounds every target it sends
    lo, hi = torch.from_numpy(lo).to(env.joint_lower), torch.from_numpy(hi).to(env.joint_upper)
    env.sim.step = lambda ctrl, n: step(torch.maximum(torch.minimum(ctrl, hi), lo), n)
    env.sim.reset_envs(torch.tensor([0]), torch.tensor(qpos[None]), torch.tensor(qvel[None]))
    env.episode_length_buf[:] = env.cfg.unactuated_steps
    env.state = env._read_state()
    env.update_observations()
    frame0 = env.obs_history.buffer[0, -1].numpy().copy()
    session = ort.InferenceSession(str(policy), providers=["CPUExecutionProvider"])
    heads, actions = [], []
    try:
        for _ in range(steps):
            a = session.run(None, {"obs": env.get_observations()["actor"].numpy()})[0]
            env.step(torch.from_numpy(a))
            actions.append(a[0])
            heads.append(float(env.state.head_height[0]))
    finally:
        env.close()
    return np.array(heads), np.array(actions), frame0


def run_parity(tmp_path, policy, duration):
    sim, links = start_sim_robot(tmp_path, "--lockstep-dt", "0.002", "--record", str(tmp_path / "trace.npz"))
    try:
        daemon = start_daemon(tmp_path, policy, links, *PARITY_ARGS, "--duration", str(duration))
        assert daemon.wait(180) == 0, (tmp_path / "daemon.log").read_text()[-3000:]
    finally:
        stop(sim)
    frames = load_frames(tmp_path / "dataset").to_pydict()
    trace = np.load(tmp_path / "trace.npz")
    n = int(sum(c == 0 for c in frames["control_source"]))  # policy frames (the last one is the stop's damping frame)
    t0 = frames["imu_time_us"][0] / 1e6  # the IMU clock of lockstep sim-robot is its physics time
    times = trace["time"]
    i0 = int(np.argmin(np.abs(times - t0)))
    assert abs(times[i0] - t0) < 1e-9
    idx = [int(np.argmin(np.abs(times - (t0 + 0.02 * (k + 1))))) for k in range(n)]
    env_head, env_actions, env_frame0 = env_rollout(policy, trace["qpos"][i0], trace["qvel"][i0], n)
    return {
        "daemon_head": trace["head_height"][idx],
        "env_head": env_head,
        "n": n,
        "daemon_frame0": np.array(frames["observation.policy_obs"][0]),
        "env_frame0": env_frame0,
        "daemon_actions": np.array(frames["observation.policy_action"][:n]),
        "env_actions": env_actions,
    }


def check_first_tick(r):
    # the whole chain (motor bytes, scalings, IMU frame, observation builder, onnxruntime) gives the env's input
    # and action at the first policy tick, up to the motors' quantisation (q 3e-5 rad, dq 4e-3 rad/s)
    np.testing.assert_allclose(r["daemon_frame0"], r["env_frame0"], atol=5e-4, rtol=0)
    np.testing.assert_allclose(r["daemon_actions"][0], r["env_actions"][0], atol=5e-3, rtol=0)


@pytest.mark.slow
def test_head_trajectory_matches_training_env_linear_policy(tmp_path, linear_policy):
    """A smooth policy: the head-height trajectory matches the env's over the whole run (2 s)."""
    r = run_parity(tmp_path, linear_policy, duration=2.6)
    assert r["n"] >= 90
    check_first_tick(r)
    err = np.abs(r["daemon_head"] - r["env_head"])
    assert err.max() < 0.03, err.max()


HEAD_RISE = 0.15
"""Rise of the head (m, above the feet) from its height at the first policy tick that counts as the policy
lifting the head in the env (a sit-up from lying is about 0.3 m; standing about 1.3 m)."""


@pytest.mark.slow
def test_head_rises_as_in_training_env_trained_policy(tmp_path, latest_policy):
    """The trained policy (upright/assets/policies/, else the newest checkpoint under logs/).

    Trained policies saturate their actions, so daemon and env trajectories part after a few tenths of a second
    (motor quantisation of 3e-5 rad grows into cm within 0.25 s): the daemon must follow the env for the first
    0.16 s; where the env's head rises by more than HEAD_RISE over the 3.7 s run, the daemon's head must rise
    too, by at least half as much at its highest and on average over the last second; and if the env stands
    up (head above 0.8 m for the last 0.5 s), the daemon's robot must stand up too."""
    policy, source = latest_policy
    if source is None:
        pytest.skip(
            "no trained policy in upright/assets/policies/ or logs/standup/ "
            "(the linear-policy test covers the pipeline)"
        )
    r = run_parity(tmp_path, policy, duration=4.0)
    check_first_tick(r)
    err = np.abs(r["daemon_head"] - r["env_head"])
    assert err[:8].max() < 0.03, err[:8]
    env_head, daemon_head = r["env_head"], r["daemon_head"]
    env_rise = env_head.max() - env_head[0]
    if env_rise > HEAD_RISE:
        last_s = int(1.0 / 0.02)
        assert daemon_head.max() - daemon_head[0] > 0.5 * env_rise, (env_head.max(), daemon_head.max())
        env_late = env_head[-last_s:].mean() - env_head[0]
        daemon_late = daemon_head[-last_s:].mean() - daemon_head[0]
        assert daemon_late > 0.5 * env_late, (env_late, daemon_late)
    last = int(0.5 / 0.02)
    if env_head[-last:].min() > STANDING_HEAD:  # this policy stands up in the env (head up for the last 0.5 s)
        assert daemon_head[-last:].min() > STANDING_HEAD, daemon_head[-last:]


@pytest.mark.slow
def test_scripted_intervention_marks_exactly_those_frames(tmp_path, linear_policy):
    sim, links = start_sim_robot(tmp_path, "--lockstep-dt", "0.002")
    daemon = start_daemon(tmp_path, linear_policy, links, "--auto-start", "--ramp-s", "0.2", "--auto-engage", "0.1")
    try:
        wait_for_mode(tmp_path, "POLICY")
        time.sleep(0.2)
        take = ctl(tmp_path, "takeover")
        assert take["ok"] and take["mode"] == "HUMAN", take
        assert ctl(tmp_path, "target", "left_knee_joint=0.6")["ok"]
        time.sleep(0.3)
        release = ctl(tmp_path, "release")
        assert release["ok"] and release["mode"] == "POLICY", release
        assert not ctl(tmp_path, "release")["ok"]  # not possible in POLICY
        time.sleep(0.1)
        pause = ctl(tmp_path, "pause")
        time.sleep(0.1)
        resume = ctl(tmp_path, "resume")
        time.sleep(0.1)
        success = ctl(tmp_path, "mark-success")
        time.sleep(0.1)
        assert ctl(tmp_path, "quit")["ok"]
        assert daemon.wait(60) == 0, (tmp_path / "daemon.log").read_text()[-3000:]
    finally:
        stop(daemon)
        stop(sim)
    assert take["episode_index"] == release["episode_index"] == success["episode_index"] == 0
    frames = load_frames(tmp_path / "dataset").to_pydict()
    ep0 = [i for i, e in enumerate(frames["episode_index"]) if e == 0]
    intervention = [frames["intervention"][i] for i in ep0]
    source = [frames["control_source"][i] for i in ep0]
    f_take, f_release = take["frame_index"], release["frame_index"]
    assert intervention == [f_take <= k < f_release for k in range(len(ep0))]
    assert [s == 1 for s in source] == intervention  # control_source human exactly there
    assert source[pause["frame_index"] : resume["frame_index"]] == [2] * (resume["frame_index"] - pause["frame_index"])
    assert source[resume["frame_index"]] == 0
    # the episode ends on mark-success: done and reward on that frame, outcome success
    assert len(ep0) == success["frame_index"] + 1
    assert frames["next.done"][ep0[-1]] and frames["next.reward"][ep0[-1]] == 1.0
    assert not any(frames["next.done"][i] for i in ep0[:-1])
    # bumpless takeover: the first human target equals the last policy target (then rate-limited moves)
    tgt = np.array([frames["action.joint_target"][i] for i in ep0])
    assert np.abs(tgt[f_take] - tgt[f_take - 1]).max() <= 0.02 + 1e-6
    episodes = pq.read_table(tmp_path / "dataset" / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pylist()
    assert [e["upright/outcome"] for e in episodes] == ["success", "stopped"]
    assert frames["control_source"][-1] == 3 and frames["next.done"][-1]  # quit: a damping frame closes episode 1


def test_sigkill_mid_episode_keeps_every_flushed_frame(tmp_path, linear_policy):
    sim, links = start_sim_robot(tmp_path, "--lockstep-dt", "0.002")
    daemon = start_daemon(tmp_path, linear_policy, links, "--auto-start", "--ramp-s", "0.1", "--auto-engage", "0.05")
    progress = tmp_path / "dataset" / "journal" / "progress.json"
    try:
        deadline = time.monotonic() + 90
        flushed = 0
        while time.monotonic() < deadline and flushed < 40:
            time.sleep(0.05)
            if progress.exists():
                flushed = json.loads(progress.read_text())["frames_flushed"]
        assert flushed >= 40, (tmp_path / "daemon.log").read_text()[-3000:]
        os.killpg(daemon.pid, signal.SIGKILL)  # the daemon and its logger process, mid-episode
        daemon.wait(10)
    finally:
        stop(daemon)
        stop(sim)
    journal = tmp_path / "dataset" / "journal" / "episode_000000.arrows"
    table = read_journal(journal)
    assert table.num_rows >= flushed
    rows = table.to_pydict()
    assert rows["frame_index"] == list(range(table.num_rows))
    assert all(np.isfinite(v).all() for v in rows["observation.state"]) and all(
        np.isfinite(v).all() for v in rows["action"]
    )
    assert np.all(np.diff(rows["t_mono_ns"]) > 0) and set(rows["control_source"]) == {0}
    from upright.deploy.cli import main

    assert main(["recover", str(tmp_path / "dataset")]) == 0
    frames = load_frames(tmp_path / "dataset").to_pydict()
    assert frames["frame_index"] == rows["frame_index"] and frames["t_mono_ns"] == rows["t_mono_ns"]
