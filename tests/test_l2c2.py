"""Tests of HoST's L2C2 smoothness term in multi-critic PPO (upright.training.multi_critic_ppo, spec section 5).

The loss reference is written with plain Python loops over the models' weights; the rollouts come from a scripted
env whose observations encode (step, env) exactly, so the next observation of every transition is known.
"""

from __future__ import annotations

import math
import re
import statistics

import pytest
import torch
from omegaconf import OmegaConf
from rsl_rl.algorithms import PPO
from rsl_rl.env import VecEnv
from rsl_rl.storage import RolloutStorage
from tensordict import TensorDict

from upright.conf.train_cfg import TrainCfg
from upright.training.l2c2 import (
    HOST_L2C2_POLICY_COEF,
    HOST_L2C2_VALUE_COEF,
    l2c2_losses,
    mix_observations,
    sample_l2c2_mix_weights,
)
from upright.training.multi_critic_model import MultiCriticModel, TanhActorModel
from upright.training.multi_critic_ppo import MultiCriticPPO
from upright.training.rsl_rl_cfg import rsl_rl_config
from upright.training.runner import UprightRunner

GROUPS = {"actor": ["actor"], "critic": ["critic"]}


class CountingEnv(VecEnv):
    """Scripted env whose observations encode the global step k and the env index n exactly.

    Actor obs (N, 3) = [k, n, sin(0.7k + 1.3n)]; critic obs (N, 4) = [k, n, cos(0.3k - n), 0.01k]; 2 actions.
    Env n's episode ends after step k when (k + 1) % (2 + n % 3) == 0 (for even n as a timeout). The extras log the
    curriculum keys the standup env logs (β = 0.5 + 0.1 (n - 2), pull force 120 N).
    """

    def __init__(self, num_envs: int = 5) -> None:
        self.num_envs = num_envs
        self.num_actions = 2
        self.max_episode_length = 100
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.device = "cpu"
        self.cfg = {"name": "counting"}
        self.k = 0
        self.done_at: dict[tuple[int, int], bool] = {}
        """(k, n) -> whether env n's episode ended after global step k."""

    def get_observations(self) -> TensorDict:
        k = torch.full((self.num_envs,), float(self.k))
        n = torch.arange(self.num_envs, dtype=torch.float32)
        actor = torch.stack([k, n, torch.sin(0.7 * k + 1.3 * n)], dim=-1)
        critic = torch.stack([k, n, torch.cos(0.3 * k - n), 0.01 * k], dim=-1)
        return TensorDict({"actor": actor, "critic": critic}, batch_size=[self.num_envs])

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        n = torch.arange(self.num_envs)
        dones = (self.k + 1) % (2 + n % 3) == 0
        time_outs = dones & (n % 2 == 0)
        for i in range(self.num_envs):
            self.done_at[(self.k, i)] = bool(dones[i])
        kf = float(self.k)
        groups = torch.stack(
            [
                torch.sin(0.1 * kf + n.float()),
                -actions.square().sum(-1),
                torch.full((self.num_envs,), math.cos(0.2 * kf)),
                (n == 0).float(),
            ],
            dim=-1,
        )
        self.k += 1
        self.episode_length_buf = torch.where(dones, 0, self.episode_length_buf + 1)
        log = {
            "Metrics/action_scale": 0.5 + 0.1 * (n.float() - 2),
            "Curriculum/pull_force_level": torch.full((self.num_envs,), 120.0),
        }
        extras = {"time_outs": time_outs, "reward_groups": groups, "log": log}
        return self.get_observations(), groups.sum(-1), dones.long(), extras


def train_dict(num_steps: int = 6, **overrides) -> dict:
    """rsl-rl runner dict built by the training entry point's own translation, with tiny networks."""
    cfg = TrainCfg(actor_hidden_dims=[16, 8], critic_hidden_dims=[8], num_steps_per_env=num_steps, **overrides)
    return rsl_rl_config(OmegaConf.structured(cfg))


