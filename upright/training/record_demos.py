"""Record scripted-expert episodes of the lift task as a LeRobotDataset v3, with the deploy daemon's writer and schema.

    python -m upright.training.record_demos --episodes 50 --out data/lift_demos [--cameras] [--num-envs 16]
        [--seed 0] [--no-domain-rand] [--only-success] [--instruction TEXT ... | --paraphrases] [env.*=... sim.*=...]

The expert (:mod:`upright.tasks.lift.expert`) runs in ``--num-envs`` envs at once on the full reset ranges
(curriculum off, domain randomisation on unless ``--no-domain-rand``); every finished episode becomes one dataset
episode, written by :class:`upright.dataset_io.lerobot.LeRobotV3Writer` with the daemon's features
(:func:`upright.dataset_io.records.frame_features`), so datasets recorded on the robot and in simulation share
one schema, at 50 fps (one frame per env step). Frame t holds:

- ``observation.state``: q (7 arm joints rad, finger m), q̇ of the 8 actuated joints, then the base's gyro (0: the
  Panda's base is fixed) and gravity in the base frame ((0, 0, -1));
- ``observation.policy_obs``: the policy's 49-value observation frame (:mod:`upright.tasks.lift.observations`);
- ``observation.images.front`` (and ``.wrist``) with ``--cameras``: PNG images of the scene cameras, before the action;
- ``action`` = ``observation.policy_action``: the expert's action a_t ∈ [-1, 1]^8 (policy units: delta targets /
  0.04); ``action.joint_target``: the position targets it set (rad, m);
- ``next.reward``: the env's reward of that step (sum over the reward groups), ``next.done``: the episode ended;
- ``control_source`` 0 (``policy``: the scripted expert commands every frame), ``intervention`` false,
  ``safety_flags`` 0, ``t_mono_ns``/``imu_time_us``: sim time, ``loop_lateness_us`` 0;
- the task instruction (``meta/tasks.parquet``, the frame's ``task_index``): :data:`TASK` by default; with
  ``--instruction`` (repeatable) or ``--paraphrases`` (:data:`PARAPHRASES`) the written episodes cycle through the
  given strings (episode k of this run gets ``instructions[k % len]``), so a language-conditioned policy sees several
  phrasings of the one task; the episode's ``upright/outcome`` is ``success`` (cube within 2.5 cm of the target at
  some step) or ``failure``.
"""

from __future__ import annotations

import argparse
import io
import pathlib
import sys

if __name__ == "__main__" and "--cameras" in sys.argv[1:]:
    from upright.gl import choose_offscreen_gl

    choose_offscreen_gl()  # before MuJoCo is imported (it reads MUJOCO_GL once): EGL, else OSMesa

import imageio.v3 as iio
import numpy as np
import pyarrow as pa
import torch

from upright.dataset_io.records import ControlSource, extra_info, frame_features
from upright.robots import panda
from upright.tasks.lift.observations import OBSERVATION_DIMS, OBSERVATION_TERMS
from upright.tasks.lift.vla_io import PARAPHRASES, TASK, proprio_state

FPS = 50
"""Frames per second: one frame per 0.02 s env step."""


def frame_names() -> list[str]:
    """Names of the 49 observation-frame entries: ``<term>.<index>``."""
    return [f"{t.name}.{k}" for t, d in zip(OBSERVATION_TERMS, OBSERVATION_DIMS) for k in range(d)]


def demo_features(cameras: tuple[str, ...], height: int, width: int) -> dict[str, dict]:
    """The dataset's features: the daemon's (:func:`upright.dataset_io.records.frame_features`) plus one image
    feature per camera."""
    joints = tuple(panda.ARM_JOINT_NAMES) + (panda.FINGER_JOINT_NAMES[0],)
    features = frame_features(joints, frame_names())
    for cam in cameras:
        features[f"observation.images.{cam}"] = {
            "dtype": "image",
            "shape": [height, width, 3],
            "names": ["height", "width", "channel"],
        }
    return features


def _png(image: np.ndarray) -> bytes:
    buf = io.BytesIO()
    iio.imwrite(buf, image, extension=".png")
    return buf.getvalue()


class EpisodeBuffer:
    """Frames of one env's current episode, as lists per feature."""

    def __init__(self):
        self.rows: dict[str, list] = {}

    def add(self, **values) -> None:
        for k, v in values.items():
            self.rows.setdefault(k, []).append(v)

    def __len__(self) -> int:
        return len(next(iter(self.rows.values()), []))

    def table(self, features: dict[str, dict]) -> pa.Table:
        from upright.dataset_io.lerobot import column

        cols = {}
        for name, f in features.items():
            values = self.rows[name]
            cols[name] = column(values if f["dtype"] == "image" else np.asarray(values), f)
        return pa.table(cols)


