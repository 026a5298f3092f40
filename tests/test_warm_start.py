"""``train.init_policy`` (a new run's actor from an exported policy file) and ``train.critic_warmup_iterations``
(the first iterations train the critics only): the update in isolation, the loader on the real G1 get-up env, and the
real ``train.py`` end to end from the committed get-up policy."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest
import torch
from test_getup_train_smoke import SMALL as GETUP_SMALL  # the 8-env get-up run of the smoke tests
from test_l2c2 import build, collect  # scripted CountingEnv + the training entry point's rsl-rl dict
from train_testlib import ROOT, run_train

COMMITTED = ROOT / "upright" / "assets" / "policies" / "g1_getup" / "policy.onnx"
"""The committed get-up policy (schema 3, ``recipe=getup``, batch-1 export; 6 frames of 75 values)."""

HIST = ["env.getup.actor_history=6"]
"""The committed policy's actor reads 6 frames (``fterm_s3``)."""

SMALL = [*GETUP_SMALL, "train.noise_cut_iteration=null"]


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _changed(before: dict[str, torch.Tensor], module: torch.nn.Module) -> list[str]:
    return [k for k, v in module.state_dict().items() if not torch.equal(v, before[k])]


def test_a_frozen_actor_update_trains_the_critic_only_and_pauses_the_schedule():
    from upright.training.multi_critic_ppo import LR_MIN

    alg, env = build(num_steps=6)
    assert alg.schedule == "adaptive" and alg.learning_rate > LR_MIN
    alg.set_actor_frozen(True)
    lr = alg.learning_rate
    actor, critic = _state(alg.actor), _state(alg.critic)
    collect(alg, env, 6)
    losses = alg.update()
    assert _changed(actor, alg.actor) == []  # weights, std and observation normaliser
    assert _changed(critic, alg.critic)  # the critic learned (its normaliser too)
    assert alg.learning_rate == lr and "kl" not in losses
    # the actor joins at the schedule's floor (its Adam moments are empty), and the update moves its weights and
    # its normaliser
    alg.set_actor_frozen(False)
    assert alg.learning_rate == LR_MIN and {g["lr"] for g in alg.optimizer.param_groups} == {LR_MIN}
    collect(alg, env, 6)
    alg.update()
    moved = _changed(actor, alg.actor)
    assert any(k.startswith("mlp.") for k in moved) and any("normalizer" in k for k in moved), moved


def _getup_actor_and_metadata(env_overrides=tuple(HIST), **train_overrides):
    """The actor of a ``recipe=getup`` runner on a 1-env G1 get-up env, and that env's policy metadata."""
    from hydra import compose, initialize

    from upright.conf import register_configs
    from upright.tasks.registry import make_env, policy_metadata
    from upright.training.rsl_rl_cfg import rsl_rl_config
    from upright.training.runner import UprightRunner

    register_configs()
    with initialize(version_base=None, config_path=None):
        base = ["task=standup", "recipe=getup", "env.num_envs=1", "sim.num_threads=1"]
        cfg = compose("config", overrides=[*base, *env_overrides])
    for key, value in train_overrides.items():
        cfg.train[key] = value
    env = make_env(cfg.task_name, cfg.env, cfg.sim, device="cpu", seed=0)
    try:
        runner = UprightRunner(env, rsl_rl_config(cfg.train), log_dir=None, device="cpu")
        return runner.alg.actor, policy_metadata(cfg.task_name, env)
    finally:
        env.close()


def test_the_committed_policy_loads_into_a_getup_actor_exactly():
    from upright.policy_io.session import open_session
    from upright.training.warm_start import NORMALIZER_COUNT, load_actor_from_onnx

    actor, meta = _getup_actor_and_metadata()
    std_before = actor.distribution.std_param.detach().clone()
    info = load_actor_from_onnx(actor, COMMITTED, meta)
    assert info["iteration"] == 1551 and info["max_abs_error"] < 1e-4  # the committed file: fterm_s3, it 1551
    assert int(actor.obs_normalizer.count) == NORMALIZER_COUNT
    assert torch.equal(actor.distribution.std_param, std_before)  # the std is train.init_noise_std's
    # independently of the loader's own check: the committed file and the loaded actor on plausible observations
    session = open_session(COMMITTED)
    obs = actor.obs_normalizer.inverse(torch.randn(5, 450, generator=torch.Generator().manual_seed(1)))
    policy = actor.as_onnx(verbose=False).eval()
    for row in obs:
        expected = policy(row[None]).detach().numpy()
        got = session.run(None, {"obs": row[None].numpy()})[0]
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_a_policy_of_another_env_or_shape_is_refused_in_one_line(tmp_path):
    from upright.training.warm_start import load_actor_from_onnx

    actor, meta = _getup_actor_and_metadata()
    with pytest.raises(ValueError, match=r"trained for another env \('joint_names'"):
        load_actor_from_onnx(actor, COMMITTED, meta | {"joint_names": list(reversed(meta["joint_names"]))})
    with pytest.raises(ValueError, match="action_mode 'relative' but this env's is 'absolute'"):
        load_actor_from_onnx(actor, COMMITTED, meta | {"action_mode": "absolute"})
    corrupt = tmp_path / "policy.onnx"
    corrupt.write_bytes(COMMITTED.read_bytes()[:5000])
    with pytest.raises(ValueError, match="not a readable ONNX file") as err:
        load_actor_from_onnx(actor, corrupt, meta)
    assert "\n" not in str(err.value) and "train.init_policy=null" in str(err.value)
    one_frame, meta1 = _getup_actor_and_metadata(env_overrides=("env.getup.actor_history=1",))
    with pytest.raises(ValueError, match="observation_history_length.*set env.getup.actor_history=6") as err:
        load_actor_from_onnx(one_frame, COMMITTED, meta1)
    assert "\n" not in str(err.value)
    narrow, meta = _getup_actor_and_metadata(actor_hidden_dims=[256, 128])
    shapes = r"layer shapes differ .*train.actor_hidden_dims.*\(512, 450\) vs \(256, 450\)"
    with pytest.raises(ValueError, match=shapes):
        load_actor_from_onnx(narrow, COMMITTED, meta)
    # a graph whose weights are not the ones it computes with: the parity check refuses it
    model = onnx.load(str(COMMITTED))
    next(i for i in model.graph.initializer if i.name == "mlp.0.bias").name = "computed_bias"
    gemm = next(n for n in model.graph.node if "mlp.0.bias" in n.input)
    gemm.input[list(gemm.input).index("mlp.0.bias")] = "computed_bias"
    extra = onnx.helper.make_tensor("mlp.0.bias", onnx.TensorProto.FLOAT, [512], np.ones(512, np.float32).tolist())
    model.graph.initializer.append(extra)
    tampered = tmp_path / "tampered.onnx"
    onnx.save(model, str(tampered))
    actor, meta = _getup_actor_and_metadata()
    with pytest.raises(ValueError, match="onnxruntime and the loaded actor disagree"):
        load_actor_from_onnx(actor, tampered, meta)