def build(num_envs: int = 5, num_steps: int = 6, seed: int = 0, **overrides) -> tuple[MultiCriticPPO, CountingEnv]:
    torch.manual_seed(seed)
    env = CountingEnv(num_envs)
    alg = MultiCriticPPO.construct_algorithm(env.get_observations(), env, train_dict(num_steps, **overrides), "cpu")
    return alg, env


def collect(alg: MultiCriticPPO, env: CountingEnv, num_steps: int) -> TensorDict:
    """One rollout as rsl_rl's OnPolicyRunner does it (inference mode); returns the observation after it."""
    obs = env.get_observations()
    with torch.inference_mode():
        for _ in range(num_steps):
            actions = alg.act(obs)
            obs, rewards, dones, extras = env.step(actions)
            alg.process_env_step(obs, rewards, dones, extras)
        alg.compute_returns(obs)
    return obs


def linear_layers(module: torch.nn.Module) -> list[torch.nn.Linear]:
    return [m for m in module.modules() if isinstance(m, torch.nn.Linear)]


def params_equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


# ----------------------------------------------------------------------------------------------------------------------
# Plain-Python reference of the loss
# ----------------------------------------------------------------------------------------------------------------------


def ref_mlp(x: list[float], layers: list[torch.nn.Linear], out_tanh: bool) -> list[float]:
    """ELU between Linear layers, optional tanh on the output (HoST actor / critic)."""
    for i, layer in enumerate(layers):
        w, b = layer.weight.tolist(), layer.bias.tolist()
        x = [sum(w[r][c] * x[c] for c in range(len(x))) + b[r] for r in range(len(w))]
        if i < len(layers) - 1:
            x = [v if v > 0 else math.exp(v) - 1.0 for v in x]
    return [math.tanh(v) for v in x] if out_tanh else x


def ref_normalise(x: list[float], data: list[list[float]]) -> list[float]:
    """(x - mean) / (std + 0.01), population statistics of ``data`` (rsl_rl EmpiricalNormalization, eps 1e-2)."""
    cols = list(zip(*data))
    return [(v - statistics.fmean(c)) / (statistics.pstdev(c) + 1e-2) for v, c in zip(x, cols)]


