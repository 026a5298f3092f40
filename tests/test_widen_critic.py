"""``python -m upright.training.widen_critic``: a checkpoint trained without a critic-only observation column resumes in
a run that adds it (``env.getup.critic_stand_flag``), and its critic computes what it computed before. Real G1
get-up envs and runners, and the committed get-up checkpoint."""

from __future__ import annotations

import pytest
import torch
from train_testlib import ROOT

CHECKPOINT = ROOT / "checkpoints" / "g1_getup_ws_s2" / "model_825.pt"
"""The committed get-up policy's training checkpoint (critic 78 inputs, separate critic optimizer group)."""


def _runner(*overrides: str, critic_lr: bool = True):
    from hydra import compose, initialize

    from upright.conf import register_configs
    from upright.tasks.registry import make_env
    from upright.training.rsl_rl_cfg import rsl_rl_config
    from upright.training.runner import UprightRunner

    register_configs()
    with initialize(version_base=None, config_path=None):
        cfg = compose(
            "config",
            overrides=[
                "task=standup",
                "recipe=getup",
                "env.num_envs=4",
                "sim.num_threads=1",
                *(["train.critic_learning_rate=1e-3"] if critic_lr else []),
                *overrides,
            ],
        )
    env = make_env(cfg.task_name, cfg.env, cfg.sim, device="cpu", seed=0)
    return UprightRunner(env, rsl_rl_config(cfg.train), log_dir=None, device="cpu"), env


def test_the_widened_checkpoint_resumes_with_the_flag_and_its_critic_computes_the_same(tmp_path):
    from upright.training.widen_critic import main

    old_runner, old_env = _runner()
    old_runner.load(str(CHECKPOINT))
    new_runner, new_env = _runner("env.getup.critic_stand_flag=true")
    try:
        with pytest.raises(ValueError, match=r"takes 78 observation columns but this run gives it 79: widen it with"):
            new_runner.load(str(CHECKPOINT))
        out = tmp_path / "model_825.pt"
        main([str(CHECKPOINT), str(out), "--extra", "1"])
        new_runner.load(str(out))
        assert new_runner.completed_iterations == old_runner.completed_iterations == 826
        obs_old = old_env.get_observations()
        assert obs_old["critic"].shape == (4, 78)
        for flag in (0.0, 1.0):
            obs_new = obs_old.clone()
            obs_new["critic"] = torch.cat([obs_old["critic"], torch.full((4, 1), flag)], dim=1)
            with torch.no_grad():
                v_old, v_new = old_runner.alg.critic(obs_old), new_runner.alg.critic(obs_new)
            torch.testing.assert_close(v_new, v_old, atol=1e-6, rtol=0)
        # the actor is the checkpoint's, and the new column's Adam moments start empty (zero)
        for k, v in old_runner.alg.actor.state_dict().items():
            assert torch.equal(v, new_runner.alg.actor.state_dict()[k]), k
        w = new_runner.alg.critic.state_dict()["mlp.0.0.weight"]
        assert w.shape == (512, 79) and torch.count_nonzero(w[:, 78]) == 0
        state = new_runner.alg.optimizer.state[next(iter(new_runner.alg.critic.mlp.parameters()))]
        assert state["exp_avg"].shape == (512, 79) and torch.count_nonzero(state["exp_avg_sq"][:, 78]) == 0
        assert torch.count_nonzero(state["exp_avg_sq"][:, :78]) > 0  # the old moments were kept
    finally:
        old_env.close()
        new_env.close()


def test_bad_input_is_one_line(tmp_path):
    from upright.training.widen_critic import main, widen_critic_input

    with pytest.raises(SystemExit, match="no checkpoint at .*pass a model_K.pt file"):
        main([str(tmp_path / "missing.pt"), str(tmp_path / "out.pt")])
    with pytest.raises(SystemExit, match="dst must differ from src"):
        main([str(CHECKPOINT), str(CHECKPOINT)])
    with pytest.raises(ValueError, match="--extra must be >= 1"):
        widen_critic_input({"critic_state_dict": {}}, 0)
    with pytest.raises(ValueError, match="no critic_state_dict"):
        widen_critic_input({"actor_state_dict": {}}, 1)
    assert not (tmp_path / "out.pt").exists()


def test_a_one_group_optimizer_is_widened_and_a_wider_checkpoint_is_refused_in_a_run_without_the_flag(tmp_path):
    """Without ``train.critic_learning_rate`` the critic's weights are the last of rsl-rl's one optimizer group; their
    Adam moments (after a real step) are widened there. Loading the widened file into a run without the flag fails in
    one line that names the setting."""
    from upright.training.widen_critic import widen_critic_input

    runner, env = _runner(critic_lr=False)
    try:
        alg = runner.alg
        assert [g.get("upright_group", "main") for g in alg.optimizer.param_groups] == ["main"]
        obs = env.get_observations()
        (alg.critic(obs).sum() + alg.actor(obs).sum()).backward()
        alg.optimizer.step()
        ckpt = {
            "actor_state_dict": alg.actor.state_dict(),
            "critic_state_dict": alg.critic.state_dict(),
            "optimizer_state_dict": alg.optimizer.state_dict(),
            "iter": 0,
            "infos": {"completed_iterations": 1},
        }
        wide = widen_critic_input(ckpt, 1)
        first = next(iter(alg.critic.mlp.parameters()))
        pid = [id(p) for p in alg.optimizer.param_groups[0]["params"]].index(id(first))
        moments = wide["optimizer_state_dict"]["state"][pid]
        assert moments["exp_avg"].shape == (512, 79) and torch.count_nonzero(moments["exp_avg"][:, 78]) == 0
        assert torch.count_nonzero(moments["exp_avg"][:, :78]) > 0
        assert ckpt["critic_state_dict"]["mlp.0.0.weight"].shape == (512, 78)  # the input is not modified
        path = tmp_path / "model_0.pt"
        torch.save(wide, path)
        with pytest.raises(ValueError, match=r"takes 79 observation columns but this run gives it 78: .*critic_stand"):
            runner.load(str(path))
    finally:
        env.close()
    flagged, env = _runner("env.getup.critic_stand_flag=true", critic_lr=False)
    try:
        flagged.load(str(path))
        assert flagged.alg.optimizer.state[next(iter(flagged.alg.critic.mlp.parameters()))]["exp_avg"].shape == (
            512,
            79,
        )
    finally:
        env.close()
