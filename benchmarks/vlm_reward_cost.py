"""Cost of the ``vlm_reward`` term (VLM-RMs, :mod:`upright.managers.vlm_reward`) per env step, against the env step.

    python benchmarks/vlm_reward_cost.py [--num-envs 64 1024] [--size 224] [--arch vit-b32] [--steps 2] [--warmup 1]
        [--every 1 4 16] [--sim-threads 0] [--cpu-threads <all>] [--device cpu] [--backend auto]
        [--sim-backend native] [--out FILE]

The env is the one ``recipe=vlm_kneel`` trains (the G1 get-up MDP, every start standing, the standing terms off, its
sim settings), with N envs and the term rendering ``--size`` x ``--size`` frames of the ``tracking`` camera and
embedding them with a ``transformers`` CLIP of a real architecture with random weights (``--arch``: ``vit-b32`` =
``CLIPConfig()``, the architecture of ``openai/clip-vit-base-patch32``; ``vit-l14`` that of
``openai/clip-vit-large-patch14`` at 224 px; ``tiny`` for a smoke run), written to a temporary folder (nothing is
downloaded: the cost of a forward pass does not depend on the weights' values).

Per N: ``--warmup`` untimed env steps, then ``--steps`` timed ``env.step`` calls with random actions and the term
evaluated at every step. The term times its own render and embed (+ reward) calls; the env step without the term is
the timed step minus the term's time, in the same steps. Printed: ms per env step of N envs (env, render, embed), the
term's cost as a multiple of the env step, and that multiple when the term is evaluated every k-th step
(``--every``: the reward held in between, the term's cost divided by k). The CPU model and the share of the CPU other
processes used while the figures were taken are printed with them: the figures compare only on an idle machine.

On the CPU torch runs with 1 thread as ``train.py`` collects, and the CLIP forward with ``--cpu-threads`` (default
all CPUs; ``env.vlm_reward.cpu_threads``); rendering is MuJoCo's OpenGL renderer on one thread
(``MUJOCO_GL=egl`` or ``osmesa``, chosen when unset) unless ``--backend warp``. The physics runs on
``--sim-backend`` (``native`` on every CPU by default; ``warp`` on a GPU, as a GPU training run steps it). Needs
``MENAGERIE_ROOT`` and ``transformers`` (``pip install 'upright[vlm]'``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from machine import CpuMeter, cpu_model

from upright.gl import choose_offscreen_gl

choose_offscreen_gl()  # before MuJoCo is imported (it reads MUJOCO_GL once)

import torch  # noqa: E402

ARCHS = ("tiny", "vit-b32", "vit-l14")


def clip_config(arch: str, size: int):
    """The ``CLIPConfig`` of ``arch`` (``vit-l14``: openai/clip-vit-large-patch14's sizes; ``vit-b32``: the default)."""
    from transformers import CLIPConfig

    if arch == "vit-b32":
        return CLIPConfig(vision_config={"image_size": size})
    if arch == "vit-l14":
        return CLIPConfig(
            text_config={
                "hidden_size": 768,
                "intermediate_size": 3072,
                "num_hidden_layers": 12,
                "num_attention_heads": 12,
            },
            vision_config={
                "hidden_size": 1024,
                "intermediate_size": 4096,
                "num_hidden_layers": 24,
                "num_attention_heads": 16,
                "patch_size": 14,
                "image_size": size,
            },
            projection_dim=768,
        )
    small = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}
    vision = {**small, "patch_size": 8, "image_size": size}
    return CLIPConfig(text_config=small, vision_config=vision, projection_dim=16)


def recipe_env_cfg(num_envs: int, clip_dir: pathlib.Path, args):
    """``recipe=vlm_kneel``'s env settings with N envs and the benchmark's CLIP, size, backend and dtype."""
    from omegaconf import OmegaConf

    from upright.conf import RECIPES
    from upright.tasks.standup.config import StandupEnvCfg

    cfg = OmegaConf.structured(StandupEnvCfg)
    for key, value in RECIPES["vlm_kneel"].items():
        if key.startswith("env."):
            OmegaConf.update(cfg, key[4:], value)
    vlm = {
        "model": str(clip_dir),
        "width": args.size,
        "height": args.size,
        "every": 1,
        "dtype": args.dtype,
        "backend": args.backend,
        "cpu_threads": args.cpu_threads,
    }
    for key, value in {"num_envs": num_envs, **{f"vlm_reward.{k}": v for k, v in vlm.items()}}.items():
        OmegaConf.update(cfg, key, value)
    return OmegaConf.to_object(cfg)