def record(
    out: str | pathlib.Path,
    episodes: int,
    num_envs: int = 16,
    seed: int = 0,
    domain_rand: bool = True,
    cameras: bool = False,
    only_success: bool = False,
    overrides: list[str] | tuple[str, ...] = (),
    instructions: list[str] | tuple[str, ...] = (TASK,),
    controller=None,
) -> dict:
    """Record ``episodes`` expert episodes into the dataset at ``out`` (created, or extended if it has this schema).

    ``instructions``: the task strings; written episode k of this call gets ``instructions[k % len(instructions)]``.
    ``controller``: None (the scripted expert drives every step, logged as the policy) or a factory
    ``controller(env)`` of an object that is called ``c(env, obs) -> (actions (N, A), human (N,) bool)`` every step
    and has ``reset(env_ids)``; its steps with ``human`` True are logged as interventions (``intervention`` True,
    ``control_source`` human), e.g. :class:`upright.vla.sim_operator.TakeoverController`.

    Returns:
        ``{"episodes", "frames", "successes", "attempts"}``.

    Raises:
        ValueError: bad overrides, an empty or blank instruction, or ``out`` holds a dataset with another schema (the
            messages say what to change).
    """
    instructions = [str(t) for t in instructions]
    if not instructions or any(not t.strip() for t in instructions):
        raise ValueError(f"instructions must be non-empty strings, got {instructions!r}; pass --instruction TEXT")
    from upright.dataset_io.lerobot import LeRobotV3Writer
    from upright.tasks.lift.expert import ScriptedExpert
    from upright.training.lift_evaluate import make_lift_eval_env

    extra = list(overrides) + (["env.camera.enabled=true"] if cameras else [])
    env, cfg = make_lift_eval_env(extra, num_envs, domain_rand, seed)
    cams = tuple(cfg.env.camera.cameras) if cameras else ()
    features = demo_features(cams, int(cfg.env.camera.height), int(cfg.env.camera.width))
    writer = LeRobotV3Writer(out, features, FPS, "franka_emika_panda", extra_info(instructions[0], "scripted_expert"))
    if controller is None:
        expert = ScriptedExpert(env)

        def controller(env, obs):
            return expert.act(), torch.zeros(num_envs, dtype=torch.bool)

        controller.reset = expert.reset
    else:
        controller = controller(env)
    controller.reset(torch.arange(num_envs))
    buffers = [EpisodeBuffer() for _ in range(num_envs)]
    lo, hi = env.ctrl_lower, env.ctrl_upper
    written = successes = attempts = frames = 0
    obs = env.get_observations()
    while written < episodes:
        proprio = proprio_state(env)
        # copies: env.step writes the reset envs' observations into these buffers in place (on the CPU .numpy()
        # shares memory), which overwrote the last frame of every episode with the next episode's first one
        policy_obs = obs["actor"].cpu().numpy().copy()
        images = obs["rgb"].cpu().numpy().copy() if cams else None
        ctrl_before = env.ctrl.clone()
        actions, human = controller(env, obs)
        human = human.cpu().numpy()
        a = actions.clamp(-cfg.env.action_clip, cfg.env.action_clip)
        targets = torch.minimum(torch.maximum(ctrl_before + cfg.env.action_scale * a, lo), hi).cpu().numpy()
        t_ns = (env.episode_length_buf.cpu().numpy() * env.step_dt * 1e9).astype(np.int64)
        obs, rewards, dones, _ = env.step(actions)
        rewards, dones = rewards.cpu().numpy(), dones.bool().cpu().numpy()
        a = a.cpu().numpy()
        for i in range(num_envs):
            row = {
                "observation.state": proprio[i],
                "observation.policy_obs": policy_obs[i],
                "observation.policy_action": a[i],
                "action": a[i],
                "action.joint_target": targets[i],
                "intervention": bool(human[i]),
                "control_source": int(ControlSource.HUMAN if human[i] else ControlSource.POLICY),
                "safety_flags": 0,
                "t_mono_ns": int(t_ns[i]),
                "imu_time_us": int(t_ns[i] // 1000),
                "loop_lateness_us": 0.0,
                "next.reward": float(rewards[i]),
                "next.done": bool(dones[i]),
            }
            for c, cam in enumerate(cams):
                row[f"observation.images.{cam}"] = _png(images[i, c])
            buffers[i].add(**row)
        for i in np.flatnonzero(dones):
            ok = bool(env.success_once_at_done[i])
            attempts += 1
            if written < episodes and (ok or not only_success):
                task = instructions[written % len(instructions)]
                writer.add_episode(
                    writer.info["total_episodes"], buffers[i].table(features), task, "success" if ok else "failure"
                )
                written += 1
                successes += int(ok)
                frames += len(buffers[i])
            buffers[i] = EpisodeBuffer()
            controller.reset(torch.tensor([int(i)]))
    env.close()
    return {"episodes": written, "frames": frames, "successes": successes, "attempts": attempts}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, required=True, help="episodes to write")
    parser.add_argument("--out", required=True, help="dataset folder (created, or extended with the same schema)")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-domain-rand", action="store_true")
    parser.add_argument("--cameras", action="store_true", help="add observation.images.* (env.camera.* sets them)")
    parser.add_argument("--only-success", action="store_true", help="write successful episodes only")
    parser.add_argument(
        "--instruction",
        action="append",
        default=None,
        metavar="TEXT",
        help=f"task instruction (repeatable: episodes cycle through them); default {TASK!r}",
    )
    parser.add_argument("--paraphrases", action="store_true", help="cycle through the built-in PARAPHRASES")
    parser.add_argument("overrides", nargs="*", help="task config overrides, e.g. env.camera.width=96")
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.num_envs < 1:
        parser.error("--episodes and --num-envs must be >= 1")
    if args.instruction and args.paraphrases:
        parser.error("--instruction and --paraphrases exclude each other; pass one")
    instructions = args.instruction or (list(PARAPHRASES) if args.paraphrases else [TASK])
    torch.set_num_threads(1)
    try:
        summary = record(
            args.out,
            args.episodes,
            args.num_envs,
            args.seed,
            not args.no_domain_rand,
            args.cameras,
            args.only_success,
            args.overrides,
            instructions,
        )
    except ValueError as err:
        parser.exit(2, f"record_demos: {err}\n")
    print(
        f"{args.out}: {summary['episodes']} episodes, {summary['frames']} frames; expert success "
        f"{summary['successes']}/{summary['episodes']} written ({summary['attempts']} attempted)"
    )


if __name__ == "__main__":
    main()
