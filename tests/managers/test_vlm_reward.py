"""``vlm_reward`` (VLM-RMs, :mod:`upright.managers.vlm_reward`): the paper's formula against hand-computed values, the
config errors, the CLIP preprocessing against the library's own image processor, and the term in real envs (MuJoCo
rendering, a ``transformers`` CLIP of the library's architecture with random weights written in the test), down to
``train.py recipe=vlm_kneel`` (offline without weights: one line; with a small model: it trains)."""

from __future__ import annotations

import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from upright.managers.clip_embedder import ClipEmbedder, save_random_clip
from upright.managers.vlm_reward import VLMRewardCfg, goal_baseline_reward, validate_vlm_reward

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOAL, BASELINE = "a humanoid robot kneeling", "a humanoid robot"
SIZE = 32
"""Input size of the small CLIP, px; the env tests render at it, so the library's processor only rescales."""


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory) -> pathlib.Path:
    from transformers import CLIPConfig

    layers = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)
    config = CLIPConfig(
        text_config=layers, vision_config={**layers, "image_size": SIZE, "patch_size": 8}, projection_dim=16
    )
    return save_random_clip(tmp_path_factory.mktemp("clip"), config, seed=3)


# ---------------------------------------------------------------------------------------------------- the formula
E = torch.eye(3)
G, B = E[0], E[1]  # g = (1, 0, 0), b = (0, 1, 0): d = g - b = (1, -1, 0), d/|d| = (1, -1, 0)/sqrt(2)


def test_alpha_0_is_the_plain_cosine_reward():
    x = torch.tensor([[0.6, 0.0, 0.8], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, 0.6, 0.8]])
    # 1 - ½|x - g|² = x·g for unit vectors: 0.6, 0, -1, 0
    assert goal_baseline_reward(x, G, B, 0.0).tolist() == pytest.approx([0.6, 0.0, -1.0, 0.0], abs=1e-6)


def test_alpha_1_counts_only_the_goal_baseline_direction():
    x = torch.tensor([[0.6, 0.0, 0.8], [0.0, 0.0, 1.0], [0.0, 0.0, -1.0], [0.0, 0.6, 0.8]])
    # x - g = (-0.4, 0, 0.8): component along d = -0.4/sqrt2, R = 1 - ½·0.08 = 0.96
    # (0, 0, ±1) - g = (-1, 0, ±1): component -1/sqrt2 either way, R = 1 - ½·½ = 0.75 (z is orthogonal to d)
    # (0, 0.6, 0.8) - g = (-1, 0.6, 0.8): component -1.6/sqrt2, R = 1 - ½·1.28 = 0.36 (toward b: penalised)
    assert goal_baseline_reward(x, G, B, 1.0).tolist() == pytest.approx([0.96, 0.75, 0.75, 0.36], abs=1e-6)
    # a move orthogonal to d changes nothing at α = 1, and does at α = 0
    x2 = torch.nn.functional.normalize(torch.tensor([[0.6, 0.0, 0.8], [0.6, 0.0, -0.8]]), dim=-1)
    assert goal_baseline_reward(x2, G, B, 1.0)[0] == pytest.approx(goal_baseline_reward(x2, G, B, 1.0)[1], abs=1e-6)


def test_alpha_half_by_hand():
    # v = x - g = (-0.4, 0, 0.8); (v·d̂)d̂ = (-0.2, 0.2, 0); Pv = ½(-0.2, 0.2, 0) + ½v = (-0.3, 0.1, 0.4);
    # |Pv|² = 0.26, R = 0.87
    # v = (-1, 0.6, 0.8); (v·d̂)d̂ = (-0.8, 0.8, 0); Pv = (-0.9, 0.7, 0.4); |Pv|² = 1.46, R = 0.27
    x = torch.tensor([[0.6, 0.0, 0.8], [0.0, 0.6, 0.8]])
    assert goal_baseline_reward(x, G, B, 0.5).tolist() == pytest.approx([0.87, 0.27], abs=1e-6)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.7, 1.0])
