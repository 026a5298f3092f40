"""The action std's own learning rate (upright/training/std_learning_rate.py) inside MultiCriticPPO."""

from __future__ import annotations

import pytest
import torch
from test_l2c2 import build, collect  # scripted CountingEnv + the training entry point's rsl-rl dict

from upright.training.std_learning_rate import (
    FIXED_LR_KEY,
    apply_noise_cut,
    convert_optimizer_state,
    set_action_std,
    std_parameter,
)

NUM_STEPS = 6


def _update(alg, env) -> torch.Tensor:
    """One rollout + update; returns the std parameter before the update."""
    collect(alg, env, NUM_STEPS)
    before = std_parameter(alg.actor).detach().clone()
    alg.update()
    return before


def test_default_keeps_rsl_rls_single_group():
    alg, _ = build(num_steps=NUM_STEPS)
    assert len(alg.optimizer.param_groups) == 1
    n = sum(1 for _ in alg.actor.parameters()) + sum(1 for _ in alg.critic.parameters())
    assert len(alg.optimizer.param_groups[0]["params"]) == n


def test_std_group_keeps_its_rate_while_the_schedule_adapts_the_rest():
    # desired KL so small that every minibatch divides the adaptive lr by 1.5 down to the 1e-5 floor
    alg, env = build(num_steps=NUM_STEPS, std_learning_rate=0.05, learning_rate=1e-3, desired_kl=1e-9)
    main, std_group = alg.optimizer.param_groups
    assert std_group["params"] == [std_parameter(alg.actor)] and std_group.get(FIXED_LR_KEY)
    assert all(p is not std_parameter(alg.actor) for p in main["params"])
    before = _update(alg, env)
    assert main["lr"] == pytest.approx(1e-5) and alg.learning_rate == pytest.approx(1e-5)
    assert std_group["lr"] == 0.05
    moved = (std_parameter(alg.actor).detach() - before).abs().max().item()
    # 20 Adam steps (5 epochs x 4 minibatches) at 0.05; the next test bounds the same update without the option
    assert moved > 0.04


def test_without_the_option_the_std_moves_at_the_scheduled_rate():
    alg, env = build(num_steps=NUM_STEPS, learning_rate=1e-3, desired_kl=1e-9)
    before = _update(alg, env)
    moved = (std_parameter(alg.actor).detach() - before).abs().max().item()
    assert moved < 0.02


def _moments_by_param(alg) -> dict[int, torch.Tensor]:
    """id(parameter) -> Adam exp_avg, read through the optimizer's own param list."""
    return {id(p): alg.optimizer.state[p]["exp_avg"].clone() for g in alg.optimizer.param_groups for p in g["params"]}


@pytest.mark.parametrize("src_lr,dst_lr", [(None, 0.02), (0.02, None)])
def test_checkpoint_optimizer_state_crosses_layouts(src_lr, dst_lr):
    src, env = build(num_steps=NUM_STEPS, std_learning_rate=src_lr, seed=1)
    _update(src, env)
    saved = src.save()
    dst, _ = build(num_steps=NUM_STEPS, std_learning_rate=dst_lr, seed=2)
    dst.load(saved, None, True)
    assert len(dst.optimizer.param_groups) == (2 if dst_lr else 1)
    # every Adam moment sits on the parameter of the same name as in the source
    src_names = {
        id(p): n
        for n, p in list(src.actor.named_parameters()) + [("c." + n, p) for n, p in src.critic.named_parameters()]
    }
    dst_names = {
        id(p): n
        for n, p in list(dst.actor.named_parameters()) + [("c." + n, p) for n, p in dst.critic.named_parameters()]
    }
    src_m = {src_names[k]: v for k, v in _moments_by_param(src).items()}
    dst_m = {dst_names[k]: v for k, v in _moments_by_param(dst).items()}
    assert src_m.keys() == dst_m.keys()
    assert all(torch.equal(src_m[k], dst_m[k]) for k in src_m)
    if dst_lr:
        assert dst.optimizer.param_groups[1]["lr"] == dst_lr
    _update(dst, env)  # the converted state steps without error


def test_mismatched_state_names_the_fix():
    alg, env = build(num_steps=NUM_STEPS)
    _update(alg, env)
    saved = alg.save()["optimizer_state_dict"]
    saved["param_groups"][0]["params"] = saved["param_groups"][0]["params"][:-1]
    with pytest.raises(ValueError, match="std_learning_rate"):
        convert_optimizer_state(saved, alg.actor, alg.critic, 0.01)


