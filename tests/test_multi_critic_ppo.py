"""Tests of multi-critic PPO (upright.training.multi_critic_ppo) against independent reference computations.

The references below are written with plain Python loops over nested lists, independently of the implementation.
The integration test trains a tiny 1-D point mass with rsl_rl's unmodified ``OnPolicyRunner``.
"""

from __future__ import annotations

import copy
import math
import os
import statistics

import pytest
import torch
from rsl_rl.env import VecEnv
from rsl_rl.runners import OnPolicyRunner
from tensordict import TensorDict

from upright.training.group_advantages import combine_group_advantages, compute_group_gae, normalize_group_advantages
from upright.training.multi_critic_model import MultiCriticModel, TanhActorModel
from upright.training.multi_critic_ppo import MultiCriticPPO
from upright.training.multi_critic_storage import MultiCriticRolloutStorage

GAMMA, LAM = 0.99, 0.95
WEIGHTS = [2.5, 0.1, 1.0, 1.0]

# The runner config the training entry point passes (keys and values exactly as used there).
TRAIN_CFG = {
    "num_steps_per_env": 50,
    "save_interval": 50,
    "obs_groups": {"actor": ["actor"], "critic": ["critic"]},
    "logger": "tensorboard",
    "check_for_nan": True,
    "algorithm": {
        "class_name": "upright.training.multi_critic_ppo:MultiCriticPPO",
        "group_weights": [2.5, 0.1, 1.0, 1.0],
        "num_learning_epochs": 5,
        "num_mini_batches": 4,
        "clip_param": 0.2,
        "gamma": 0.99,
        "lam": 0.95,
        "value_loss_coef": 1.0,
        "entropy_coef": 0.01,
        "learning_rate": 1e-3,
        "max_grad_norm": 1.0,
        "schedule": "adaptive",
        "desired_kl": 0.01,
        "use_clipped_value_loss": True,
    },
    "actor": {
        "class_name": "upright.training.multi_critic_model:TanhActorModel",
        "hidden_dims": [512, 256, 128],
        "activation": "elu",
        "obs_normalization": True,
        "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 0.8},
    },
    "critic": {
        "class_name": "upright.training.multi_critic_model:MultiCriticModel",
        "hidden_dims": [512, 256],
        "activation": "elu",
        "obs_normalization": True,
    },
}


class PointMassEnv(VecEnv):
    """1-D point mass driven by a force; 4 reward groups (task, regularization, style, post-task).

    Actor obs (N, 2) = [x, v]; critic obs (N, 3) = [x, v, t / T]; action (N, 1). Episodes end by timeout after
    ``max_episode_length`` steps or by termination when |x| > 2.
    """

    def __init__(self, num_envs: int = 8, max_episode_length: int = 20, seed: int = 0) -> None:
        self.num_envs = num_envs
        self.num_actions = 1
        self.max_episode_length = max_episode_length
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.device = "cpu"
        self.cfg = {"name": "point_mass"}
        self.generator = torch.Generator().manual_seed(seed)
        self.x = torch.rand(num_envs, generator=self.generator) * 2.0 - 1.0
        self.v = torch.zeros(num_envs)

    def get_observations(self) -> TensorDict:
        t = self.episode_length_buf.float() / self.max_episode_length
        return TensorDict(
            {"actor": torch.stack([self.x, self.v], -1), "critic": torch.stack([self.x, self.v, t], -1)},
            batch_size=[self.num_envs],
        )

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        force = actions[:, 0].clamp(-1.0, 1.0)
        self.v = self.v + 0.1 * force
        self.x = self.x + 0.1 * self.v
        self.episode_length_buf += 1
        groups = torch.stack([-self.x.abs(), -force.square(), -self.v.abs(), (self.x.abs() < 0.1).float()], dim=-1)
        rewards = (groups * torch.tensor(WEIGHTS)).sum(-1)
        time_outs = self.episode_length_buf >= self.max_episode_length
        dones = time_outs | (self.x.abs() > 2.0)
        reset = dones.nonzero(as_tuple=False).flatten()
        self.x[reset] = torch.rand(len(reset), generator=self.generator) * 2.0 - 1.0
        self.v[reset] = 0.0
        self.episode_length_buf[reset] = 0
        extras = {"time_outs": time_outs, "reward_groups": groups, "log": {"/x_abs": self.x.abs().mean()}}
        return self.get_observations(), rewards, dones.long(), extras


