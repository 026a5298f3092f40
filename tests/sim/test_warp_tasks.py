"""The tasks run unchanged on ``sim.backend=warp`` (MuJoCo Warp on Warp's CPU device) and match ``sim.backend=native``.

1. Standup (G1), lockstep: two ``StandupEnv`` (4 envs, same seed, domain randomisation on with the same draws, so
   per-env masses, COM, Kp/Kd, friction and the per-substep action delay are exercised; no observation noise) get
   the same actions for 40 env steps (10 unactuated: the robot drops 0.5 m and lands; 30 with 0.3·N(0, 1)). After
   every step the Warp env's physics is set to the native env's state, so each step compares one env step of physics
   from the same state (free-running, two simulators of a falling robot drift apart chaotically).
   Tolerances per env step [measured 2026-11-26]: q 0.1 rad [0.026], 0.05·q̇ 0.2 [0.058], 0.25·ω 0.3 [0.070],
   projected gravity 0.02 [0.0040], actions and β exact; 90 % of all observation entries within 1e-3; each env's
   total reward within 5 % of the largest |reward| (+1e-6) in all but 3 of the 160 (env, step) entries [0; max
   |Δreward| 0.0069]. (MJX's lockstep test allows 1.0 and 0.05 for ω and gravity; Warp is closer.)
2. Lift (Panda), lockstep with the scripted expert's actions (computed on the native env) for 110 env steps
   (approach, grasp, lift; domain randomisation on, no observation noise or action delay). Tolerances per env step
   [measured]: joint positions 5e-3 [5.8e-4], 0.1·joint velocities 0.03 [1.7e-3], gripper-to-cube and
   cube-to-target 2e-3 m [4.1e-4, 3.7e-4], cube position 2e-3 m [3.7e-4]; contact counts equal in >= 95 % of the
   (env, step) entries [98.6 %; the rest differ by contacts on the margin]; the cubes end lifted (> 0.15 m).

The envs are module-scoped; Warp compiles the lift kernels once per machine (about 15 s here, ``~/.cache/warp``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco_warp")  # CI installs the [warp] extra; without it this module skips

from upright.tasks.lift.config import LiftEnvCfg
from upright.tasks.lift.env import LiftEnv
from upright.tasks.lift.expert import ScriptedExpert
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.env import StandupEnv

N = 4
STANDUP_STEPS, UNACTUATED = 40, 10
OBS_TOL = {"ang_vel": 0.3, "gravity": 0.02, "q": 0.1, "dq": 0.2, "action": 0.0, "beta": 0.0}
OBS_SLICES = {
    "ang_vel": slice(0, 3),
    "gravity": slice(3, 6),
    "q": slice(6, 29),
    "dq": slice(29, 52),
    "action": slice(52, 75),
    "beta": slice(75, 76),
}
LIFT_STEPS = 110
LIFT_SLICES = {
    "joint_pos": (slice(0, 9), 5e-3),
    "joint_vel": (slice(9, 18), 0.03),
    "gripper_to_cube": (slice(29, 32), 2e-3),
    "cube_to_target": (slice(32, 35), 2e-3),
}


@pytest.fixture(scope="module")
def standup_lockstep():
    cfg = StandupEnvCfg(num_envs=N, obs_noise=False, unactuated_steps=UNACTUATED)
    native = StandupEnv(cfg, SimCfg(backend="native", num_threads=1), seed=0)
    warp = StandupEnv(cfg, SimCfg(backend="warp"), seed=0)
    start = (native.sim.state.qpos.clone(), warp.sim.state.qpos.clone())
    start += (native.get_observations(), warp.get_observations())
    gen = torch.Generator().manual_seed(1)
    frames, rewards = ([], []), ([], [])
    for _ in range(STANDUP_STEPS):
        action = 0.3 * torch.randn(N, native.num_actions, generator=gen)
        for k, env in enumerate((native, warp)):
            obs, rew, done, _ = env.step(action)
            assert not done.any()
            frames[k].append(obs["actor"][:, -76:].clone())
            rewards[k].append(rew.clone())
        warp.sim.reset_envs(torch.arange(N), native.sim.state.qpos, native.sim.state.qvel)  # lockstep
        warp.state = warp._read_state()
    yield start, [torch.stack(f) for f in frames], [torch.stack(r) for r in rewards]
    native.close()
    warp.close()


def test_standup_resets_and_first_observations_agree(standup_lockstep):
    (q_n, q_w, obs_n, obs_w), *_ = standup_lockstep
    torch.testing.assert_close(q_w, q_n.float(), atol=1e-6, rtol=0)
    torch.testing.assert_close(obs_w["actor"], obs_n["actor"], atol=1e-5, rtol=0)


def test_standup_observations_and_rewards_agree(standup_lockstep):
    _, (frames_n, frames_w), (rew_n, rew_w) = standup_lockstep
    diff = (frames_n - frames_w).abs()
    measured = {name: round(diff[..., sl].max().item(), 4) for name, sl in OBS_SLICES.items()}
    print(f"standup on warp, max |Δobs| per part: {measured}")
    for name, tol in OBS_TOL.items():
        assert measured[name] <= tol, (name, measured[name], tol)
    assert torch.quantile(diff.flatten(), 0.9).item() < 1e-3
    assert frames_n[UNACTUATED:].abs().sum() > 0  # actuated frames are compared, not only zeros
    outliers = int(((rew_n - rew_w).abs() > 0.05 * rew_n.abs().max() + 1e-6).sum())
    print(f"reward outliers: {outliers}; max |Δreward| {(rew_n - rew_w).abs().max().item():.3g}")
    assert outliers <= 3


def _lift(backend: str) -> LiftEnv:
    cfg = LiftEnvCfg(num_envs=N)
    cfg.curriculum.enabled = False
    cfg.domain_rand.obs_noise_scale = 0.0
    cfg.domain_rand.action_delay_substeps = 0
    return LiftEnv(cfg, SimCfg(backend=backend, num_threads=1), device="cpu", seed=4)


def test_lift_lockstep_matches_native_and_lifts():
    native, warp = _lift("native"), _lift("warp")
    try:
        native.reset_all()
        warp.reset_all()
        expert = ScriptedExpert(native)
        worst = dict.fromkeys([*LIFT_SLICES, "cube_pos"], 0.0)
        same_contacts = []
        for step in range(LIFT_STEPS):
            actions = expert.act()
            obs_n, _, done_n, _ = native.step(actions)
            obs_w, _, done_w, _ = warp.step(actions)
            assert not done_n.any() and not done_w.any()
            for name, (sl, tol) in LIFT_SLICES.items():
                d = (obs_n["actor"][:, sl] - obs_w["actor"][:, sl]).abs().max().item()
                worst[name] = max(worst[name], d)
                assert d <= tol, f"step {step}: {name} differs by {d:.4g} > {tol}"
            cube = (native.state.cube_pos - warp.state.cube_pos).abs().max().item()
            worst["cube_pos"] = max(worst["cube_pos"], cube)
            assert cube <= 2e-3, f"step {step}: cube position differs by {cube:.4g} m"
            same_contacts.append(native.sim._batch.bind("ncon") == warp.sim.contact_counts().numpy())
            s = native.sim.state
            warp.sim.reset_envs(torch.arange(N), s.qpos, s.qvel)  # lockstep
            warp.state = warp._read_state()
            warp.reached.copy_(native.reached)
        same = float(np.mean(same_contacts))
        print(
            "lift on warp, largest per-step differences: "
            + ", ".join(f"{k} {v:.3g}" for k, v in worst.items())
            + f"; contact counts equal in {100 * same:.1f} % of (env, step)"
        )
        assert same >= 0.95
        assert native.state.cube_pos[:, 2].min() > 0.15 and warp.state.cube_pos[:, 2].min() > 0.15
    finally:
        native.close()
        warp.close()
