"""``python -m upright.training.stack_actor_history``: the committed get-up checkpoint widened to an H-frame actor acts
exactly as before on the real get-up env, keeps its optimizer state aligned, refuses bad input, and resumes in
``train.py`` with ``env.getup.actor_history``."""

from __future__ import annotations

import shutil

import pytest
import torch
from test_getup_train_smoke import SMALL
from train_testlib import ROOT, run_train

from upright.training.stack_actor_history import main, stack_actor_history

CKPT_DIR = ROOT / "checkpoints" / "g1_getup_std03_s3"
CKPT = CKPT_DIR / "model_1025.pt"
"""The committed get-up policy's checkpoint (one 75-value frame)."""


@pytest.fixture(scope="module")
def original() -> dict:
    return torch.load(CKPT, map_location="cpu", weights_only=False)


def _getup_env(history: int):
    from upright.tasks.standup.config import SimCfg, StandupEnvCfg
    from upright.tasks.standup.getup.env import GetupEnv

    cfg = StandupEnvCfg(num_envs=4, mdp="getup")
    cfg.curriculum.enabled, cfg.curriculum.beta_init = False, 0.6
    cfg.getup.actor_history = history
    return GetupEnv(cfg, SimCfg(num_threads=1), seed=5)


def test_the_widened_actor_acts_as_before_whatever_the_older_frames(original, tmp_path):
    from omegaconf import OmegaConf

    from upright.conf.train_cfg import TrainCfg
    from upright.training.policy_loading import checkpoint_policy

    torch.save(stack_actor_history(original, 4, 75), tmp_path / "model_1025.pt")
    shutil.copy(CKPT_DIR / "config_926.yaml", tmp_path / "config_926.yaml")
    train_cfg = OmegaConf.structured(TrainCfg)
    one, four = _getup_env(1), _getup_env(4)
    try:
        before = checkpoint_policy(CKPT, one, train_cfg)
        after = checkpoint_policy(tmp_path / "model_1025.pt", four, train_cfg)
        assert four.get_observations()["actor"].shape == (4, 300)
        gen = torch.Generator().manual_seed(0)
        for _ in range(3):
            obs = one.get_observations()["actor"]
            older = torch.randn(4, 225, generator=gen) * 3.0
            a = before(obs)
            b = after(torch.cat([older, obs], dim=1))
            assert a.abs().max() > 0.05  # a real policy's action, not zeros
            torch.testing.assert_close(b, a, atol=2e-5, rtol=0)
            one.step(a)
        four.step(after(four.get_observations()["actor"]))  # the 4-frame env feeds it
    finally:
        one.close()
        four.close()


def test_normaliser_and_adam_moments_move_with_the_columns(original):
    out = stack_actor_history(original, 3, 75)
    a0, a1 = original["actor_state_dict"], out["actor_state_dict"]
    assert a1["mlp.0.weight"].shape == (512, 225)
    assert torch.equal(a1["mlp.0.weight"][:, 150:], a0["mlp.0.weight"])
    assert not a1["mlp.0.weight"][:, :150].any()
    for key in ("obs_normalizer._mean", "obs_normalizer._var", "obs_normalizer._std"):
        assert torch.equal(a1[key][:, 150:], a0[key]) and torch.equal(a1[key][:, :75], a0[key])
    assert torch.equal(a1["obs_normalizer.count"], a0["obs_normalizer.count"])
    s0 = original["optimizer_state_dict"]["state"][1]  # main group: std_param, then mlp.0.weight
    s1 = out["optimizer_state_dict"]["state"][1]
    for name in ("exp_avg", "exp_avg_sq"):
        assert torch.equal(s1[name][:, 150:], s0[name]) and not s1[name][:, :150].any()
    assert s1["step"] == s0["step"]
    assert torch.equal(out["critic_state_dict"]["mlp.0.0.weight"], original["critic_state_dict"]["mlp.0.0.weight"])
    assert original["actor_state_dict"]["mlp.0.weight"].shape == (512, 75)  # the input is not modified


def test_bad_input_is_refused_in_one_line(original, tmp_path, capsys):
    with pytest.raises(ValueError, match="must exceed the actor's 1 frame"):
        stack_actor_history(original, 1, 75)
    with pytest.raises(ValueError, match="not whole frames of 76"):
        stack_actor_history(original, 3, 76)
    with pytest.raises(ValueError, match="no actor first layer"):
        stack_actor_history({"critic_state_dict": {}}, 3, 75)
    with pytest.raises(SystemExit, match="no checkpoint at"):
        main([str(tmp_path / "missing.pt"), str(tmp_path / "out.pt"), "--frames", "3"])
    with pytest.raises(SystemExit, match="dst must differ"):
        main([str(CKPT), str(CKPT), "--frames", "3"])
    assert not (tmp_path / "out.pt").exists()


def test_train_py_resumes_the_widened_checkpoint_with_an_actor_history(original, tmp_path):
    run = tmp_path / "runs" / "standup" / "hist"
    run.mkdir(parents=True)
    main([str(CKPT), str(run / "model_1025.pt"), "--frames", "3"])
    args = [*SMALL, "env.getup.actor_history=3", "train.max_iterations=1027", "run.root=runs", "run.name=hist"]
    proc = run_train([*args, f"resume={run}"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "after 1026 completed iterations" in proc.stdout
    saved = torch.load(run / "model_1026.pt", map_location="cpu", weights_only=False)
    assert saved["actor_state_dict"]["mlp.0.weight"].shape == (512, 225)
    # without the setting the run refuses the wider actor
    proc = run_train([*SMALL, "train.max_iterations=1028", "run.root=runs", "run.name=hist", f"resume={run}"], tmp_path)
    assert proc.returncode == 2 and "does not fit this run's networks" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    # evaluation and export read the history from the run config, evaluation of the export from its metadata
    from upright.training.evaluate import make_eval_env
    from upright.training.export import export_checkpoint
    from upright.training.policy_loading import policy_env_settings

    export_checkpoint(run / "model_1026.pt", tmp_path / "exported")
    for source in (run / "model_1026.pt", tmp_path / "exported" / "policy.onnx"):
        assert policy_env_settings(str(source))["getup.actor_history"] == 3
        env, policy, _, _ = make_eval_env(str(source), num_envs=2, episode_length_s=0.1, domain_rand=False)
        try:
            obs = env.get_observations()["actor"]
            assert obs.shape == (2, 225) and policy(obs).shape == (2, 23)
        finally:
            env.close()