# ----------------------------------------------------------------------------------------------------------------------
# Independent references (plain Python)
# ----------------------------------------------------------------------------------------------------------------------


def reference_gae(rewards, values, dones, last_values, gamma, lam):
    """rewards/values [T][N][G], dones [T][N] (truthy = episode ended after t), last_values [N][G]."""
    num_steps, num_envs, num_groups = len(rewards), len(rewards[0]), len(rewards[0][0])
    adv = [[[0.0] * num_groups for _ in range(num_envs)] for _ in range(num_steps)]
    ret = [[[0.0] * num_groups for _ in range(num_envs)] for _ in range(num_steps)]
    for n in range(num_envs):
        for g in range(num_groups):
            running = 0.0
            for t in reversed(range(num_steps)):
                next_value = last_values[n][g] if t == num_steps - 1 else values[t + 1][n][g]
                alive = 0.0 if dones[t][n] else 1.0
                delta = rewards[t][n][g] + gamma * alive * next_value - values[t][n][g]
                running = delta + gamma * lam * alive * running
                adv[t][n][g] = running
                ret[t][n][g] = running + values[t][n][g]
    return ret, adv


def reference_combine(adv, weights):
    """Normalise each group over all (t, n) with the sample std, then the weighted sum -> [T][N]."""
    num_steps, num_envs, num_groups = len(adv), len(adv[0]), len(adv[0][0])
    normed = [[[0.0] * num_groups for _ in range(num_envs)] for _ in range(num_steps)]
    for g in range(num_groups):
        column = [adv[t][n][g] for t in range(num_steps) for n in range(num_envs)]
        mean, std = statistics.mean(column), statistics.stdev(column)
        for t in range(num_steps):
            for n in range(num_envs):
                normed[t][n][g] = (adv[t][n][g] - mean) / (std + 1e-8)
    combined = [
        [sum(weights[g] * normed[t][n][g] for g in range(num_groups)) for n in range(num_envs)]
        for t in range(num_steps)
    ]
    return normed, combined


def make_cfg(**algorithm_overrides) -> dict:
    cfg = copy.deepcopy(TRAIN_CFG)
    cfg["algorithm"].update(algorithm_overrides)
    return cfg


# ----------------------------------------------------------------------------------------------------------------------
# Pure math
# ----------------------------------------------------------------------------------------------------------------------


def test_group_gae_matches_reference():
    gen = torch.Generator().manual_seed(1)
    T, N, G = 5, 3, 4
    rewards = torch.randn(T, N, G, generator=gen)
    values = torch.randn(T, N, G, generator=gen)
    last_values = torch.randn(N, G, generator=gen)
    dones = torch.zeros(T, N, 1, dtype=torch.uint8)
    dones[1, 0] = dones[3, 2] = dones[4, 1] = dones[2, 1] = 1
    returns, advantages = compute_group_gae(rewards, values, dones, last_values, GAMMA, LAM)
    ref_ret, ref_adv = reference_gae(
        rewards.tolist(), values.tolist(), dones[..., 0].tolist(), last_values.tolist(), GAMMA, LAM
    )
    assert returns.shape == advantages.shape == (T, N, G)
    torch.testing.assert_close(advantages, torch.tensor(ref_adv), atol=1e-5, rtol=0)
    torch.testing.assert_close(returns, torch.tensor(ref_ret), atol=1e-5, rtol=0)
    # dones given as (T, N) bool give the same result
    returns_2d, _ = compute_group_gae(rewards, values, dones[..., 0].bool(), last_values, GAMMA, LAM)
    torch.testing.assert_close(returns_2d, returns)


