"""Evaluate a VLA chunk policy (TinyVLA checkpoint or exported ``policy.onnx``) on the lift task.

    python -m upright.vla.evaluate_lift --policy runs/tiny_vla [--episodes 50] [--num-envs 25] [--seed 0]
        [--cameras | --no-cameras] [--instruction TEXT] [--n-action-steps K | --temporal-ensemble M]
        [--no-domain-rand] [--out DIR] [env.*=... sim.*=...]

``--policy``: a folder with ``model.pt`` (preferred) or ``policy.onnx``, a ``model.pt`` file, or an ``.onnx`` file;
``ws://HOST:PORT``, a policy server (:class:`~upright.vla.remote.RemotePolicy`; :func:`remote_spec` reads its
inputs from the server's metadata); or a residual run of ``python train.py task=lift policy.base=...`` (its folder or
its ``policy.onnx``: the residual and its base run together, :class:`upright.vla.residual.ResidualChunkPolicy`; a
base that was a server is asked at its recorded URL). ``--base FILE|ws://HOST:PORT`` runs a residual with another
copy of its base (e.g. the run's ``base_model.pt`` served on a GPU machine), checked against the run's record unless
``--no-base-check``.
The protocol and the table are those of :mod:`upright.training.lift_evaluate` (150-step episodes on the full reset
ranges, curriculum off, domain randomisation on; success = cube centre within 2.5 cm of the target at some step).
Every step the policy gets a batch with LeRobot's keys: ``observation.state`` (the feature it was trained on: the
22-value proprioceptive state of :func:`~upright.tasks.lift.vla_io.proprio_state`, or the 49-value
``observation.policy_obs``, the env's ``actor`` observation), ``observation.images.<camera>`` (the env's ``rgb``
group, rendered when the policy reads cameras; ``--cameras`` forces it on), and ``task`` (``--instruction``, default
the recorder's :data:`~upright.tasks.lift.vla_io.TASK`). Chunks are executed through
:meth:`~upright.vla.policy.ChunkPolicy.select_action` (queue mode by default).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

if __name__ == "__main__":
    from upright.gl import choose_offscreen_gl

    choose_offscreen_gl()  # before MuJoCo is imported, in case the policy reads cameras

import torch

from upright.policy_io.registry import find_loader, policy_kind
from upright.policy_io.residual_base import is_remote_base, resolve_base_file
from upright.vla.policy import IMAGE_PREFIX, STATE_KEY, TASK_KEY, ChunkPolicy

POLICY_OBS_KEY = "observation.policy_obs"
"""The lift env's own observation (its ``actor`` group) as a policy's state feature."""


def load_chunk_policy(
    path: str | pathlib.Path, base: str | None = None, check_base: bool = True
) -> tuple[ChunkPolicy, dict]:
    """A TinyVLA (``model.pt``), an :class:`~upright.vla.onnx_policy.OnnxChunkPolicy` (``.onnx``), a
    :class:`~upright.vla.remote.RemotePolicy` (``ws://HOST:PORT``, a str) or a residual run, and its description:
    ``cameras``, ``image_height``, ``image_width``, ``state_key``, ``state_dim`` (``residual``: True for a residual).

    Args:
        path: the policy (module docstring).
        base: a residual run's base, instead of the one it records (a file, a folder or ``ws://HOST:PORT``).
        check_base: refuse a residual's base that is not the one it was trained on
            (:class:`~upright.vla.residual.ResidualChunkPolicy`).

    Raises:
        FileNotFoundError: nothing loadable at ``path`` (the message names train_bc).
        ValueError: a file that is not a VLA policy, a server whose metadata lacks the inputs (one line naming the fix).
        ConnectionError: no server at a ``ws://`` address.
    """
    if is_remote_base(str(path)):
        from upright.vla.remote import RemotePolicy

        policy = RemotePolicy.from_url(str(path))
        try:
            return policy, remote_spec(policy)
        except ValueError:
            policy.close()
            raise
    path = pathlib.Path(path)
    found = find_loader(str(path), ["residual"]) if policy_kind(str(path)) == "residual" else None
    if found is not None:  # a residual pair (upright.vla.residual registers its loader)
        policy = found[1](str(path), base=base, check_checksum=check_base)
        return policy, {**policy.base_spec, "residual": True}
    if base is not None:
        raise ValueError(f"--base applies to a residual run (policy.base=...), and {path} is not one; drop --base")
    path = resolve_base_file(path, label="policy")
    found = find_loader(str(path), ["chunk"])  # a VLA .onnx (upright.vla.onnx_policy), a TinyVLA (upright.vla.tiny)
    if found is None:
        raise ValueError(
            f"--policy {path}: not a VLA policy file (a TinyVLA model.pt or a VLA .onnx); train one with "
            "python -m upright.vla.train_bc --dataset DIR --out DIR"
        )
    policy = found[1](str(path))
    keys = ("cameras", "image_height", "image_width", "state_key", "state_dim")
    cfg = getattr(policy, "cfg", None)
    if cfg is not None:  # a TinyVLA: its config
        return policy, {**{k: getattr(cfg, k) for k in keys}, "cameras": list(cfg.cameras)}
    return policy, {k: policy.metadata[k] for k in keys}  # an exported VLA: its file's metadata


def remote_spec(policy) -> dict:
    """The inputs of a policy served at ``policy.url`` (a :class:`~upright.vla.remote.RemotePolicy`), from its
    server's metadata (as ``upright-policy-server`` sends it): ``cameras``, ``image_height``, ``image_width``,
    ``state_key``, ``state_dim``.

    Raises:
        ValueError: the metadata does not say which lift feature the policy's state is (``state_key``), or the policy
            reads cameras and the metadata gives no image size (one line naming the fix).
    """
    m = policy.metadata
    state_key = m.get("state_key")
    if state_key not in (STATE_KEY, POLICY_OBS_KEY):
        raise ValueError(
            f"the server at {policy.url} does not say which lift state its policy reads (metadata "
            f"state_key {state_key!r}); serve it with upright-policy-server and give the policy a "
            f"state_key ('{STATE_KEY}': the 22-value proprioceptive state, '{POLICY_OBS_KEY}': the env "
            "observation), as TinyVLA and exported VLA files have"
        )
    cameras = [str(c) for c in m.get("cameras") or []]
    height, width = m.get("image_height"), m.get("image_width")
    if cameras and not (isinstance(height, int) and isinstance(width, int)):
        raise ValueError(
            f"the server at {policy.url} serves a policy reading cameras {cameras} but sends no "
            "image_height/image_width; give the policy those attributes"
        )
    return {
        "cameras": cameras,
        "image_height": height,
        "image_width": width,
        "state_key": state_key,
        "state_dim": m.get("state_dim"),
    }


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
    from upright.tasks.lift.vla_io import proprio_state

    if spec["state_key"] == STATE_KEY:
        state = torch.from_numpy(proprio_state(env))
    elif spec["state_key"] == POLICY_OBS_KEY:
        state = obs["actor"].float().cpu()
    else:
        raise ValueError(
            f"the policy reads state feature {spec['state_key']!r}; the lift evaluation provides "
            f"{STATE_KEY} and observation.policy_obs: train with --state-key one of them"
        )
    batch = {STATE_KEY: state, TASK_KEY: [instruction] * env.num_envs}
    if spec.get("residual"):  # a residual policy also reads the env observation
        batch[POLICY_OBS_KEY] = obs["actor"].float().cpu()
    for cam in spec["cameras"]:
        rgb = obs["rgb"][:, camera_order.index(cam)]  # (N, H, W, 3) uint8
        batch[IMAGE_PREFIX + cam] = rgb.permute(0, 3, 1, 2).contiguous().cpu()
    return batch


def evaluate_chunk_policy(
    policy_path: str | pathlib.Path,
    episodes: int,
    num_envs: int = 25,
    seed: int = 0,
    instruction: str | None = None,
    overrides: list[str] | None = None,
    domain_rand: bool = True,
    n_action_steps: int | None = None,
    temporal_ensemble: float | None = None,
    cameras: bool = False,
    base: str | None = None,
    check_base: bool = True,
) -> tuple[dict, object, float, str]:
    """Evaluate a VLA chunk policy (or a residual run) on the lift protocol (module docstring); ``base`` and
    ``check_base`` as :func:`load_chunk_policy`'s.

    Returns:
        (:func:`upright.tasks.lift.evaluation.summarize` of the episodes, the env config, seconds taken, a protocol
        note).

    Raises:
        FileNotFoundError, ValueError: nothing loadable at ``policy_path``, or bad overrides (one line each).
        ConnectionError: a policy server that does not answer.
    """
    from upright.tasks.lift.evaluation import run_episodes, summarize
    from upright.tasks.lift.vla_io import TASK
    from upright.training.lift_evaluate import make_lift_eval_env

    instruction = TASK if instruction is None else instruction
    policy, spec = load_chunk_policy(policy_path, base, check_base)
    chunked = getattr(policy, "base", policy)  # a residual policy's chunks are its base's
    if n_action_steps is not None:
        chunked.n_action_steps = n_action_steps
    if temporal_ensemble is not None:
        chunked.temporal_ensemble_coeff = temporal_ensemble
    cams = list(spec["cameras"])
    overrides = list(overrides or [])
    if cams or cameras:
        overrides += ["env.camera.enabled=true", f"env.camera.cameras=[{','.join(cams or ['front'])}]"]
        overrides += [f"env.camera.{k[6:]}={spec[k]}" for k in ("image_height", "image_width") if spec.get(k)]
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
    execution = (
        f"temporal ensembling m={chunked.temporal_ensemble_coeff}"
        if chunked.temporal_ensemble_coeff is not None
        else f"queue, {chunked.n_action_steps or chunked.chunk_size} of {chunked.chunk_size} actions per chunk"
    )
    if chunked is not policy:
        execution += f"; residual alpha {policy.alpha} on the base's actions"
    if getattr(chunked, "url", None):
        execution += f"; {'base' if chunked is not policy else 'policy'} served at {chunked.url}"
    note = f" VLA inputs: {spec['state_key']}, {inputs}, instruction {instruction!r}; chunk execution: {execution}."
    env.close()
    if hasattr(policy, "close"):  # a remote policy (or a residual's remote base): its connections
        policy.close()
    return summarize(per_episode), cfg, seconds, note


def main(argv: list[str] | None = None) -> None:
    from upright.tasks.lift.evaluation import write_report
    from upright.tasks.lift.vla_io import TASK

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--policy",
        required=True,
        help="folder with model.pt or policy.onnx, the file, ws://HOST:PORT (a policy server), or a residual run",
    )
    parser.add_argument(
        "--base",
        default=None,
        metavar="FILE|ws://HOST:PORT",
        help="a residual run's base instead of the recorded one (checked against the run's record)",
    )
    parser.add_argument(
        "--no-base-check",
        action="store_true",
        help="run a residual with a --base (or recorded base) the record cannot vouch for",
    )
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
            args.policy,
            args.episodes,
            args.num_envs,
            args.seed,
            args.instruction,
            list(args.overrides),
            not args.no_domain_rand,
            args.n_action_steps,
            args.temporal_ensemble,
            args.cameras,
            args.base,
            not args.no_base_check,
        )
    except (FileNotFoundError, ValueError, ConnectionError) as err:
        parser.exit(2, f"evaluate_lift: {err}\n")
    write_report(args.policy, args.episodes, summary, cfg, args.seed, seconds, args.out, note)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