def test_l2c2_losses_match_hand_reference():
    gen = torch.Generator().manual_seed(11)
    B, G = 5, 4
    obs = TensorDict({"actor": torch.randn(B, 3, generator=gen), "critic": torch.randn(B, 4, generator=gen)}, [B])
    nxt = TensorDict({"actor": torch.randn(B, 3, generator=gen), "critic": torch.randn(B, 4, generator=gen)}, [B])
    stats = TensorDict(
        {"actor": torch.randn(40, 3, generator=gen) * 2 + 1, "critic": torch.randn(40, 4, generator=gen) * 0.5 - 2},
        [40],
    )
    torch.manual_seed(0)
    actor = TanhActorModel(
        obs,
        GROUPS,
        "actor",
        2,
        hidden_dims=[6, 5],
        obs_normalization=True,
        distribution_cfg={"class_name": "GaussianDistribution", "init_std": 0.8},
    )
    critic = MultiCriticModel(obs, GROUPS, "critic", 1, hidden_dims=[5], obs_normalization=True, num_critics=G)
    actor.update_normalization(stats)
    critic.update_normalization(stats)
    before = actor.state_dict() | {"c." + k: v for k, v in critic.state_dict().items()}
    buffers = {k: v.clone() for k, v in before.items()}
    u = torch.tensor([[-1.0], [-0.3], [0.0], [0.5], [0.99]])

    actor(obs, stochastic_output=True)
    mean_actions, values = actor.output_mean, critic(obs)
    mixed = mix_observations(obs, nxt, u)
    policy_term, value_term = l2c2_losses(actor, critic, mean_actions, values, mixed)

    # Reference, sample by sample.
    a_layers = linear_layers(actor.mlp)
    c_layers = [linear_layers(head) for head in critic.mlp]
    ref_policy = ref_value = 0.0
    for i in range(B):
        ui = u[i, 0].item()
        s_a, n_a = obs["actor"][i].tolist(), nxt["actor"][i].tolist()
        s_c, n_c = obs["critic"][i].tolist(), nxt["critic"][i].tolist()
        mix_a = [s + ui * (n - s) for s, n in zip(s_a, n_a)]
        mix_c = [s + ui * (n - s) for s, n in zip(s_c, n_c)]
        mu = ref_mlp(ref_normalise(s_a, stats["actor"].tolist()), a_layers, True)
        mu_mix = ref_mlp(ref_normalise(mix_a, stats["actor"].tolist()), a_layers, True)
        ref_policy += sum((p - q) ** 2 for p, q in zip(mu, mu_mix))
        for g in range(G):
            v = ref_mlp(ref_normalise(s_c, stats["critic"].tolist()), c_layers[g], False)[0]
            v_mix = ref_mlp(ref_normalise(mix_c, stats["critic"].tolist()), c_layers[g], False)[0]
            ref_value += (v - v_mix) ** 2
    assert policy_term.item() == pytest.approx(ref_policy / B, rel=1e-5, abs=1e-7)
    assert value_term.item() == pytest.approx(ref_value / B, rel=1e-5, abs=1e-7)
    assert policy_term.item() > 1e-4 and value_term.item() > 1e-4
    # The mixed state went through the normalisers without changing their statistics (models in train mode).
    after = actor.state_dict() | {"c." + k: v for k, v in critic.state_dict().items()}
    assert all(torch.equal(after[k], v) for k, v in buffers.items())
    # u = 1 gives s_{t+1}, u = 0 gives s_t.
    torch.testing.assert_close(mix_observations(obs, nxt, torch.ones(B, 1))["critic"], nxt["critic"])
    assert torch.equal(mix_observations(obs, nxt, torch.zeros(B, 1))["actor"], obs["actor"])


def test_l2c2_gradient_reaches_actor_and_every_critic():
    alg, env = build(l2c2_policy_coef=1.0, l2c2_value_coef=1.0)
    collect(alg, env, 6)
    batch = next(alg.storage.mini_batch_generator(1, 1, with_next_observations=True))
    u = torch.full((batch.observations.batch_size[0], 1), 0.7)
    alg.actor(batch.observations, stochastic_output=True)
    values = alg.critic(batch.observations)
    mixed = mix_observations(batch.observations, batch.next_observations, u)
    policy_term, value_term = l2c2_losses(alg.actor, alg.critic, alg.actor.output_mean, values, mixed)

    alg.optimizer.zero_grad()
    policy_term.backward(retain_graph=True)
    for layer in linear_layers(alg.actor.mlp):
        assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0
    assert all(p.grad is None or not p.grad.any() for p in alg.critic.parameters())

    alg.optimizer.zero_grad()
    value_term.backward()
    for head in alg.critic.mlp:
        for layer in linear_layers(head):
            assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0
    assert all(p.grad is None or not p.grad.any() for p in alg.actor.parameters())


def test_update_l2c2_moves_only_the_weighted_side():
    """Fixed lr: with only lambda_pi > 0 the critics end exactly as without L2C2 and the actor differs; with only
    lambda_V > 0 the actor ends exactly as without L2C2 and every critic differs."""
    finals = {}
    for name, coefs in {"off": (0.0, 0.0), "policy": (0.5, 0.0), "value": (0.0, 0.5)}.items():
        alg, env = build(schedule="fixed", l2c2_policy_coef=coefs[0], l2c2_value_coef=coefs[1])
        collect(alg, env, 6)
        torch.manual_seed(5)
        loss_dict = alg.update()
        assert ("l2c2_policy" in loss_dict) == (name != "off")
        finals[name] = alg
    off, pol, val = finals["off"], finals["policy"], finals["value"]
    assert params_equal(pol.critic, off.critic) and not params_equal(pol.actor, off.actor)
    assert params_equal(val.actor, off.actor)
    for g in range(4):
        assert not torch.equal(val.critic.mlp[g][0].weight, off.critic.mlp[g][0].weight)