def test_bad_init_policy_settings_are_one_line(tmp_path):
    from upright.conf.validate import validate_overrides

    msg = validate_overrides(["task=standup", f"train.init_policy={tmp_path / 'none.onnx'}"])
    assert "no such policy file" in msg
    msg = validate_overrides(["task=standup", f"train.init_policy={COMMITTED}", f"resume={tmp_path}"])
    assert "Give one of them" in msg
    assert "must be >= 0" in validate_overrides(["task=standup", "train.critic_warmup_iterations=-1"])
    base = ROOT / "upright" / "assets" / "policies" / "panda_lift_residual" / "base_policy.onnx"
    lift = ROOT / "upright" / "assets" / "policies" / "panda_lift" / "policy.onnx"
    msg = validate_overrides(["task=lift", f"policy.base={base}", f"train.init_policy={lift}"])
    assert "a residual run" in msg and "Give one of them" in msg
    assert validate_overrides(["task=standup", f"train.init_policy={COMMITTED}"]) is None


@pytest.mark.slow
def test_train_from_the_committed_policy_keeps_its_actor_through_the_warm_up(tmp_path):
    """``train.py`` from the committed policy with a 2-iteration warm-up: after it, the run's exported actor is the
    committed one (same actions) while the critic has learned; the third iteration moves the actor."""
    from upright.policy_io.session import open_session

    args = [*SMALL, *HIST, f"train.init_policy={COMMITTED}", "train.init_noise_std=0.3"]
    args += ["train.critic_warmup_iterations=2"]
    args += ["train.max_iterations=2", "run.root=runs", "run.name=warm"]
    proc = run_train(args, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"Actor initialised from {COMMITTED} (its iteration 1551" in proc.stdout
    run_dir = tmp_path / "runs" / "standup" / "warm"
    obs = np.random.default_rng(0).normal(size=(8, 450)).astype(np.float32)

    def actions(path: pathlib.Path) -> np.ndarray:
        session = open_session(path)
        return np.concatenate([session.run(None, {"obs": row[None]})[0] for row in obs])

    np.testing.assert_allclose(actions(run_dir / "policy.onnx"), actions(COMMITTED), atol=1e-5)
    ckpt = {it: torch.load(run_dir / f"model_{it}.pt", weights_only=False) for it in (0, 1)}
    std = ckpt[1]["actor_state_dict"]["distribution.std_param"]
    assert torch.allclose(std, torch.full_like(std, 0.3))
    critic = [ckpt[it]["critic_state_dict"] for it in (0, 1)]
    assert any(not torch.equal(critic[0][k], critic[1][k]) for k in critic[0])
    # one more iteration: the warm-up is over and the actor trains (a resume does not repeat the warm-up)
    args = [a for a in args if not a.startswith(("train.init_policy", "train.max_iterations"))]
    proc = run_train([*args, "train.max_iterations=3", f"resume={run_dir}"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert np.abs(actions(run_dir / "policy.onnx") - actions(COMMITTED)).max() > 1e-4


def test_init_policy_for_another_recipe_fails_before_training(tmp_path):
    args = ["task=standup", "recipe=host", "env.num_envs=2", "sim.num_threads=1", "train.max_iterations=1"]
    proc = run_train([*args, f"train.init_policy={COMMITTED}", "run.root=runs", "run.name=bad"], tmp_path)
    assert proc.returncode != 0
    assert "train.init_policy=" in proc.stderr and "trained for another env" in proc.stderr
    assert not (tmp_path / "runs" / "standup" / "bad").exists()  # a failed start leaves no run folder
