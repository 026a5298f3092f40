"""Evaluate a VLA chunk policy (TinyVLA checkpoint or exported ``policy.onnx``) on the lift task.

    python -m upright.vla.evaluate_lift --policy runs/tiny_vla [--episodes 50] [--num-envs 25] [--seed 0]
        [--cameras | --no-cameras] [--instruction TEXT] [--n-action-steps K | --temporal-ensemble M]
        [--no-domain-rand] [--out DIR] [env.*=... sim.*=...]

``--policy``: a folder with ``model.pt`` (preferred) or ``policy.onnx``, a ``model.pt`` file, or an ``.onnx`` file;
or a residual run of ``python train.py task=lift policy.base=...`` (its folder or its ``policy.onnx``: the residual
and its base run together, :class:`upright.vla.residual.ResidualChunkPolicy`).
The protocol and the table are those of :mod:`upright.tasks.lift.evaluate` (150-step episodes on the full reset
ranges, curriculum off, domain randomisation on; success = cube centre within 2.5 cm of the target at some step).
Every step the policy gets a batch with LeRobot's keys: ``observation.state`` (the feature it was trained on: the
22-value proprioceptive state of :func:`~upright.tasks.lift.record_demos.proprio_state`, or the 49-value
``observation.policy_obs``, the env's ``actor`` observation), ``observation.images.<camera>`` (the env's ``rgb``
group, rendered when the policy reads cameras; ``--cameras`` forces it on), and ``task`` (``--instruction``, default
the recorder's :data:`~upright.tasks.lift.record_demos.TASK`). Chunks are executed through
:meth:`~upright.vla.policy.ChunkPolicy.select_action` (queue mode by default).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

if __name__ == "__main__":
    from upright.viewer.gl import choose_offscreen_gl

    choose_offscreen_gl()  # before MuJoCo is imported, in case the policy reads cameras

import torch

from upright.vla.policy import IMAGE_PREFIX, STATE_KEY, TASK_KEY, ChunkPolicy
from upright.vla.residual_config import resolve_base_file


def load_chunk_policy(path: str | pathlib.Path) -> tuple[ChunkPolicy, dict]:
    """A TinyVLA (``model.pt``) or an :class:`~upright.vla.onnx_policy.OnnxChunkPolicy` (``.onnx``), and its
    description: ``cameras``, ``image_height``, ``image_width``, ``state_key``, ``state_dim``.

    Raises:
        FileNotFoundError: nothing loadable at ``path`` (the message names train_bc).
        ValueError: a file that is not a VLA policy (one line naming the fix).
    """
    path = pathlib.Path(path)
    residual = path / "policy.onnx" if path.is_dir() and (path / "base_checksum.json").is_file() else path
    if residual.suffix == ".onnx" and residual.is_file() and _is_residual(residual):
        from upright.vla.residual import ResidualChunkPolicy

        policy = ResidualChunkPolicy(residual)
        return policy, {**policy.base_spec, "residual": True}
    path = resolve_base_file(path, label="policy")
    if path.suffix == ".onnx":
        from upright.vla.onnx_policy import OnnxChunkPolicy

        policy = OnnxChunkPolicy(path)
        m = policy.metadata
        return policy, {k: m[k] for k in ("cameras", "image_height", "image_width", "state_key", "state_dim")}
    from upright.vla.tiny import TinyVLA

    model = TinyVLA.load(path)
    c = model.cfg
    return model, {"cameras": list(c.cameras), "image_height": c.image_height, "image_width": c.image_width,
                   "state_key": c.state_key, "state_dim": c.state_dim}  # fmt: skip


def _is_residual(path: pathlib.Path) -> bool:
    """Whether an ``.onnx`` file is a residual policy of :mod:`upright.vla.residual` (trained with policy.base=)."""
    import onnx

    props = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    return props.get("policy_type", "").strip('"') == "residual"


class _StepObservations:
    """The env, remembering the observations its last ``step`` returned (so a camera frame is rendered once)."""

    def __init__(self, env):
        self._env = env
        self.obs = None

    def __getattr__(self, name):
        return getattr(self._env, name)

    def step(self, actions):
        out = self._env.step(actions)
        self.obs = out[0]
        return out

    def reset_all(self):
        self._env.reset_all()
        self.obs = None

    def observations(self):
        return self.obs if self.obs is not None else self._env.get_observations()


def make_batch(env, obs, spec: dict, instruction: str, camera_order: list[str]) -> dict:
    """The policy batch for the lift env's current step (module docstring).

    Raises:
        ValueError: the policy's state feature is neither observation.state nor observation.policy_obs.
    """
    from upright.tasks.lift.record_demos import proprio_state

    if spec["state_key"] == STATE_KEY:
        state = torch.from_numpy(proprio_state(env))
    elif spec["state_key"] == "observation.policy_obs":
        state = obs["actor"].float().cpu()
    else:
        raise ValueError(f"the policy reads state feature {spec['state_key']!r}; the lift evaluation provides "
                         f"{STATE_KEY} and observation.policy_obs: train with --state-key one of them")  # fmt: skip
    batch = {STATE_KEY: state, TASK_KEY: [instruction] * env.num_envs}
    if spec.get("residual"):  # a residual policy also reads the env observation
        batch["observation.policy_obs"] = obs["actor"].float().cpu()
    for cam in spec["cameras"]:
        rgb = obs["rgb"][:, camera_order.index(cam)]  # (N, H, W, 3) uint8
        batch[IMAGE_PREFIX + cam] = rgb.permute(0, 3, 1, 2).contiguous().cpu()
    return batch


def evaluate_chunk_policy(policy_path: str | pathlib.Path, episodes: int, num_envs: int = 25, seed: int = 0,
                          instruction: str | None = None, overrides: list[str] | None = None, domain_rand: bool = True,
                          n_action_steps: int | None = None, temporal_ensemble: float | None = None,
                          cameras: bool = False) -> tuple[dict, object, float, str]:
    """Evaluate a VLA chunk policy (or a residual run) on the lift protocol (module docstring).

    Returns:
        (:func:`upright.tasks.lift.evaluate.summarize` of the episodes, the env config, seconds taken, a protocol note).

    Raises:
        FileNotFoundError, ValueError: nothing loadable at ``policy_path``, or bad overrides (one line each).
    """
    from upright.tasks.lift.evaluate import make_lift_eval_env, run_episodes, summarize
    from upright.tasks.lift.record_demos import TASK

    instruction = TASK if instruction is None else instruction
    policy, spec = load_chunk_policy(policy_path)
    chunked = getattr(policy, "base", policy)  # a residual policy's chunks are its base's
    if n_action_steps is not None:
        chunked.n_action_steps = n_action_steps
    if temporal_ensemble is not None:
        chunked.temporal_ensemble_coeff = temporal_ensemble
    cams = list(spec["cameras"])
    overrides = list(overrides or [])
    if cams or cameras:
        overrides += ["env.camera.enabled=true", f"env.camera.height={spec['image_height']}",
                      f"env.camera.width={spec['image_width']}",
                      f"env.camera.cameras=[{','.join(cams or ['front'])}]"]  # fmt: skip
    env, cfg = make_lift_eval_env(overrides, num_envs, domain_rand, seed)
    order = list(cfg.env.camera.cameras)
    wrapped = _StepObservations(env)

    def act() -> torch.Tensor:
        return policy.select_action(make_batch(env, wrapped.observations(), spec, instruction, order))

    def on_reset(ids: torch.Tensor) -> None:
        policy.reset(ids)

    start = time.monotonic()
    per_episode = run_episodes(wrapped, act, episodes, on_reset)
    seconds = time.monotonic() - start
    inputs = f"cameras {cams} ({spec['image_height']}x{spec['image_width']})" if cams else "no cameras"
    execution = (f"temporal ensembling m={chunked.temporal_ensemble_coeff}" if chunked.temporal_ensemble_coeff is not None
                 else f"queue, {chunked.n_action_steps or chunked.chunk_size} of {chunked.chunk_size} actions per chunk")
    if chunked is not policy:
        execution += f"; residual alpha {policy.alpha} on the base's actions"
    note = (f" VLA inputs: {spec['state_key']}, {inputs}, instruction {instruction!r}; chunk execution: "
            f"{execution}.")
    env.close()
    return summarize(per_episode), cfg, seconds, note


def main(argv: list[str] | None = None) -> None:
    from upright.tasks.lift.evaluate import write_report
    from upright.tasks.lift.record_demos import TASK

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", required=True, help="folder with model.pt or policy.onnx, or the file")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--num-envs", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--instruction", default=TASK)
    parser.add_argument("--cameras", action="store_true", help="render the cameras even if the policy reads none")
    parser.add_argument("--n-action-steps", type=int, default=None, help="queue mode: actions run per chunk")
    parser.add_argument("--temporal-ensemble", type=float, default=None, metavar="M", help="ACT's ensembling (0.01)")
    parser.add_argument("--no-domain-rand", action="store_true")
    parser.add_argument("--out", default=None, help="folder for eval.csv and eval.md")
    parser.add_argument("overrides", nargs="*", help="task config overrides, e.g. sim.num_threads=1")
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.num_envs < 1:
        parser.error("--episodes and --num-envs must be >= 1")
    torch.set_num_threads(1)
    try:
        summary, cfg, seconds, note = evaluate_chunk_policy(
            args.policy, args.episodes, args.num_envs, args.seed, args.instruction, list(args.overrides),
            not args.no_domain_rand, args.n_action_steps, args.temporal_ensemble, args.cameras)
    except (FileNotFoundError, ValueError) as err:
        parser.exit(2, f"evaluate_lift: {err}\n")
    write_report(args.policy, args.episodes, summary, cfg, args.seed, seconds, args.out, note)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
