"""train.py end to end through its real CLI: a few iterations with a few envs, then resume."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from train_testlib import run_train, two_iteration_run

from upright.training.onnx_export import read_metadata

SMALL = [
    "task=standup",
    "recipe=host",  # HoST's multi-critic recipe (the default recipe=getup: tests/test_getup_train_smoke.py)
    "env.num_envs=8",
    "env.episode_length_s=0.3",
    "train.num_steps_per_env=8",
    "train.save_interval=1",
    "sim.num_threads=1",
]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    return two_iteration_run(tmp_path_factory.mktemp("train"), "standup", SMALL)


def test_checkpoint_written(first_run):
    run_dir, proc = first_run
    ckpt = run_dir / "model_1.pt"
    assert ckpt.is_file(), sorted(p.name for p in run_dir.iterdir())
    data = torch.load(ckpt, weights_only=False)
    assert data["infos"]["completed_iterations"] == 2
    assert "optimizer_state_dict" in data and "critic_state_dict" in data
    # one progress line per iteration
    lines = [line for line in proc.stdout.splitlines() if line.startswith("it ")]
    assert [line.split()[1] for line in lines] == ["1/2", "2/2"], proc.stdout[-2000:]
    assert "env-steps/s" in lines[0] and "task=" in lines[0] and "ETA" in lines[0]


def test_onnx_with_metadata_written(first_run):
    run_dir, proc = first_run
    assert "ONNX export failed" not in proc.stdout
    path = run_dir / "policy.onnx"
    meta = read_metadata(path)
    assert len(meta["joint_names"]) == 23 and len(meta["kp"]) == 23 and len(meta["default_joint_pos"]) == 23
    assert meta["observation_history_length"] == 6 and sum(meta["observation_dims"]) == 76
    assert meta["control_dt"] == pytest.approx(0.02)
    model = onnx.load(str(path))
    assert model.graph.input[0].name == "obs"
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim][-1] == 456


def test_resume_continues_iteration_count(first_run):
    run_dir, _ = first_run
    before = torch.load(run_dir / "model_1.pt", weights_only=False)
    proc = run_train([*SMALL, "train.max_iterations=4", f"resume={run_dir}"], run_dir.parent.parent.parent)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("it ")]
    assert lines == ["3/4", "4/4"], proc.stdout[-2000:]
    after = torch.load(run_dir / "model_3.pt", weights_only=False)
    assert after["infos"]["completed_iterations"] == 4
    # optimizer state was carried over: Adam's step count keeps growing across the resume
    step_before = before["optimizer_state_dict"]["state"][0]["step"]
    step_after = after["optimizer_state_dict"]["state"][0]["step"]
    assert step_after > step_before


def test_unknown_task_and_override_list_valid_ones(tmp_path):
    proc = run_train(["task=walk"], tmp_path)
    assert proc.returncode == 2 and "Valid tasks: lift, reach, standup" in proc.stderr
    proc = run_train(["task=standup", "env.num_envz=4"], tmp_path)
    assert proc.returncode == 2
    assert "Could not override 'env.num_envz'" in proc.stderr and "did you mean env.num_envs?" in proc.stderr


def test_tensorboard_has_every_group_and_term(first_run):
    from upright.tasks.standup.rewards import REWARD_GROUPS, standup_reward_terms
    from upright.training.plot_scalars import load_scalars

    run_dir, _ = first_run
    tags = set(load_scalars(run_dir))
    expected = {f"Episode_Reward/group/{g}" for g in REWARD_GROUPS}
    expected |= {f"Episode_Reward/{term.key}" for term in standup_reward_terms()}
    expected.add("Metrics/head_height")
    assert expected <= tags, sorted(expected - tags)


def test_onnx_matches_the_checkpoint_actor_to_1e5(first_run):
    from omegaconf import OmegaConf

    from upright.conf.train_cfg import TrainCfg
    from upright.tasks.standup.config import SimCfg, StandupEnvCfg
    from upright.tasks.standup.env import StandupEnv
    from upright.training.policy_loading import checkpoint_policy, expected_metadata, onnx_policy

    run_dir, _ = first_run
    env = StandupEnv(StandupEnvCfg(num_envs=6, unactuated_steps=0), SimCfg(num_threads=1), seed=5)
    for _ in range(5):
        env.step(torch.rand(6, 23) * 2 - 1)
    obs = env.get_observations()["actor"]
    from_onnx = onnx_policy(run_dir / "policy.onnx", expected_metadata("standup", env), obs.shape[1])(obs)
    iteration = read_metadata(run_dir / "policy.onnx")["iteration"]  # completed iterations at export
    from_torch = checkpoint_policy(run_dir / f"model_{iteration - 1}.pt", env, OmegaConf.structured(TrainCfg))(obs)
    assert (from_onnx - from_torch).abs().max() <= 1e-5
    assert from_torch.abs().max() > 1e-3  # a real, non-trivial output


@pytest.mark.slow
def test_train_cli_runs_the_same_task_on_mjx(tmp_path):
    """``python train.py task=standup recipe=host sim.backend=mjx``: the same task code on the MJX backend."""
    pytest.importorskip("jax")
    proc = run_train(
        [
            "task=standup",
            "recipe=host",
            "sim.backend=mjx",
            "env.num_envs=4",
            "env.episode_length_s=0.3",
            "train.num_steps_per_env=4",
            "train.max_iterations=1",
            "run.root=runs",
            "run.name=mjx",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "mjx backend" in proc.stdout
    assert [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("it ")] == ["1/1"]
    assert (tmp_path / "runs/standup/mjx/model_0.pt").is_file()


def test_export_cli_reproduces_the_runs_onnx(first_run, tmp_path):
    """``python -m upright.training.export`` on the last checkpoint gives the run's policy with its metadata."""
    from upright.training.export import main as export_main

    run_dir, _ = first_run
    # the newest checkpoint is the one the run's policy.onnx was exported from (a resume test may have added one)
    ckpt = max(run_dir.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    export_main(["--checkpoint", str(ckpt), "--out", str(tmp_path / "exported")])
    meta = read_metadata(tmp_path / "exported" / "policy.onnx")
    assert meta["checkpoint"] == ckpt.name and meta["action_scale"] == pytest.approx(1.0)
    assert meta["joint_names"] == read_metadata(run_dir / "policy.onnx")["joint_names"]
    assert (tmp_path / "exported" / "config.yaml").is_file()
    import onnxruntime as ort

    obs = np.random.default_rng(0).standard_normal((1, 456)).astype(np.float32)
    ours = ort.InferenceSession(str(tmp_path / "exported" / "policy.onnx")).run(None, {"obs": obs})[0]
    theirs = ort.InferenceSession(str(run_dir / "policy.onnx")).run(None, {"obs": obs})[0]
    np.testing.assert_allclose(ours, theirs, atol=1e-6)


def test_evaluating_a_checkpoint_applies_no_pull_force(first_run):
    """A checkpoint carries its training envs' curriculum (200 N pull); evaluation must not apply it."""
    from upright.training.evaluate import make_eval_env

    run_dir, _ = first_run
    saved = torch.load(run_dir / "model_1.pt", weights_only=False)["infos"]["env_state"]["curriculum"]
    assert float(saved["force"].max()) > 0  # the training envs did have a pull force
    env, policy, beta, _ = make_eval_env(
        str(run_dir / "model_1.pt"), num_envs=2, episode_length_s=1.0, overrides=["sim.num_threads=1"]
    )
    try:
        assert beta == pytest.approx(float(saved["beta"].mean()))
        obs = env.get_observations()["actor"]
        for _ in range(env.max_episode_length - 1):
            env.step(policy(obs))
            obs = env.get_observations()["actor"]
            assert float(env.pull_force.abs().max()) == 0.0
        assert float(env.curriculum.force.abs().max()) == 0.0
    finally:
        env.close()


def copy_checkpoint(ckpt, run_dir):
    """A new run folder ``run_dir`` holding a copy of ``ckpt`` (to resume without touching the shared run)."""
    run_dir.mkdir(parents=True)
    (run_dir / ckpt.name).write_bytes(ckpt.read_bytes())
    return run_dir


@pytest.mark.slow
def test_resume_std_sets_the_action_std_of_a_resumed_run(first_run, tmp_path):
    copy_dir = copy_checkpoint(first_run[0] / "model_1.pt", tmp_path / "runs" / "standup" / "lower_std")
    std_before = torch.load(copy_dir / "model_1.pt", weights_only=False)["actor_state_dict"]["distribution.std_param"]
    assert (std_before - 0.25).abs().min() > 0.3  # init 0.8
    # fixed lr 1e-3: one update of 20 Adam steps moves the std by at most 0.02
    args = [*SMALL, "train.max_iterations=3", f"resume={copy_dir}", "train.resume_std=0.25", "train.schedule=fixed"]
    proc = run_train(args, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Action std set to 0.25 (train.resume_std)" in proc.stdout
    after = torch.load(copy_dir / "model_2.pt", weights_only=False)["actor_state_dict"]["distribution.std_param"]
    assert torch.allclose(after, torch.full_like(after, 0.25), atol=0.021), after
    # a new run has no std to override: the error names the setting to use instead
    args = [*SMALL, "train.max_iterations=1", "run.root=runs", "run.name=fresh", "train.resume_std=0.25"]
    proc = run_train(args, tmp_path)
    assert proc.returncode != 0 and "train.init_noise_std" in proc.stderr


@pytest.mark.slow
def test_noise_cut_sets_the_action_std_at_its_iteration(tmp_path):
    """``train.noise_cut_*``: after the 2nd iteration the std is 0.25 in the checkpoint saved then, and the 3rd
    update (fixed lr 1e-3, 20 Adam steps) moves it by at most 0.02."""
    args = [*SMALL, "train.max_iterations=3", "run.root=runs", "run.name=cut", "train.schedule=fixed"]
    args += ["train.noise_cut_iteration=2", "train.noise_cut_std=0.25", "train.noise_cut_entropy_coef=0"]
    proc = run_train(args, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Noise cut after iteration 2: action std 0.25, entropy coefficient 0.0" in proc.stdout
    run_dir = tmp_path / "runs" / "standup" / "cut"
    std = {
        it: torch.load(run_dir / f"model_{it}.pt", weights_only=False)["actor_state_dict"]["distribution.std_param"]
        for it in (0, 1, 2)
    }
    assert (std[0] - 0.25).abs().min() > 0.3  # init 0.8
    assert torch.equal(std[1], torch.full_like(std[1], 0.25))
    assert torch.allclose(std[2], torch.full_like(std[2], 0.25), atol=0.021) and not torch.equal(std[2], std[1])
    assert torch.load(run_dir / "model_1.pt", weights_only=False)["infos"]["noise_cut_applied"] is True
    assert torch.load(run_dir / "model_0.pt", weights_only=False)["infos"]["noise_cut_applied"] is False
    # resumed past an applied cut: no second cut, the std the policy learned since goes on from the checkpoint
    proc = run_train([*args, "train.max_iterations=4", f"resume={run_dir}"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Noise cut" not in proc.stdout
    std3 = torch.load(run_dir / "model_3.pt", weights_only=False)["actor_state_dict"]["distribution.std_param"]
    assert torch.allclose(std3, std[2], atol=0.021) and not torch.equal(std3, torch.full_like(std3, 0.25))


@pytest.mark.slow
def test_a_run_resumed_past_the_cut_without_it_gets_it_at_the_resume(first_run, tmp_path):
    """A checkpoint from before the setting (2 iterations, no cut) resumed with a cut at iteration 1: cut at once."""
    copy_dir = copy_checkpoint(first_run[0] / "model_1.pt", tmp_path / "runs" / "standup" / "late_cut")
    args = [*SMALL, "train.max_iterations=3", f"resume={copy_dir}", "train.schedule=fixed"]
    args += ["train.noise_cut_iteration=1", "train.noise_cut_std=0.25", "train.noise_cut_entropy_coef=0.002"]
    proc = run_train(args, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Noise cut after iteration 2: action std 0.25, entropy coefficient 0.002" in proc.stdout
    saved = torch.load(copy_dir / "model_2.pt", weights_only=False)
    std = saved["actor_state_dict"]["distribution.std_param"]
    assert torch.allclose(std, torch.full_like(std, 0.25), atol=0.021) and saved["infos"]["noise_cut_applied"]


def test_bad_noise_cut_values_are_one_line():
    from upright.conf.validate import validate_overrides

    assert "train.noise_cut_std must be > 0" in validate_overrides(
        ["task=standup", "train.noise_cut_iteration=5", "train.noise_cut_std=0"]
    )
    assert "train.noise_cut_iteration must be >= 1" in validate_overrides(
        ["task=standup", "train.noise_cut_iteration=0"]
    )
    assert "train.noise_cut_entropy_coef must be >= 0" in validate_overrides(
        ["task=standup", "train.noise_cut_iteration=5", "train.noise_cut_entropy_coef=-1"]
    )
    assert validate_overrides(["task=standup", "train.noise_cut_iteration=5"]) is None


def test_a_hosts_terrain_with_the_getup_recipe_is_one_line_naming_recipe_host():
    from upright.conf.validate import validate_overrides

    for terrain in ("platform", "wall", "slope"):
        problem = validate_overrides(["task=standup", f"terrain={terrain}"])  # the default recipe: getup
        assert problem.startswith(f"terrain={terrain}: recipe=getup") and f"recipe=host terrain={terrain}" in problem
        assert validate_overrides(["task=standup", "recipe=host", f"terrain={terrain}"]) is None
    assert validate_overrides(["task=standup", "terrain=ground"]) is None


def test_unknown_recipe_is_refused_with_the_valid_ones():
    from upright.conf.validate import validate_overrides

    standup = validate_overrides(["task=standup", "recipe=bogus"])
    assert "Valid recipes: host, getup, vlm_kneel (default: getup)." in standup
    assert validate_overrides(["task=lift", "recipe=bogus"]).endswith("Valid recipes: cartesian.")  # its own only
    assert "task=reach has no recipes; drop recipe=bogus" in validate_overrides(["task=reach", "recipe=bogus"])
    assert validate_overrides(["task=standup", "recipe=getup"]) is None
    assert "recipe=cartesian is a task=lift recipe" in validate_overrides(["task=standup", "recipe=cartesian"])


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the lent GPU's session runs it)")
def test_cuda_training_exports_onnx(tmp_path):
    """A run on ``device=cuda:0`` exports ``policy.onnx`` at each save (it failed with a cuda/cpu mix on the H100)."""
    run_dir, proc = two_iteration_run(tmp_path, "standup", [*SMALL, "device=cuda:0"])
    assert "ONNX export failed" not in proc.stdout, proc.stdout[-2000:]
    assert (run_dir / "policy.onnx").is_file()


@pytest.mark.slow
def test_a_model_mjx_cannot_run_is_one_line_naming_the_backends_that_can(tmp_path):
    """The get-up scene's self-collision contact sensor (the pelvis subtree against itself) matches subtrees, which
    MJX's JAX implementation lacks: one line, exit 2, no run folder (not a traceback from inside ``mjx.put_model``)."""
    pytest.importorskip("jax")
    args = ["task=standup", "recipe=getup", "sim.backend=mjx", "env.num_envs=2", "run.root=runs", "run.name=mjx"]
    proc = run_train(args, tmp_path)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert "sim.backend=mjx (impl=jax) cannot run this model" in lines[0] and "sim.backend=warp" in lines[0]
    assert "Traceback" not in proc.stderr and not (tmp_path / "runs").exists()


def test_resuming_a_run_of_the_other_mdp_is_one_line_naming_its_recipe(tmp_path):
    """A HoST run (or one from before the get-up MDP: no env.mdp) resumed with the default recipe=getup, and the
    reverse: one line naming the recipe to resume it with, before any env or network is built."""
    from hydra import compose, initialize

    from upright.conf import register_configs
    from upright.conf.validate import check_resume_mdp

    register_configs()
    with initialize(version_base=None, config_path=None):
        default = compose("config", overrides=["task=standup"])
        host = compose("config", overrides=["task=standup", "recipe=host"])
    for name, env in (("host_run", "env: {mdp: host}\n"), ("old_run", "")):
        run = tmp_path / name
        run.mkdir()
        (run / "config_0.yaml").write_text("task_name: standup\n" + env)
        problem = check_resume_mdp(str(run), default)
        assert "is an env.mdp=host run (config_0.yaml), but this config runs env.mdp=getup" in problem
        assert problem.endswith("resume it with recipe=host.")
        assert check_resume_mdp(str(run), host) is None
    getup_run = tmp_path / "getup_run"
    getup_run.mkdir()
    (getup_run / "config_0.yaml").write_text("task_name: standup\nenv: {mdp: getup}\n")
    assert check_resume_mdp(str(getup_run), default) is None
    assert check_resume_mdp(str(getup_run), host).endswith("resume it with recipe=getup.")
