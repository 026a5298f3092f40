"""Replay without a policy: qpos trajectories (.npz) and deploy-daemon datasets (LeRobot v3)."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pyarrow as pa
import pytest
import torch


def _rollout(env, steps: int, seed: int = 0):
    """Random-action steps of env 0: qpos, and what the deploy daemon logs (q, dq, gyro, gravity of the policy
    joints)."""
    gen = torch.Generator().manual_seed(seed)
    qpos, state = [], []
    for _ in range(steps):
        env.step(torch.rand(1, env.num_actions, generator=gen) * 2 - 1)
        s = env.state
        qpos.append(env.sim.state.qpos[0].double().numpy().copy())
        state.append(torch.cat([s.q[0], s.dq[0], s.base_ang_vel[0], s.projected_gravity[0]]).numpy().copy())
    return np.array(qpos), np.array(state, np.float32)


def test_npz_roundtrip_and_replay_session(tmp_path, standup_env):
    from upright.viewer.session import ReplaySession
    from upright.viewer.trajectory import Trajectory, load_replay, model_joint_names, save_trajectory

    qpos, _ = _rollout(standup_env, 40)
    episode = np.r_[np.zeros(20, np.int64), np.ones(20, np.int64)]
    traj = Trajectory(
        qpos,
        0.02,
        episode,
        np.r_[np.arange(20), np.arange(20)] * 0.02,
        "standup",
        "unitree_g1_29dof",
        model_joint_names(standup_env.model),
    )
    path = save_trajectory(tmp_path / "eval.npz", traj, source="test")
    loaded = load_replay(path, standup_env.model)
    assert np.array_equal(loaded.qpos, qpos) and loaded.dt == 0.02 and loaded.task == "standup"

    session = ReplaySession(loaded.select_episode(1), standup_env.model)
    assert np.allclose(session.data.qpos, qpos[20])
    infos = [session.step() for _ in range(19)]
    assert np.allclose(session.data.qpos, qpos[39]) and infos[-1].done and not session.finished
    assert session.step() is infos[-1] and session.finished  # past the end: stays on the last frame
    assert math.isfinite(infos[0].head_height)  # from the model's head and feet sites
    session.reset()
    assert np.allclose(session.data.qpos, qpos[20]) and session.status()["reset_count"] == 1


def test_replay_errors(tmp_path, standup_env):
    from upright.viewer.trajectory import TrajectoryError, load_replay

    with pytest.raises(TrajectoryError, match="no such file or folder"):
        load_replay(tmp_path / "missing.npz", standup_env.model)
    np.savez(tmp_path / "short.npz", qpos=np.zeros((5, 10)), dt=0.02)
    with pytest.raises(TrajectoryError, match="nq=36"):
        load_replay(tmp_path / "short.npz", standup_env.model)
    np.savez(tmp_path / "noq.npz", x=np.zeros(3))
    with pytest.raises(TrajectoryError, match=r"keys \['qpos', 'dt'\] are missing"):
        load_replay(tmp_path / "noq.npz", standup_env.model)
    (tmp_path / "folder").mkdir()
    with pytest.raises(TrajectoryError, match="not a LeRobot dataset"):
        load_replay(tmp_path / "folder", standup_env.model)
    np.savez(tmp_path / "ok.npz", qpos=np.zeros((3, 36)), dt=0.02)
    with pytest.raises(TrajectoryError, match="has episodes \\[0\\]"):
        load_replay(tmp_path / "ok.npz", standup_env.model).select_episode(4)


def _write_deploy_dataset(root, joint_names, state: np.ndarray, fps: int = 50) -> None:
    from upright.dataset_io.lerobot import LeRobotV3Writer, column
    from upright.dataset_io.records import extra_info, frame_features

    frame_names = [f"obs.{i}" for i in range(76)]
    features = frame_features(tuple(joint_names), frame_names)
    writer = LeRobotV3Writer(root, features, fps, "unitree_g1_29dof", extra_info("standup", "policy.onnx"))
    n = len(state)
    cols = {}
    for name, f in features.items():
        if name == "observation.state":
            values = state
        elif f["shape"] == [1]:
            values = np.zeros(n, {"float32": np.float32, "int64": np.int64, "bool": np.bool_}[f["dtype"]])
        else:
            values = np.zeros((n, f["shape"][0]), np.float32)
        cols[name] = column(values, f)
    cols["frame_index"] = pa.array(np.arange(n, dtype=np.int64))
    writer.add_episode(0, pa.table(cols), "standup", "success")


def test_deploy_dataset_replay_rebuilds_qpos(tmp_path, standup_env):
    from upright.deploy.observation import projected_gravity
    from upright.viewer.session import ReplaySession
    from upright.viewer.trajectory import load_replay

    env = standup_env
    env.reset_envs(torch.zeros(1, dtype=torch.long))
    env.state = env._read_state()
    true_qpos, state = _rollout(env, 60, seed=1)
    _write_deploy_dataset(tmp_path / "ds", env.robot.policy_joint_names, state)
    default = env.model.qpos0.copy()
    default[env._q_adr.numpy()] = env.default_pose.numpy()
    traj = load_replay(tmp_path / "ds", env.model, default)
    assert traj.qpos.shape == (60, env.model.nq) and traj.dt == pytest.approx(0.02)
    assert "base pose estimated" in traj.note

    pol_adr = env._pq_adr.numpy()
    assert np.allclose(traj.qpos[:, pol_adr], true_qpos[:, pol_adr], atol=1e-6)  # joint angles as logged
    held_adr = env._q_adr[env._held_ids].numpy()
    assert np.allclose(traj.qpos[:, held_adr], default[held_adr])
    for t in range(0, 60, 7):  # the estimated base has the logged tilt ...
        assert np.allclose(projected_gravity(traj.qpos[t, 3:7]), state[t, -3:], atol=1e-4)
    # ... and rests on the ground: once the robot has landed (the reset drops it from 0.5 m during the first
    # 0.6 s), the estimated height is close to the simulated one. Not exact: bounding boxes make it a little
    # high, and the held joints (not logged, shown at their default) deflect under random actions.
    err = np.abs(traj.qpos[35:, 2] - true_qpos[35:, 2])
    assert np.median(err) < 0.06 and err.max() < 0.15, err

    session = ReplaySession(traj, env.model, "deploy dataset")
    for _ in range(59):
        session.step()
    assert session.finished is False and np.allclose(session.data.qpos, traj.qpos[-1])
    lowest = min(session.data.geom_xpos[g, 2] for g in range(env.model.ngeom) if env.model.geom_bodyid[g] > 0)
    assert lowest > -0.1
    assert mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_JOINT, env.robot.policy_joint_names[0]) >= 0