def test_the_reward_is_maximal_at_the_goal(alpha):
    gen = torch.Generator().manual_seed(0)
    g, b = torch.randn(64, generator=gen), torch.randn(64, generator=gen)
    x = torch.cat([g[None], torch.randn(500, 64, generator=gen), (g + 0.05 * torch.randn(64, generator=gen))[None]])
    r = goal_baseline_reward(x, g, b, alpha)
    assert r[0].item() == pytest.approx(1.0, abs=1e-6)
    assert bool((r <= 1.0 + 1e-6).all()) and int(r.argmax()) == 0
    assert r[-1] > r[1:-1].max()  # near the goal beats random embeddings


def test_embeddings_are_normalised_first():
    x = torch.tensor([[0.6, 0.0, 0.8]])
    assert goal_baseline_reward(5 * x, 3 * G, 2 * B, 0.5).item() == pytest.approx(0.87, abs=1e-6)


def test_goal_equal_to_baseline_is_refused_with_alpha():
    with pytest.raises(ValueError, match="coincide"):
        goal_baseline_reward(torch.ones(1, 3), G, G, 0.5)
    assert goal_baseline_reward(G[None], G, G, 0.0).item() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "change,key",
    [
        ({"goal_prompt": " "}, "goal_prompt"),
        ({"alpha": 1.5}, "alpha"),
        ({"every": 0}, "every"),
        ({"baseline_prompt": GOAL, "alpha": 0.5}, "baseline_prompt"),
        ({"batch_size": 0}, "batch_size"),
        ({"weight": math.nan}, "weight"),
        ({"width": 8}, "width"),
        ({"dtype": "float64"}, "dtype"),
        ({"backend": "vulkan"}, "backend"),
        ({"group": ""}, "group"),
        ({"cpu_threads": -1}, "cpu_threads"),
    ],
)
def test_bad_settings_fail_in_one_line_naming_the_key(change, key):
    cfg = VLMRewardCfg(enabled=True, goal_prompt=GOAL, **{k: v for k, v in change.items() if k != "goal_prompt"})
    if "goal_prompt" in change:
        cfg.goal_prompt = change["goal_prompt"]
    with pytest.raises(ValueError) as err:
        validate_vlm_reward(cfg)
    assert f"env.vlm_reward.{key}" in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------------------- the CLIP model
def _gradient_image(h: int, w: int) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.linspace(0, 1, h), torch.linspace(0, 1, w), indexing="ij")
    return torch.stack([yy * 255, xx * 255, yy * xx * 255], -1).round().to(torch.uint8)


@pytest.mark.parametrize("shape", [(SIZE, SIZE), (40, 48), (64, 50)])
def test_preprocessing_matches_the_library_image_processor(clip_dir, shape):
    from transformers import CLIPImageProcessorPil

    img = _gradient_image(*shape)
    ours = ClipEmbedder(str(clip_dir)).preprocess(img[None])
    ref = CLIPImageProcessorPil.from_pretrained(str(clip_dir))(images=[img.numpy()], return_tensors="pt").pixel_values
    assert ours.shape == ref.shape == (1, 3, SIZE, SIZE)
    # same size: exact; resized: PIL rounds to uint8 after its bicubic, torch does not (~1/255 before normalising)
    assert (ours - ref).abs().max().item() <= (1e-6 if shape == (SIZE, SIZE) else 0.02)


def test_text_embeddings_are_computed_once_per_prompt(clip_dir):
    emb = ClipEmbedder(str(clip_dir))
    g = emb.text(GOAL)
    assert emb.text(GOAL) is g and g.shape == (16,) and g.norm().item() == pytest.approx(1.0, abs=1e-5)
    assert not torch.allclose(emb.text(BASELINE), g)


# ---------------------------------------------------------------------------------------------------- in real envs
def _env_cfg(clip_dir, **vlm):
    from upright.tasks.standup.config import StandupEnvCfg

    cfg = StandupEnvCfg(num_envs=2, mdp="getup")
    cfg.curriculum.enabled = False
    cfg.vlm_reward = VLMRewardCfg(
        enabled=True,
        model=str(clip_dir),
        goal_prompt=GOAL,
        baseline_prompt=BASELINE,
        alpha=0.5,
        width=SIZE,
        height=SIZE,
        backend="opengl",
        **vlm,
    )
    return cfg