def test_update_reports_the_kl_the_schedule_measured(monkeypatch):
    alg, env = build(num_steps=NUM_STEPS, learning_rate=1e-3, desired_kl=0.01)
    seen: list[float] = []
    original = alg.actor.get_kl_divergence

    def spy(old, new):
        kl = original(old, new)
        seen.append(kl.mean().item())
        return kl

    monkeypatch.setattr(alg.actor, "get_kl_divergence", spy)
    collect(alg, env, NUM_STEPS)
    losses = alg.update()
    assert len(seen) == alg.num_learning_epochs * alg.num_mini_batches
    assert seen[0] == 0.0 and max(seen) > 0.0  # first minibatch: the rollout policy itself
    assert losses["kl"] == pytest.approx(sum(seen) / len(seen))


@pytest.mark.parametrize("std_lr", [None, 1e-3])
def test_set_action_std_sets_every_entry_and_clears_its_adam_moments(std_lr):
    alg, env = build(num_steps=NUM_STEPS, std_learning_rate=std_lr)
    _update(alg, env)
    param = std_parameter(alg.actor)
    assert param in alg.optimizer.state and not torch.allclose(param, torch.full_like(param, 0.3))
    set_action_std(alg.actor, 0.3, alg.optimizer)
    assert torch.equal(param.detach(), torch.full_like(param, 0.3))
    assert param not in alg.optimizer.state
    others = [p for g in alg.optimizer.param_groups for p in g["params"] if p is not param]
    assert all(p in alg.optimizer.state for p in others)  # the rest keep their moments
    _update(alg, env)  # training goes on from there


def test_noise_cut_sets_std_and_entropy_once_when_due():
    alg, env = build(num_steps=NUM_STEPS)
    _update(alg, env)
    param = std_parameter(alg.actor)
    before = param.detach().clone()
    assert alg.entropy_coef > 0 and not torch.allclose(before, torch.full_like(before, 0.3))
    assert apply_noise_cut(alg, 4, 5, 0.3, 0.0, applied=False) is False  # before the cut: nothing changes
    assert torch.equal(param.detach(), before) and alg.entropy_coef > 0
    assert apply_noise_cut(alg, 5, None, 0.3, 0.0, applied=False) is False  # no cut configured
    assert apply_noise_cut(alg, 5, 5, 0.3, 0.0, applied=False) is True
    assert torch.equal(param.detach(), torch.full_like(param, 0.3)) and alg.entropy_coef == 0.0
    assert param not in alg.optimizer.state
    _update(alg, env)
    moved = param.detach().clone()
    alg.entropy_coef = 0.01  # e.g. a resume builds PPO with the recipe's coefficient again
    assert apply_noise_cut(alg, 6, 5, 0.3, 0.0, applied=True) is False  # past an applied cut: the learned std stays
    assert torch.equal(param.detach(), moved) and alg.entropy_coef == 0.0


def test_a_cut_that_is_overdue_is_applied_at_once():
    """A checkpoint past the cut iteration that does not record the cut (from before the setting) gets it."""
    alg, env = build(num_steps=NUM_STEPS)
    _update(alg, env)
    param = std_parameter(alg.actor)
    assert apply_noise_cut(alg, 9, 5, 0.3, 0.002, applied=False) is True
    assert torch.equal(param.detach(), torch.full_like(param, 0.3)) and alg.entropy_coef == 0.002


@pytest.mark.parametrize(("std", "entropy", "key"), [(0.0, 0.0, "noise_cut_std"), (0.3, -1.0, "noise_cut_entropy")])
def test_noise_cut_refuses_bad_values_by_their_names(std, entropy, key):
    alg, _ = build(num_steps=NUM_STEPS)
    with pytest.raises(ValueError, match=f"train.{key}"):
        apply_noise_cut(alg, 5, 5, std, entropy, applied=False)


@pytest.mark.parametrize("bad", [0.0, -0.1, float("nan")])
def test_set_action_std_refuses_a_non_positive_std(bad):
    alg, _ = build(num_steps=NUM_STEPS)
    with pytest.raises(ValueError, match="train.resume_std must be > 0"):
        set_action_std(alg.actor, bad, alg.optimizer)


