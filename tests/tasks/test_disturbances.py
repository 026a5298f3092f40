"""Robustness disturbances of the standup env: the action delay (per-substep targets), torque dropout, pushes and
observation noise (its scale and its generator).

Expected values come from the compiled model, ``upright.robots.g1.robot_info()`` and the physics' own outputs
(``actuator_force``, qpos, qvel), never from the randomiser's code paths. Domain randomisation itself (config,
sampling, actuators, masses, restitution): ``test_randomization.py``.
"""

from __future__ import annotations

import mujoco
import torch
from randomization_testlib import make_env

from upright.managers.randomization import ActionDelay
from upright.robots import g1
from upright.sim import make_sim
from upright.tasks.standup.randomization import DisturbanceCfg, DomainRandCfg
from upright.tasks.standup.scene import standup_scene

# ---------------------------------------------------------------------------------------- delay


def _floating_g1(model: mujoco.MjModel, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    q = torch.tensor(model.qpos0, dtype=torch.float32).repeat(n, 1)
    q[:, 2] = 3.0
    q[:, 7:] = torch.tensor(g1.robot_info().default_pose, dtype=torch.float32)
    return q, torch.zeros(n, model.nv)


def test_delayed_joints_respond_d_substeps_later():
    """Envs with delays 0, 3, 8, 16 substeps get one command stream (a step of +0.3 rad at env step 5);
    env 4 never gets the step. Each env's joints leave env 4's trajectory exactly d substeps after env 0's."""
    model = standup_scene()
    delays = torch.tensor([0, 3, 8, 16, 0])
    n, dec = delays.numel(), 4
    sim = make_sim("native", model, n, num_threads=1)
    q, v = _floating_g1(model, n)
    sim.reset_envs(torch.arange(n), q, v)
    pose = q[:, 7:].clone()
    queue = ActionDelay(n, model.nu, dec, max_delay=16)
    queue.reset(torch.arange(n), pose, delays)
    change_step = 5
    joints = []
    for k in range(12):
        ctrl = pose.clone()
        if k >= change_step:
            ctrl[:4] += 0.3
        out = queue.push(ctrl)
        per_substep = out if out.dim() == 3 else out.expand(dec, -1, -1)
        for j in range(dec):
            sim.step(per_substep[j], 1)
            joints.append(sim.state.qpos[:, 7:].double().clone())
    joints = torch.stack(joints)  # (substeps, N, nu): state after each substep
    moved = (joints[:, :4] - joints[:, 4:5]).abs().amax(-1) > 0  # (substeps, 4)
    onset = moved.float().argmax(0)  # first substep whose end state differs from the unchanged env
    t0 = change_step * dec
    assert onset.tolist() == (t0 + delays[:4]).tolist()
    assert not moved[:t0].any()


def test_env_passes_delayed_per_substep_targets_to_the_sim():
    """A fixed 6-substep delay (longer than an env step): substeps 0-1 get the target of two env steps ago,
    2-3 the target of the previous one; with no delay anywhere the sim gets the held (N, nu) control."""
    env = make_env(
        2,
        unactuated_steps=0,
        domain_rand=DomainRandCfg(enabled=False),
        disturbance=DisturbanceCfg(action_delay_substeps=6),
    )
    received = []
    step = env.sim.step
    env.sim.step = lambda ctrl, n: (received.append(ctrl.clone()), step(ctrl, n))[1]
    targets = []
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        env.step(0.3 * torch.randn(2, 23, generator=gen))
        t = env.default_pose.expand(2, -1).clone()
        t[:, env._policy_ids] = env.p_target
        targets.append(t)
    for k in range(2, 5):
        ctrl = received[k]
        assert ctrl.shape == (4, 2, env.model.nu)
        for j, lag in enumerate((2, 2, 1, 1)):
            torch.testing.assert_close(ctrl[j], targets[k - lag])
    undelayed = make_env(2, unactuated_steps=0, domain_rand=DomainRandCfg(enabled=False))
    received.clear()
    step2 = undelayed.sim.step
    undelayed.sim.step = lambda ctrl, n: (received.append(ctrl.clone()), step2(ctrl, n))[1]
    undelayed.step(torch.zeros(2, 23))
    assert received[0].shape == (2, undelayed.model.nu)


# ---------------------------------------------------------------------------------------- disturbances


def test_torque_dropout_zeroes_exactly_the_dropped_joints():
    env = make_env(8, unactuated_steps=0, disturbance=DisturbanceCfg(torque_dropout=0.3))
    pol = torch.tensor(g1.robot_info().policy_joint_ids)
    rates = []
    for _ in range(5):
        env.step(0.5 * torch.randn(8, 23))
        dropped = env.randomizer.dropped
        force = env.sim.state.actuator_force[:, pol]
        assert torch.all(force[dropped] == 0)
        assert (force[~dropped] != 0).float().mean() > 0.99
        rates.append(dropped.float().mean())
    assert 0.2 < float(torch.stack(rates).mean()) < 0.4
    none = make_env(2, unactuated_steps=0, disturbance=DisturbanceCfg(torque_dropout=1.0))
    none.step(torch.ones(2, 23))
    assert torch.all(none.sim.state.actuator_force[:, pol] == 0)
    held = torch.tensor(g1.robot_info().held_joint_ids)
    assert torch.any(none.sim.state.actuator_force[:, held] != 0)  # held joints unaffected


def test_pushes_kick_the_pelvis_by_the_set_velocity():
    """A 1 m/s push (impulse M·Δv on the pelvis over one env step) moves the pelvis sideways; its twin without
    pushes (same seed and actions) does not. Pushes wait for the end of the unactuated start."""
    kw = dict(unactuated_steps=3, domain_rand=DomainRandCfg(enabled=False), init_height=1.5)
    pushed = make_env(2, seed=1, disturbance=DisturbanceCfg(push_velocity=1.0, push_interval_s=0.01), **kw)
    calm = make_env(2, seed=1, **kw)
    for _ in range(3):
        pushed.step(torch.zeros(2, 23))
        calm.step(torch.zeros(2, 23))
        assert torch.all(pushed.randomizer.push_force == 0)
    pushed.step(torch.zeros(2, 23))
    calm.step(torch.zeros(2, 23))
    force = pushed.randomizer.push_force
    mass = float(pushed.model.body_mass.sum())
    torch.testing.assert_close(force[:, :2].norm(dim=1), torch.full((2,), mass * 1.0 / 0.02))
    assert torch.all(force[:, 2] == 0)
    # in the air (no contact), the whole robot's momentum changes by the impulse: the pelvis leads it
    dv = (pushed.sim.state.qvel[:, :2] - calm.sim.state.qvel[:, :2]).double()
    cos = (dv * force[:, :2].double()).sum(1) / (dv.norm(dim=1) * force[:, :2].double().norm(dim=1))
    assert torch.all(cos > 0.9) and torch.all(dv.norm(dim=1) > 0.7)


def test_obs_noise_scale_multiplies_hosts_noise_even_when_obs_noise_is_off():
    env = make_env(16, unactuated_steps=0, disturbance=DisturbanceCfg(obs_noise_scale=2.0))
    env.step(torch.zeros(16, 23))
    from upright.managers.observation import compute_frame
    from upright.tasks.standup.observations import OBS_CLIP, OBSERVATION_TERMS

    def clean(state):
        return compute_frame(OBSERVATION_TERMS, state, clip=OBS_CLIP)

    diff = (env.obs_history.buffer[:, -1] - clean(env.state)).abs()
    q = diff[:, 6:29]  # joint positions: HoST noise ±0.01 rad
    assert q.max() <= 0.02 + 1e-6 and q.max() > 0.015
    off = make_env(2, unactuated_steps=0)
    off.step(torch.zeros(2, 23))
    torch.testing.assert_close(off.obs_history.buffer[:, -1], clean(off.state))


def test_obs_noise_comes_from_the_env_seed_not_the_global_rng():
    """Two envs with the same seed see the same noisy observations whatever torch's global RNG does; another
    seed sees other noise (evaluation and robustness rows are reproducible from their seed)."""
    frames = []
    for seed, global_seed in ((3, 0), (3, 12345), (4, 0)):
        env = make_env(4, seed=seed, unactuated_steps=0, disturbance=DisturbanceCfg(obs_noise_scale=2.0))
        torch.manual_seed(global_seed)
        env.step(torch.zeros(4, 23))
        frames.append(env.obs_history.buffer[:, -1].clone())
    torch.testing.assert_close(frames[0], frames[1], rtol=0, atol=0)
    assert not torch.equal(frames[0], frames[2])