def _expected_rewards(env, clip_dir, alpha: float) -> np.ndarray:
    """R of the envs' current states computed without the term's code: MuJoCo's renderer after mj_forward, the
    library's processor and tokenizer, the paper's P with d unnormalised."""
    import mujoco
    from transformers import CLIPImageProcessorPil, CLIPModel, CLIPTokenizer

    model = CLIPModel.from_pretrained(str(clip_dir)).eval()
    tok = CLIPTokenizer.from_pretrained(str(clip_dir))
    data, renderer = mujoco.MjData(env.model), mujoco.Renderer(env.model, SIZE, SIZE)
    frames = []
    for q in env.sim.state.qpos.cpu().double().numpy():
        data.qpos[:] = q
        mujoco.mj_forward(env.model, data)
        renderer.update_scene(data, camera="tracking")
        for flag in ("mjRND_SHADOW", "mjRND_REFLECTION", "mjRND_SKYBOX"):
            renderer.scene.flags[getattr(mujoco.mjtRndFlag, flag)] = False
        frames.append(renderer.render().copy())
    renderer.close()
    assert all(f.std() > 5 for f in frames)  # the robot and the floor are in view, not a blank frame
    pixels = CLIPImageProcessorPil.from_pretrained(str(clip_dir))(images=frames, return_tensors="pt").pixel_values
    with torch.no_grad():
        x = model.get_image_features(pixel_values=pixels).pooler_output.numpy().astype(np.float64)
        t = model.get_text_features(**tok([GOAL, BASELINE], padding=True, return_tensors="pt")).pooler_output
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    g, b = t.numpy().astype(np.float64) / np.linalg.norm(t.numpy(), axis=1, keepdims=True)
    d = g - b
    v = x - g
    pv = alpha * np.outer(v @ d, d) / (d @ d) + (1 - alpha) * v
    return 1.0 - 0.5 * (pv**2).sum(axis=1)


def test_the_term_in_the_g1_env_renders_embeds_and_holds(clip_dir):
    from upright.managers.batch_render import OpenGLFrameRenderer
    from upright.tasks.registry import make_env
    from upright.tasks.standup.config import SimCfg

    env = make_env("standup", _env_cfg(clip_dir, every=2, weight=2.0), SimCfg(num_threads=1), "cpu", seed=4)
    try:
        assert env.reward_group_names == ("getup", "vlm")  # a new group: one more critic
        term = env.reward_manager.terms[-1]
        assert term.key == "vlm/vlm_reward" and isinstance(term.func.renderer, OpenGLFrameRenderer)
        gen = torch.Generator().manual_seed(0)
        column = []
        for step in range(3):
            _, _, dones, extras = env.step(torch.randn(2, env.num_actions, generator=gen))
            assert not dones.any()
            column.append(extras["reward_groups"][:, 1].clone())
            if step == 0:  # evaluated at the first step: check against the independent computation
                expected = _expected_rewards(env, clip_dir, 0.5)
                assert column[0].numpy() == pytest.approx(2.0 * env.step_dt * expected, abs=1e-6)
        assert torch.equal(column[1], column[0])  # held at the second step
        expected = _expected_rewards(env, clip_dir, 0.5)  # evaluated again at the third, on the moved robot
        assert column[2].numpy() == pytest.approx(2.0 * env.step_dt * expected, abs=1e-6)
        assert not torch.equal(column[2], column[1]) and column[2][0] != column[2][1]
        assert (term.func.calls, term.func.evaluations) == (3, 2)
    finally:
        env.close()


def test_the_term_joins_a_group_of_the_lift_task(clip_dir):
    from upright.tasks.lift.config import LiftEnvCfg
    from upright.tasks.lift.env import LiftEnv
    from upright.tasks.standup.config import SimCfg

    cfg = LiftEnvCfg(num_envs=2)
    cfg.vlm_reward = VLMRewardCfg(
        enabled=True,
        model=str(clip_dir),
        goal_prompt="a robot arm lifting a green cube",
        baseline_prompt="a robot arm",
        alpha=1.0,
        camera="front",
        width=40,
        height=36,
        group="lift",
        backend="opengl",
    )
    env = LiftEnv(cfg, SimCfg(num_threads=1, timestep=0.005), seed=0)
    try:
        assert env.reward_group_names == ["reach", "lift", "regularization"]  # joined an existing group
        assert "lift/vlm_reward" in env.reward_manager.keys
        rewards, terms = env.reward_manager.compute(env._read_state(), env.num_envs, env.device)
        value = terms["lift/vlm_reward"] / env.step_dt
        assert bool(((value > -1.0) & (value <= 1.0)).all()) and value[0] != value[1]  # two cubes, two frames
    finally:
        env.close()
    cfg.vlm_reward.camera = "nose"
    with pytest.raises(ValueError, match=r"env.vlm_reward.camera='nose' is not a camera of the scene; its cameras"):
        LiftEnv(cfg, SimCfg(num_threads=1, timestep=0.005), seed=0)