def test_update_adds_exactly_the_gradient_of_the_l2c2_term(monkeypatch):
    """One mini-batch with the whole rollout, no gradient clipping: the gradient the update applies with L2C2 minus
    the one without equals the autograd gradient of a hand-built L2C2 loss (both sides of the difference
    differentiated, u fixed)."""
    import upright.training.multi_critic_ppo as mcp

    monkeypatch.setattr(mcp, "sample_l2c2_mix_weights", lambda dones: 0.6 * (1.0 - dones.reshape(-1, 1).float()))
    grads, reference = {}, None
    for coefs in ((0.0, 0.0), (1.0, 2.0)):
        alg, env = build(
            num_learning_epochs=1,
            num_mini_batches=1,
            schedule="fixed",
            max_grad_norm=1e9,
            l2c2_policy_coef=coefs[0],
            l2c2_value_coef=coefs[1],
        )
        collect(alg, env, 6)
        if reference is None:  # reference gradient of the L2C2 loss on the rollout, before the update
            st = alg.storage
            obs = st.observations.flatten(0, 1)
            nxt = {k: torch.cat([st.observations[k][1:].flatten(0, 1), st.last_observations[k]]) for k in GROUPS}
            u = 0.6 * (1.0 - st.dones.flatten(0, 1).float())
            mixed = TensorDict({k: obs[k] + u * (nxt[k] - obs[k]) for k in nxt}, batch_size=obs.batch_size)
            loss = 1.0 * (alg.actor(obs) - alg.actor(mixed)).pow(2).sum(-1).mean()
            loss = loss + 2.0 * (alg.critic(obs) - alg.critic(mixed)).pow(2).sum(-1).mean()
            params = list(alg.actor.parameters()) + list(alg.critic.parameters())
            reference = torch.autograd.grad(loss, params, allow_unused=True)
        captured = []
        monkeypatch.setattr(
            alg.optimizer,
            "step",
            lambda captured=captured, alg=alg: captured.append(
                [
                    p.grad.clone() if p.grad is not None else None
                    for g in alg.optimizer.param_groups
                    for p in g["params"]
                ]
            ),
        )
        alg.update()
        grads[coefs] = captured[0]
    names = [n for n, _ in alg.actor.named_parameters()] + [n for n, _ in alg.critic.named_parameters()]
    for name, ref, on, off in zip(names, reference, grads[(1.0, 2.0)], grads[(0.0, 0.0)]):
        if ref is None:  # the action std gets no L2C2 gradient
            torch.testing.assert_close(on, off, msg=name)
            continue
        critic_output_bias = name in {f"mlp.{g}.2.bias" for g in range(4)}  # cancels in V(s_t) - V(s_mix)
        assert ref.abs().sum() > 0 or critic_output_bias, name
        torch.testing.assert_close(on - off, ref, atol=2e-6, rtol=1e-4, msg=name)


# ----------------------------------------------------------------------------------------------------------------------
# Mixing weights and terminal transitions
# ----------------------------------------------------------------------------------------------------------------------


def test_mix_weights_uniform_and_zero_on_terminal():
    gen = torch.Generator().manual_seed(3)
    dones = (torch.rand(20000, 1, generator=gen) < 0.3).to(torch.uint8)
    u = sample_l2c2_mix_weights(dones, generator=gen)
    assert u.shape == (20000, 1) and u.dtype == torch.float32
    assert torch.all(u[dones.bool()] == 0.0)
    live = u[~dones.bool()]
    assert torch.all(live != 0.0) and live.min() >= -1.0 and live.max() < 1.0
    assert live.min() < -0.99 and live.max() > 0.99 and abs(live.mean().item()) < 0.03
    assert live.abs().mean().item() == pytest.approx(0.5, abs=0.02)  # E|U(-1, 1)| = 1/2
    assert sample_l2c2_mix_weights(dones.view(-1).bool(), generator=gen).shape == (20000, 1)


