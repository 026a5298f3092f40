"""A learning rate of its own for the policy's action std, outside the adaptive-KL schedule.

Why: with HoST's actor (456 normalised inputs → [512, 256, 128] ELU → 23 Tanh) Adam's near sign-sized steps move the
action mean so far that rsl_rl's adaptive-KL schedule (desired KL 0.01) pins the learning rate at its 1e-5 floor from
the first iteration on this project's 512-env batches. Measured on the 551-iteration ground checkpoint
(``docs/std_learning_rate.md``): one Adam step at lr 1e-4 already gives KL 0.03, at 1e-3 KL 1.8–3.6. The mean still
moves (KL 0.04–0.1 per update at the floor), but the state-independent std, a 23-vector that moves at most ``lr``
per Adam step, can move only 20 · 1e-5 = 2e-4 per update: it stayed at 0.79 (init 0.8) for 550 iterations, so the
policy kept exploring with noise ~0.8 of its full action range.

With ``std_learning_rate`` set, the std parameter gets its own Adam parameter group with that fixed rate; the adaptive
schedule sets only the other group. ``None`` keeps rsl_rl's single group (the plain HoST update).

Checkpoints written with one group load into two groups and back: Adam's per-parameter state is re-indexed
(:func:`convert_optimizer_state`), so a run can switch the option on at a resume.
"""

from __future__ import annotations

import copy
import math
from itertools import chain

import torch
import torch.nn as nn

FIXED_LR_KEY = "fixed_lr"
"""Param-group flag: the adaptive-KL schedule leaves this group's ``lr`` alone."""


def _find_std(actor: nn.Module) -> tuple[str, nn.Parameter] | None:
    """(attribute name, parameter) of the actor's state-independent std: rsl_rl ``GaussianDistribution``'s
    ``std_param`` (the std) or ``log_std_param`` (its log); None if the actor has neither."""
    dist = getattr(actor, "distribution", None)
    for name in ("std_param", "log_std_param"):
        param = getattr(dist, name, None)
        if isinstance(param, nn.Parameter):
            return name, param
    return None


def std_parameter(actor: nn.Module) -> nn.Parameter:
    """The actor's state-independent std parameter (rsl_rl ``GaussianDistribution``: ``std_param`` or
    ``log_std_param``, shape (num_actions,)).

    Raises:
        ValueError: The actor has no such parameter (e.g. a state-dependent std head).
    """
    found = _find_std(actor)
    if found is None:
        raise ValueError(
            "std_learning_rate needs an actor with a state-independent std (rsl_rl GaussianDistribution); "
            f"{type(actor).__name__} has none. Set train.std_learning_rate=null."
        )
    return found[1]


def _param_order(actor: nn.Module, critic: nn.Module) -> list[nn.Parameter]:
    """rsl_rl PPO's optimizer order: ``chain(actor.parameters(), critic.parameters())``."""
    return list(chain(actor.parameters(), critic.parameters()))


def build_optimizer(
    optimizer: torch.optim.Optimizer, actor: nn.Module, critic: nn.Module, std_lr: float
) -> torch.optim.Optimizer:
    """A fresh optimizer of ``optimizer``'s class and hyperparameters with two groups: group 0 = all actor and critic
    parameters except the std (lr = ``optimizer``'s lr, adapted by the KL schedule), group 1 = the std alone (lr =
    ``std_lr``, flagged :data:`FIXED_LR_KEY`).

    Raises:
        ValueError: ``std_lr`` is not > 0, or ``optimizer`` does not hold exactly one group.
    """
    if not std_lr > 0.0:
        raise ValueError(f"std_learning_rate must be > 0 (or null to disable), got {std_lr}.")
    if len(optimizer.param_groups) != 1:
        raise ValueError(f"expected rsl_rl's single-group optimizer, got {len(optimizer.param_groups)} groups.")
    std = std_parameter(actor)
    others = [p for p in _param_order(actor, critic) if p is not std]
    defaults = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    return type(optimizer)(
        [{"params": others, **defaults}, {"params": [std], **defaults, "lr": std_lr, FIXED_LR_KEY: True}]
    )


def convert_optimizer_state(saved: dict, actor: nn.Module, critic: nn.Module, target_groups: int, std_lr: float | None
                            ) -> dict:
    """Re-index a saved optimizer ``state_dict`` between rsl_rl's one-group layout and :func:`build_optimizer`'s
    two-group layout (either direction); returned unchanged when it already has ``target_groups`` groups.

    Parameter indices follow each layout's parameter order: one group = :func:`_param_order`; two groups = that order
    without the std, then the std. Adam's per-parameter moments move with their parameter.

    Raises:
        ValueError: The saved state has neither 1 nor 2 groups, or its parameter count does not match the models.
    """
    groups = saved["param_groups"]
    if len(groups) == target_groups:
        return saved
    order = _param_order(actor, critic)
    std = std_parameter(actor)
    std_index = next(i for i, p in enumerate(order) if p is std)
    n = len(order)
    if sum(len(g["params"]) for g in groups) != n or {len(groups), target_groups} != {1, 2}:
        raise ValueError(
            f"optimizer state with {len(groups)} group(s) and {sum(len(g['params']) for g in groups)} parameters "
            f"does not fit this model ({n} parameters, {target_groups} group(s)); load the checkpoint with the "
            "train.std_learning_rate setting it was written with, or without its optimizer state."
        )
    # one-group index i  <->  two-group index: i (< std), i - 1 (> std), n - 1 (the std)
    def to_two(i: int) -> int:
        return n - 1 if i == std_index else (i if i < std_index else i - 1)

    out = copy.deepcopy(saved)
    hyper = {k: v for k, v in groups[0].items() if k != "params"}
    if target_groups == 2:
        remap = {i: to_two(i) for i in range(n)}
        out["param_groups"] = [
            {**hyper, "params": list(range(n - 1))},
            {**hyper, "params": [n - 1], "lr": std_lr, FIXED_LR_KEY: True},
        ]
    else:
        remap = {to_two(i): i for i in range(n)}
        hyper.pop(FIXED_LR_KEY, None)
        out["param_groups"] = [{**hyper, "params": list(range(n))}]
    out["state"] = {remap[int(k)]: v for k, v in saved["state"].items()}
    return out


def set_action_std(actor: nn.Module, value: float, optimizer: torch.optim.Optimizer | None = None) -> None:
    """Set every entry of the actor's state-independent action std to ``value`` (``train.resume_std``).

    Works for both of rsl_rl's parameterisations (``std_param`` holds the std, ``log_std_param`` its log). The
    optimizer's state for that parameter (Adam moments) is cleared so that old moments do not push it back.

    Args:
        actor: an actor with a state-independent std (rsl_rl ``GaussianDistribution``).
        value: the new std, in action units (> 0).
        optimizer: the optimizer holding the parameter, or None.

    Raises:
        ValueError: ``value`` is not > 0, or the actor has no state-independent std.
    """
    if not value > 0:
        raise ValueError(f"train.resume_std must be > 0 (an action std), got {value}.")
    found = _find_std(actor)
    if found is None:
        raise ValueError(
            "train.resume_std needs an actor with a state-independent std (rsl_rl GaussianDistribution); "
            f"{type(actor).__name__} has none. Set train.resume_std=null."
        )
    name, param = found
    with torch.no_grad():
        param.fill_(math.log(value) if name == "log_std_param" else value)
    if optimizer is not None:
        optimizer.state.pop(param, None)