def test_advantage_combination_matches_reference():
    gen = torch.Generator().manual_seed(2)
    adv = torch.randn(5, 3, 4, generator=gen) * torch.tensor([1.0, 10.0, 0.1, 3.0]) + torch.tensor([0.0, 5, -1, 2])
    ref_normed, ref_combined = reference_combine(adv.tolist(), WEIGHTS)
    combined = combine_group_advantages(adv, WEIGHTS)
    assert combined.shape == (5, 3, 1)
    torch.testing.assert_close(combined[..., 0], torch.tensor(ref_combined), atol=1e-5, rtol=0)
    torch.testing.assert_close(normalize_group_advantages(adv), torch.tensor(ref_normed), atol=1e-5, rtol=0)
    # Not re-normalised after the sum: std of the combination is not 1 for these weights.
    assert abs(combined.std().item() - 1.0) > 0.1


# ----------------------------------------------------------------------------------------------------------------------
# Algorithm pieces on a small rollout (T=5, N=3, G=4)
# ----------------------------------------------------------------------------------------------------------------------


def _small_rollout(**algorithm_overrides):
    """Build the algorithm for N=3, T=5 and record 5 scripted steps with dones and timeouts."""
    torch.manual_seed(0)
    T, N, G = 5, 3, 4
    env = PointMassEnv(num_envs=N)
    cfg = make_cfg(**algorithm_overrides)
    cfg["num_steps_per_env"] = T
    alg = MultiCriticPPO.construct_algorithm(env.get_observations(), env, cfg, "cpu")
    gen = torch.Generator().manual_seed(3)

    def random_obs():
        return TensorDict(
            {"actor": torch.randn(N, 2, generator=gen), "critic": torch.randn(N, 3, generator=gen)}, batch_size=[N]
        )

    dones = torch.zeros(T, N, dtype=torch.long)
    time_outs = torch.zeros(T, N, dtype=torch.bool)
    dones[1, 0] = dones[3, 2] = dones[4, 1] = dones[2, 1] = 1
    time_outs[1, 0] = time_outs[4, 1] = True  # two of the four dones are timeouts
    group_rewards = torch.randn(T, N, G, generator=gen)
    observations, values = [], []
    obs = random_obs()
    for t in range(T):
        observations.append(obs)
        alg.act(obs)
        values.append(alg.critic(obs).detach())
        obs = random_obs()
        extras = {"reward_groups": group_rewards[t].clone(), "time_outs": time_outs[t]}
        alg.process_env_step(obs, torch.full((N,), 123.0), dones[t], extras)
        assert torch.equal(extras["reward_groups"], group_rewards[t])  # env's tensor left untouched
    last_values = alg.critic(obs).detach()
    alg.compute_returns(obs)
    return alg, observations, torch.stack(values), group_rewards, dones, time_outs, last_values


def test_process_env_step_and_compute_returns_match_reference():
    alg, _, values, group_rewards, dones, time_outs, last_values = _small_rollout()
    st = alg.storage
    assert isinstance(st, MultiCriticRolloutStorage)
    assert values.shape == (5, 3, 4)
    torch.testing.assert_close(st.values, values)
    # Per-critic timeout bootstrap: r_g + gamma * V_g(s_t) * timeout, scalar reward argument ignored.
    T, N, G = group_rewards.shape
    boot = [
        [
            [
                group_rewards[t, n, g].item() + (GAMMA * values[t, n, g].item() if time_outs[t, n] else 0.0)
                for g in range(G)
            ]
            for n in range(N)
        ]
        for t in range(T)
    ]
    torch.testing.assert_close(st.rewards, torch.tensor(boot), atol=1e-6, rtol=0)
    ref_ret, ref_adv = reference_gae(boot, values.tolist(), dones.tolist(), last_values.tolist(), GAMMA, LAM)
    ref_normed, ref_combined = reference_combine(ref_adv, WEIGHTS)
    torch.testing.assert_close(st.returns, torch.tensor(ref_ret), atol=1e-5, rtol=0)
    torch.testing.assert_close(st.group_advantages, torch.tensor(ref_normed), atol=1e-5, rtol=0)
    assert st.advantages.shape == (T, N, 1)
    torch.testing.assert_close(st.advantages[..., 0], torch.tensor(ref_combined), atol=1e-5, rtol=0)
    # The storage's mini-batch generator (rsl_rl's, plus next observations on request) yields (B, G) values/returns
    # and (B, 1) advantages.
    batches = list(st.mini_batch_generator(num_mini_batches=3, num_epochs=1))
    assert len(batches) == 3
    for batch in batches:
        assert batch.values.shape == batch.returns.shape == (5, G)
        assert batch.advantages.shape == (5, 1)


