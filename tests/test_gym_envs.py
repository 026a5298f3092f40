"""The gymnasium interface (upright.gym_envs; G1Standup-v0 and PandaLift-v0): registration, gymnasium's own env checker,
seeding, time limits and final observations, the vector env over one batched simulation, rendering, refused input, and a
third-party trainer (Stable-Baselines3 PPO, examples/sb3_ppo_standup.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pathlib
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
os.environ.setdefault("MENAGERIE_ROOT", str((ROOT / ".." / "shared" / "menagerie").resolve()))

from upright.gl import choose_offscreen_gl  # noqa: E402

choose_offscreen_gl()  # before MuJoCo is imported: EGL or OSMesa for rgb_array frames on a headless machine

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402

import upright  # noqa: E402,F401
from upright.gym_envs.core import UprightVectorEnv  # noqa: E402

ID = "upright/G1Standup-v0"
SHORT = {"episode_length_s": 0.1, "unactuated_steps": 2}
"""5-step episodes (0.1 s) whose policy acts from the 3rd step: time limits within a few steps."""


@pytest.fixture(scope="module")
def short_env():
    env = gymnasium.make(ID, overrides=SHORT)
    yield env
    env.close()


def test_ids_are_registered_once_with_both_entry_points():
    from upright.gym_envs.registration import gym_entries, register_envs

    spec = gymnasium.spec(ID)
    assert spec.entry_point == "upright.gym_envs.standup:make_env"
    assert spec.vector_entry_point == "upright.gym_envs.standup:make_vector_env"
    assert spec.max_episode_steps is None  # the env truncates at its own time limit
    assert ID in [e.id for e in gym_entries()]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # re-registering would warn "Overriding environment"
        assert register_envs() == []


def test_check_env_passes_unchanged_with_render_checks():
    env = gymnasium.make(ID)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)  # spaces, seeded resets, step determinism, fresh data, both render modes, close
    env.close()
    expected = ("symmetric and normalized space",)  # the action space is the env's clip range, ±100
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        expected += ("render_mode='human' needs a display",)
    unexpected = [str(w.message) for w in caught if not any(e in str(w.message) for e in expected)]
    assert not unexpected, unexpected


def test_spaces_match_what_the_env_returns(short_env):
    assert short_env.observation_space == gymnasium.spaces.Box(-100.0, 100.0, (456,), np.float32)
    assert short_env.action_space == gymnasium.spaces.Box(-100.0, 100.0, (23,), np.float32)
    obs, info = short_env.reset(seed=0)
    assert obs.dtype == np.float32 and obs.shape == (456,) and info == {}
    obs, reward, terminated, truncated, info = short_env.step(short_env.action_space.sample())
    assert obs in short_env.observation_space and isinstance(reward, float)
    assert info["reward_groups"].shape == (4,) and short_env.unwrapped.reward_group_names == (
        "task",
        "regularization",
        "style",
        "post_task",
    )
    assert reward == pytest.approx(float(info["reward_groups"].sum()), rel=1e-5, abs=1e-7)


def _rollout(env, seed: int, steps: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = [env.reset(seed=seed)[0]]
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(rng.uniform(-1, 1, 23).astype(np.float32))
        out += [obs, np.array([reward, terminated, truncated])]
        if terminated or truncated:
            out.append(env.reset()[0])
    return out


def test_same_seed_same_trajectory_across_episodes(short_env):
    a = _rollout(short_env, seed=7, steps=12)  # crosses two time limits: reset() without seed continues the streams
    b = _rollout(short_env, seed=7, steps=12)
    c = _rollout(short_env, seed=8, steps=12)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_reseeded_env_equals_a_freshly_built_one():
    """reset(seed=s) reseeds in place (no recompiling): it must equal StandupEnv(seed=s), domain randomisation and
    observation noise included (both on: the training defaults)."""
    from upright.tasks.registry import make_env

    env = gymnasium.make(ID)
    env.reset(seed=1)
    for _ in range(3):
        env.step(env.action_space.sample())
    obs, _ = env.reset(seed=5)
    task = env.unwrapped.task
    fresh = make_env("standup", task.cfg, task.sim_cfg, device="cpu", seed=5)
    np.testing.assert_array_equal(obs, fresh.get_observations()["actor"][0].numpy())
    for name in ("friction", "restitution", "payload", "com_offset", "link_mass_scale", "kp_factor", "torque_offset"):
        torch.testing.assert_close(getattr(task.env.randomizer, name), getattr(fresh.randomizer, name), rtol=0, atol=0)
    actions = torch.rand(40, 1, 23) * 2 - 1
    for a in actions:  # past the 30-step unactuated start
        obs, *_ = env.step(a[0].numpy())
        fresh_obs, *_ = fresh.step(a)
        np.testing.assert_array_equal(obs, fresh_obs["actor"][0].numpy())
    fresh.close()
    env.close()


def test_time_limit_truncates_and_final_observation_is_the_unreset_one():
    """The env resets inside the step that ends an episode; the observation the episode ended on is rebuilt. It
    must equal what a twin env with a longer time limit shows after the same steps (no observation noise)."""
    from upright.tasks.registry import make_env

    overrides = {**SHORT, "obs_noise": False}
    env = gymnasium.make(ID, overrides=overrides)
    env.reset(seed=3)
    task = env.unwrapped.task
    twin_cfg = dataclasses.replace(task.cfg, episode_length_s=10.0)
    twin = make_env("standup", twin_cfg, task.sim_cfg, device="cpu", seed=3)
    flags = []
    for k in range(5):
        a = np.full(23, 0.05 * (k + 1), np.float32)
        obs, _, terminated, truncated, _ = env.step(a)
        twin_obs, *_ = twin.step(torch.from_numpy(a)[None])
        flags.append((terminated, truncated))
        np.testing.assert_array_equal(obs, twin_obs["actor"][0].numpy())
    assert flags == [(False, False)] * 4 + [(False, True)]
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(np.zeros(23, np.float32))
    start, _ = env.reset()
    assert not np.any(start)  # a new episode: all frames zero in the unactuated start
    twin.close()
    env.close()


def test_vector_env_is_one_batched_simulation_with_same_step_autoreset():
    venv = gymnasium.make_vec(
        ID, num_envs=3, vectorization_mode="vector_entry_point", num_threads=1, overrides={**SHORT, "obs_noise": False}
    )
    assert isinstance(venv, UprightVectorEnv) and isinstance(venv, gymnasium.vector.VectorEnv)
    assert venv.unwrapped.task.env.num_envs == 3  # N envs in one StandupEnv, not N Python envs
    assert venv.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.SAME_STEP
    assert venv.observation_space.shape == (3, 456) and venv.action_space.shape == (3, 23)
    obs, _ = venv.reset(seed=2)
    assert obs.dtype == np.float32 and obs in venv.observation_space
    for _ in range(5):
        before = obs
        obs, rewards, terminated, truncated, infos = venv.step(np.zeros((3, 23), np.float32))
        assert rewards.dtype == np.float64 and terminated.dtype == truncated.dtype == np.bool_
        assert infos["reward_groups"].shape == (3, 4)
        np.testing.assert_allclose(rewards, infos["reward_groups"].sum(axis=1), rtol=1e-5, atol=1e-7)
    assert truncated.all() and not terminated.any() and infos["_final_obs"].all()
    final = np.stack(list(infos["final_obs"]))
    assert final.shape == (3, 456) and final.dtype == np.float32
    np.testing.assert_array_equal(final[:, :-76], before[:, 76:])  # the history moved on by one frame...
    assert np.any(final[:, -76:]) and not np.any(obs)  # ...the ended episodes' last frame; obs: the new episodes
    venv.close()


def test_vector_env_torch_option_and_seeding():
    kwargs = dict(num_envs=2, vectorization_mode="vector_entry_point", num_threads=1, overrides=SHORT, as_torch=True)
    venv = gymnasium.make_vec(ID, **kwargs)
    obs, _ = venv.reset(seed=4)
    assert isinstance(obs, torch.Tensor) and obs.shape == (2, 456) and obs.dtype == torch.float32
    a = torch.full((2, 23), 0.1)
    traj = [venv.step(a)[0] for _ in range(4)]
    obs2, _ = venv.reset(seed=4)
    torch.testing.assert_close(obs2, obs, rtol=0, atol=0)
    for x in traj:
        o, r, te, tr, infos = venv.step(a)
        assert isinstance(r, torch.Tensor) and te.dtype == torch.bool
        torch.testing.assert_close(o, x, rtol=0, atol=0)
    with pytest.raises(ValueError, match="one int seed"):
        venv.reset(seed=[1, 5])
    venv.close()


def test_rgb_array_frames():
    env = gymnasium.make(ID, render_mode="rgb_array", render_size=(96, 64), overrides=SHORT)
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (64, 96, 3) and frame.dtype == np.uint8
    assert frame.std() > 5  # a scene, not a blank image
    env.close()
    env.close()  # a second close is allowed


def test_bad_input_is_refused_with_the_fix(short_env):
    short_env.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(23,\)"):
        short_env.step(np.zeros(22, np.float32))
    with pytest.raises(ValueError, match="NaN"):
        short_env.step(np.full(23, np.nan, np.float32))
    with pytest.raises(ValueError, match="no field 'episode_len'; valid: .*episode_length_s"):
        gymnasium.make(ID, overrides={"episode_len": 1.0})
    with pytest.raises(ValueError, match="pass terrain= to make"):
        gymnasium.make(ID, overrides={"terrain": "wall"})
    with pytest.raises(ValueError, match="platform"):
        gymnasium.make(ID, terrain="moon")
    with pytest.raises(ValueError, match="render_mode"):
        gymnasium.make(ID, render_mode="ascii")
    with pytest.raises(ValueError, match="reward_weights needs 4"):
        gymnasium.make(ID, reward_weights=[1.0, 2.0])


def test_stable_baselines3_ppo_trains_on_the_vector_env():
    pytest.importorskip("stable_baselines3", reason="pip install -e '.[dev]' installs stable-baselines3")
    spec = importlib.util.spec_from_file_location("sb3_example", ROOT / "examples" / "sb3_ppo_standup.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    lines = []
    model = example.train(num_envs=4, iterations=2, n_steps=8, seed=0, overrides=SHORT, log=lines.append)
    assert model.num_timesteps == 2 * 8 * 4
    episodes = list(model.ep_info_buffer)  # SB3's VecMonitor: every env ended episodes at the 5-step time limit
    assert len(episodes) >= 4 * 3 and all(e["l"] <= 5 for e in episodes)
    assert model._n_updates == 2 * 2  # two PPO updates of two epochs each ran
    assert "finished episodes" in lines[0]


def test_human_mode_draws_every_step_in_mujocos_window(monkeypatch):
    """With a display, ``human`` opens MuJoCo's passive viewer and syncs it at reset and at every step (the window is
    replaced by a recorder here: CI has no display)."""
    import mujoco.viewer

    class Window:
        def __init__(self):
            self.cam, self.synced, self.closed = mujoco.MjvCamera(), [], False

        def is_running(self):
            return not self.closed

        def lock(self):
            import contextlib

            return contextlib.nullcontext()

        def sync(self):
            self.synced.append(self.data.qpos.copy())

        def close(self):
            self.closed = True

    window = Window()

    def launch_passive(model, data, **kwargs):
        window.data = data
        return window

    monkeypatch.setenv("DISPLAY", ":99")
    monkeypatch.setattr(mujoco.viewer, "launch_passive", launch_passive)
    env = gymnasium.make(ID, render_mode="human", overrides=SHORT)
    env.reset(seed=0)
    for _ in range(3):
        env.step(np.zeros(23, np.float32))
    assert env.render() is None
    assert len(window.synced) == 1 + 3 + 1
    np.testing.assert_allclose(window.synced[-1], env.unwrapped.task.render_qpos(0))
    assert window.synced[0][2] != window.synced[3][2]  # the robot moved (dropping onto the floor)
    env.close()
    assert window.closed


LIFT = "upright/PandaLift-v0"


def test_lift_passes_check_env_and_reproduces_seeded_trajectories():
    env = gymnasium.make(LIFT)
    assert env.observation_space == gymnasium.spaces.Box(-100.0, 100.0, (49,), np.float32)
    assert env.action_space == gymnasium.spaces.Box(-1.0, 1.0, (8,), np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    expected = () if (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) else ("needs a display",)
    unexpected = [str(w.message) for w in caught if not any(e in str(w.message) for e in expected)]
    assert not unexpected, unexpected
    env.close()

    short = gymnasium.make(LIFT, overrides={"episode_length_s": 0.1})

    def rollout(seed):
        rng = np.random.default_rng(0)
        out = [short.reset(seed=seed)[0]]
        for _ in range(12):  # crosses two 5-step time limits
            obs, reward, terminated, truncated, _ = short.step(rng.uniform(-1, 1, 8).astype(np.float32))
            out += [obs, np.array([reward, terminated, truncated])]
            if terminated or truncated:
                out.append(short.reset()[0])
        return out

    a, b, c = rollout(3), rollout(3), rollout(4)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, y) for x, y in zip(a, c, strict=True))
    short.close()


def test_lift_vector_env_final_observation_is_the_unreset_one():
    from upright.tasks.registry import make_env

    overrides = {"episode_length_s": 0.1, "domain_rand.obs_noise_scale": 0.0}
    venv = gymnasium.make_vec(
        LIFT, num_envs=2, vectorization_mode="vector_entry_point", num_threads=1, overrides=overrides
    )
    venv.reset(seed=6)
    task = venv.unwrapped.task
    twin = make_env("lift", dataclasses.replace(task.cfg, episode_length_s=10.0), task.sim_cfg, device="cpu", seed=6)
    for k in range(5):
        a = np.full((2, 8), 0.2 if k % 2 else -0.1, np.float32)
        obs, rewards, terminated, truncated, infos = venv.step(a)
        twin_obs, *_ = twin.step(torch.from_numpy(a))
    assert truncated.all() and not terminated.any()
    np.testing.assert_array_equal(np.stack(list(infos["final_obs"])), twin_obs["actor"].numpy())
    assert infos["reward_groups"].shape == (2, 3) and venv.unwrapped.reward_group_names == (
        "reach",
        "lift",
        "regularization",
    )
    twin.close()
    venv.close()


@pytest.mark.slow
def test_vector_env_on_mjx_is_one_mjx_simulation_and_matches_native():
    pytest.importorskip("jax")  # CI installs the [mjx] extra; compiling the G1 for CPU-JAX takes minutes
    from upright.sim.mjx import MjxSim

    overrides = {**SHORT, "obs_noise": False, "domain_rand.enabled": False}
    runs = {}
    for backend in ("native", "mjx"):
        venv = gymnasium.make_vec(
            ID, num_envs=2, vectorization_mode="vector_entry_point", num_threads=1, backend=backend, overrides=overrides
        )
        obs, _ = venv.reset(seed=3)
        traj = [obs]
        for _ in range(5):  # 0.1 s episodes: the 5th step truncates and autoresets (same step)
            obs, rewards, terminated, truncated, infos = venv.step(np.full((2, 23), 0.2, np.float32))
            traj.append(obs)
        assert truncated.all() and not terminated.any() and infos["_final_obs"].all()
        runs[backend] = (np.stack(traj), type(venv.unwrapped.task.env.sim), rewards)
        venv.close()
    assert runs["mjx"][1] is MjxSim  # one batched MJX simulation behind the vector env
    assert runs["mjx"][0].dtype == np.float32 and runs["mjx"][0].shape == runs["native"][0].shape == (6, 2, 456)
    np.testing.assert_allclose(runs["mjx"][0], runs["native"][0], atol=1e-3)  # measured max |diff| 1.9e-7 (4 steps)
    np.testing.assert_allclose(runs["mjx"][2], runs["native"][2], rtol=1e-3, atol=1e-5)


def test_getup_recipe_passes_gymnasiums_checker_and_reseeds_like_a_fresh_env():
    """``recipe="getup"``: gymnasium's checker passes, the observation is the get-up actor's 6 frames (6 x 75), the
    reward is the one ``getup`` group, and reset(seed=s) equals a freshly built env of that seed (encoder bias
    included)."""
    from upright.tasks.registry import make_env

    env = gymnasium.make(ID, recipe="getup", overrides={"episode_length_s": 0.3})
    check_env(env.unwrapped, skip_render_check=True)
    assert env.observation_space.shape == (6 * 75,)  # the recipe's env.getup.actor_history=6
    obs, _ = env.reset(seed=5)
    task = env.unwrapped.task
    assert task.reward_group_names == ("getup",)
    fresh = make_env("standup", task.cfg, task.sim_cfg, device="cpu", seed=5)
    torch.testing.assert_close(task.env.encoder_bias, fresh.encoder_bias, rtol=0, atol=0)
    assert float(fresh.encoder_bias.abs().max()) > 0
    np.testing.assert_array_equal(obs, fresh.get_observations()["actor"][0].numpy())
    for a in torch.rand(20, 1, 23) * 2 - 1:  # up to the time limit: the final observation is the unreset one
        obs, _, terminated, truncated, info = env.step(a[0].numpy())
        fresh_obs, *_ = fresh.step(a)
        if terminated or truncated:
            assert truncated and obs.shape == (6 * 75,) and np.isfinite(obs).all()
            break
        np.testing.assert_array_equal(obs, fresh_obs["actor"][0].numpy())
    assert truncated
    fresh.close()
    env.close()
    with pytest.raises(ValueError, match="valid: getup, host"):
        gymnasium.make(ID, recipe="cartesian")


def test_getup_recipe_with_an_actor_history_stacks_frames_up_to_the_final_observation():
    """``overrides={"getup.actor_history": 3}``: a (225,) observation, frames oldest first; the final observation at
    the time limit is the previous observation's last two frames and the unreset state's frame."""
    env = gymnasium.make(ID, recipe="getup", overrides={"episode_length_s": 0.3, "getup.actor_history": 3})
    check_env(env.unwrapped, skip_render_check=True)
    assert env.observation_space.shape == (225,)
    obs, _ = env.reset(seed=5)
    np.testing.assert_array_equal(obs[:75], obs[150:])  # the first frame fills the history
    for a in torch.rand(20, 23) * 2 - 1:
        prev = obs
        obs, _, terminated, truncated, _ = env.step(a.numpy())
        assert obs.shape == (225,)
        np.testing.assert_array_equal(obs[:150], prev[75:])  # shifted by one frame, also in the final observation
        if terminated or truncated:
            break
    assert truncated
    env.close()