def test_l2c2_term_is_zero_on_terminal_transitions():
    for all_done, expect_zero in ((True, True), (False, False)):
        alg, env = build(l2c2_policy_coef=1.0, l2c2_value_coef=1.0)
        collect(alg, env, 6)
        alg.storage.dones.fill_(1 if all_done else 0)  # s_{t+1} differs from s_t everywhere (k increases)
        loss_dict = alg.update()
        if expect_zero:
            assert loss_dict["l2c2_policy"] == 0.0 and loss_dict["l2c2_value"] == 0.0
        else:
            assert loss_dict["l2c2_policy"] > 0.0 and loss_dict["l2c2_value"] > 0.0


# ----------------------------------------------------------------------------------------------------------------------
# Next observations in the storage
# ----------------------------------------------------------------------------------------------------------------------


def test_minibatch_next_observation_is_next_step_of_same_env():
    N, T = 5, 6
    alg, env = build(N, T)
    st = alg.storage
    for rollout in range(2):  # the second rollout checks that the last observation is refreshed
        last = collect(alg, env, T)
        assert int(last["actor"][0, 0]) == (rollout + 1) * T
        torch.manual_seed(9)
        batches = list(st.mini_batch_generator(4, 2, with_next_observations=True))
        torch.manual_seed(9)
        reference = list(RolloutStorage.mini_batch_generator(st, 4, 2))  # rsl_rl's own generator
        assert len(batches) == len(reference) == 8
        seen = set()
        for batch, ref in zip(batches, reference):
            assert torch.equal(batch.observations["critic"], ref.observations["critic"])
            assert torch.equal(batch.actions, ref.actions) and torch.equal(batch.returns, ref.returns)
            obs, nxt = batch.observations, batch.next_observations
            assert nxt.batch_size == obs.batch_size and batch.transition_dones.shape == (obs.batch_size[0], 1)
            for i in range(obs.batch_size[0]):
                k, n = int(obs["actor"][i, 0]), int(obs["actor"][i, 1])
                seen.add((k, n))
                expected = {
                    "actor": [k + 1, n, math.sin(0.7 * (k + 1) + 1.3 * n)],
                    "critic": [k + 1, n, math.cos(0.3 * (k + 1) - n), 0.01 * (k + 1)],
                }
                for key in ("actor", "critic"):
                    assert nxt[key][i].tolist() == pytest.approx(expected[key], abs=1e-6)
                assert bool(batch.transition_dones[i, 0]) == env.done_at[(k, n)]
        ks = {k for k, _ in seen}
        assert ks <= set(range(rollout * T, (rollout + 1) * T)) and (rollout + 1) * T - 1 in ks  # last step included
        assert any(env.done_at[key] for key in seen) and not all(env.done_at[key] for key in seen)
        alg.update()
    with pytest.raises(RuntimeError, match="set_last_observations"):  # cleared by the update
        st.flat_next_observations()


# ----------------------------------------------------------------------------------------------------------------------
# lambda = 0 is the old update
# ----------------------------------------------------------------------------------------------------------------------


def test_zero_weights_give_exactly_the_rsl_rl_update():
    results = {}
    for name in ("ours", "rsl_rl", "l2c2"):
        coefs = (HOST_L2C2_POLICY_COEF, HOST_L2C2_VALUE_COEF) if name == "l2c2" else (0.0, 0.0)
        alg, env = build(l2c2_policy_coef=coefs[0], l2c2_value_coef=coefs[1])  # adaptive lr, 5 epochs x 4 batches
        collect(alg, env, 6)
        torch.manual_seed(1)
        loss_dict = PPO.update(alg) if name == "rsl_rl" else alg.update()
        results[name] = (alg, loss_dict)
    (ours, ours_loss), (ref, ref_loss), (l2c2, _) = results["ours"], results["rsl_rl"], results["l2c2"]
    assert params_equal(ours.actor, ref.actor) and params_equal(ours.critic, ref.critic)
    assert ours.learning_rate == ref.learning_rate
    for key in ("value", "surrogate", "entropy"):
        assert ours_loss[key] == ref_loss[key]
    assert not params_equal(l2c2.actor, ref.actor) and not params_equal(l2c2.critic, ref.critic)


