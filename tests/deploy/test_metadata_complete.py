"""The policy file is the whole contract: every key a consumer needs is written, matches what the env does,
and a file lacking any of them is refused with a one-line error that names the fix."""

from __future__ import annotations

import pathlib
import shutil

import numpy as np
import onnx
import pytest
import torch
from deploy_testlib import write_linear_policy

from upright.deploy.metadata import load_policy_spec
from upright.deploy.robot_config import g1_29dof
from upright.policy_io import schema as policy_schema
from upright.policy_io.schema import PolicyMetadataError
from upright.tasks.registry import policy_metadata
from upright.tasks.standup import observations

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _jsonable(meta: dict) -> dict:
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in meta.items()}


def _drop_key(path, key: str) -> None:
    model = onnx.load(str(path))
    kept = [(p.key, p.value) for p in model.metadata_props if p.key != key]
    del model.metadata_props[:]
    for k, v in kept:
        entry = model.metadata_props.add()
        entry.key, entry.value = k, v
    onnx.save(model, str(path))


NEEDED = (
    "joint_names",
    "kp",
    "kd",
    "torque_limit",
    "default_joint_pos",
    "held_joint_names",
    "held_kp",
    "held_kd",
    "held_torque_limit",
    "held_joint_pos",
    "action_mode",
    "action_scale",
    "action_clip",
    "control_dt",
    "decimation",
    "observation_names",
    "observation_dims",
    "observation_scales",
    "observation_descriptions",
    "observation_clip",
    "observation_history_length",
    "history_layout",
    "unactuated_steps",
    "privileged_inputs",
    "training_assistance",
    "input_name",
    "output_name",
)
"""What a consumer needs to run the policy from the file alone: all of it must be required."""


def test_exported_metadata_has_every_required_key_with_the_env_values(standup_metadata):
    assert set(NEEDED) <= set(policy_schema.REQUIRED_KEYS)
    meta = standup_metadata
    assert not [k for k in policy_schema.REQUIRED_KEYS if k not in meta and k != "upright_metadata_version"]
    assert meta["history_layout"] == policy_schema.HISTORY_LAYOUT == "frames_oldest_first"
    assert meta["observation_frame_dim"] == sum(meta["observation_dims"]) == 76
    assert meta["observation_dim"] == meta["observation_history_length"] * 76 == 456
    assert len(meta["observation_descriptions"]) == len(meta["observation_names"]) == len(meta["observation_scales"])
    assert "rad/s" in meta["observation_descriptions"][0]  # units come with the terms
    assert len(meta["torque_limit"]) == 23 and len(meta["held_torque_limit"]) == len(meta["held_joint_names"]) == 6
    assert meta["decimation"] * meta["sim_dt"] == pytest.approx(meta["control_dt"]) == 0.02
    assert meta["unactuated_steps"] == 30
    assert meta["privileged_inputs"] == []
    assert "pull force" in meta["training_assistance"]
    assert meta["action_mode"] == "relative"  # env.action_mode's default (HoST)
    assert meta["action_formula"].startswith("p_target = q_measured + action_scale * action")


def test_a_privileged_observation_term_is_declared(monkeypatch):
    """A term a robot cannot measure (e.g. the training pull force) shows up in privileged_inputs."""
    from upright.tasks.registry import make_env
    from upright.tasks.standup.config import SimCfg, StandupEnvCfg

    env = make_env("standup", StandupEnvCfg(num_envs=1), SimCfg(num_threads=1), device="cpu", seed=0)
    try:
        pull = observations.ObservationTerm("pull_force", lambda s: torch.zeros(1, 1), 1.0, 0.0)
        monkeypatch.setattr(observations, "OBSERVATION_TERMS", (*observations.OBSERVATION_TERMS, pull))
        assert policy_metadata("standup", env)["privileged_inputs"] == ["pull_force"]
    finally:
        env.close()


