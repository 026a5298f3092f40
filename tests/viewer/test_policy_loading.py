"""play.py's policies: run dir / .pt / .onnx / zero / random, and clear errors for bad paths and mismatches."""

from __future__ import annotations

import pytest
import torch
from viewer_testlib import run_play, write_onnx_policy


def _obs_dim(env) -> int:
    return int(env.get_observations()["actor"].shape[-1])


def test_zero_and_random(standup_env):
    from upright.viewer.policy import load_policy

    obs = standup_env.get_observations()["actor"]
    assert torch.equal(load_policy("zero", standup_env, "standup")(obs), torch.zeros(1, 23))
    a = load_policy("random", standup_env, "standup", seed=3)(obs)
    assert a.shape == (1, 23) and a.abs().max() <= 1.0 and a.abs().max() > 0


def test_onnx_with_matching_metadata_runs(tmp_path, standup_env, standup_meta):
    from upright.viewer.policy import load_policy

    path = write_onnx_policy(tmp_path / "policy.onnx", _obs_dim(standup_env), 23, standup_meta, gain=0.01)
    policy = load_policy(str(path), standup_env, "standup")
    out = policy(standup_env.get_observations()["actor"])
    assert out.shape == (1, 23) and torch.isfinite(out).all()
    # a run directory resolves to its policy.onnx
    assert load_policy(str(tmp_path), standup_env, "standup")(standup_env.get_observations()["actor"]).shape == (1, 23)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("does/not/exist.onnx", "no such file or directory"),
        ("empty_run_dir", "neither policy.onnx nor a model_<iteration>.pt"),
        ("notes.txt", "expected a .pt checkpoint or an .onnx file"),
        ("garbage.pt", "cannot read as a torch checkpoint"),
        ("garbage.onnx", "cannot read as an ONNX model"),
    ],
)
def test_bad_policy_paths(tmp_path, standup_env, spec, message):
    from upright.policy_io.source import PolicyLoadError
    from upright.viewer.policy import load_policy

    (tmp_path / "empty_run_dir").mkdir()
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "garbage.pt").write_bytes(b"not a checkpoint")
    (tmp_path / "garbage.onnx").write_bytes(b"not onnx")
    with pytest.raises(PolicyLoadError, match=message):
        load_policy(str(tmp_path / spec) if not spec.startswith("does/") else spec, standup_env, "standup")


def test_onnx_without_metadata(tmp_path, standup_env):
    from upright.policy_io.source import PolicyLoadError
    from upright.viewer.policy import load_policy

    path = write_onnx_policy(tmp_path / "bare.onnx", _obs_dim(standup_env), 23, None)
    with pytest.raises(PolicyLoadError, match="not a self-describing upright policy"):
        load_policy(str(path), standup_env, "standup")


@pytest.mark.parametrize(
    "key, value",
    [
        ("joint_names", None),  # reversed below
        ("observation_history_length", 5),
        ("task", "walk"),
        ("control_dt", 0.01),
        ("action_mode", "absolute"),  # the env runs relative: the actions would mean other targets
    ],
)
def test_onnx_metadata_mismatch(tmp_path, standup_env, standup_meta, key, value):
    from upright.policy_io.source import PolicyLoadError
    from upright.viewer.policy import load_policy

    meta = dict(standup_meta)
    meta[key] = list(reversed(meta["joint_names"])) if key == "joint_names" else value
    path = write_onnx_policy(tmp_path / "other.onnx", _obs_dim(standup_env), 23, meta)
    with pytest.raises(PolicyLoadError, match=f"does not match task 'standup'(.|\\n)*{key}: policy has"):
        load_policy(str(path), standup_env, "standup")


def test_play_session_runs_an_absolute_policy_in_absolute_mode(tmp_path, standup_meta, capsys):
    """play.py builds its env with the policy's env.action_mode (here absolute, the config says relative), so the
    session's targets are the default pose + β·a."""
    from hydra import compose, initialize

    from upright.viewer.config import register_play_config
    from upright.viewer.session import PolicySession

    meta = dict(standup_meta) | {"action_mode": "absolute", "action_formula": "p_target = default_joint_pos + ..."}
    path = write_onnx_policy(tmp_path / "policy.onnx", 456, 23, meta, gain=0.01)
    register_play_config()
    with initialize(version_base=None, config_path=None):
        cfg = compose(
            config_name="play", overrides=["task=standup", f"policy={path}", "beta=0.6", "env.unactuated_steps=0"]
        )
    s = PolicySession(cfg)
    try:
        assert s.env.cfg.action_mode == "absolute" and "env.action_mode=absolute" in capsys.readouterr().out
        obs = s.env.get_observations()["actor"]
        s.step()
        a = s.policy(obs)
        default = s.env.default_pose[s.env.robot.policy_joint_ids]
        torch.testing.assert_close(s.env.p_target, default + 0.6 * a, atol=1e-5, rtol=0)
    finally:
        s.close()