def test_warp_batch_frames_are_each_envs_own(clip_dir):
    pytest.importorskip("mujoco_warp")
    import mujoco

    from upright.managers.batch_render import WarpFrameRenderer
    from upright.sim.options import PhysicsOptions
    from upright.tasks.standup.scene import standup_scene

    model = standup_scene(PhysicsOptions(timestep=0.005), "ground", ())
    data = mujoco.MjData(model)
    data.qpos[2] = 0.78
    qpos = torch.tensor(np.stack([data.qpos, data.qpos]))
    qpos[1, 0] += 1.0  # env 1 stands 1 m further along x: the tracking camera follows it
    qpos[1, model.jnt_qposadr[model.joint("left_shoulder_roll_joint").id]] = 1.5  # and raises its left arm

    class Sim:
        def __init__(self, q):
            self.state = type("State", (), {"qpos": q})()

    renderer = WarpFrameRenderer(model, "tracking", 48, 48, device="cpu")
    batch, single = renderer.render(Sim(qpos)), renderer.render(Sim(qpos[1:]))
    assert batch.shape == (2, 48, 48, 3) and batch.dtype == torch.uint8
    assert torch.equal(batch[1], single[0]) and not torch.equal(batch[0], batch[1])
    bright = batch.float().mean(-1) > 150  # the silver robot, tracked: in view and near the middle of each frame
    cols = torch.arange(48.0)
    centre = (bright.float().sum(1) * cols).sum(1) / bright.float().sum(dim=(1, 2))
    assert bool((bright.float().mean(dim=(1, 2)) > 0.004).all()) and bool(((centre > 12) & (centre < 36)).all()), centre


# ---------------------------------------------------------------------------------------------------- train.py
def _train(args: list[str], cwd: pathlib.Path, **env) -> subprocess.CompletedProcess:
    """``python train.py *args`` as a user starts it: MUJOCO_GL unset (train.py picks EGL or OSMesa itself)."""
    base = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=280,
        env={**base, "PYTHONUNBUFFERED": "1", **env},
    )


@pytest.mark.slow
def test_offline_without_cached_weights_the_recipe_fails_in_one_line(tmp_path):
    proc = _train(
        ["recipe=vlm_kneel", "env.num_envs=2", "sim.num_threads=1", "run.root=runs"],
        tmp_path,
        HF_HOME=str(tmp_path / "hf"),
        HF_HUB_OFFLINE="1",
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "hf download laion/CLIP-ViT-bigG-14-laion2B-39B-b160k" in errors[0] and "HF_HUB_OFFLINE" in errors[0]
    assert not (tmp_path / "runs" / "standup").exists() or not any((tmp_path / "runs" / "standup").iterdir())


@pytest.mark.slow
def test_the_recipe_trains_with_a_small_clip(clip_dir, tmp_path):
    small = [
        "recipe=vlm_kneel",
        f"env.vlm_reward.model={clip_dir}",
        f"env.vlm_reward.width={SIZE}",
        f"env.vlm_reward.height={SIZE}",
        "env.vlm_reward.dtype=float32",
        "env.vlm_reward.backend=opengl",
        "env.num_envs=4",
        "env.episode_length_s=0.5",
        "train.num_steps_per_env=4",
        "train.max_iterations=2",
        "sim.num_threads=1",
        "run.root=runs",
        "run.name=vlm",
    ]
    proc = _train(small, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("it ")]
    assert lines and "vlm=" in lines[-1] and "getup=" in lines[-1], proc.stdout[-2000:]
    assert (tmp_path / "runs" / "standup" / "vlm" / "policy.onnx").is_file()
    # one weight per group: the recipe's two groups with one weight is named in one line
    proc = _train([*small[:-1], "run.name=bad", "train.group_weights=[1.0]"], tmp_path)
    assert proc.returncode != 0 and "train.group_weights has 1 entries but the env has 2 reward groups" in proc.stderr