def test_env_does_what_the_metadata_says_about_history_and_the_unactuated_start(standup_metadata):
    """Whole frames, oldest first: each step shifts the stacked input by one frame; the first unactuated_steps
    steps push zero frames (whatever the action), and the first actuated input has H-1 zero frames."""
    from upright.tasks.registry import make_env
    from upright.tasks.standup.config import SimCfg, StandupEnvCfg
    from upright.tasks.standup.randomization import DomainRandCfg

    h, f, n = (standup_metadata[k] for k in ("observation_history_length", "observation_frame_dim", "unactuated_steps"))
    cfg = StandupEnvCfg(num_envs=1, obs_noise=False, domain_rand=DomainRandCfg(enabled=False))
    env = make_env("standup", cfg, SimCfg(num_threads=1), device="cpu", seed=0)
    try:
        torch.manual_seed(0)
        prev = None
        for step in range(n + 3):
            obs = env.step(torch.rand(1, 23) * 2 - 1)[0]["actor"].reshape(h, f)
            if env.episode_length_buf[0] < n:  # still unactuated: zero frames
                assert torch.all(obs == 0), step
            elif env.episode_length_buf[0] == n:  # the first input the policy acts on
                assert torch.all(obs[:-1] == 0) and torch.any(obs[-1] != 0)
                last_action = obs[-1, 3 + 3 + 23 + 23 : 3 + 3 + 23 + 23 + 23]
                assert torch.all(last_action == 0)  # the unactuated steps applied no action
            else:
                torch.testing.assert_close(obs[:-1], prev[1:])  # oldest first: frames shift toward index 0
            prev = obs
    finally:
        env.close()


@pytest.mark.parametrize("key", policy_schema.REQUIRED_KEYS)
def test_deploy_refuses_a_file_missing_any_key_with_one_line_naming_the_fix(tmp_path, standup_metadata, key):
    path = write_linear_policy(tmp_path / "p.onnx", 456, 23, _jsonable(standup_metadata))
    load_policy_spec(path, g1_29dof())  # complete: accepted
    _drop_key(path, key)
    with pytest.raises(PolicyMetadataError) as err:
        load_policy_spec(path, g1_29dof())
    message = str(err.value)
    assert "\n" not in message and key in message
    assert "python -m upright.training.export" in message


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"history_layout": "terms_oldest_first"}, "history_layout 'terms_oldest_first' is not supported"),
        ({"observation_history_start": "last_frame"}, "observation_history_start 'last_frame' is not supported"),
        ({"privileged_inputs": ["pull_force"]}, "inputs a robot does not provide"),
        ({"upright_metadata_version": "1"}, "metadata version '1'.*python -m upright.training.export"),
    ],
)
def test_deploy_refuses_other_layouts_and_privileged_inputs(tmp_path, standup_metadata, change, message):
    meta = _jsonable(standup_metadata)
    path = write_linear_policy(tmp_path / "p.onnx", 456, 23, meta)
    if "upright_metadata_version" in change:  # attach_metadata always writes the current version: edit the file
        model = onnx.load(str(path))
        next(p for p in model.metadata_props if p.key == "upright_metadata_version").value = '"1"'
        onnx.save(model, str(path))
    else:
        write_linear_policy(path, 456, 23, meta | change)
    with pytest.raises(PolicyMetadataError, match=message):
        load_policy_spec(path, g1_29dof())


