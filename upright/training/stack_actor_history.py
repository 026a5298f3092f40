"""Resume a one-frame actor with an observation history: widen a checkpoint's actor to H frames, starting as it was.

A ``recipe=getup`` run with ``env.getup.actor_history=H`` feeds the actor ``concat(frame[t-H+1], ..., frame[t])``
(oldest first). A checkpoint trained on fewer frames cannot be loaded into it, since the actor's first layer and its
observation normaliser are narrower. This rewrites such a checkpoint so that it loads and the actor computes exactly
the action it computed before (from the newest frames; the older ones have no effect until training gives them one):

- the actor's first ``Linear`` weight (512, F·D) becomes (512, H·D): its columns move to the newest F frames, the
  older H - F frames get zero columns;
- the actor's observation normaliser (rsl-rl ``EmpiricalNormalization``) gives each new frame the statistics of the
  oldest existing frame (every frame is the same terms one step apart, so the same distribution); its count is kept;
- the Adam moments of that weight move with its columns, and the new columns get zero moments. They keep the group's
  step count, so their first updates are a few times the learning rate (a fresh parameter's are about 1x).

The critic, the other optimizer state, the iteration and the env state are copied unchanged. Usage::

    python -m upright.training.stack_actor_history RUN/model_1025.pt NEW/model_1025.pt --frames 6
    cp RUN/config_*.yaml NEW/
    python train.py <the run's settings> env.getup.actor_history=6 resume=NEW

The resumed run writes its own ``config_<iteration>.yaml`` with the new setting, which evaluation and export of its
later checkpoints read; the widened file itself pairs with no config (evaluate the original: it acts the same).
"""

from __future__ import annotations

import argparse
import copy
import pathlib

import torch

FIRST_LAYER = "mlp.0.weight"
"""Actor state-dict key of the first Linear weight (rsl-rl ``MLPModel``)."""

NORMALIZER = "obs_normalizer."
"""Prefix of the actor's observation-normaliser buffers (``_mean``, ``_var``, ``_std`` of shape (1, D), ``count``)."""


def stack_actor_history(checkpoint: dict, frames: int, frame_dim: int) -> dict:
    """A copy of an rsl-rl ``checkpoint`` whose actor reads ``frames`` frames of ``frame_dim`` values, oldest first.

    Args:
        checkpoint: the dict ``torch.load`` returns for an upright/rsl-rl checkpoint (``actor_state_dict``,
            ``optimizer_state_dict``, ...).
        frames: H, the frames the actor will read (more than it reads now).
        frame_dim: D, the width of one frame (75 for the get-up actor on 23 joints).

    Returns:
        The widened checkpoint; ``checkpoint`` is not modified.

    Raises:
        ValueError: no actor first layer, a width that is not a whole number of frames, ``frames`` not above the
            current count, or optimizer moments that do not match the weight (the message names the fix).
    """
    actor = checkpoint.get("actor_state_dict")
    if actor is None or FIRST_LAYER not in actor:
        raise ValueError("stack_actor_history: no actor first layer (mlp.0.weight); pass a training model_K.pt")
    width = int(actor[FIRST_LAYER].shape[1])
    if frame_dim < 1 or width % frame_dim:
        raise ValueError(f"stack_actor_history: the actor reads {width} values, not whole frames of {frame_dim}")
    old = width // frame_dim
    if int(frames) <= old:
        raise ValueError(f"stack_actor_history: --frames must exceed the actor's {old} frame(s), got {frames}")
    extra = (int(frames) - old) * frame_dim
    out = copy.deepcopy(checkpoint)
    actor = out["actor_state_dict"]
    w = actor[FIRST_LAYER]
    actor[FIRST_LAYER] = torch.cat([w.new_zeros(w.shape[0], extra), w], dim=1)
    for name in ("_mean", "_var", "_std"):
        key = NORMALIZER + name
        if key in actor:
            v = actor[key]
            if v.shape[-1] != width:
                raise ValueError(f"stack_actor_history: {key} has width {v.shape[-1]}, the first layer {width}")
            oldest = v[..., :frame_dim]
            actor[key] = torch.cat([oldest.repeat(*([1] * (v.dim() - 1)), int(frames) - old), v], dim=-1)
    optimizer = out.get("optimizer_state_dict")
    if optimizer is not None:
        _move_moments(optimizer, actor, tuple(w.shape), extra)
    return out


def _actor_param_names(actor: dict) -> list[str]:
    """Names of the actor's parameters in ``parameters()`` order (its state dict without the normaliser buffers)."""
    return [k for k in actor if not k.startswith(NORMALIZER)]


def _move_moments(optimizer: dict, actor: dict, old_shape: tuple, extra: int) -> None:
    """Prepend ``extra`` zero columns to every Adam moment of the actor's first-layer weight, in place.

    The actor's parameters lead the ``main`` group (rsl-rl orders them before the critic's;
    :func:`upright.training.std_learning_rate.group_layout`), less the std parameter when a ``std`` group holds it.

    Raises:
        ValueError: no group to read, or the moment's shape is not the weight's.
    """
    from upright.training.std_learning_rate import _saved_layout

    groups = optimizer["param_groups"]
    layout = _saved_layout(groups)
    if not groups or "main" not in layout:
        raise ValueError(
            "stack_actor_history: the optimizer state has no main parameter group; is this a checkpoint "
            "of this project's PPO?"
        )
    main = groups[layout.index("main")]
    names = _actor_param_names(actor)
    if "std" in layout:
        names = [n for n in names if not n.endswith("std_param")]
    ids = list(main["params"])[: len(names)]
    pid = dict(zip(names, ids)).get(FIRST_LAYER)
    if pid is None:
        raise ValueError("stack_actor_history: the optimizer's main group does not hold the actor's first layer")
    for name, m in list(optimizer["state"].get(pid, {}).items()):
        if not torch.is_tensor(m) or m.dim() == 0:
            continue  # the step count
        if tuple(m.shape) != old_shape:
            raise ValueError(
                f"stack_actor_history: Adam {name} of the actor's first layer has shape {tuple(m.shape)}, expected "
                f"{old_shape}; is this a checkpoint of this project's PPO?"
            )
        optimizer["state"][pid][name] = torch.cat([m.new_zeros(m.shape[0], extra), m], dim=1)


def main(argv: list[str] | None = None) -> None:
    """The command line (module docstring).

    Raises:
        SystemExit: a missing source, ``dst`` equal to ``src``, or a checkpoint :func:`stack_actor_history` refuses
            (one line naming the fix).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("src", type=pathlib.Path, help="checkpoint to widen (model_K.pt)")
    parser.add_argument("dst", type=pathlib.Path, help="where to write the widened checkpoint")
    parser.add_argument("--frames", type=int, required=True, help="frames H the actor will read")
    parser.add_argument("--frame-dim", type=int, default=75, help="values per frame (default 75: get-up, 23 joints)")
    args = parser.parse_args(argv)
    if not args.src.is_file():
        raise SystemExit(f"stack_actor_history: no checkpoint at {args.src}; pass a model_K.pt file")
    if args.dst.resolve() == args.src.resolve():
        raise SystemExit("stack_actor_history: dst must differ from src (the original is kept)")
    try:
        ckpt = torch.load(args.src, map_location="cpu", weights_only=False)
        widened = stack_actor_history(ckpt, args.frames, args.frame_dim)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    args.dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.dst.with_suffix(args.dst.suffix + ".tmp")
    torch.save(widened, tmp)
    tmp.replace(args.dst)
    print(f"{args.src} -> {args.dst}: actor input {args.frames} frames x {args.frame_dim}")


if __name__ == "__main__":
    main()
