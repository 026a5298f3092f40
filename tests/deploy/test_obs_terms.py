"""The neutral observation terms (upright.policy_io.obs_terms): one function per term gives the same values on the
training env's torch state and on the daemon's numpy reading, and the daemon's numpy frame equals the env's frame bit
for bit, for HoST's standup terms and for a recipe=getup policy (relative actions, β 0.6, 5 terms, one frame)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from deploy_testlib import write_linear_policy

from upright.deploy.metadata import load_policy_spec
from upright.deploy.observation import ObservationBuilder, projected_gravity
from upright.deploy.robot_config import g1_29dof
from upright.managers.observation import compute_frame
from upright.policy_io import obs_terms
from upright.tasks.metadata import observation_metadata
from upright.tasks.standup import observations as host_obs
from upright.tasks.standup.getup import observations as getup_obs
from upright.tasks.standup.state import StandupState

J = 23


def _reading(seed: int, rows: int = 1):
    """(torch state, numpy quaternions) of ``rows`` random readings; the state's projected gravity is the daemon's
    function of the quaternion (float32), as the IMU gives it."""
    rng = np.random.default_rng(seed)
    state = StandupState.zeros(rows, J)
    state.q = torch.from_numpy(rng.uniform(-2, 2, (rows, J)).astype(np.float32))
    state.dq = torch.from_numpy(rng.uniform(-30, 30, (rows, J)).astype(np.float32))
    state.base_ang_vel = torch.from_numpy(rng.uniform(-5, 5, (rows, 3)).astype(np.float32))
    quat = rng.standard_normal((rows, 4))
    state.projected_gravity = torch.from_numpy(np.stack([projected_gravity(qt) for qt in quat]).astype(np.float32))
    state.action = torch.from_numpy(rng.uniform(-150, 150, (rows, J)).astype(np.float32))  # beyond the ±100 clip
    state.beta = torch.full((rows,), 0.6)
    return state, quat


class _NumpyReading:
    def __init__(self, state: StandupState):
        for name in ("q", "dq", "base_ang_vel", "projected_gravity", "action", "beta"):
            setattr(self, name, getattr(state, name).numpy().copy())


def test_each_term_is_the_same_on_torch_and_numpy():
    state, _ = _reading(0, rows=4)
    reading = _NumpyReading(state)
    assert [t.name for t in obs_terms.TERMS] == [t.name for t in host_obs.OBSERVATION_TERMS]
    for term in obs_terms.TERMS:
        on_torch, on_numpy = term.func(state), term.func(reading)
        assert isinstance(on_torch, torch.Tensor) and isinstance(on_numpy, np.ndarray), term.name
        assert on_torch.shape == on_numpy.shape == (4, term.width(J)), term.name
        assert on_numpy.dtype == np.float32 and np.array_equal(on_torch.numpy(), on_numpy), term.name
        assert term.sensor, term.name
    assert host_obs.observation_dims(J) == [3, 3, J, J, J, 1]
    assert getup_obs.observation_dims(J) == [3, 3, J, J, J]
    assert getup_obs.ACTOR_SENSORS["base_ang_vel"] == "pelvis IMU gyro"


def _builder_frames(spec, state, quat) -> np.ndarray:
    builder = ObservationBuilder(spec)
    return np.stack(
        [
            builder.frame(
                state.q[i].numpy(), state.dq[i].numpy(), state.base_ang_vel[i].numpy(), quat[i], state.action[i].numpy()
            )
            for i in range(state.q.shape[0])
        ]
    )


@pytest.mark.parametrize("seed", [1, 2])
def test_host_frame_is_bit_identical_to_the_env(linear_policy, seed):
    spec = load_policy_spec(linear_policy, g1_29dof())
    state, quat = _reading(seed, rows=3)
    state.beta = torch.full((3,), spec.action_scale)
    env_frame = compute_frame(host_obs.OBSERVATION_TERMS, state, clip=host_obs.OBS_CLIP).numpy()
    frames = _builder_frames(spec, state, quat)
    assert frames.dtype == np.float32 and frames.shape == env_frame.shape == (3, 76)
    assert np.array_equal(frames, env_frame)


@pytest.fixture(scope="module")
def getup_policy(tmp_path_factory, standup_metadata):
    """A recipe=getup policy file: the exporter's getup observation keys (5 terms, one frame, scale 1), relative
    actions with β 0.6, on the standup file's joints."""
    meta = dict(standup_metadata)
    for key in [k for k in meta if k.startswith("observation_")]:
        del meta[key]
    dims = getup_obs.observation_dims(J)
    meta.update(observation_metadata(getup_obs.ACTOR_TERMS, dims, 1, getup_obs.OBS_CLIP, getup_obs.ACTOR_SENSORS))
    meta.update(action_scale=0.6, action_mode="relative", mdp="getup")
    path = tmp_path_factory.mktemp("getup") / "policy.onnx"
    return write_linear_policy(path, sum(dims), J, meta, gain=0.003)


def test_getup_policy_loads_runs_and_its_frame_is_bit_identical_to_the_env(getup_policy):
    from upright.policy_io.mlp import OnnxPolicy

    spec = load_policy_spec(getup_policy, g1_29dof())
    assert spec.observation_names == tuple(t.name for t in getup_obs.ACTOR_TERMS)
    assert (spec.action_mode, spec.action_scale, spec.history_length, spec.frame_dim) == ("relative", 0.6, 1, 75)
    state, quat = _reading(3, rows=3)
    env_frame = compute_frame(getup_obs.ACTOR_TERMS, state, clip=getup_obs.OBS_CLIP).numpy()
    frames = _builder_frames(spec, state, quat)
    assert np.array_equal(frames, env_frame)
    builder = ObservationBuilder(spec)
    action = OnnxPolicy(spec)(builder.push(frames[0]))
    assert action.shape == (J,) and np.all(np.isfinite(action))