def test_critic_group_keeps_its_rate_while_the_schedule_adapts_the_actor():
    """``train.critic_learning_rate``: the critics learn at their fixed rate although the actor's KL drives the
    schedule to its floor; without it they move at the floor."""
    alg, env = build(num_steps=NUM_STEPS, critic_learning_rate=1e-2, learning_rate=1e-3, desired_kl=1e-9)
    main, critic_group = alg.optimizer.param_groups
    critic_ids = {id(p) for p in alg.critic.parameters()}
    assert {id(p) for p in critic_group["params"]} == critic_ids and critic_group.get(FIXED_LR_KEY)
    assert all(id(p) not in critic_ids for p in main["params"])
    before = [p.detach().clone() for p in alg.critic.parameters()]
    _update(alg, env)
    assert main["lr"] == pytest.approx(1e-5) and critic_group["lr"] == 1e-2
    fast = max((p.detach() - b).abs().max().item() for p, b in zip(alg.critic.parameters(), before))
    slow_alg, slow_env = build(num_steps=NUM_STEPS, learning_rate=1e-3, desired_kl=1e-9)
    before = [p.detach().clone() for p in slow_alg.critic.parameters()]
    _update(slow_alg, slow_env)
    slow = max((p.detach() - b).abs().max().item() for p, b in zip(slow_alg.critic.parameters(), before))
    assert fast > 20 * slow  # Adam steps ~lr per step: 1e-2 vs mostly the 1e-5 floor


@pytest.mark.parametrize(
    "src,dst",
    [
        ((None, None), (0.02, 1e-3)),
        ((0.02, 1e-3), (None, None)),
        ((0.02, None), (None, 1e-3)),
        ((None, 1e-3), (0.02, 1e-3)),
    ],
)
def test_checkpoint_optimizer_state_crosses_std_and_critic_layouts(src, dst):
    source, env = build(num_steps=NUM_STEPS, std_learning_rate=src[0], critic_learning_rate=src[1], seed=1)
    _update(source, env)
    saved = source.save()
    target, _ = build(num_steps=NUM_STEPS, std_learning_rate=dst[0], critic_learning_rate=dst[1], seed=2)
    target.load(saved, None, True)
    assert len(target.optimizer.param_groups) == 1 + sum(x is not None for x in dst)

    def named(alg):
        names = {
            id(p): n
            for n, p in list(alg.actor.named_parameters()) + [("c." + n, p) for n, p in alg.critic.named_parameters()]
        }
        return {names[k]: v for k, v in _moments_by_param(alg).items()}

    src_m, dst_m = named(source), named(target)
    assert src_m.keys() == dst_m.keys() and all(torch.equal(src_m[k], dst_m[k]) for k in src_m)
    rates = {g.get("upright_group"): g["lr"] for g in target.optimizer.param_groups}
    if dst[0] is not None:
        assert rates["std"] == dst[0]
    if dst[1] is not None:
        assert rates["critic"] == dst[1]
    _update(target, env)


def test_masked_transitions_add_nothing_to_the_policy_gradient():
    """``train.mask_unapplied_actions``: transitions flagged ``action_applied=False`` get a zero advantage (no policy
    gradient); the others keep theirs; without the flag nothing changes."""
    from tensordict import TensorDict  # noqa: F401

    def rollout(mask: bool):
        alg, env = build(num_steps=NUM_STEPS, mask_unapplied_actions=mask, seed=3)
        obs = env.get_observations()
        applied = torch.ones(NUM_STEPS, env.num_envs, dtype=torch.bool)
        applied[:2, 0] = False  # env 0 ignored its first two actions
        with torch.inference_mode():
            for t in range(NUM_STEPS):
                actions = alg.act(obs)
                obs, rewards, dones, extras = env.step(actions)
                alg.process_env_step(obs, rewards, dones, {**extras, "action_applied": applied[t]})
            alg.compute_returns(obs)
        return alg

    masked, plain = rollout(True), rollout(False)
    adv_m, adv_p = masked.storage.advantages[..., 0], plain.storage.advantages[..., 0]
    assert torch.all(adv_m[:2, 0] == 0) and torch.all(adv_p[:2, 0] != 0)
    torch.testing.assert_close(adv_m[2:], adv_p[2:])
    torch.testing.assert_close(adv_m[:, 1:], adv_p[:, 1:])
    assert masked.masked_fraction == pytest.approx(2 / (NUM_STEPS * 5))