def test_refresh_metadata_adds_only_missing_keys_and_checks_the_contract(tmp_path, standup_metadata):
    from upright.training.export import refresh_metadata
    from upright.training.onnx_export import read_metadata

    src = tmp_path / "run"
    src.mkdir()
    shutil.copy2(ROOT / "upright" / "assets" / "policies" / "g1_standup_ground" / "config.yaml", src / "config.yaml")
    meta = _jsonable(standup_metadata) | {"action_scale": 0.4, "iteration": 7}
    path = write_linear_policy(src / "policy.onnx", 456, 23, meta)
    for key in ("history_layout", "unactuated_steps", "privileged_inputs", "held_torque_limit"):
        _drop_key(path, key)
    with pytest.raises(PolicyMetadataError, match="history_layout"):
        load_policy_spec(path, g1_29dof())
    added = refresh_metadata(path)
    assert added == sorted(["history_layout", "unactuated_steps", "privileged_inputs", "held_torque_limit"])
    refreshed = read_metadata(path)
    assert refreshed["action_scale"] == 0.4 and refreshed["iteration"] == 7  # the file's own values stay
    load_policy_spec(path, g1_29dof())
    # a file whose contract disagrees with the config is not "refreshed" into a wrong one
    bad = write_linear_policy(src / "policy.onnx", 456, 23, meta | {"kp": [1.0] * 23})
    _drop_key(bad, "history_layout")
    with pytest.raises(PolicyMetadataError, match="'kp'"):
        refresh_metadata(bad)


def test_committed_policy_is_complete():
    # the G1 policies the daemon runs (the lift policies under upright/assets/policies/ are simulation-only)
    paths = sorted((ROOT / "upright" / "assets" / "policies").glob("g1_*/policy.onnx"))
    assert paths
    for path in paths:
        spec = load_policy_spec(path, g1_29dof())
        assert spec.metadata["history_layout"] == "frames_oldest_first" and spec.metadata["privileged_inputs"] == []


def _as_schema_2(path) -> None:
    """Rewrite ``path``'s metadata as a schema-2 exporter wrote it: version 2, a formula string as action_mode
    (relative whatever the run trained with), no action_formula."""
    _drop_key(path, "action_formula")
    model = onnx.load(str(path))
    for p in model.metadata_props:
        if p.key == "upright_metadata_version":
            p.value = '"2"'
        elif p.key == "action_mode":
            p.value = '"relative: p_target = q_measured + action_scale * action, held for one control period"'
    onnx.save(model, str(path))


@pytest.mark.parametrize("mode", ["relative", "absolute"])
def test_refresh_gives_a_schema_2_file_the_action_mode_of_its_run_config(tmp_path, standup_metadata, mode):
    """A schema-2 file always said relative; the daemon refuses it, and --refresh-metadata takes the mode from the
    run config (a run directory's newest config_<n>.yaml here), keeping the file's other values."""
    from omegaconf import OmegaConf

    from upright.training.export import refresh_metadata
    from upright.training.onnx_export import read_metadata

    src = tmp_path / "run"
    src.mkdir()
    cfg = OmegaConf.load(ROOT / "upright" / "assets" / "policies" / "g1_standup_ground" / "config.yaml")
    OmegaConf.save(cfg, src / "config_0.yaml")  # an older segment of the run: relative
    cfg.env.action_mode = mode
    OmegaConf.save(cfg, src / "config_400.yaml")
    path = write_linear_policy(src / "policy.onnx", 456, 23, _jsonable(standup_metadata) | {"action_scale": 0.4})
    _as_schema_2(path)
    with pytest.raises(PolicyMetadataError, match="metadata version '2'.*--refresh-metadata"):
        load_policy_spec(path, g1_29dof())
    assert refresh_metadata(path) == ["action_formula", "action_mode"]
    meta = read_metadata(path)
    assert meta["upright_metadata_version"] == "3" and meta["action_mode"] == mode and meta["action_scale"] == 0.4
    assert load_policy_spec(path, g1_29dof()).action_mode == mode
    if mode == "absolute":  # a schema-3 file keeps its mode: one that disagrees with the config is refused
        cfg.env.action_mode = "relative"
        OmegaConf.save(cfg, src / "config_400.yaml")
        with pytest.raises(PolicyMetadataError, match="'action_mode' is 'absolute' in the file but 'relative'"):
            refresh_metadata(path)