def measure(num_envs: int, clip_dir: pathlib.Path, args) -> dict:
    """Timings of ``args.steps`` env steps of N envs with the term evaluated at each (after ``args.warmup``)."""
    import time

    from upright.tasks.registry import make_env
    from upright.tasks.standup.config import SimCfg

    env = make_env(
        "standup",
        recipe_env_cfg(num_envs, clip_dir, args),
        SimCfg(backend=args.sim_backend, num_threads=args.sim_threads),
        args.device,
        seed=0,
    )
    term = env.reward_manager.terms[-1].func
    gen = torch.Generator().manual_seed(0)
    try:
        for _ in range(args.warmup):
            env.step(torch.randn(num_envs, env.num_actions, generator=gen).to(env.device))
        render0, embed0, evals0 = term.render_s, term.embed_s, term.evaluations
        meter = CpuMeter()
        meter.start()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            env.step(torch.randn(num_envs, env.num_actions, generator=gen).to(env.device))
        total = (time.perf_counter() - t0) / args.steps
        others = meter.stop()
        evals = term.evaluations - evals0
        assert evals == args.steps, (evals, args.steps)
        render, embed = (term.render_s - render0) / evals, (term.embed_s - embed0) / evals
        return {
            "n": num_envs,
            "env": total - render - embed,
            "render": render,
            "embed": embed,
            "others": others,
            "renderer": type(term.renderer).__name__,
        }
    finally:
        env.close()


def report(rows: list[dict], args) -> str:
    head = (
        f"# vlm_reward cost per env step ({datetime.date.today()})\n\n"
        f"CPU: {cpu_model()}, {os.cpu_count()} CPUs; torch {torch.__version__}; device {args.device}; CLIP "
        f"{args.arch} ({args.dtype}, random weights), {args.size} x {args.size} frames of the G1 `tracking` "
        f"camera; CLIP forward on {args.cpu_threads} torch threads (CPU); env: `recipe=vlm_kneel`'s, sim backend "
        f"{args.sim_backend}, sim threads {args.sim_threads or 'all'}; {args.steps} timed steps after {args.warmup}."
        "\n\n"
    )
    every = [int(k) for k in args.every]
    cols = (
        "| N | renderer | env step ms | render ms | embed ms | term / env step | "
        + " | ".join(f"every {k}: / env step" for k in every)
        + " | other processes' CPU share |"
    )
    lines = [cols, "|" + "---|" * (6 + len(every) + 1)]
    for r in rows:
        term = r["render"] + r["embed"]
        ratios = " | ".join(f"{term / k / r['env']:.1f}x" for k in every)
        lines.append(
            f"| {r['n']} | {r['renderer']} | {1e3 * r['env']:.1f} | {1e3 * r['render']:.1f} | "
            f"{1e3 * r['embed']:.1f} | {term / r['env']:.1f}x | {ratios} | {r['others']:.0%} |"
        )
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--size", type=int, default=224, help="frame width = height, px (also the CLIP input size)")
    parser.add_argument("--arch", choices=ARCHS, default="vit-b32")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--steps", type=int, default=2, help="timed env steps per N")
    parser.add_argument("--warmup", type=int, default=1, help="untimed env steps per N")
    parser.add_argument("--every", nargs="+", default=["1", "4", "16"], help="evaluation periods to report")
    parser.add_argument("--sim-threads", type=int, default=0, help="physics threads (0: all CPUs)")
    parser.add_argument(
        "--cpu-threads",
        type=int,
        default=os.cpu_count() or 1,
        help="torch threads of the CLIP forward on the CPU (env.vlm_reward.cpu_threads; default: all)",
    )
    parser.add_argument("--device", default="cpu", help="torch device of the env and CLIP (cpu, cuda:0)")
    parser.add_argument("--backend", default="auto", choices=("auto", "opengl", "warp"), help="frame renderer")
    parser.add_argument(
        "--sim-backend", default="native", choices=("native", "warp", "mjx"), help="physics backend (sim.backend)"
    )
    parser.add_argument("--out", type=pathlib.Path, help="also write the Markdown report here")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")
    torch.set_num_threads(1)  # as train.py collects on the CPU; the term's forward uses --cpu-threads
    from upright.managers.clip_embedder import save_random_clip

    with tempfile.TemporaryDirectory() as tmp:
        clip_dir = save_random_clip(pathlib.Path(tmp) / "clip", clip_config(args.arch, args.size))
        rows = []
        for n in args.num_envs:
            rows.append(measure(n, clip_dir, args))
            print(
                f"N={n}: env {1e3 * rows[-1]['env']:.1f} ms, render {1e3 * rows[-1]['render']:.1f} ms, "
                f"embed {1e3 * rows[-1]['embed']:.1f} ms per step",
                flush=True,
            )
    text = report(rows, args)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
