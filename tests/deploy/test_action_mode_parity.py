"""Both action modes end to end, in process: a freshly constructed actor exported as train.py exports it (the env's
``env.action_mode`` in the metadata), then run by the deploy controller on the env's own states, gives the env's
actions and PD targets step for step; evaluation builds its env in the policy's mode."""

from __future__ import annotations

import time

import numpy as np
import onnxruntime as ort
import pytest
import torch
from omegaconf import OmegaConf

from upright.deploy.controller import Controller, ControllerConfig
from upright.deploy.metadata import load_policy_spec
from upright.deploy.robot import RobotReading
from upright.deploy.robot_config import g1_29dof
from upright.deploy.safety import SafetyConfig
from upright.deploy.state_machine import Mode
from upright.tasks.registry import policy_metadata
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.curriculum import CurriculumCfg
from upright.tasks.standup.env import StandupEnv
from upright.tasks.standup.randomization import DomainRandCfg

BETA = 0.6
"""β of the comparison (not 1, so a missing or doubled scale shows)."""
STEPS = 8
"""Actuated steps compared."""


def _env(mode: str) -> StandupEnv:
    curriculum = CurriculumCfg(enabled=False, beta_init=BETA, beta_min=BETA)
    cfg = StandupEnvCfg(
        num_envs=1, obs_noise=False, action_mode=mode, curriculum=curriculum, domain_rand=DomainRandCfg(enabled=False)
    )
    return StandupEnv(cfg, SimCfg(num_threads=1), seed=0)


@pytest.fixture(scope="module", params=["relative", "absolute"])
def exported(request, tmp_path_factory):
    """(mode, policy.onnx) of a freshly constructed actor, exported by the runner with the env's metadata."""
    from upright.conf.train_cfg import TrainCfg
    from upright.training.rsl_rl_cfg import rsl_rl_config
    from upright.training.runner import UprightRunner

    mode = request.param
    env = _env(mode)
    try:
        torch.manual_seed(0)
        runner = UprightRunner(
            env,
            rsl_rl_config(OmegaConf.structured(TrainCfg())),
            log_dir=None,
            device="cpu",
            onnx_metadata=policy_metadata("standup", env),
        )
        path = tmp_path_factory.mktemp(f"{mode}_policy") / "policy.onnx"
        runner.export_onnx(path)
    finally:
        env.close()
    return mode, path


def test_controller_targets_equal_the_env_targets(exported):
    mode, path = exported
    spec = load_policy_spec(path, g1_29dof())
    assert spec.action_mode == mode and spec.action_scale == pytest.approx(BETA)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def act(obs: np.ndarray) -> np.ndarray:
        return session.run(None, {"obs": np.asarray(obs, np.float32)})[0]

    robot = g1_29dof()
    safety = SafetyConfig(max_target_delta=None, clamp_torque=False, tilt_limit_rad=None)  # as training: no clamps
    c = Controller(spec, robot, act, ControllerConfig(policy_ramp_s=0.0, auto_engage_s=0.0, safety=safety))
    c.start(time.monotonic_ns())
    c.sm.mode = Mode.HOLD  # the daemon's state before POLICY (the env's unactuated phase)
    c.command.kp[:], c.command.kd[:], c.command.q[:] = c.kp, c.kd, c.default
    rd = RobotReading(len(robot.joint_names))
    rd.ok[:] = True
    rd.imu_ok, rd.imu_seq = True, 0
    rd.q[c.held] = spec.held_joint_pos
    lower, upper = c.target_lower[c.pol], c.target_upper[c.pol]  # the daemon's target bounds (safety.target_bounds)

    env = _env(mode)
    try:
        zero = torch.zeros(1, env.num_actions)
        while int(env.episode_length_buf[0]) < env.cfg.unactuated_steps:
            env.step(zero)
        differs = 0.0
        for k in range(STEPS):
            s = env.state  # the state the next action is computed on (both sides)
            rd.q[c.pol], rd.dq[c.pol] = s.q[0].double().numpy(), s.dq[0].double().numpy()
            rd.imu_gyro[:], rd.imu_quat[:] = s.base_ang_vel[0].double().numpy(), s.base_quat[0].double().numpy()
            rd.imu_seq += 1
            rd.t_ns = time.monotonic_ns()
            c.on_cycle(rd, k * c.decimation, 0)
            assert c.mode == Mode.POLICY, c.sm.damping_reason
            a = act(env.get_observations()["actor"].numpy())
            env.step(torch.from_numpy(a))
            np.testing.assert_allclose(c.proposal, a[0], atol=2e-5, rtol=0)  # same input, same action
            env_target = env.p_target[0].double().numpy()
            # the daemon's target bounds are the clamp it cannot switch off: compare with the bounded env target
            np.testing.assert_allclose(c.command.q[c.pol], np.clip(env_target, lower, upper), atol=5e-5, rtol=0)
            unclamped = (env_target > lower) & (env_target < upper)
            np.testing.assert_allclose(c.executed[unclamped], a[0][unclamped], atol=5e-5, rtol=0)
            other = (s.q[0].double().numpy() if mode == "absolute" else c.default[c.pol]) + BETA * a[0]
            differs = max(differs, float(np.abs(other - env_target).max()))
        assert differs > 0.05  # the other mode's rule would have given other targets: the comparison can fail
    finally:
        env.close()


def test_evaluation_builds_its_env_in_the_policys_action_mode(exported):
    from upright.training.evaluate import make_eval_env

    mode, path = exported
    kwargs = {"num_envs": 1, "episode_length_s": 0.1, "domain_rand": False, "overrides": ["sim.num_threads=1"]}
    env, _, beta, _ = make_eval_env(str(path), **kwargs)
    try:
        assert env.cfg.action_mode == mode and beta == pytest.approx(BETA)
    finally:
        env.close()
    other = "relative" if mode == "absolute" else "absolute"
    kwargs["overrides"] = [*kwargs["overrides"], f"env.action_mode={other}"]
    with pytest.raises(ValueError, match=f"env.action_mode={other} contradicts the policy"):
        make_eval_env(str(path), **kwargs)


def test_play_takes_a_schema_2_files_mode_from_its_run_config(exported, tmp_path):
    """A schema-2 file always said relative: play and evaluation read the mode from the run config beside it."""
    import onnx

    from upright.training.policy_loading import policy_action_mode

    mode, path = exported
    assert policy_action_mode(str(path)) == mode
    model = onnx.load(str(path))
    for p in model.metadata_props:
        if p.key == "upright_metadata_version":
            p.value = '"2"'
        elif p.key == "action_mode":
            p.value = '"relative: p_target = q_measured + action_scale * action, held for one control period"'
    onnx.save(model, str(tmp_path / "policy.onnx"))
    assert policy_action_mode(str(tmp_path / "policy.onnx")) == "relative"  # no run config beside it
    OmegaConf.save(OmegaConf.create({"env": {"action_mode": mode}}), tmp_path / "config_12.yaml")
    assert policy_action_mode(str(tmp_path)) == mode  # a run directory: its policy.onnx and newest config
