"""The critics' shared trunk (``train.critic_shared_trunk``, not HoST) inside MultiCriticPPO."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf
from test_l2c2 import build, collect  # scripted CountingEnv + the training entry point's rsl-rl dict

from upright.conf.train_cfg import TrainCfg
from upright.training.rsl_rl_cfg import rsl_rl_config

NUM_STEPS = 6


def _linear_shapes(module: torch.nn.Module) -> list[tuple[int, int]]:
    return [tuple(m.weight.shape) for m in module.modules() if isinstance(m, torch.nn.Linear)]


def test_shared_trunk_is_one_mlp_with_a_head_per_group():
    shared, env = build(num_steps=NUM_STEPS, critic_shared_trunk=True)
    separate, _ = build(num_steps=NUM_STEPS)
    # tiny networks of test_l2c2: critic hidden [8], critic obs 4, G = 4
    assert _linear_shapes(shared.critic.mlp) == [(8, 4), (4, 8)]
    assert _linear_shapes(separate.critic.mlp) == [(8, 4), (1, 8)] * 4
    values = shared.critic(env.get_observations())
    assert values.shape == (env.num_envs, 4)
    assert not torch.allclose(values[:, 0], values[:, 1])  # the heads differ


def test_an_update_trains_every_head_and_the_trunk():
    alg, env = build(num_steps=NUM_STEPS, critic_shared_trunk=True)
    before = {k: v.clone() for k, v in alg.critic.state_dict().items() if k.startswith("mlp.")}
    collect(alg, env, NUM_STEPS)
    stats = alg.update()
    after = alg.critic.state_dict()
    for key, value in before.items():
        assert not torch.equal(after[key], value), key
    head = after["mlp.2.weight"] - before["mlp.2.weight"]  # (G, hidden): each group's head row moved
    assert (head.abs().sum(dim=1) > 0).all()
    assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())


@pytest.mark.parametrize("saved_shared", [False, True])
def test_resuming_the_other_layout_names_the_setting(saved_shared):
    saved, _ = build(num_steps=NUM_STEPS, critic_shared_trunk=saved_shared)
    other, _ = build(num_steps=NUM_STEPS, critic_shared_trunk=not saved_shared)
    with pytest.raises(ValueError, match=f"train.critic_shared_trunk={str(saved_shared).lower()}"):
        other.critic.load_state_dict(saved.critic.state_dict())
    same, _ = build(num_steps=NUM_STEPS, critic_shared_trunk=saved_shared, seed=1)
    same.critic.load_state_dict(saved.critic.state_dict())  # the same layout loads
    for a, b in zip(same.critic.parameters(), saved.critic.parameters()):
        assert torch.equal(a, b)


def test_config_default_is_hosts_separate_critics():
    cfg = rsl_rl_config(OmegaConf.structured(TrainCfg()))
    assert cfg["critic"]["shared_trunk"] is False
    assert rsl_rl_config(OmegaConf.structured(TrainCfg(critic_shared_trunk=True)))["critic"]["shared_trunk"] is True