def test_onnx_input_width_mismatch(tmp_path, standup_env, standup_meta):
    from upright.policy_io.source import PolicyLoadError
    from upright.viewer.policy import load_policy

    path = write_onnx_policy(tmp_path / "narrow.onnx", 76, 23, standup_meta)
    with pytest.raises(PolicyLoadError, match="has width 76, the task's observation has 456"):
        load_policy(str(path), standup_env, "standup")


def _train_cfg(**overrides):
    from omegaconf import OmegaConf

    from upright.conf.train_cfg import TrainCfg

    cfg = OmegaConf.structured(TrainCfg)
    for k, v in overrides.items():
        cfg[k] = v
    return cfg


def _write_checkpoint(path, env, train_cfg):
    import contextlib
    import io

    from upright.training.rsl_rl_cfg import rsl_rl_config
    from upright.training.runner import UprightRunner

    threads = torch.get_num_threads()
    with contextlib.redirect_stdout(io.StringIO()):
        runner = UprightRunner(env, rsl_rl_config(train_cfg), log_dir=None)
    torch.set_num_threads(threads)
    torch.save({**runner.alg.save(), "iter": 4, "infos": {"completed_iterations": 5}}, path)
    obs = env.get_observations()
    return runner.get_inference_policy()(obs)


def test_checkpoint_loads_and_matches(tmp_path, standup_env):
    from upright.viewer.policy import load_policy

    cfg = _train_cfg()
    expected = _write_checkpoint(tmp_path / "model_4.pt", standup_env, cfg)
    policy = load_policy(str(tmp_path / "model_4.pt"), standup_env, "standup", train_cfg=cfg)
    got = policy(standup_env.get_observations()["actor"])
    assert torch.allclose(got, expected, atol=1e-6)
    # a run directory without policy.onnx resolves to its latest checkpoint
    (tmp_path / "model_10.pt").write_bytes((tmp_path / "model_4.pt").read_bytes())
    from upright.policy_io.source import resolve_policy_path

    assert resolve_policy_path(str(tmp_path)).name == "model_10.pt"


def test_checkpoint_of_other_layout(tmp_path, standup_env):
    from upright.policy_io.source import PolicyLoadError
    from upright.viewer.policy import load_policy

    _write_checkpoint(tmp_path / "model_0.pt", standup_env, _train_cfg(actor_hidden_dims=[64, 32]))
    with pytest.raises(PolicyLoadError, match="does not fit task"):
        load_policy(str(tmp_path / "model_0.pt"), standup_env, "standup", train_cfg=_train_cfg())


def test_checkpoint_takes_its_actor_layout_from_the_run_config(tmp_path, standup_env):
    """A checkpoint trained with ``train.actor_hidden_dims`` off the task's default loads with the caller's (default)
    ``train`` config when the run's ``config_<n>.yaml`` sits beside it (evaluate and play are not given the run's
    ``train.*``); without that file the mismatch is reported, naming the task."""
    from upright.policy_io.source import PolicyLoadError
    from upright.viewer.policy import load_policy

    cfg = _train_cfg(actor_hidden_dims=[64, 32])
    expected = _write_checkpoint(tmp_path / "model_0.pt", standup_env, cfg)
    with pytest.raises(PolicyLoadError, match="does not fit task 'standup'"):
        load_policy(str(tmp_path / "model_0.pt"), standup_env, "standup", train_cfg=_train_cfg())
    (tmp_path / "config_0.yaml").write_text("task_name: standup\ntrain:\n  actor_hidden_dims: [64, 32]\n")
    policy = load_policy(str(tmp_path / "model_0.pt"), standup_env, "standup", train_cfg=_train_cfg())
    got = policy(standup_env.get_observations()["actor"])
    assert torch.allclose(got, expected, atol=1e-6)


def test_cli_reports_metadata_mismatch_clearly(tmp_path, standup_env, standup_meta):
    meta = {**standup_meta, "joint_names": list(reversed(standup_meta["joint_names"]))}
    write_onnx_policy(tmp_path / "other.onnx", _obs_dim(standup_env), 23, meta)
    proc = run_play(["task=standup", "policy=other.onnx", "video=out.mp4"], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: ") and "joint_names: policy has" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out.mp4").exists()
    proc = run_play(["task=standup", "polcy=zero"], tmp_path)
    assert proc.returncode == 2 and "did you mean policy?" in proc.stderr
