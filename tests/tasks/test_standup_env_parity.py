"""The standup task on ``sim.backend=mjx`` matches ``sim.backend=native``: observations and rewards, term by term.

Two ``StandupEnv`` (4 envs, same seed, ``obs_noise=False``, domain randomisation on: the same samples on both
backends) get the same actions for 40 env steps:
10 unactuated (the robot drops from 0.5 m and lands) and 30 with random actions (0.3·N(0, 1)).

The comparison is made in lockstep: after every step, the MJX env's physics is set to the native
env's state, so each step compares one env step of physics from the same state. Free-running, two
simulators of a falling, contact-rich robot drift apart (chaotically, and because MJX orients
pyramidal friction cones differently, see ``tests/test_sim_mjx.py``); lockstep keeps what is
compared to what the task sees from one step, which is what must agree.

Tolerances, per env step (measured values in brackets):

- observation frame: actions and β exactly; q 0.1 rad [0.034], 0.05·q̇ 0.2 [0.06],
  0.25·ω 1.0 [0.32], projected gravity 0.05 [0.016] (the maxima come from touchdown steps);
  90 % of all entries within 1e-3;
- each reward term's contribution: |Δ| <= 5 % of that term's largest |value| (+1e-6) in all but
  3 of the 160 (env, step) entries (a threshold term flips when a state sits on its threshold)
  [max relative Δ: 1.7 %, no flips];
- per-group rewards: the same rule.
"""

from __future__ import annotations

import pytest
import torch

from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.env import StandupEnv

pytest.importorskip("jax")  # CI installs the [mjx] extra; without jax this module skips

N, STEPS, UNACTUATED = 4, 40, 10
OBS_TOL = {"ang_vel": 1.0, "gravity": 0.05, "q": 0.1, "dq": 0.2, "action": 0.0, "beta": 0.0}
OBS_SLICES = {
    "ang_vel": slice(0, 3),
    "gravity": slice(3, 6),
    "q": slice(6, 29),
    "dq": slice(29, 52),
    "action": slice(52, 75),
    "beta": slice(75, 76),
}
TERM_REL_TOL, MAX_OUTLIERS = 0.05, 3


def _recording(env: StandupEnv) -> list:
    """Record (group rewards, per-term contributions) of every reward computation of ``env``."""
    records: list = []
    compute = env.reward_manager.compute

    def wrapped(state, *args):
        groups, terms = compute(state, *args)
        records.append((groups.clone(), {k: v.clone() for k, v in terms.items()}))
        return groups, terms

    env.reward_manager.compute = wrapped
    return records


@pytest.fixture(scope="module")
def lockstep():
    cfg = StandupEnvCfg(num_envs=N, obs_noise=False, unactuated_steps=UNACTUATED)
    native = StandupEnv(cfg, SimCfg(backend="native", num_threads=1), seed=0)
    mjx = StandupEnv(cfg, SimCfg(backend="mjx"), seed=0)
    start = (native.sim.state.qpos.clone(), mjx.sim.state.qpos.clone())
    start += (native.get_observations(), mjx.get_observations())
    rec_n, rec_x = _recording(native), _recording(mjx)
    gen = torch.Generator().manual_seed(1)
    frames_n, frames_x = [], []
    for _ in range(STEPS):
        action = 0.3 * torch.randn(N, native.num_actions, generator=gen)
        obs_n, _, done_n, _ = native.step(action)
        obs_x, _, done_x, _ = mjx.step(action)
        assert not done_n.any() and not done_x.any()
        frames_n.append(obs_n["actor"][:, -76:].clone())
        frames_x.append(obs_x["actor"][:, -76:].clone())
        # lockstep: the MJX env continues from the native env's physical state
        mjx.sim.reset_envs(torch.arange(N), native.sim.state.qpos, native.sim.state.qvel)
        mjx.state = mjx._read_state()
    return start, torch.stack(frames_n), torch.stack(frames_x), rec_n, rec_x


def test_reset_states_and_first_observations_agree(lockstep):
    (q_n, q_x, obs_n, obs_x), *_ = lockstep
    torch.testing.assert_close(q_x, q_n.float(), atol=1e-6, rtol=0)
    torch.testing.assert_close(obs_x["actor"], obs_n["actor"], atol=1e-5, rtol=0)


def test_observations_agree(lockstep):
    _, frames_n, frames_x, *_ = lockstep
    diff = (frames_n - frames_x).abs()
    measured = {name: diff[..., sl].max().item() for name, sl in OBS_SLICES.items()}
    print(f"max |Δobs| per part: {measured}")
    for name, tol in OBS_TOL.items():
        assert measured[name] <= tol, (name, measured[name], tol)
    assert torch.quantile(diff.flatten(), 0.9).item() < 1e-3
    assert frames_n[UNACTUATED:].abs().sum() > 0  # actuated frames are compared, not only zeros


def _outliers(a: torch.Tensor, b: torch.Tensor) -> tuple[int, float]:
    tol = TERM_REL_TOL * a.abs().max().item() + 1e-6
    delta = (a - b).abs()
    return int((delta > tol).sum()), delta.max().item()


def test_reward_terms_agree(lockstep):
    *_, rec_n, rec_x = lockstep
    assert len(rec_n) == len(rec_x) == STEPS
    report = {}
    for key in rec_n[0][1]:
        a = torch.stack([r[1][key] for r in rec_n])
        b = torch.stack([r[1][key] for r in rec_x])
        outliers, worst = _outliers(a, b)
        report[key] = worst
        assert outliers <= MAX_OUTLIERS, (key, outliers, worst, a.abs().max().item())
    print(f"max |Δ| per reward term: {report}")
    groups_n = torch.stack([r[0] for r in rec_n])
    groups_x = torch.stack([r[0] for r in rec_x])
    for g in range(groups_n.shape[-1]):
        outliers, worst = _outliers(groups_n[..., g], groups_x[..., g])
        assert outliers <= MAX_OUTLIERS, (g, outliers, worst)