# ----------------------------------------------------------------------------------------------------------------------
# Config, runner (logging, checkpoint layout and load)
# ----------------------------------------------------------------------------------------------------------------------

ACTOR_KEYS = [
    "obs_normalizer._mean",
    "obs_normalizer._var",
    "obs_normalizer._std",
    "obs_normalizer.count",
    "distribution.std_param",
] + [f"mlp.{i}.{p}" for i in (0, 2, 4) for p in ("weight", "bias")]
CRITIC_KEYS = ["obs_normalizer._mean", "obs_normalizer._var", "obs_normalizer._std", "obs_normalizer.count"] + [
    f"mlp.{g}.{i}.{p}" for g in range(4) for i in (0, 2) for p in ("weight", "bias")
]  # the layout of the checkpoints written before L2C2 (actor with 2 hidden layers here, critics with 1)


def test_config_passes_host_weights():
    cfg = rsl_rl_config(OmegaConf.structured(TrainCfg()))["algorithm"]
    assert cfg["l2c2_policy_coef"] == pytest.approx(0.1111111, abs=1e-6) == HOST_L2C2_POLICY_COEF
    assert cfg["l2c2_value_coef"] == pytest.approx(0.0111111, abs=1e-7) == HOST_L2C2_VALUE_COEF
    alg, _ = build(l2c2_policy_coef=0.0, l2c2_value_coef=0.0)
    assert not alg.l2c2_enabled
    alg, _ = build()
    assert alg.l2c2_enabled and alg.l2c2_policy_coef == HOST_L2C2_POLICY_COEF
    with pytest.raises(ValueError, match=">= 0"):
        build(l2c2_value_coef=-0.1)


def test_runner_logs_l2c2_and_curriculum_and_checkpoint_loads(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    runner = UprightRunner(CountingEnv(), train_dict(save_interval=1), log_dir=str(tmp_path / "run"), update_threads=1)
    runner.learn_until(2)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("it ")]
    expected = r"\| action bound beta 0\.50 \| pull force 120 N \|"
    assert len(lines) == 2 and all(re.search(expected, line) for line in lines), lines

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "run"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"Loss/l2c2_policy", "Loss/l2c2_value", "Metrics/action_scale"} <= set(tags)
    assert all(e.value > 0 for e in events.Scalars("Loss/l2c2_policy"))

    ckpt = tmp_path / "run" / "model_1.pt"
    saved = torch.load(ckpt, weights_only=False)
    assert list(saved["actor_state_dict"]) == ACTOR_KEYS and list(saved["critic_state_dict"]) == CRITIC_KEYS
    # Loads (strict) into a runner with and without L2C2, and training continues.
    for coefs in ((0.0, 0.0), (HOST_L2C2_POLICY_COEF, HOST_L2C2_VALUE_COEF)):
        cfg = train_dict(save_interval=1, l2c2_policy_coef=coefs[0], l2c2_value_coef=coefs[1])
        resumed = UprightRunner(CountingEnv(), cfg, log_dir=str(tmp_path / f"resume{coefs[0]}"), update_threads=1)
        resumed.load(str(ckpt))
        assert resumed.completed_iterations == 2
        assert params_equal(resumed.alg.actor, runner.alg.actor) and params_equal(resumed.alg.critic, runner.alg.critic)
        resumed.learn_until(3)
        assert resumed.completed_iterations == 3
