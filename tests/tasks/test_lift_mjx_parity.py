"""The lift task on ``sim.backend=mjx`` matches ``sim.backend=native`` (same Menagerie model, same contact set).

1. Lockstep: two ``LiftEnv`` (4 envs, same seed, domain randomisation on with the same draws, no observation noise
   and no action delay)
   get the scripted expert's actions (computed on the native env) for 110 env steps: approach, descent, grasp and
   lift, so the comparison covers pad-cube and cube-floor contacts. After every step the MJX env's physics is set to
   the native env's state, so each step compares one env step of physics from the same state (free-running, two
   contact-rich simulators drift apart; what must agree is what the task sees from one step).
   Tolerances per env step: joint positions 5e-3 (rad, m), joint velocities 0.3 (rad/s), cube position 2e-3 m,
   gripper-to-cube and cube-to-target vectors 2e-3 m; each reward group within 5 % of its largest value (+1e-6) in all
   but 2 % of the (env, step) entries (the reach latch and the floor contact flip when a state sits on a threshold).
2. Free-running: the expert, acting on the MJX env's own state, lifts the cube to the target in at least 3 of 4 envs.

Measured (2026-11-24, ``UPRIGHT_LIFT_MJX_PARITY=1``, ``UPRIGHT_LIFT_MJX_DEVICE=cuda|cpu``): on an H100 (CUDA JAX
0.11.2, 102 s with the compile) and on a 16-core Xeon (CPU JAX, 61 s), the largest per-step differences of the
lockstep run were joint positions 6.7e-4, joint velocities 0.16 rad/s (CUDA) / 0.068 rad/s (CPU), gripper-to-cube 4.1e-4
m, cube-to-target and cube position 3.7e-4 m, and 0.45 % of the reward-group entries outside 5 %: every tolerance
above holds with a margin of 1.9x or more. Free-running, the expert succeeded in 3 of the 4 envs on MJX on both
devices; the fourth starts with the cube at x = 0.875 m, the far edge of the reach, where the expert succeeds in
88 % of native episodes (``docs/lift_learning.md``) and where it succeeded on native with the same draws; the test
asks for 3 of 4. Still opt-in: on the 2-core CI machine the MJX compile alone took 2.5 min on a loaded CPU and a
whole run did not finish within 13 min there.
"""

from __future__ import annotations

import os

import pytest
import torch

from upright.tasks.lift.config import LiftEnvCfg
from upright.tasks.lift.env import LiftEnv
from upright.tasks.lift.expert import ScriptedExpert
from upright.tasks.standup.config import SimCfg

pytest.importorskip("jax")  # CI installs the [mjx] extra; without jax this module skips
if os.environ.get("UPRIGHT_LIFT_MJX_PARITY") != "1":
    pytest.skip(
        "lift MJX parity is opt-in (61 s on 16 cores, 102 s on an H100; it has not finished within 13 min on the "
        "2-core CI machine); run with UPRIGHT_LIFT_MJX_PARITY=1 [UPRIGHT_LIFT_MJX_DEVICE=cuda]",
        allow_module_level=True,
    )
pytestmark = pytest.mark.timeout(1200)  # MJX compiles the lift step for ~2.5 min on a loaded 2-core CPU (cached after)

N, STEPS = 4, 110
DEVICE = os.environ.get("UPRIGHT_LIFT_MJX_DEVICE", "cpu")
"""Torch device of the MJX env (``cuda``: MJX on the GPU); the native env is on the CPU."""
SLICES = {
    "joint_pos": (slice(0, 9), 5e-3),
    "joint_vel": (slice(9, 18), 0.3 * 0.1),
    "gripper_to_cube": (slice(29, 32), 2e-3),
    "cube_to_target": (slice(32, 35), 2e-3),
}
GROUP_REL_TOL, MAX_OUTLIER_FRACTION = 0.05, 0.02


def make(backend: str) -> LiftEnv:
    cfg = LiftEnvCfg(num_envs=N)
    cfg.curriculum.enabled = False
    cfg.domain_rand.obs_noise_scale = 0.0
    cfg.domain_rand.action_delay_substeps = 0  # one compiled MJX step program (a delay adds a per-substep one)
    sim = SimCfg(backend=backend, num_threads=1) if backend == "native" else SimCfg(backend=backend)
    return LiftEnv(cfg, sim, device="cpu" if backend == "native" else DEVICE, seed=4)


@pytest.fixture(scope="module")
def envs():
    native, mjx = make("native"), make("mjx")
    yield native, mjx
    native.close()
    mjx.close()


def test_lockstep_observations_and_rewards_agree(envs):
    native, mjx = envs
    native.reset_all()
    mjx.reset_all()
    torch.testing.assert_close(mjx.target_pos.cpu(), native.target_pos)
    expert = ScriptedExpert(native)
    groups_n, groups_x = [], []
    worst = dict.fromkeys([*SLICES, "cube_pos"], 0.0)
    for step in range(STEPS):
        actions = expert.act()
        obs_n, _, done_n, ex_n = native.step(actions)
        obs_x, _, done_x, ex_x = mjx.step(actions.to(mjx.device))
        assert not done_n.any() and not done_x.cpu().any()
        for name, (sl, tol) in SLICES.items():
            diff = (obs_n["actor"][:, sl] - obs_x["actor"][:, sl].cpu()).abs().max().item()
            worst[name] = max(worst[name], diff)
            assert diff <= tol, f"step {step}: {name} differs by {diff:.4g} > {tol}"
        cube = (native.state.cube_pos - mjx.state.cube_pos.cpu()).abs().max().item()
        worst["cube_pos"] = max(worst["cube_pos"], cube)
        assert cube <= 2e-3, f"step {step}: cube position differs by {cube:.4g} m"
        groups_n.append(ex_n["reward_groups"])
        groups_x.append(ex_x["reward_groups"].cpu())
        s = native.sim.state
        mjx.sim.reset_envs(torch.arange(N, device=mjx.device), s.qpos.to(mjx.device), s.qvel.to(mjx.device))  # lockstep
        mjx.state = mjx._read_state()
        mjx.reached.copy_(native.reached)
    assert native.state.cube_pos[:, 2].min() > 0.15  # the sequence really lifted the cubes
    gn, gx = torch.stack(groups_n), torch.stack(groups_x)
    scale = gn.abs().amax(dim=(0, 1), keepdim=True) + 1e-6
    outliers = ((gn - gx).abs() > GROUP_REL_TOL * scale).float().mean().item()
    print(
        f"lift MJX parity on {DEVICE}, largest per-step differences: "
        + ", ".join(f"{k} {v:.3g}" for k, v in worst.items())
        + f"; reward-group outliers {100 * outliers:.2f} %"
    )
    assert outliers <= MAX_OUTLIER_FRACTION, f"{100 * outliers:.1f} % of reward-group entries differ by > 5 %"


def test_expert_lifts_the_cube_on_mjx(envs):
    _, mjx = envs
    mjx.reset_all()
    expert = ScriptedExpert(mjx)
    success = torch.zeros(N, dtype=torch.bool)
    for _ in range(149):
        mjx.step(expert.act())
        success |= mjx.success_once.cpu()
    assert int(success.sum()) >= N - 1, success  # one far-edge start may fail (module docstring)
