"""Self-generated start states (not HoST): the head-height-binned archive, exact restoration of a recorded state in
the real G1 env, no pull force for archived episodes, and evaluation never using it."""

import pytest
import torch

from upright.tasks.standup.config import StandupEnvCfg
from upright.tasks.standup.env import StandupEnv
from upright.tasks.standup.state_archive import StateArchive, StateArchiveCfg, validate


def _archive(**kw) -> StateArchive:
    cfg = StateArchiveCfg(fraction=0.5, **kw)
    return StateArchive(cfg, nq=3, nv=2, history_shape=(2, 4), num_actions=1)


def _record(arch, heights, rng):
    n = heights.numel()
    qpos = torch.arange(n, dtype=torch.float32).unsqueeze(1).expand(n, 3)
    return arch.record(
        torch.ones(n, dtype=torch.bool),
        heights,
        qpos,
        torch.zeros(n, 2),
        torch.zeros(n, 2, 4),
        torch.zeros(n, 3, 1),
        torch.zeros(n, dtype=torch.long),
        rng,
    )


def test_bins_are_drawn_evenly_whatever_their_counts():
    """One rare high state is drawn as often as the common low ones: a non-empty bin first, then an entry."""
    rng = torch.Generator().manual_seed(0)
    arch = _archive(num_bins=4, height_min=0.0, height_max=1.2, record_every=1, record_per_step=100, bin_capacity=64)
    heights = torch.cat([torch.full((63,), 0.05), torch.tensor([1.1])])  # 63 lying states, one standing (env 63)
    assert _record(arch, heights, rng) == 64
    assert arch.filled.tolist() == [63, 0, 0, 1]
    draw = arch.sample(4000, rng)
    share_high = (draw.qpos[:, 0] == 63).float().mean().item()
    assert 0.45 < share_high < 0.55


def test_bins_are_rings_and_record_only_eligible_envs_every_k_steps():
    rng = torch.Generator().manual_seed(0)
    arch = _archive(num_bins=2, record_every=2, record_per_step=3, bin_capacity=4)
    h = torch.full((10,), 0.1)
    assert _record(arch, h, rng) == 0  # first call: not a recording step
    assert _record(arch, h, rng) == 3
    for _ in range(4):
        _record(arch, h, rng)
    assert arch.count.tolist() == [9, 0] and arch.filled.tolist() == [4, 0]
    none = arch.record(
        torch.zeros(10, dtype=torch.bool),
        h,
        torch.zeros(10, 3),
        torch.zeros(10, 2),
        torch.zeros(10, 2, 4),
        torch.zeros(10, 3, 1),
        torch.zeros(10, dtype=torch.long),
        rng,
    )
    assert none == 0
    assert _archive().sample(5, rng) is None  # empty archive: nothing to draw


@pytest.mark.parametrize(
    "bad", [dict(fraction=1.0), dict(fraction=-0.1), dict(num_bins=0), dict(height_min=1.0, height_max=0.5)]
)
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError, match="env.state_archive"):
        validate(StateArchiveCfg(**bad))


def _nominal_env(num_envs: int, fraction: float, seed: int = 0) -> StandupEnv:
    cfg = StandupEnvCfg(num_envs=num_envs)
    cfg.domain_rand.enabled, cfg.obs_noise = False, False
    cfg.state_archive = StateArchiveCfg(fraction=fraction, record_every=1, record_per_step=num_envs)
    return StandupEnv(cfg, seed=seed)


def test_a_restored_state_continues_exactly_as_the_recorded_episode():
    """Record env 0 mid-episode, restore it into env 1 at its reset: with the same actions the two envs follow the
    same trajectory (qpos to 1e-5) and see the same observations, history included."""
    torch.manual_seed(0)
    env = _nominal_env(2, fraction=0.5)
    env.curriculum.force.zero_()  # no pull force in either env
    env.episode_length_buf[:] = 0
    actions = [0.5 * torch.randn(1, 23) for _ in range(60)]
    for a in actions[:45]:
        env.step(a.expand(2, -1))
    arch = env.archive
    arch.count.zero_()
    arch.steps = 0
    obs_before = env.get_observations()["actor"][0].clone()
    env.step(actions[45].expand(2, -1))  # records both envs into the archive, state after step 45
    entry = arch.filled.nonzero().flatten()
    assert entry.numel() >= 1
    # keep env 0's entry only, then restore it into env 1
    mask = torch.zeros_like(arch.count)
    env_q = env.sim.state.qpos[0].clone()
    for b in entry.tolist():
        slots = (arch.qpos[b, : int(arch.filled[b])] - env_q).abs().amax(dim=1) < 1e-6
        if slots.any():
            k = int(slots.nonzero()[0])
            arch.qpos[b, 0], arch.qvel[b, 0] = arch.qpos[b, k].clone(), arch.qvel[b, k].clone()
            arch.obs_history[b, 0], arch.actions[b, 0] = arch.obs_history[b, k].clone(), arch.actions[b, k].clone()
            mask[b] = 1
    assert int(mask.sum()) == 1
    arch.count.copy_(mask)
    env.cfg.state_archive.fraction = 0.999999
    env.reset_envs(torch.tensor([1]))
    env.state = env._read_state()
    kept = env.obs_history.buffer[0].clone()
    env._update_history()  # as step() does after a reset: appends the frame of the restored state (env 1 only here)
    env.obs_history.buffer[0] = kept
    assert bool(env.archived[1]) and bool(env.assisted[1])
    obs = env.get_observations()["actor"]
    torch.testing.assert_close(obs[1], obs[0], atol=1e-5, rtol=0)
    assert not torch.equal(obs[0], obs_before)
    for a in actions[46:]:
        env.step(a.expand(2, -1))
        torch.testing.assert_close(env.sim.state.qpos[1], env.sim.state.qpos[0], atol=1e-5, rtol=0)


def test_archived_episodes_get_no_pull_force_when_pull_assisted_is_off():
    env = _nominal_env(32, fraction=0.5, seed=1)
    env.cfg.curriculum.pull_assisted = False
    env.cfg.curriculum.gravity_gate = None  # the pull would act in every actuated env
    for _ in range(40):
        env.step(torch.zeros(32, 23))
    env.reset_envs(torch.arange(32))
    env.state = env._read_state()
    env._update_history()
    assert 0 < int(env.archived.sum()) < 32
    env.step(torch.zeros(32, 23))
    lying = ~env.assisted & (env.episode_length_buf > env.cfg.unactuated_steps)
    assert (env.pull_force[env.archived] == 0).all()
    if lying.any():
        assert (env.pull_force[lying] > 0).all()


def test_archive_round_trips_through_the_env_checkpoint_state():
    env = _nominal_env(8, fraction=0.5)
    for _ in range(40):
        env.step(torch.zeros(8, 23))
    assert int(env.archive.count.sum()) > 0
    other = _nominal_env(8, fraction=0.5, seed=5)
    other.load_state_dict(env.state_dict())
    torch.testing.assert_close(other.archive.qpos, env.archive.qpos)
    torch.testing.assert_close(other.archive.count, env.archive.count)
