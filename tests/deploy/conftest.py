"""Fixtures of the deploy tests: the Menagerie path, a standup policy file with the exporter's metadata."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
os.environ.setdefault("MENAGERIE_ROOT", str((ROOT / ".." / "shared" / "menagerie").resolve()))


@pytest.fixture(scope="session")
def standup_metadata():
    """The exact metadata train.py writes into a standup policy (from the registry, on a 1-env env)."""
    from upright.tasks.registry import make_env, policy_metadata
    from upright.tasks.standup.config import SimCfg, StandupEnvCfg

    env = make_env("standup", StandupEnvCfg(num_envs=1), SimCfg(num_threads=1), device="cpu", seed=0)
    try:
        return policy_metadata("standup", env)
    finally:
        env.close()


@pytest.fixture(scope="session")
def linear_policy(tmp_path_factory, standup_metadata):
    """A small standup policy file (linear + tanh, fixed seed) carrying the real exporter metadata."""
    from deploy_testlib import write_linear_policy

    path = tmp_path_factory.mktemp("policy") / "policy.onnx"
    return write_linear_policy(path, 456, 23, standup_metadata, gain=0.003)


@pytest.fixture(scope="session")
def latest_policy(tmp_path_factory, linear_policy):
    """The trained standup policy committed under upright/assets/policies/ (so CI runs it), else the newest
    trained checkpoint under logs/standup/*/policy.onnx (copied with its weights, since a training run may
    rewrite it), or the linear policy when there is neither."""
    from upright.deploy.metadata import load_policy_spec
    from upright.policy_io.schema import PolicyMetadataError

    committed = sorted((ROOT / "upright" / "assets" / "policies").glob("g1_standup_*/policy.onnx"))
    trained = sorted((ROOT / "logs" / "standup").glob("*/policy.onnx"), key=lambda p: p.stat().st_mtime, reverse=True)
    candidates = committed + trained
    for src in candidates:
        dst_dir = tmp_path_factory.mktemp("trained")
        try:
            shutil.copy2(src, dst_dir / "policy.onnx")
            if (src.parent / "policy.onnx.data").exists():
                shutil.copy2(src.parent / "policy.onnx.data", dst_dir / "policy.onnx.data")
            load_policy_spec(dst_dir / "policy.onnx")
            import onnxruntime as ort

            ort.InferenceSession(str(dst_dir / "policy.onnx"), providers=["CPUExecutionProvider"])
            return dst_dir / "policy.onnx", src
        except (OSError, PolicyMetadataError, Exception):  # noqa: BLE001 - a half-written file: try the next one
            continue
    return linear_policy, None
