"""Resume a checkpoint after the critic gained observation columns: append inputs that start with no effect.

A run that adds critic-only observations (for example ``env.getup.critic_stand_flag``) cannot load a checkpoint
written before, since the critic's first layers and its observation normaliser are narrower. This rewrites such a
checkpoint so that it loads and the critic computes exactly what it computed before:

- each critic head's first ``Linear`` weight (H, D) gets ``extra`` zero columns (H, D + extra);
- the critic's observation normaliser gets mean 0, variance 1 and std 1 for the new columns, so they enter the
  network raw (its sample count is kept: the new columns' statistics then move as slowly as the old ones);
- the Adam moments of those weights get zero columns. They keep the group's step count, so Adam's bias correction
  is about 1 for them and their first updates are a few times the learning rate in size (a fresh parameter's are
  about 1x); the critic's other weights continue as they were.

The actor, the other optimizer state, the iteration and the env state are copied unchanged. Usage::

    python -m upright.training.widen_critic RUN/model_925.pt NEW/model_925.pt --extra 1
    cp RUN/config_*.yaml NEW/
    python train.py <the run's settings> env.getup.critic_stand_flag=true resume=NEW

The resumed run writes its own ``config_<iteration>.yaml`` with the new setting, which evaluation and export of its
later checkpoints read; the widened file itself pairs with no config (evaluate the original instead: the actor is
the same).
"""

from __future__ import annotations

import argparse
import copy
import pathlib
import re

import torch

FIRST_LAYER = re.compile(r"mlp\.(\d+\.)?0\.weight")
"""Critic state-dict keys of each head's first Linear weight (``mlp.0.weight`` for one trunk, ``mlp.<g>.0.weight``
for separate critics)."""

NORMALIZER = "obs_normalizer."
"""Prefix of the critic's observation-normaliser buffers (rsl-rl ``EmpiricalNormalization``: ``_mean``, ``_var``,
``_std`` of shape (1, D), ``count``)."""


def widen_critic_input(checkpoint: dict, extra: int) -> dict:
    """A copy of an rsl-rl ``checkpoint`` whose critic takes ``extra`` more observation columns, appended last.

    Args:
        checkpoint: the dict ``torch.load`` returns for an upright/rsl-rl checkpoint (``critic_state_dict``,
            ``optimizer_state_dict``, ...).
        extra: number of columns to append (>= 1).

    Returns:
        The widened checkpoint; ``checkpoint`` is not modified.

    Raises:
        ValueError: ``extra`` < 1, no critic in the checkpoint, first layers of different widths, or an optimizer
            without a ``critic`` group whose first-layer moments can be found (the message names the fix).
    """
    if int(extra) < 1:
        raise ValueError(f"widen_critic: --extra must be >= 1, got {extra}")
    if "critic_state_dict" not in checkpoint:
        raise ValueError(
            "widen_critic: the checkpoint has no critic_state_dict; pass a training checkpoint (model_K.pt)"
        )
    out = copy.deepcopy(checkpoint)
    critic = out["critic_state_dict"]
    firsts = [k for k in critic if FIRST_LAYER.fullmatch(k)]
    widths = {int(critic[k].shape[1]) for k in firsts}
    if not firsts or len(widths) != 1:
        raise ValueError(f"widen_critic: expected critic first layers of one width, found {sorted(widths)} in {firsts}")
    (width,) = widths
    old_shapes = {k: tuple(critic[k].shape) for k in firsts}
    for k in firsts:
        w = critic[k]
        critic[k] = torch.cat([w, w.new_zeros(w.shape[0], extra)], dim=1)
    for name, fill in (("_mean", 0.0), ("_var", 1.0), ("_std", 1.0)):
        key = NORMALIZER + name
        if key in critic:
            v = critic[key]
            if v.shape[-1] != width:
                raise ValueError(f"widen_critic: {key} has width {v.shape[-1]}, the first layer {width}")
            critic[key] = torch.cat([v, v.new_full((*v.shape[:-1], extra), fill)], dim=-1)
    optimizer = out.get("optimizer_state_dict")
    if optimizer is not None:
        _widen_moments(optimizer, critic, firsts, old_shapes, extra)
    return out


def _widen_moments(optimizer: dict, critic: dict, firsts: list[str], old_shapes: dict, extra: int) -> None:
    """Append zero columns to every Adam moment (``exp_avg``, ``exp_avg_sq``, ``max_exp_avg_sq``) of the critic's
    first-layer weights, in place.

    The critic's parameters are the ``critic`` group (``train.critic_learning_rate``), or else the last ones of the
    first group: rsl-rl orders them after the actor's (:func:`upright.training.std_learning_rate.group_layout`).

    Raises:
        ValueError: the optimizer holds fewer parameters than the critic, or a moment's shape is not its weight's.
    """
    params = [k for k in critic if not k.startswith(NORMALIZER)]
    groups = optimizer["param_groups"]
    named = [g for g in groups if g.get("upright_group") == "critic"]
    ids = list(named[0]["params"]) if named else list(groups[0]["params"])[-len(params) :]
    if len(ids) != len(params):
        raise ValueError(
            f"widen_critic: the optimizer's critic parameters ({len(ids)}) do not match the critic's ({len(params)}); "
            "is this a checkpoint of this project's PPO?"
        )
    by_name = dict(zip(params, ids))
    for k in firsts:
        state = optimizer["state"].get(by_name[k], {})
        for name, m in list(state.items()):
            if not torch.is_tensor(m) or m.dim() == 0:
                continue  # the step count
            if tuple(m.shape) != old_shapes[k]:
                got = tuple(m.shape)
                raise ValueError(f"widen_critic: Adam {name} of {k} has shape {got}, expected {old_shapes[k]}")
            state[name] = torch.cat([m, m.new_zeros(m.shape[0], extra)], dim=1)


def main(argv: list[str] | None = None) -> None:
    """The command line (module docstring).

    Raises:
        SystemExit: a missing source, ``dst`` equal to ``src``, or a checkpoint :func:`widen_critic_input` refuses
            (one line naming the fix).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("src", type=pathlib.Path, help="checkpoint to widen (model_K.pt)")
    parser.add_argument("dst", type=pathlib.Path, help="where to write the widened checkpoint")
    parser.add_argument("--extra", type=int, default=1, help="critic observation columns to append (default 1)")
    args = parser.parse_args(argv)
    if not args.src.is_file():
        raise SystemExit(f"widen_critic: no checkpoint at {args.src}; pass a model_K.pt file")
    if args.dst.resolve() == args.src.resolve():
        raise SystemExit("widen_critic: dst must differ from src (the original is kept)")
    try:
        widened = widen_critic_input(torch.load(args.src, map_location="cpu", weights_only=False), args.extra)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    args.dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.dst.with_suffix(args.dst.suffix + ".tmp")
    torch.save(widened, tmp)
    tmp.replace(args.dst)
    print(f"{args.src} -> {args.dst}: critic input +{args.extra} (width {_width(widened)})")


def _width(checkpoint: dict) -> int:
    """Input width of the critic of ``checkpoint`` (its first layer's columns)."""
    critic = checkpoint["critic_state_dict"]
    return int(next(critic[k].shape[1] for k in critic if FIRST_LAYER.fullmatch(k)))


if __name__ == "__main__":
    main()