def test_update_value_and_surrogate_losses_match_hand_computation():
    alg, *_ = _small_rollout(num_learning_epochs=1, num_mini_batches=1, schedule="fixed")
    st = alg.storage
    gen = torch.Generator().manual_seed(4)
    obs_flat = st.observations.flatten(0, 1)
    B, G = obs_flat.batch_size[0], 4
    with torch.no_grad():
        new_values = alg.critic(obs_flat)  # what the update's forward pass will produce (no step before it)
        alg.actor(obs_flat, stochastic_output=True)
        new_log_prob = alg.actor.get_output_log_prob(st.actions.flatten(0, 1))
    # Old values offset by up to +-0.5 so that the 0.2 value clip is active for some entries, not for others.
    old_values = new_values + (torch.rand(B, G, generator=gen) - 0.5)
    returns = torch.randn(B, G, generator=gen)
    advantages = torch.randn(B, 1, generator=gen)
    log_ratio = (torch.rand(B, generator=gen) - 0.5) * 0.8  # ratio in [0.67, 1.49]: policy clip partly active
    st.values.copy_(old_values.view(5, 3, G))
    st.returns.copy_(returns.view(5, 3, G))
    st.advantages.copy_(advantages.view(5, 3, 1))
    st.actions_log_prob.copy_((new_log_prob - log_ratio).view(5, 3, 1))
    expected_mse = ((returns - old_values) ** 2).mean(dim=0)

    loss_dict = alg.update()

    nv, ov, rt = new_values.tolist(), old_values.tolist(), returns.tolist()
    value_loss = 0.0
    for i in range(B):
        for g in range(G):
            clipped = ov[i][g] + min(max(nv[i][g] - ov[i][g], -0.2), 0.2)
            value_loss += max((nv[i][g] - rt[i][g]) ** 2, (clipped - rt[i][g]) ** 2)
    value_loss /= B * G
    surrogate = 0.0
    for i in range(B):
        a, r = advantages[i, 0].item(), math.exp(log_ratio[i].item())
        surrogate += max(-a * r, -a * min(max(r, 0.8), 1.2))
    surrogate /= B
    assert loss_dict["value"] == pytest.approx(value_loss, abs=1e-5)
    assert loss_dict["surrogate"] == pytest.approx(surrogate, abs=1e-5)
    for g in range(G):
        assert loss_dict[f"value_mse_group{g}"] == pytest.approx(expected_mse[g].item(), abs=1e-5)


def test_models_and_config_checks():
    env = PointMassEnv(num_envs=3)
    obs = env.get_observations()
    groups = {"actor": ["actor"], "critic": ["critic"]}
    critic = MultiCriticModel(obs, groups, "critic", 1, hidden_dims=[8, 8], num_critics=3)
    assert critic(obs).shape == (3, 3)
    # Critics are independent networks: zeroing one head's last layer changes only its column.
    before = critic(obs).detach()
    with torch.no_grad():
        critic.mlp[1][-1].weight.zero_()
        critic.mlp[1][-1].bias.fill_(7.0)
    after = critic(obs).detach()
    torch.testing.assert_close(after[:, [0, 2]], before[:, [0, 2]])
    assert torch.all(after[:, 1] == 7.0)

    actor = TanhActorModel(
        obs,
        groups,
        "actor",
        1,
        hidden_dims=[8],
        distribution_cfg={"class_name": "GaussianDistribution", "init_std": 0.8},
    )
    assert isinstance(actor.mlp[-1], torch.nn.Tanh)
    with pytest.raises(ValueError):
        TanhActorModel(
            obs,
            groups,
            "actor",
            1,
            hidden_dims=[8],
            distribution_cfg={"class_name": "HeteroscedasticGaussianDistribution"},
        )

    cfg = make_cfg(group_weights=[1.0, 1.0])  # 2 groups, but the env emits 4
    cfg["num_steps_per_env"] = 2
    alg = MultiCriticPPO.construct_algorithm(obs, env, cfg, "cpu")
    assert alg.critic.num_critics == 2
    alg.act(obs)
    next_obs, rewards, dones, extras = env.step(torch.zeros(3, 1))
    with pytest.raises(ValueError, match="reward_groups"):
        alg.process_env_step(next_obs, rewards, dones, extras)
    cfg = make_cfg()
    cfg["critic"]["num_critics"] = 3
    with pytest.raises(ValueError, match="num_critics"):
        MultiCriticPPO.construct_algorithm(obs, env, cfg, "cpu")


# ----------------------------------------------------------------------------------------------------------------------
# Integration with rsl_rl's unmodified OnPolicyRunner
# ----------------------------------------------------------------------------------------------------------------------


def test_on_policy_runner_train_save_load_export(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    runner = OnPolicyRunner(PointMassEnv(num_envs=8), copy.deepcopy(TRAIN_CFG), log_dir=str(tmp_path / "run"))
    assert isinstance(runner.alg, MultiCriticPPO)
    runner.learn(num_learning_iterations=3)
    assert runner.current_learning_iteration == 2
    ckpt = tmp_path / "run" / "model_2.pt"
    assert ckpt.is_file() and (tmp_path / "run" / "model_0.pt").is_file()
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(tmp_path / "run"))

    # Resume: a new runner restores iteration, models and optimizer state.
    runner2 = OnPolicyRunner(PointMassEnv(num_envs=8, seed=1), copy.deepcopy(TRAIN_CFG), log_dir=None)
    runner2.load(str(ckpt))
    assert runner2.current_learning_iteration == 2
    assert runner2.alg.learning_rate == runner.alg.optimizer.param_groups[0]["lr"]
    for key, value in runner.alg.actor.state_dict().items():
        torch.testing.assert_close(runner2.alg.actor.state_dict()[key], value)
    for key, value in runner.alg.critic.state_dict().items():
        torch.testing.assert_close(runner2.alg.critic.state_dict()[key], value)
    opt1, opt2 = runner.alg.optimizer.state_dict(), runner2.alg.optimizer.state_dict()
    assert opt1["param_groups"] == opt2["param_groups"]
    assert opt1["state"].keys() == opt2["state"].keys() and len(opt1["state"]) > 0
    for idx, state in opt1["state"].items():
        for name, tensor in state.items():
            torch.testing.assert_close(opt2["state"][idx][name], tensor)
    runner2.learn(num_learning_iterations=1)  # resumed training runs

    # ONNX export includes the Tanh and matches torch.
    export_dir = tmp_path / "export"
    runner.export_policy_to_onnx(str(export_dir))
    model = onnx.load(str(export_dir / "policy.onnx"))
    op_types = {node.op_type for node in model.graph.node}
    op_types |= {node.op_type for function in model.functions for node in function.node}
    assert "Tanh" in op_types
    session = ort.InferenceSession(str(export_dir / "policy.onnx"), providers=["CPUExecutionProvider"])
    policy = runner.get_inference_policy()
    gen = torch.Generator().manual_seed(5)
    for _ in range(4):
        x = torch.randn(1, 2, generator=gen) * 3.0
        with torch.no_grad():
            expected = policy(TensorDict({"actor": x, "critic": torch.zeros(1, 3)}, batch_size=[1]))
            pre_tanh = torch.nn.Sequential(*list(policy.mlp)[:-1])(policy.obs_normalizer(x))
        torch.testing.assert_close(expected, torch.tanh(pre_tanh))
        (out,) = session.run(None, {"obs": x.numpy()})
        torch.testing.assert_close(torch.from_numpy(out), expected, atol=1e-5, rtol=0)

    # TorchScript export as well.
    runner.export_policy_to_jit(str(export_dir))
    jit_policy = torch.jit.load(str(export_dir / "policy.pt"))
    x = torch.randn(4, 2, generator=gen)
    with torch.no_grad():
        expected = policy(TensorDict({"actor": x, "critic": torch.zeros(4, 3)}, batch_size=[4]))
        torch.testing.assert_close(jit_policy(x), expected, atol=1e-6, rtol=0)
